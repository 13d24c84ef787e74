//! Colour-space and colour-adjustment ops on images whose innermost
//! dimension is the channel: `RGBToHSV`, `HSVToRGB` (`tf.image.rgb_to_hsv`,
//! `hsv_to_rgb`), `AdjustHue`, `AdjustSaturation` and `AdjustContrastv2`
//! (`tf.image.adjust_hue`, `adjust_saturation`, `adjust_contrast`).
//!
//! Owns: these kernels, each with the formulas of TensorFlow's own CPU
//! kernel (they differ: the HSV ops use piecewise-linear ramps; AdjustHue
//! works on a hue in [0, 6) and the pixel's value range; AdjustSaturation
//! has its own HSV round trip), so results agree to float rounding. Must
//! not hold state.

use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::numeric::Float;
use crate::ops::registry::OpDef;
use crate::ops::{FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Element, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("RGBToHSV", colour_signature, build_rgb_to_hsv),
    OpDef::kernel("HSVToRGB", colour_signature, build_hsv_to_rgb),
    OpDef::kernel("AdjustContrastv2", contrast_signature, build_contrast),
    OpDef::kernel("AdjustHue", contrast_signature, build_hue),
    OpDef::kernel("AdjustSaturation", contrast_signature, build_saturation),
];

const FLOATS: &[DType] = &[DType::F32, DType::F64];

fn colour_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype_or("T", DType::F32)?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

fn contrast_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype_or("T", DType::F32)?);
    Ok(OpSignature::new(vec![t, ValueType::Tensor(DType::F32)], vec![t]))
}

