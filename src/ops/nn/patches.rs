//! Sliding-window ops that gather instead of convolving, on NHWC batches:
//! `ExtractImagePatches` (`tf.image.extract_patches`: each window's pixels
//! laid out along depth), `MaxPoolWithArgmax` (`tf.nn.max_pool_with_argmax`:
//! the maximum and where it was) and `Dilation2D` (`tf.nn.dilation2d`:
//! grayscale morphological dilation, max of input + filter).
//!
//! Owns: these kernels. The geometry (output sizes, SAME padding, rates)
//! is `window::Axis`'s. Must not hold state beyond parsed attributes.
//!
//! TensorFlow's rules: a patch's taps in the padding are zeros; a window's
//! maximum is its first largest element in row-major order (a later equal
//! one does not replace it, NaN never does) and the argmax is flat
//! `(y · width + x) · channels + c`, with the batch folded in front when
//! `include_batch_in_index`; a dilation ignores taps in the padding.

use super::super::math::REAL;
use super::super::numeric::Num;
use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use super::window::{Axis, Padding, nhwc_list, positive};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("ExtractImagePatches", same_type_signature::<1>, build_patches),
    OpDef::kernel("MaxPoolWithArgmax", argmax_signature, build_argmax_pool),
    OpDef::kernel("Dilation2D", same_type_signature::<2>, build_dilation),
];

/// `N` inputs of `T` -> `[T]`.
fn same_type_signature<const N: usize>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t; N], vec![t]))
}

fn argmax_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let index = ValueType::Tensor(node.attr_dtype_or("Targmax", DType::I64)?);
    Ok(OpSignature::new(vec![t], vec![t, index]))
}

/// A spatial list attribute `[1, rows, cols, 1]` as `[rows, cols]`, both
/// positive.
fn spatial(node: &NodeSpec, key: &str, default: &[i64]) -> Result<[usize; 2]> {
    let v = nhwc_list(node, key, default, key)?;
    if v[0] != 1 || v[3] != 1 {
        bail!(
            invalid_argument,
            "node '{}' ({}): {key} must be [1, rows, cols, 1] (windows across space only), got {v:?}",
            node.name,
            node.op
        );
    }
    let bad =
        || Status::invalid_argument(format!("node '{}' ({}): {key} must be positive, got {v:?}", node.name, node.op));
    Ok([positive(v[1], bad)?, positive(v[2], bad)?])
}

/// An NHWC input's dimensions.
fn nhwc(t: &Tensor, what: &str) -> Result<[usize; 4]> {
    <[usize; 4]>::try_from(t.dims())
        .map_err(|_| Status::invalid_argument(format!("{what} must be 4-dimensional, got shape {}", t.shape())))
}

// ---------------------------------------------------------------------------
// ExtractImagePatches

struct Patches {
    window: [usize; 2],
    strides: [usize; 2],
    rates: [usize; 2],
    padding: Padding,
}

fn build_patches(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    Ok(Box::new(Patches {
        window: spatial(node, "ksizes", &[])?,
        strides: spatial(node, "strides", &[])?,
        rates: spatial(node, "rates", &[1, 1, 1, 1])?,
        padding: Padding::from_node(node, &[Padding::Valid, Padding::Same])?,
    }))
}

