//! `ResizeBicubic` and `ResizeArea` (`tf.image.resize` with `bicubic` or
//! `area`, Keras `Resizing`/`UpSampling2D` with bicubic interpolation).
//!
//! Owns: these two kernels and their sampling weights. Must not hold state
//! beyond parsed attributes.
//!
//! Both follow TensorFlow's CPU kernels in float32 step for step. Bicubic
//! takes its four weights from a 1025-entry table of the cubic convolution
//! kernel (a = −0.75, or Keys' a = −0.5 with half-pixel centers, where taps
//! outside the image get weight 0 and the rest are renormalised; the legacy
//! form repeats the edge pixel instead), interpolates each of four rows
//! along x, then the four results along y. Area averages the input cells
//! an output cell covers, each weighted by the part of it covered.

use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use super::{pixels_as_f32, resize_conventions, resized_dims, scale};
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Tensor};
use std::sync::OnceLock;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("ResizeBicubic", float_resize_signature, build_cubic_area),
    OpDef::kernel("ResizeArea", float_resize_signature, build_cubic_area),
];

/// `[T, int32] -> [float32]`.
fn float_resize_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, ValueType::Tensor(DType::I32)], vec![ValueType::Tensor(DType::F32)]))
}

struct CubicOrArea {
    bicubic: bool,
    align_corners: bool,
    half_pixel_centers: bool,
}

fn build_cubic_area(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    // ResizeArea has no half_pixel_centers attribute.
    let (align_corners, half_pixel_centers) = resize_conventions(init.node)?;
    let bicubic = init.node.op == "ResizeBicubic";
    Ok(Box::new(CubicOrArea { bicubic, align_corners, half_pixel_centers: bicubic && half_pixel_centers }))
}

