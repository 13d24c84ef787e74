//! Image resizing: `ResizeBilinear` and `ResizeNearestNeighbor` on NHWC
//! batches (`tf.image.resize`, Keras' `Resizing` and bilinear
//! `UpSampling2D`), with TensorFlow's `align_corners` and
//! `half_pixel_centers` conventions.
//!
//! Owns: these kernels and the source coordinates they sample. Arithmetic
//! follows TensorFlow's CPU kernels step for step in float32 (the scale,
//! the sampled coordinate, its floor and ceiling, the two lerps), so
//! results agree to float rounding. Must not hold state beyond parsed
//! attributes.

use super::registry::OpDef;
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("ResizeBilinear", bilinear_signature, build_resize),
    OpDef::kernel("ResizeNearestNeighbor", nearest_signature, build_resize),
];

fn bilinear_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, ValueType::Tensor(DType::I32)], vec![ValueType::Tensor(DType::F32)]))
}

fn nearest_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, ValueType::Tensor(DType::I32)], vec![t]))
}

struct Resize {
    bilinear: bool,
    align_corners: bool,
    half_pixel_centers: bool,
}

fn build_resize(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let align_corners = node.attr_bool_or("align_corners", false)?;
    let half_pixel_centers = node.attr_bool_or("half_pixel_centers", false)?;
    if align_corners && half_pixel_centers {
        bail!(
            invalid_argument,
            "node '{}' ({}): If half_pixel_centers is True, align_corners must be False.",
            node.name,
            node.op
        );
    }
    let dtype = node.attr_dtype("T")?;
    if !matches!(dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64) {
        bail!(invalid_argument, "node '{}' ({}): dtype {dtype} is not supported", node.name, node.op);
    }
    Ok(Box::new(Resize { bilinear: node.op == "ResizeBilinear", align_corners, half_pixel_centers }))
}

/// Source pixels per output pixel along one axis.
fn scale(in_size: usize, out_size: usize, align_corners: bool) -> f32 {
    if align_corners && out_size > 1 {
        (in_size - 1) as f32 / (out_size - 1) as f32
    } else {
        in_size as f32 / out_size as f32
    }
}

/// Where bilinear output pixel `x` samples along one axis: the two source
/// pixels and the weight of the second.
#[derive(Clone, Copy)]
struct Lerp {
    lower: usize,
    upper: usize,
    weight: f32,
}

fn bilinear_axis(in_size: usize, out_size: usize, align_corners: bool, half_pixel: bool) -> Vec<Lerp> {
    let scale = scale(in_size, out_size, align_corners);
    (0..out_size)
        .map(|x| {
            let at = if half_pixel { (x as f32 + 0.5) * scale - 0.5 } else { x as f32 * scale };
            let floor = at.floor();
            Lerp {
                lower: (floor as i64).max(0) as usize,
                upper: (at.ceil() as i64).min(in_size as i64 - 1).max(0) as usize,
                weight: at - floor,
            }
        })
        .collect()
}

/// The source pixel nearest output pixel `x` along one axis.
fn nearest_axis(in_size: usize, out_size: usize, align_corners: bool, half_pixel: bool) -> Vec<usize> {
    let scale = scale(in_size, out_size, align_corners);
    (0..out_size)
        .map(|x| {
            // TensorFlow's nearest-neighbour scaler leaves out the -0.5 of
            // the half-pixel one: the floor below does its work.
            let at = if half_pixel { (x as f32 + 0.5) * scale } else { x as f32 * scale };
            let index = if align_corners { at.round() as i64 } else { at.floor() as i64 };
            index.min(in_size as i64 - 1).max(0) as usize
        })
        .collect()
}

