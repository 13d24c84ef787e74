//! `ScaleAndTranslate`: resampling with a chosen kernel, low-pass filtered
//! when shrinking (`tf.image.resize` with `antialias=True`, and its
//! `lanczos3`, `lanczos5`, `gaussian` and `mitchellcubic` methods).
//!
//! Owns: the sampling kernels and each output pixel's span of input pixels
//! with its weights. Must not hold state beyond parsed attributes.
//!
//! TensorFlow's arithmetic in float32, step for step: output pixel `x`
//! samples at `(x + ½) / scale − translate / scale`; with `antialias` and
//! a scale below 1 the kernel is stretched by `1 / scale`; a span's weights
//! are normalised to sum to 1; a sample outside the image gets an empty
//! span (output 0). Rows are resampled first, into a float buffer, then
//! columns.

use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use super::{pixels_as_f32, resized_dims};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[OpDef::kernel("ScaleAndTranslate", signature, build)];

/// `[T, int32, float32, float32] -> [float32]`.
fn signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let (i, f) = (ValueType::Tensor(DType::I32), ValueType::Tensor(DType::F32));
    Ok(OpSignature::new(vec![t, i, f, f], vec![f]))
}

/// TensorFlow's sampling kernels, each with its radius.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sampler {
    Lanczos(f32),
    Gaussian,
    Box,
    Triangle,
    KeysCubic,
    MitchellCubic,
}

impl Sampler {
    fn parse(name: &str) -> Option<Sampler> {
        Some(match name {
            "lanczos1" => Sampler::Lanczos(1.0),
            "lanczos3" => Sampler::Lanczos(3.0),
            "lanczos5" => Sampler::Lanczos(5.0),
            "gaussian" => Sampler::Gaussian,
            "box" => Sampler::Box,
            "triangle" => Sampler::Triangle,
            "keyscubic" => Sampler::KeysCubic,
            "mitchellcubic" => Sampler::MitchellCubic,
            _ => return None,
        })
    }

    fn radius(self) -> f32 {
        match self {
            Sampler::Lanczos(r) => r,
            Sampler::Gaussian => 1.5,
            Sampler::Box | Sampler::Triangle => 1.0,
            Sampler::KeysCubic | Sampler::MitchellCubic => 2.0,
        }
    }

    fn weight(self, x: f32) -> f32 {
        let x = x.abs();
        match self {
            Sampler::Lanczos(radius) => {
                use std::f32::consts::PI;
                if x > radius {
                    0.0
                } else if x <= 1e-3 {
                    1.0 // the limit of sin(x)/x at 0
                } else {
                    radius * (PI * x).sin() * (PI * x / radius).sin() / (PI * PI * x * x)
                }
            }
            Sampler::Gaussian => {
                // sigma = radius / 3.
                const RADIUS: f32 = 1.5;
                const SIGMA: f32 = RADIUS / 3.0;
                if x >= RADIUS { 0.0 } else { (-x * x / (2.0 * SIGMA * SIGMA)).exp() }
            }
            Sampler::Box => {
                if x < 0.5 {
                    1.0
                } else if x == 0.5 {
                    0.5
                } else {
                    0.0
                }
            }
            Sampler::Triangle => {
                if x < 1.0 {
                    1.0 - x
                } else {
                    0.0
                }
            }
            Sampler::KeysCubic => {
                if x >= 2.0 {
                    0.0
                } else if x >= 1.0 {
                    ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0
                } else {
                    ((1.5 * x - 2.5) * x) * x + 1.0
                }
            }
            Sampler::MitchellCubic => {
                if x >= 2.0 {
                    0.0
                } else if x >= 1.0 {
                    (((-7.0 / 18.0) * x + 2.0) * x - 10.0 / 3.0) * x + 16.0 / 9.0
                } else {
                    (((7.0 / 6.0) * x - 2.0) * x) * x + 8.0 / 9.0
                }
            }
        }
    }
}

struct ScaleAndTranslate {
    sampler: Sampler,
    antialias: bool,
}

fn build(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    if !matches!(dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64 | DType::U8) {
        bail!(invalid_argument, "node '{}' (ScaleAndTranslate): dtype {dtype} is not supported", node.name);
    }
    let name = node.attr_str_or("kernel_type", "lanczos3")?;
    let Some(sampler) = Sampler::parse(&name) else {
        bail!(invalid_argument, "node '{}' (ScaleAndTranslate): unknown kernel type '{name}'", node.name);
    };
    Ok(Box::new(ScaleAndTranslate { sampler, antialias: node.attr_bool_or("antialias", true)? }))
}

