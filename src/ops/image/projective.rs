//! Projective transforms of NHWC images (`ImageProjectiveTransformV2`,
//! `V3`): what Keras' `RandomRotation`, `RandomZoom`, `RandomTranslation`
//! and `tf.raw_ops` transforms put in exported graphs. Each output pixel
//! `(x, y)` reads the input at `((a0 x + a1 y + a2) / k, (b0 x + b1 y +
//! b2) / k)` with `k = c0 x + c1 y + 1`, one 8-vector per image (or one for
//! all), with nearest or bilinear sampling; points outside the input are
//! mapped back by the fill mode (`REFLECT`, `WRAP`, `NEAREST`) or read as
//! the fill value (`CONSTANT`; V2 fills 0).
//!
//! Owns: these kernels. Arithmetic follows TensorFlow's CPU kernel in
//! float32 (the projection, the mapped coordinate, its floor, the lerps),
//! so results agree to float rounding. Must not hold state beyond parsed
//! attributes.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values};
use crate::tensor::{DType, Element, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("ImageProjectiveTransformV2", signature::<false>, build),
    OpDef::kernel("ImageProjectiveTransformV3", signature::<true>, build),
];

/// `[T images, float transforms, int32 output_shape (, float fill_value)] -> [T]`.
fn signature<const FILL_VALUE: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let images = ValueType::Tensor(node.attr_dtype("dtype")?);
    let mut inputs = vec![images, ValueType::Tensor(DType::F32), ValueType::Tensor(DType::I32)];
    if FILL_VALUE {
        inputs.push(ValueType::Tensor(DType::F32));
    }
    Ok(OpSignature::new(inputs, vec![images]))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FillMode {
    Reflect,
    Wrap,
    Constant,
    Nearest,
}

struct ProjectiveTransform {
    bilinear: bool,
    fill_mode: FillMode,
    /// V3 reads its fill value from input 3; V2 fills 0.
    fill_value_input: bool,
}

fn build(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let bilinear = match node.attr_str_or("interpolation", "")?.as_str() {
        "NEAREST" => false,
        "BILINEAR" => true,
        other => bail!(
            invalid_argument,
            "node '{}' ({}): interpolation '{other}' (expected NEAREST or BILINEAR)",
            node.name,
            node.op
        ),
    };
    let fill_mode = match node.attr_str_or("fill_mode", "CONSTANT")?.as_str() {
        "REFLECT" => FillMode::Reflect,
        "WRAP" => FillMode::Wrap,
        "CONSTANT" => FillMode::Constant,
        "NEAREST" => FillMode::Nearest,
        other => bail!(
            invalid_argument,
            "node '{}' ({}): fill_mode '{other}' (expected REFLECT, WRAP, CONSTANT or NEAREST)",
            node.name,
            node.op
        ),
    };
    let dtype = node.attr_dtype("dtype")?;
    if !matches!(dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64 | DType::U8) {
        bail!(invalid_argument, "node '{}' ({}): dtype {dtype} is not supported", node.name, node.op);
    }
    Ok(Box::new(ProjectiveTransform { bilinear, fill_mode, fill_value_input: node.op.ends_with("V3") }))
}

/// A pixel type, read and written through float32 as TensorFlow's kernel
/// does (`static_cast<float>` in, `T(float)` out).
trait Pixel: Element {
    fn to_f32(self) -> f32;
    fn from_f32(value: f32) -> Self;
}

macro_rules! pixel {
    ($($t:ty),*) => {$(
        impl Pixel for $t {
            fn to_f32(self) -> f32 {
                self as f32
            }
            fn from_f32(value: f32) -> Self {
                value as $t
            }
        }
    )*};
}
pixel!(f32, f64, i32, i64, u8);