impl OpKernel for CubicOrArea {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let images = ctx.input(0)?;
        let dims = resized_dims(images, ctx.input(1)?)?;
        let op = if self.bicubic { "ResizeBicubic" } else { "ResizeArea" };
        let pixels = pixels_as_f32(images, op)?;
        let [_, in_h, in_w, _] = <[usize; 4]>::try_from(images.dims()).expect("resized_dims checked the rank");
        let (hs, ws) = (scale(in_h, dims[1], self.align_corners), scale(in_w, dims[2], self.align_corners));
        let out = if self.bicubic {
            let ys = cubic_taps(hs, dims[1], in_h, self.half_pixel_centers);
            let xs = cubic_taps(ws, dims[2], in_w, self.half_pixel_centers);
            bicubic(&pixels, in_h, in_w, dims, &ys, &xs)?
        } else {
            area(&pixels, in_h, in_w, dims, hs, ws)?
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Bicubic

const TABLE_SIZE: usize = 1 << 10;

/// The cubic convolution kernel at i/1024 (even entries: |t| = x; odd:
/// |t| = x + 1), as TensorFlow tabulates it in float32.
fn coefficients(a: f32) -> Vec<f32> {
    let mut table = vec![0f32; (TABLE_SIZE + 1) * 2];
    for i in 0..=TABLE_SIZE {
        let x = (i as f64 / TABLE_SIZE as f64) as f32;
        table[i * 2] = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
        let x = x + 1.0;
        table[i * 2 + 1] = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    }
    table
}

fn table(keys: bool) -> &'static [f32] {
    static LEGACY: OnceLock<Vec<f32>> = OnceLock::new();
    static KEYS: OnceLock<Vec<f32>> = OnceLock::new();
    if keys { KEYS.get_or_init(|| coefficients(-0.5)) } else { LEGACY.get_or_init(|| coefficients(-0.75)) }
}

/// The four source indices and weights of one output coordinate.
#[derive(Clone, Copy, Debug)]
struct Taps {
    index: [usize; 4],
    weight: [f32; 4],
}

fn cubic_taps(scale: f32, out_size: usize, limit: usize, half_pixel: bool) -> Vec<Taps> {
    let coeffs = table(half_pixel);
    let bound = |v: i64| v.clamp(0, limit as i64 - 1) as usize;
    (0..out_size)
        .map(|out| {
            let at = if half_pixel { (out as f32 + 0.5) * scale - 0.5 } else { out as f32 * scale };
            let base = at.floor() as i64;
            let delta = at - base as f32;
            // lrintf: to nearest, ties to even.
            let offset = (delta * TABLE_SIZE as f32).round_ties_even() as usize;
            let raw = [
                coeffs[offset * 2 + 1],
                coeffs[offset * 2],
                coeffs[(TABLE_SIZE - offset) * 2],
                coeffs[(TABLE_SIZE - offset) * 2 + 1],
            ];
            let index = [bound(base - 1), bound(base), bound(base + 1), bound(base + 2)];
            let mut weight = raw;
            if half_pixel {
                for (k, w) in weight.iter_mut().enumerate() {
                    if index[k] as i64 != base - 1 + k as i64 {
                        *w = 0.0;
                    }
                }
                let sum = weight[0] + weight[1] + weight[2] + weight[3];
                if sum.abs() >= 1000.0 * f32::MIN_POSITIVE {
                    let inverse = 1.0 / sum;
                    weight.iter_mut().for_each(|w| *w *= inverse);
                }
            }
            Taps { index, weight }
        })
        .collect()
}

fn interpolate(w: &[f32; 4], v: [f32; 4]) -> f32 {
    v[0] * w[0] + v[1] * w[1] + v[2] * w[2] + v[3] * w[3]
}

fn bicubic(pixels: &[f32], in_h: usize, in_w: usize, dims: [usize; 4], ys: &[Taps], xs: &[Taps]) -> Result<Tensor> {
    let [batch, _, _, channels] = dims;
    Tensor::build::<f32>(dims, |out| {
        let mut at = 0;
        for n in 0..batch {
            let image = &pixels[n * in_h * in_w * channels..];
            for y in ys {
                for x in xs {
                    for c in 0..channels {
                        let row = |r: usize| {
                            let line = &image[y.index[r] * in_w * channels..];
                            interpolate(&x.weight, x.index.map(|i| line[i * channels + c]))
                        };
                        out[at] = interpolate(&y.weight, [row(0), row(1), row(2), row(3)]);
                        at += 1;
                    }
                }
            }
        }
    })
}

// ---------------------------------------------------------------------------
// Area

/// The input cells `[start, end)` an output cell covers along one axis,
/// with the covered part of the first and of the last.
struct Span {
    start: usize,
    end: usize,
    first_part: f32,
    last_part: f32,
}

/// How much of cell `i` lies in `[from, to)` (TensorFlow's reckoning: the
/// whole scale when the cell holds the interval).
fn covered(i: f32, from: f32, to: f32, scale: f32) -> f32 {
    if i < from {
        if i + 1.0 > to { scale } else { i + 1.0 - from }
    } else if i + 1.0 > to {
        to - i
    } else {
        1.0
    }
}

fn area_spans(scale: f32, out_size: usize, in_size: usize) -> Vec<Span> {
    (0..out_size)
        .map(|o| {
            let (from, to) = (o as f32 * scale, (o + 1) as f32 * scale);
            let start = from.floor() as i64;
            let end = (to.ceil() as i64).max(start + 1);
            let clamp = |v: i64| v.clamp(0, in_size as i64 - 1) as usize;
            Span {
                start: clamp(start),
                end: clamp(end - 1) + 1,
                first_part: covered(start as f32, from, to, scale),
                last_part: covered((end - 1) as f32, from, to, scale),
            }
        })
        .collect()
}

fn area(pixels: &[f32], in_h: usize, in_w: usize, dims: [usize; 4], hs: f32, ws: f32) -> Result<Tensor> {
    let [batch, out_h, out_w, channels] = dims;
    let ys = area_spans(hs, out_h, in_h);
    let xs = area_spans(ws, out_w, in_w);
    let norm = (1.0 / (hs as f64 * ws as f64)) as f32;
    // Each row's weight, in order: the first part, whole cells, the last.
    let row_weights = |s: &Span| -> Vec<(usize, f32)> {
        (s.start..s.end)
            .map(|i| {
                let w = if i == s.start {
                    s.first_part
                } else if i + 1 == s.end {
                    s.last_part
                } else {
                    1.0
                };
                (i, w)
            })
            .collect()
    };
    Tensor::build::<f32>(dims, |out| {
        let mut at = 0;
        for n in 0..batch {
            let image = &pixels[n * in_h * in_w * channels..];
            for y in &ys {
                let rows = row_weights(y);
                for x in &xs {
                    for c in 0..channels {
                        let mut sum = 0f32;
                        for &(r, row_weight) in &rows {
                            let line = &image[r * in_w * channels..];
                            let mut row_sum = line[x.start * channels + c] * x.first_part;
                            if x.start + 1 != x.end {
                                for i in x.start + 1..x.end - 1 {
                                    row_sum += line[i * channels + c];
                                }
                                row_sum += line[(x.end - 1) * channels + c] * x.last_part;
                            }
                            sum += row_sum * row_weight;
                        }
                        out[at] = sum * norm;
                        at += 1;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn resize(op: &str, x: &Tensor, size: [i32; 2], half: bool) -> Result<Tensor> {
        let n = node(op).attr("T", ty(DType::F32)).attr("half_pixel_centers", AttrValue::Bool(half));
        run1(&n, &[x.clone(), Tensor::from_slice::<i32>([2], &size).unwrap()])
    }
    fn close(got: &Tensor, want: &[f32]) {
        let got = got.as_slice::<f32>().unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{got:?} against {want:?}");
        }
    }

    #[test]
    fn bicubic_matches_tensorflow_in_both_conventions() {
        let x = Tensor::from_slice::<f32>([1, 1, 4, 1], &[0.0, 1.0, 4.0, 9.0]).unwrap();
        // TensorFlow 2.21: tf.image.resize(x, [1, 6], "bicubic") (half-pixel
        // centers, Keys' kernel) and tf.compat.v1.image.resize_bicubic.
        let keys = [-0.06588884, 0.2941177, 1.3618708, 3.3599176, 6.8235297, 9.329443];
        close(&resize("ResizeBicubic", &x, [1, 6], true).unwrap(), &keys);
        let legacy = [0.0, 0.35220474, 1.7771268, 4.0, 7.5941124, 9.555555];
        close(&resize("ResizeBicubic", &x, [1, 6], false).unwrap(), &legacy);
    }

    #[test]
    fn area_averages_the_covered_cells() {
        let x = Tensor::from_slice::<f32>([1, 2, 3, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        // Whole cells: a 2x3 image to 1x1 is its mean.
        close(&resize("ResizeArea", &x, [1, 1], false).unwrap(), &[3.5]);
        // TensorFlow 2.21: tf.image.resize(x, [1, 2], "area").
        close(&resize("ResizeArea", &x, [1, 2], false).unwrap(), &[2.8333335, 4.166667]);
        close(
            &resize("ResizeArea", &x, [3, 2], false).unwrap(),
            &[1.3333334, 2.6666667, 2.8333335, 4.166667, 4.333333, 5.6666665],
        );
        // Growing repeats cells.
        close(&resize("ResizeArea", &x, [2, 6], false).unwrap(), &[1., 1., 2., 2., 3., 3., 4., 4., 5., 5., 6., 6.]);
    }
}