/// The input pixels output pixels read along one axis: `span` weights per
/// output, from `starts[x]`, zero past the pixels a span covers.
struct Spans {
    span: usize,
    starts: Vec<usize>,
    weights: Vec<f32>,
}

fn spans(sampler: Sampler, out_size: usize, in_size: usize, scale: f32, translate: f32, antialias: bool) -> Spans {
    let inv_scale = 1.0 / scale;
    let inv_translate = -inv_scale * translate;
    let kernel_scale = if antialias { inv_scale.max(1.0) } else { 1.0 };
    let reach = sampler.radius() * kernel_scale;
    let span = ((2.0 * reach.ceil()) as usize + 1).min(in_size);
    let mut starts = vec![0; out_size];
    let mut weights = vec![0f32; span * out_size];
    let mut scratch = Vec::with_capacity(span);
    for x in 0..out_size {
        let sample = (x as f32 + 0.5) * inv_scale + inv_translate;
        if sample < 0.0 || sample > in_size as f32 {
            continue; // outside the image: an empty span
        }
        let last = in_size as i64 - 1;
        let start = ((sample - reach - 0.5).ceil() as i64).clamp(0, last);
        let end = ((sample + reach - 0.5).floor() as i64).clamp(0, last) + 1;
        scratch.clear();
        let mut total = 0f32;
        for source in start..end {
            let w = sampler.weight(((source as f32 + 0.5 - sample) / kernel_scale).abs());
            total += w;
            scratch.push(w);
        }
        // The kernel's reach bounds a span; the clamps only shorten it.
        debug_assert!(scratch.len() <= span);
        if total.abs() >= 1000.0 * f32::MIN_POSITIVE {
            let inverse = 1.0 / total;
            for (slot, w) in weights[x * span..].iter_mut().zip(&scratch) {
                *slot = w * inverse;
            }
        }
        starts[x] = start as usize;
    }
    Spans { span, starts, weights }
}