impl OpKernel for Resize {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let images = ctx.input(0)?;
        let &[batch, in_h, in_w, channels] = images.dims() else {
            bail!(invalid_argument, "input must be 4-dimensional, got shape {}", images.shape());
        };
        let size = ctx.input(1)?;
        if size.shape().rank() != 1 || size.num_elements() != 2 {
            bail!(
                invalid_argument,
                "shape_t must be a 1-dimensional tensor of two elements, got shape {}",
                size.shape()
            );
        }
        let wanted = index_values(size, "size")?;
        let (Ok(out_h), Ok(out_w)) = (usize::try_from(wanted[0]), usize::try_from(wanted[1])) else {
            bail!(invalid_argument, "output dimensions must be positive, got {:?}", &wanted[..]);
        };
        if out_h == 0 || out_w == 0 {
            bail!(invalid_argument, "output dimensions must be positive, got [{out_h}, {out_w}]");
        }
        if batch * channels > 0 && (in_h == 0 || in_w == 0) {
            bail!(invalid_argument, "input image must be of non-zero size, got shape {}", images.shape());
        }
        let dims = [batch, out_h, out_w, channels];
        let out = if self.bilinear {
            match images.dtype() {
                DType::F32 => self.bilinear::<f32>(images, dims, |v| v)?,
                DType::F64 => self.bilinear::<f64>(images, dims, |v| v as f32)?,
                DType::I32 => self.bilinear::<i32>(images, dims, |v| v as f32)?,
                DType::I64 => self.bilinear::<i64>(images, dims, |v| v as f32)?,
                other => return Err(Status::invalid_argument(format!("ResizeBilinear does not support {other}"))),
            }
        } else {
            self.nearest(images, dims)?
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

impl Resize {
    fn bilinear<T: Element + Copy>(
        &self,
        images: &Tensor,
        dims: [usize; 4],
        read: impl Fn(T) -> f32,
    ) -> Result<Tensor> {
        let [batch, out_h, out_w, channels] = dims;
        let (in_h, in_w) = (images.dims()[1], images.dims()[2]);
        let ys = bilinear_axis(in_h, out_h, self.align_corners, self.half_pixel_centers);
        let xs = bilinear_axis(in_w, out_w, self.align_corners, self.half_pixel_centers);
        let src = images.as_slice::<T>()?;
        Tensor::build::<f32>(dims, |out| {
            let pixel = |n: usize, y: usize, x: usize| ((n * in_h + y) * in_w + x) * channels;
            let mut at = 0;
            for n in 0..batch {
                for y in &ys {
                    for x in &xs {
                        let (tl, tr) = (pixel(n, y.lower, x.lower), pixel(n, y.lower, x.upper));
                        let (bl, br) = (pixel(n, y.upper, x.lower), pixel(n, y.upper, x.upper));
                        for c in 0..channels {
                            let top_left = read(src[tl + c]);
                            let top = top_left + (read(src[tr + c]) - top_left) * x.weight;
                            let bottom_left = read(src[bl + c]);
                            let bottom = bottom_left + (read(src[br + c]) - bottom_left) * x.weight;
                            out[at] = top + (bottom - top) * y.weight;
                            at += 1;
                        }
                    }
                }
            }
        })
    }

    fn nearest(&self, images: &Tensor, dims: [usize; 4]) -> Result<Tensor> {
        let [batch, out_h, out_w, channels] = dims;
        let (in_h, in_w) = (images.dims()[1], images.dims()[2]);
        let ys = nearest_axis(in_h, out_h, self.align_corners, self.half_pixel_centers);
        let xs = nearest_axis(in_w, out_w, self.align_corners, self.half_pixel_centers);
        let size = images.dtype().size().unwrap_or(0);
        let run = channels * size;
        let src = images.as_bytes();
        let mut out = Vec::with_capacity(batch * out_h * out_w * run);
        for n in 0..batch {
            for &y in &ys {
                for &x in &xs {
                    out.extend_from_slice(&src[((n * in_h + y) * in_w + x) * run..][..run]);
                }
            }
        }
        Tensor::from_bytes(images.dtype(), dims, &out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn resize(op: &str, x: &Tensor, size: [i32; 2], align: bool, half: bool) -> Result<Tensor> {
        let n = node(op)
            .attr("T", ty(x.dtype()))
            .attr("align_corners", AttrValue::Bool(align))
            .attr("half_pixel_centers", AttrValue::Bool(half));
        run1(&n, &[x.clone(), Tensor::from_slice::<i32>([2], &size).unwrap()])
    }

    fn row(values: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>([1, 1, values.len(), 1], values).unwrap()
    }

    #[test]
    fn bilinear_follows_each_convention() {
        let x = row(&[0.0, 10.0]);
        // tf.compat.v1.image.resize_bilinear to width 4, three ways.
        let legacy = resize("ResizeBilinear", &x, [1, 4], false, false).unwrap();
        assert_eq!(legacy.as_slice::<f32>().unwrap(), &[0.0, 5.0, 10.0, 10.0]);
        let corners = resize("ResizeBilinear", &x, [1, 4], true, false).unwrap();
        let got = corners.as_slice::<f32>().unwrap();
        assert!(got.iter().zip([0.0, 10.0 / 3.0, 20.0 / 3.0, 10.0]).all(|(a, b)| (a - b).abs() < 1e-5), "{got:?}");
        let half = resize("ResizeBilinear", &x, [1, 4], false, true).unwrap();
        assert_eq!(half.as_slice::<f32>().unwrap(), &[0.0, 2.5, 7.5, 10.0]);
        let ints = Tensor::from_slice::<i32>([1, 1, 2, 1], &[0, 10]).unwrap();
        let from_ints = resize("ResizeBilinear", &ints, [1, 4], false, true).unwrap();
        assert_eq!(from_ints.dtype(), DType::F32);
        assert_eq!(from_ints.as_slice::<f32>().unwrap(), &[0.0, 2.5, 7.5, 10.0]);
    }

    #[test]
    fn nearest_follows_each_convention_and_keeps_the_dtype() {
        let x = Tensor::from_slice::<i64>([1, 1, 3, 1], &[1, 2, 3]).unwrap();
        let legacy = resize("ResizeNearestNeighbor", &x, [1, 5], false, false).unwrap();
        assert_eq!(legacy.as_slice::<i64>().unwrap(), &[1, 1, 2, 2, 3]);
        let corners = resize("ResizeNearestNeighbor", &x, [1, 5], true, false).unwrap();
        assert_eq!(corners.as_slice::<i64>().unwrap(), &[1, 2, 2, 3, 3]);
        let half = resize("ResizeNearestNeighbor", &x, [1, 2], false, true).unwrap();
        assert_eq!(half.as_slice::<i64>().unwrap(), &[1, 3]);
    }

    #[test]
    fn bad_sizes_and_conventions_are_errors() {
        let x = row(&[1.0, 2.0]);
        assert!(resize("ResizeBilinear", &x, [0, 2], false, false).unwrap_err().message.contains("positive"));
        assert!(resize("ResizeBilinear", &x, [2, 2], true, true).unwrap_err().message.contains("align_corners"));
        let flat = Tensor::from_slice::<f32>([2], &[1.0, 2.0]).unwrap();
        assert!(resize("ResizeNearestNeighbor", &flat, [2, 2], false, false).unwrap_err().message.contains("4-dim"));
    }
}