fn pick(
    node: &NodeSpec,
    f32_fn: fn(&mut OpContext<'_>) -> Result<()>,
    f64_fn: fn(&mut OpContext<'_>) -> Result<()>,
) -> Result<Box<dyn OpKernel>> {
    match node.attr_dtype_or("T", DType::F32)? {
        DType::F32 => Ok(FnKernel::boxed(f32_fn)),
        DType::F64 => Ok(FnKernel::boxed(f64_fn)),
        other => Err(unsupported_dtype(&node.op, other, FLOATS)),
    }
}

fn build_rgb_to_hsv(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    pick(init.node, convert::<f32, true>, convert::<f64, true>)
}

fn build_hsv_to_rgb(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    pick(init.node, convert::<f32, false>, convert::<f64, false>)
}

fn build_contrast(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    pick(init.node, contrast::<f32>, contrast::<f64>)
}

fn build_hue(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    adjust_kernel(init.node, adjust_hue)
}

fn build_saturation(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    adjust_kernel(init.node, adjust_saturation)
}

/// A per-pixel adjustment by a scalar (AdjustHue, AdjustSaturation), on
/// float32 images as TensorFlow's CPU kernels.
fn adjust_kernel(node: &NodeSpec, f: fn([f32; 3], f32) -> [f32; 3]) -> Result<Box<dyn OpKernel>> {
    let dtype = node.attr_dtype_or("T", DType::F32)?;
    if dtype != DType::F32 {
        return Err(unsupported_dtype(&node.op, dtype, &[DType::F32]));
    }
    Ok(Box::new(Adjust { f }))
}

struct Adjust {
    f: fn([f32; 3], f32) -> [f32; 3],
}

impl OpKernel for Adjust {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        if x.shape().rank() < 3 || x.dims().last() != Some(&3) {
            bail!(invalid_argument, "input must be at least 3-D with 3 channels, got shape {}", x.shape());
        }
        let by_t = ctx.input(1)?;
        if by_t.shape().rank() != 0 {
            bail!(invalid_argument, "the adjustment must be a scalar, got shape {}", by_t.shape());
        }
        let by = by_t.as_slice::<f32>()?[0];
        let values = x.as_slice::<f32>()?;
        let out = Tensor::build::<f32>(x.shape().clone(), |out| {
            for (dst, px) in out.chunks_exact_mut(3).zip(values.chunks_exact(3)) {
                dst.copy_from_slice(&(self.f)([px[0], px[1], px[2]], by));
            }
        })?;
        ctx.set_output(0, out);
        Ok(())
    }
}

/// AdjustHue's pixel: its hue in [0, 6) from which channel is largest and
/// which smallest, moved by `delta` turns, back with the same value range.
fn adjust_hue([r, g, b]: [f32; 3], delta: f32) -> [f32; 3] {
    // Which channel is largest, middle, smallest (ties counted either way),
    // and the sextant of the hue circle that ordering is.
    let (max, mid, min, sextant) = if r < g {
        if b < r {
            (g, r, b, 1)
        } else if b > g {
            (b, g, r, 3)
        } else {
            (g, b, r, 2)
        }
    } else if b < g {
        (r, g, b, 0)
    } else if b > r {
        (b, r, g, 4)
    } else {
        (r, b, g, 5)
    };
    if max == min {
        return [r, g, b];
    }
    let ratio = (mid - min) / (max - min);
    let mut h = sextant as f32 + if sextant % 2 == 0 { ratio } else { 1.0 - ratio };
    h += delta * 6.0;
    while h < 0.0 {
        h += 6.0;
    }
    while h >= 6.0 {
        h -= 6.0;
    }
    let sextant = h as i32;
    let mut ratio = h - sextant as f32;
    if sextant % 2 != 0 {
        ratio = 1.0 - ratio;
    }
    let mid = min + ratio * (max - min);
    match sextant {
        0 => [max, mid, min],
        1 => [mid, max, min],
        2 => [min, max, mid],
        3 => [min, mid, max],
        4 => [mid, min, max],
        _ => [max, min, mid],
    }
}

/// AdjustSaturation's pixel: to HSV, saturation scaled and clamped to
/// [0, 1], back to RGB by chroma and sextant.
fn adjust_saturation([r, g, b]: [f32; 3], scale: f32) -> [f32; 3] {
    let v = r.max(g.max(b));
    let range = v - r.min(g.min(b));
    let s = if v > 0.0 { range / v } else { 0.0 };
    let norm = 1.0 / (6.0 * range);
    let mut h = if r == v {
        norm * (g - b)
    } else if g == v {
        norm * (b - r) + 2.0 / 6.0
    } else {
        norm * (r - g) + 4.0 / 6.0
    };
    if range <= 0.0 {
        h = 0.0;
    }
    if h < 0.0 {
        h += 1.0;
    }
    let s = (s * scale).clamp(0.0, 1.0);
    let c = s * v;
    let m = v - c;
    let dh = h * 6.0;
    let mut fmodu = dh;
    while fmodu <= 0.0 {
        fmodu += 2.0;
    }
    while fmodu >= 2.0 {
        fmodu -= 2.0;
    }
    let x = c * (1.0 - (fmodu - 1.0).abs());
    let [rr, gg, bb] = match dh as i32 {
        0 => [c, x, 0.0],
        1 => [x, c, 0.0],
        2 => [0.0, c, x],
        3 => [0.0, x, c],
        4 => [x, 0.0, c],
        5 => [c, 0.0, x],
        _ => [0.0, 0.0, 0.0],
    };
    [rr + m, gg + m, bb + m]
}

fn rgb_to_hsv<T: Float>([r, g, b]: [T; 3]) -> [T; 3] {
    let v = r.max_nan(g).max_nan(b);
    let range = v.sub(r.min_nan(g).min_nan(b));
    let s = if v > T::ZERO { range.div(v) } else { T::ZERO };
    let norm = T::ONE.div(T::from_f64(6.0).mul(range));
    let mut h = if r == v {
        norm.mul(g.sub(b))
    } else if g == v {
        norm.mul(b.sub(r)).add(T::from_f64(2.0 / 6.0))
    } else {
        norm.mul(r.sub(g)).add(T::from_f64(4.0 / 6.0))
    };
    // No range (grey), or NaN: no hue.
    if range.partial_cmp(&T::ZERO) != Some(std::cmp::Ordering::Greater) {
        h = T::ZERO;
    }
    if h < T::ZERO {
        h = h.add(T::ONE);
    }
    [h, s, v]
}

fn hsv_to_rgb<T: Float>([h, s, v]: [T; 3]) -> [T; 3] {
    let clamp = |x: T| x.max_nan(T::ZERO).min_nan(T::ONE);
    let dh = h.mul(T::from_f64(6.0));
    let dr = clamp(dh.sub(T::from_f64(3.0)).abs().sub(T::ONE));
    let dg = clamp(T::from_f64(2.0).sub(dh.sub(T::from_f64(2.0)).abs()));
    let db = clamp(T::from_f64(2.0).sub(dh.sub(T::from_f64(4.0)).abs()));
    let one_minus_s = T::ONE.sub(s);
    [dr, dg, db].map(|d| one_minus_s.add(s.mul(d)).mul(v))
}

fn convert<T: Float + Element, const TO_HSV: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    if x.dims().last() != Some(&3) {
        bail!(invalid_argument, "input must have 3 channels in its last dimension, got shape {}", x.shape());
    }
    let values = x.as_slice::<T>()?;
    let out = Tensor::build::<T>(x.shape().clone(), |out| {
        for (dst, px) in out.chunks_exact_mut(3).zip(values.chunks_exact(3)) {
            let px = [px[0], px[1], px[2]];
            dst.copy_from_slice(&if TO_HSV { rgb_to_hsv(px) } else { hsv_to_rgb(px) });
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

fn contrast<T: Float + Element>(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let dims = x.dims();
    if dims.len() < 3 {
        bail!(invalid_argument, "input must be at least 3-D, got shape {}", x.shape());
    }
    let factor_t = ctx.input(1)?;
    if factor_t.shape().rank() != 0 {
        bail!(invalid_argument, "contrast_factor must be scalar, got shape {}", factor_t.shape());
    }
    let factor = T::from_f64(f64::from(factor_t.as_slice::<f32>()?[0]));
    let channels = dims[dims.len() - 1];
    let pixels = dims[dims.len() - 3] * dims[dims.len() - 2];
    let values = x.as_slice::<T>()?;
    let out = Tensor::build::<T>(x.shape().clone(), |out| {
        if channels == 0 || pixels == 0 {
            return;
        }
        for (dst, image) in out.chunks_exact_mut(pixels * channels).zip(values.chunks_exact(pixels * channels)) {
            for c in 0..channels {
                let sum = image.iter().skip(c).step_by(channels).fold(T::ZERO, |acc, &v| acc.add(v));
                let mean = sum.div(T::from_usize(pixels));
                for (o, &v) in dst.iter_mut().skip(c).step_by(channels).zip(image.iter().skip(c).step_by(channels)) {
                    *o = v.sub(mean).mul(factor).add(mean);
                }
            }
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, run1, ty};

    #[test]
    fn hsv_round_trips_and_names_primary_hues() {
        let rgb = Tensor::from_slice::<f32>([4, 3], &[1., 0., 0., 0., 1., 0., 0., 0., 1., 0.2, 0.4, 0.3]).unwrap();
        let hsv = run1(&node("RGBToHSV").attr("T", ty(DType::F32)), std::slice::from_ref(&rgb)).unwrap();
        let h = hsv.as_slice::<f32>().unwrap();
        assert_eq!(&h[..9], &[0., 1., 1., 1. / 3., 1., 1., 2. / 3., 1., 1.]);
        let back = run1(&node("HSVToRGB").attr("T", ty(DType::F32)), &[hsv]).unwrap();
        let (got, want) = (back.as_slice::<f32>().unwrap(), rgb.as_slice::<f32>().unwrap());
        assert!(got.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6), "{got:?}");
        let two = Tensor::from_slice::<f32>([1, 2], &[0., 1.]).unwrap();
        assert!(run1(&node("RGBToHSV").attr("T", ty(DType::F32)), &[two]).is_err());
    }

    #[test]
    fn hue_turns_and_saturation_scales() {
        let red = Tensor::from_slice::<f32>([1, 1, 3], &[1.0, 0.2, 0.2]).unwrap();
        let hue = node("AdjustHue").attr("T", ty(DType::F32));
        // A third of a turn takes red to green; a whole turn changes nothing.
        let green = run1(&hue, &[red.clone(), Tensor::scalar(1.0f32 / 3.0)]).unwrap();
        let got = green.as_slice::<f32>().unwrap();
        assert!(got.iter().zip([0.2, 1.0, 0.2]).all(|(a, b)| (a - b).abs() < 1e-6), "{got:?}");
        let same = run1(&hue, &[red.clone(), Tensor::scalar(-1.0f32)]).unwrap();
        assert_eq!(same.as_slice::<f32>().unwrap(), red.as_slice::<f32>().unwrap());
        let saturation = node("AdjustSaturation").attr("T", ty(DType::F32));
        let grey = run1(&saturation, &[red.clone(), Tensor::scalar(0.0f32)]).unwrap();
        assert_eq!(grey.as_slice::<f32>().unwrap(), &[1.0, 1.0, 1.0]);
        let full = run1(&saturation, &[red, Tensor::scalar(10.0f32)]).unwrap();
        assert_eq!(full.as_slice::<f32>().unwrap(), &[1.0, 0.0, 0.0]);
    }

    #[test]
    fn contrast_scales_about_each_channels_mean() {
        let x = Tensor::from_slice::<f32>([1, 2, 1, 2], &[0., 10., 2., 30.]).unwrap();
        let op = node("AdjustContrastv2").attr("T", ty(DType::F32));
        let out = run1(&op, &[x, Tensor::scalar(2.0f32)]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[-1., 0., 3., 40.]);
    }
}
