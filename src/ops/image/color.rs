//! Colour-space and contrast ops on images whose innermost dimension is
//! the channel: `RGBToHSV`, `HSVToRGB` (`tf.image.rgb_to_hsv`,
//! `hsv_to_rgb`, what hue and saturation adjustments are built from) and
//! `AdjustContrastv2` (`tf.image.adjust_contrast`).
//!
//! Owns: these kernels, with TensorFlow's formulas (hue in [0, 1), the
//! piecewise-linear HSV to RGB ramps, contrast about each channel's mean
//! over the image). Must not hold state.

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
    fn contrast_scales_about_each_channels_mean() {
        let x = Tensor::from_slice::<f32>([1, 2, 1, 2], &[0., 10., 2., 30.]).unwrap();
        let op = node("AdjustContrastv2").attr("T", ty(DType::F32));
        let out = run1(&op, &[x, Tensor::scalar(2.0f32)]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[-1., 0., 3., 40.]);
    }
}