impl OpKernel for ScaleAndTranslate {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let images = ctx.input(0)?;
        let [batch, out_h, out_w, channels] = resized_dims(images, ctx.input(1)?)?;
        let (in_h, in_w) = (images.dims()[1], images.dims()[2]);
        let pair = |t: &Tensor, what: &str| -> Result<[f32; 2]> {
            if t.dims() != [2] {
                bail!(invalid_argument, "{what} must be a vector of two elements, got shape {}", t.shape());
            }
            let v = t.as_slice::<f32>()?;
            Ok([v[0], v[1]])
        };
        let scale = pair(ctx.input(2)?, "scale")?;
        let translate = pair(ctx.input(3)?, "translation")?;
        // NaN scales fail too.
        if scale.iter().any(|&s| s.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)) {
            bail!(invalid_argument, "scale must be positive, got {scale:?}");
        }
        let pixels = pixels_as_f32(images, "ScaleAndTranslate")?;
        let rows = spans(self.sampler, out_h, in_h, scale[0], translate[0], self.antialias);
        let cols = spans(self.sampler, out_w, in_w, scale[1], translate[1], self.antialias);
        let out = Tensor::build::<f32>([batch, out_h, out_w, channels], |out| {
            let line = in_w * channels;
            let mut between = vec![0f32; out_h * line];
            for n in 0..batch {
                let image = &pixels[n * in_h * line..(n + 1) * in_h * line];
                // Rows: each output row a weighted sum of input rows.
                between.fill(0.0);
                for y in 0..out_h {
                    let start = rows.starts[y];
                    let used = (start + rows.span).min(in_h) - start;
                    let target = &mut between[y * line..(y + 1) * line];
                    for (k, &w) in rows.weights[y * rows.span..][..used].iter().enumerate() {
                        let source = &image[(start + k) * line..(start + k + 1) * line];
                        for (t, &v) in target.iter_mut().zip(source) {
                            *t += w * v;
                        }
                    }
                }
                // Columns: each output pixel a weighted sum of pixels in its row.
                let result = &mut out[n * out_h * out_w * channels..(n + 1) * out_h * out_w * channels];
                for y in 0..out_h {
                    let row = &between[y * line..(y + 1) * line];
                    for x in 0..out_w {
                        let start = cols.starts[x];
                        let used = (start + cols.span).min(in_w) - start;
                        let pixel = &mut result[(y * out_w + x) * channels..(y * out_w + x + 1) * channels];
                        pixel.fill(0.0);
                        for (k, &w) in cols.weights[x * cols.span..][..used].iter().enumerate() {
                            let source = &row[(start + k) * channels..(start + k + 1) * channels];
                            for (p, &v) in pixel.iter_mut().zip(source) {
                                *p += w * v;
                            }
                        }
                    }
                }
            }
        })?;
        ctx.set_output(0, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn resample(kernel: &str, antialias: bool, width: i32, scale: f32, translate: f32) -> Vec<f32> {
        // [0, 1, 2, ..., 7] ** 1.5 in one row.
        let v: Vec<f32> = (0..8).map(|i| (i as f32).powf(1.5)).collect();
        let x = Tensor::from_slice::<f32>([1, 1, 8, 1], &v).unwrap();
        let n = node("ScaleAndTranslate")
            .attr("T", ty(DType::F32))
            .attr("kernel_type", AttrValue::Bytes(kernel.as_bytes().to_vec()))
            .attr("antialias", AttrValue::Bool(antialias));
        let inputs = [
            x,
            Tensor::from_slice::<i32>([2], &[1, width]).unwrap(),
            Tensor::from_slice::<f32>([2], &[1.0, scale]).unwrap(),
            Tensor::from_slice::<f32>([2], &[0.0, translate]).unwrap(),
        ];
        run1(&n, &inputs).unwrap().as_slice::<f32>().unwrap().to_vec()
    }
    fn close(got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            // float32 sums, rounded in another order (or fused) in TensorFlow.
            assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn every_kernel_matches_tensorflow() {
        // TensorFlow 2.21: tf.image.resize(x, [1, 3], method, antialias=True)
        // (scale 3/8), and the raw op for box and a translation.
        let down = 3.0 / 8.0;
        close(&resample("triangle", true, 3, down, 0.0), &[1.4748502, 6.7930546, 14.442104]);
        close(&resample("keyscubic", true, 3, down, 0.0), &[1.008936, 6.6312203, 15.104389]);
        close(&resample("lanczos3", true, 3, down, 0.0), &[0.8200535, 6.5250726, 15.392235]);
        close(&resample("lanczos5", true, 3, down, 0.0), &[0.8726604, 6.467147, 15.429357]);
        close(&resample("gaussian", true, 3, down, 0.0), &[1.6949139, 6.9076924, 14.127518]);
        close(&resample("mitchellcubic", true, 3, down, 0.0), &[1.327958, 6.7615733, 14.637426]);
        close(&resample("box", false, 3, down, 0.5), &[0.0, 2.828427, 11.18034]);
        close(&resample("triangle", true, 3, down, -2.0), &[14.442104, 0.0, 0.0]);
        let up = [
            -0.03261678,
            0.42316467,
            1.5307825,
            2.912645,
            4.665057,
            6.548828,
            8.63153,
            11.051692,
            13.312847,
            16.686539,
            18.729153,
        ];
        close(&resample("lanczos3", true, 11, 11.0 / 8.0, 0.0), &up);
    }

    #[test]
    fn bad_kernels_and_scales_are_named() {
        let n =
            node("ScaleAndTranslate").attr("T", ty(DType::F32)).attr("kernel_type", AttrValue::Bytes(b"sinc".to_vec()));
        let x = Tensor::from_slice::<f32>([1, 1, 2, 1], &[1.0, 2.0]).unwrap();
        let size = Tensor::from_slice::<i32>([2], &[1, 1]).unwrap();
        let pair = |a: f32, b: f32| Tensor::from_slice::<f32>([2], &[a, b]).unwrap();
        let err = run1(&n, &[x.clone(), size.clone(), pair(1.0, 1.0), pair(0.0, 0.0)]).unwrap_err();
        assert!(err.message.contains("unknown kernel type 'sinc'"), "{}", err.message);
        let ok = node("ScaleAndTranslate").attr("T", ty(DType::F32));
        let err = run1(&ok, &[x, size, pair(1.0, 0.0), pair(0.0, 0.0)]).unwrap_err();
        assert!(err.message.contains("scale must be positive"), "{}", err.message);
    }
}