impl OpKernel for Patches {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let images = ctx.input(0)?;
        let [batch, rows, cols, depth] = nhwc(images, "input")?;
        let width = images.dtype().size().ok_or_else(|| {
            Status::invalid_argument(format!("ExtractImagePatches does not support {}", images.dtype()))
        })?;
        let ys = Axis::new(rows, self.window[0], self.strides[0], self.rates[0], self.padding, [0, 0])?;
        let xs = Axis::new(cols, self.window[1], self.strides[1], self.rates[1], self.padding, [0, 0])?;
        let pixel = depth * width;
        let patch = self.window[0] * self.window[1] * pixel;
        let src = images.as_bytes();
        let mut out = vec![0u8; batch * ys.output * xs.output * patch];
        let mut at = 0;
        for n in 0..batch {
            for oy in 0..ys.output {
                for ox in 0..xs.output {
                    for ky in 0..ys.window {
                        for kx in 0..xs.window {
                            let (y, x) = (ys.position(oy, ky), xs.position(ox, kx));
                            if (0..rows as isize).contains(&y) && (0..cols as isize).contains(&x) {
                                let from = ((n * rows + y as usize) * cols + x as usize) * pixel;
                                out[at..at + pixel].copy_from_slice(&src[from..from + pixel]);
                            }
                            at += pixel;
                        }
                    }
                }
            }
        }
        let dims = [batch, ys.output, xs.output, self.window[0] * self.window[1] * depth];
        ctx.set_output(0, Tensor::from_bytes(images.dtype(), dims, &out)?);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// MaxPoolWithArgmax

struct ArgmaxPool {
    window: [usize; 2],
    strides: [usize; 2],
    padding: Padding,
    with_batch: bool,
    wide: bool,
}

fn build_argmax_pool(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    if !REAL.contains(&dtype) {
        return Err(unsupported_dtype(&node.op, dtype, REAL));
    }
    let index = node.attr_dtype_or("Targmax", DType::I64)?;
    if !matches!(index, DType::I32 | DType::I64) {
        bail!(
            invalid_argument,
            "node '{}' (MaxPoolWithArgmax): Targmax must be int32 or int64, not {index}",
            node.name
        );
    }
    Ok(Box::new(ArgmaxPool {
        window: spatial(node, "ksize", &[])?,
        strides: spatial(node, "strides", &[])?,
        padding: Padding::from_node(node, &[Padding::Valid, Padding::Same])?,
        with_batch: node.attr_bool_or("include_batch_in_index", false)?,
        wide: index == DType::I64,
    }))
}

impl OpKernel for ArgmaxPool {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let dims = nhwc(input, "input")?;
        let ys = Axis::new(dims[1], self.window[0], self.strides[0], 1, self.padding, [0, 0])?;
        let xs = Axis::new(dims[2], self.window[1], self.strides[1], 1, self.padding, [0, 0])?;
        let (values, argmax) = match input.dtype() {
            DType::F32 => self.pool::<f32>(input, dims, ys, xs)?,
            DType::F64 => self.pool::<f64>(input, dims, ys, xs)?,
            DType::I32 => self.pool::<i32>(input, dims, ys, xs)?,
            DType::I64 => self.pool::<i64>(input, dims, ys, xs)?,
            other => return Err(unsupported_dtype("MaxPoolWithArgmax", other, REAL)),
        };
        let shape = [dims[0], ys.output, xs.output, dims[3]];
        let argmax = if self.wide {
            Tensor::from_slice::<i64>(shape, &argmax)?
        } else {
            if argmax.iter().any(|&i| i > i32::MAX as i64) {
                bail!(invalid_argument, "MaxPoolWithArgmax: an index past int32 with Targmax int32");
            }
            Tensor::from_map(shape, &argmax, |i| i as i32)?
        };
        ctx.set_output(0, values);
        ctx.set_output(1, argmax);
        Ok(())
    }
}

impl ArgmaxPool {
    fn pool<T: Num>(&self, input: &Tensor, dims: [usize; 4], ys: Axis, xs: Axis) -> Result<(Tensor, Vec<i64>)> {
        let [batch, rows, cols, depth] = dims;
        let src = input.as_slice::<T>()?;
        let shape = [batch, ys.output, xs.output, depth];
        let mut argmax = vec![-1i64; shape.iter().product()];
        let values = Tensor::build::<T>(shape, |out| {
            let mut at = 0;
            for n in 0..batch {
                for oy in 0..ys.output {
                    for ox in 0..xs.output {
                        for c in 0..depth {
                            let (mut best, mut best_at) = (T::BOTTOM, -1i64);
                            for y in ys.taps(oy).map(|k| ys.position(oy, k) as usize) {
                                for x in xs.taps(ox).map(|k| xs.position(ox, k) as usize) {
                                    let v = src[((n * rows + y) * cols + x) * depth + c];
                                    if best_at < 0 || best < v {
                                        best = v;
                                        let base = if self.with_batch { (n * rows + y) * cols } else { y * cols };
                                        best_at = ((base + x) * depth + c) as i64;
                                    }
                                }
                            }
                            out[at] = best;
                            argmax[at] = best_at;
                            at += 1;
                        }
                    }
                }
            }
        })?;
        Ok((values, argmax))
    }
}