impl OpKernel for ProjectiveTransform {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let images = ctx.input(0)?;
        let transforms = ctx.input(1)?;
        let &[batch, _, _, _] = images.dims() else {
            bail!(invalid_argument, "Input images must have rank 4, got shape {}", images.shape());
        };
        let rows = match transforms.dims() {
            &[rows, 8] if rows == 1 || rows == batch => rows,
            _ => bail!(
                invalid_argument,
                "Input transform should be num_images x 8 or 1 x 8, got shape {} for {batch} images",
                transforms.shape()
            ),
        };
        let size = ctx.input(2)?;
        if size.shape().rank() != 1 || size.num_elements() != 2 {
            bail!(invalid_argument, "output shape must be 1-dimensional with 2 elements, got {}", size.shape());
        }
        let wanted = index_values(size, "output_shape")?;
        let (Ok(out_h), Ok(out_w)) = (usize::try_from(wanted[0]), usize::try_from(wanted[1])) else {
            bail!(invalid_argument, "output dimensions must be non-negative, got {:?}", &wanted[..]);
        };
        let fill = if self.fill_value_input {
            let fill = ctx.input(3)?;
            if fill.shape().rank() != 0 {
                bail!(invalid_argument, "fill_value must be a scalar, got shape {}", fill.shape());
            }
            fill.as_slice::<f32>()?[0]
        } else {
            0.0
        };
        let transforms = transforms.as_slice::<f32>()?;
        let out = match images.dtype() {
            DType::F32 => self.transform::<f32>(images, transforms, rows, [out_h, out_w], fill)?,
            DType::F64 => self.transform::<f64>(images, transforms, rows, [out_h, out_w], fill)?,
            DType::I32 => self.transform::<i32>(images, transforms, rows, [out_h, out_w], fill)?,
            DType::I64 => self.transform::<i64>(images, transforms, rows, [out_h, out_w], fill)?,
            DType::U8 => self.transform::<u8>(images, transforms, rows, [out_h, out_w], fill)?,
            other => return Err(Status::invalid_argument(format!("projective transform of {other} images"))),
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

impl ProjectiveTransform {
    fn transform<T: Pixel>(
        &self,
        images: &Tensor,
        transforms: &[f32],
        rows: usize,
        [out_h, out_w]: [usize; 2],
        fill: f32,
    ) -> Result<Tensor> {
        let &[batch, in_h, in_w, channels] = images.dims() else {
            bail!(internal, "images were checked to be 4-D");
        };
        let src = images.as_slice::<T>()?;
        let fill = T::from_f32(fill);
        Tensor::build::<T>([batch, out_h, out_w, channels], |out| {
            let read = |n: usize, y: f32, x: f32, c: usize| -> T {
                // TensorFlow's DenseIndex(y): truncation toward zero.
                let (yi, xi) = (y as i64, x as i64);
                if yi >= 0 && (yi as usize) < in_h && xi >= 0 && (xi as usize) < in_w {
                    src[((n * in_h + yi as usize) * in_w + xi as usize) * channels + c]
                } else {
                    fill
                }
            };
            let mut at = 0;
            for n in 0..batch {
                let t = &transforms[if rows == 1 { 0 } else { n * 8 }..][..8];
                for oy in 0..out_h {
                    for ox in 0..out_w {
                        let (xf, yf) = (ox as f32, oy as f32);
                        let projection = t[6] * xf + t[7] * yf + 1.0;
                        if projection == 0.0 {
                            out[at..at + channels].fill(fill);
                            at += channels;
                            continue;
                        }
                        let in_x = (t[0] * xf + t[1] * yf + t[2]) / projection;
                        let in_y = (t[3] * xf + t[4] * yf + t[5]) / projection;
                        let x = map_coordinate(in_x, in_w, self.fill_mode);
                        let y = map_coordinate(in_y, in_h, self.fill_mode);
                        for c in 0..channels {
                            out[at] = if self.bilinear {
                                let (y0, x0) = (y.floor(), x.floor());
                                let (y1, x1) = (y0 + 1.0, x0 + 1.0);
                                let top =
                                    (x1 - x) * read(n, y0, x0, c).to_f32() + (x - x0) * read(n, y0, x1, c).to_f32();
                                let bottom =
                                    (x1 - x) * read(n, y1, x0, c).to_f32() + (x - x0) * read(n, y1, x1, c).to_f32();
                                T::from_f32((y1 - y) * top + (y - y0) * bottom)
                            } else {
                                read(n, y.round(), x.round(), c)
                            };
                            at += 1;
                        }
                    }
                }
            }
        })
    }
}

/// An input coordinate outside `[0, len - 1]` mapped back inside by the
/// fill mode (`CONSTANT` leaves it outside: it reads as the fill value).
fn map_coordinate(coord: f32, len: usize, mode: FillMode) -> f32 {
    let len_i = len as i64;
    let last = len as f32 - 1.0;
    let mapped = match mode {
        FillMode::Constant => return coord,
        FillMode::Nearest => coord,
        FillMode::Reflect => {
            let mut c = coord;
            if c < 0.0 {
                if len <= 1 {
                    c = 0.0;
                } else {
                    let period = (2 * len_i) as f32;
                    if c < period {
                        c += period * ((-c / period) as i64) as f32;
                    }
                    c = if c < -(len as f32) { c + period } else { -c - 1.0 };
                }
            } else if c > last {
                if len <= 1 {
                    c = 0.0;
                } else {
                    let period = (2 * len_i) as f32;
                    c -= period * ((c / period) as i64) as f32;
                    if c >= len as f32 {
                        c = period - c - 1.0;
                    }
                }
            }
            c
        }
        FillMode::Wrap => {
            let mut c = coord;
            if c < 0.0 {
                if len <= 1 {
                    c = 0.0;
                } else {
                    let span = (len_i - 1) as f32;
                    c += len as f32 * (((-c / span) as i64) + 1) as f32;
                }
            } else if c > last {
                if len <= 1 {
                    c = 0.0;
                } else {
                    let span = (len_i - 1) as f32;
                    c -= len as f32 * ((c / span) as i64) as f32;
                }
            }
            c
        }
    };
    // Rounding 3.5 in a length of 4 would read index 4: clamp.
    mapped.clamp(0.0, last.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_map_back_as_each_fill_mode_says() {
        // Length 4: reflect is half-sample symmetric, wrap is periodic
        // over len, nearest clamps, constant leaves the point outside.
        let reflect: Vec<f32> =
            [-1.0, -4.0, -5.0, 4.0, 7.0, 8.5].iter().map(|&c| map_coordinate(c, 4, FillMode::Reflect)).collect();
        assert_eq!(reflect, [0.0, 3.0, 3.0, 3.0, 0.0, 0.5]);
        let wrap: Vec<f32> = [-1.0, 4.0, 5.5].iter().map(|&c| map_coordinate(c, 4, FillMode::Wrap)).collect();
        assert_eq!(wrap, [3.0, 0.0, 1.5]);
        assert_eq!(map_coordinate(-2.5, 4, FillMode::Nearest), 0.0);
        assert_eq!(map_coordinate(-2.5, 4, FillMode::Constant), -2.5);
        assert_eq!(map_coordinate(-2.5, 1, FillMode::Reflect), 0.0);
    }
}