// ---------------------------------------------------------------------------
// Dilation2D

struct Dilation {
    strides: [usize; 2],
    rates: [usize; 2],
    padding: Padding,
}

fn build_dilation(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    if !REAL.contains(&dtype) {
        return Err(unsupported_dtype(&node.op, dtype, REAL));
    }
    Ok(Box::new(Dilation {
        strides: spatial(node, "strides", &[])?,
        rates: spatial(node, "rates", &[])?,
        padding: Padding::from_node(node, &[Padding::Valid, Padding::Same])?,
    }))
}

impl OpKernel for Dilation {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (input, filter) = (ctx.input(0)?, ctx.input(1)?);
        let dims = nhwc(input, "input")?;
        let &[fh, fw, fd] = filter.dims() else {
            bail!(invalid_argument, "filter must be 3-dimensional, got shape {}", filter.shape());
        };
        if fd != dims[3] {
            bail!(invalid_argument, "input and filter must have the same depth: {} vs {fd}", dims[3]);
        }
        let ys = Axis::new(dims[1], fh, self.strides[0], self.rates[0], self.padding, [0, 0])?;
        let xs = Axis::new(dims[2], fw, self.strides[1], self.rates[1], self.padding, [0, 0])?;
        let out = match input.dtype() {
            DType::F32 => dilate::<f32>(input, filter, dims, ys, xs)?,
            DType::F64 => dilate::<f64>(input, filter, dims, ys, xs)?,
            DType::I32 => dilate::<i32>(input, filter, dims, ys, xs)?,
            DType::I64 => dilate::<i64>(input, filter, dims, ys, xs)?,
            other => return Err(unsupported_dtype("Dilation2D", other, REAL)),
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

fn dilate<T: Num>(input: &Tensor, filter: &Tensor, dims: [usize; 4], ys: Axis, xs: Axis) -> Result<Tensor> {
    let [batch, rows, cols, depth] = dims;
    let (src, kernel) = (input.as_slice::<T>()?, filter.as_slice::<T>()?);
    Tensor::build::<T>([batch, ys.output, xs.output, depth], |out| {
        let mut at = 0;
        for n in 0..batch {
            for oy in 0..ys.output {
                for ox in 0..xs.output {
                    for c in 0..depth {
                        let mut best = T::BOTTOM;
                        for ky in ys.taps(oy) {
                            let y = ys.position(oy, ky) as usize;
                            for kx in xs.taps(ox) {
                                let x = xs.position(ox, kx) as usize;
                                let v = src[((n * rows + y) * cols + x) * depth + c]
                                    .add(kernel[(ky * xs.window + kx) * depth + c]);
                                if v > best {
                                    best = v;
                                }
                            }
                        }
                        out[at] = best;
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
    use crate::ops::nn::window::testing::{ints, text};
    use crate::ops::testing::{node, ty};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn run(n: &NodeSpec, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let values = inputs.iter().cloned().map(Value::Tensor).collect();
        run_kernel_once(n, values, &ResourceMgr::default())?.into_iter().map(Value::into_tensor).collect()
    }
    fn image() -> Tensor {
        // [1, 4, 4, 2]: channel 0 counts up, channel 1 down.
        let v: Vec<f32> = (0..16).flat_map(|i| [i as f32, 100.0 - i as f32]).collect();
        Tensor::from_slice::<f32>([1, 4, 4, 2], &v).unwrap()
    }

    #[test]
    fn patches_lay_each_window_along_depth() {
        let n = node("ExtractImagePatches")
            .attr("T", ty(DType::F32))
            .attr("ksizes", ints(&[1, 2, 2, 1]))
            .attr("strides", ints(&[1, 2, 2, 1]))
            .attr("rates", ints(&[1, 1, 1, 1]))
            .attr("padding", text("VALID"));
        let out = run(&n, &[image()]).unwrap().remove(0);
        assert_eq!(out.dims(), [1, 2, 2, 8]);
        let v = out.as_slice::<f32>().unwrap();
        assert_eq!(&v[..8], &[0., 100., 1., 99., 4., 96., 5., 95.]);
        // SAME with a rate: taps two apart, the padding zero.
        let same = n.clone().attr("rates", ints(&[1, 2, 2, 1])).attr("padding", text("SAME"));
        let out = run(&same, &[image()]).unwrap().remove(0);
        assert_eq!(out.dims(), [1, 2, 2, 8]);
        let v = out.as_slice::<f32>().unwrap();
        // Output (0, 0): effective window 3, one padding row and column,
        // both after: taps at 0 and 2. Output (1, 1): taps 2 and 4 (padding).
        assert_eq!(&v[..8], &[0., 100., 2., 98., 8., 92., 10., 90.]);
        assert_eq!(&v[24..], &[10., 90., 0., 0., 0., 0., 0., 0.]);
        let bad = n.attr("ksizes", ints(&[2, 2, 2, 1]));
        assert!(run(&bad, &[image()]).unwrap_err().message.contains("ksizes must be [1, rows, cols, 1]"));
    }

    #[test]
    fn argmax_pooling_keeps_the_first_maximum() {
        let n = node("MaxPoolWithArgmax")
            .attr("T", ty(DType::F32))
            .attr("ksize", ints(&[1, 2, 2, 1]))
            .attr("strides", ints(&[1, 2, 2, 1]))
            .attr("padding", text("VALID"));
        let outs = run(&n, &[image()]).unwrap();
        assert_eq!(outs[0].as_slice::<f32>().unwrap(), &[5., 100., 7., 98., 13., 92., 15., 90.]);
        assert_eq!(outs[1].as_slice::<i64>().unwrap(), &[10, 1, 14, 5, 26, 17, 30, 21]);
        // Ties: the first in row-major order.
        let flat = Tensor::from_slice::<f32>([1, 2, 2, 1], &[3., 3., 3., 3.]).unwrap();
        let outs = run(&n.clone().attr("Targmax", ty(DType::I32)), &[flat]).unwrap();
        assert_eq!(outs[1].as_slice::<i32>().unwrap(), &[0]);
        // With the batch folded in, the second image's indices move on.
        let two = Tensor::from_slice::<f32>([2, 2, 2, 1], &[0., 1., 2., 3., 7., 6., 5., 4.]).unwrap();
        let outs = run(&n.attr("include_batch_in_index", AttrValue::Bool(true)), &[two]).unwrap();
        assert_eq!(outs[1].as_slice::<i64>().unwrap(), &[3, 4]);
    }

    #[test]
    fn dilation_adds_the_filter_and_takes_the_max() {
        let n = node("Dilation2D")
            .attr("T", ty(DType::F32))
            .attr("strides", ints(&[1, 1, 1, 1]))
            .attr("rates", ints(&[1, 1, 1, 1]))
            .attr("padding", text("SAME"));
        let x = Tensor::from_slice::<f32>([1, 2, 2, 1], &[1., 5., 2., 0.]).unwrap();
        let filter = Tensor::from_slice::<f32>([2, 2, 1], &[0., 1., -1., 10.]).unwrap();
        let out = run(&n, &[x, filter]).unwrap().remove(0);
        // Output (0,0): max(1+0, 5+1, 2-1, 0+10) = 10; (0,1): max(5+0, 0-1) = 5;
        // (1,0): max(2+0, 0+1) = 2; (1,1): 0.
        assert_eq!(out.as_slice::<f32>().unwrap(), &[10., 5., 2., 0.]);
    }
}
