//! The gradients of `Conv3D`, which are also how Keras' `Conv3DTranspose`
//! runs: `Conv3DBackpropInputV2` (input sizes given) and
//! `Conv3DBackpropInput` (an input tensor's shape), and
//! `Conv3DBackpropFilterV2` / `Conv3DBackpropFilter`, on NDHWC volumes.
//!
//! Owns: these kernels. The products are `volume`'s patch matrix run
//! backwards, a block of output voxels at a time: the input gradient
//! multiplies the incoming gradient rows by the transposed filter and adds
//! each patch row back where its taps read (none in the padding); the
//! filter gradient is the transposed patch matrix times the incoming
//! gradient, summed over blocks. Must not hold state beyond parsed
//! attributes.

use super::volume::{Conv3D, for_each_tap, input_dims, patch_block};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::matmul::{Gemm, Strided};
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values};
use crate::tensor::{DType, Element, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Conv3DBackpropInputV2", input_v2_signature, build::<true, true>),
    OpDef::kernel("Conv3DBackpropInput", tensors_signature, build::<true, false>),
    OpDef::kernel("Conv3DBackpropFilterV2", filter_v2_signature, build::<false, true>),
    OpDef::kernel("Conv3DBackpropFilter", tensors_signature, build::<false, false>),
];

/// `[Tshape, T, T] -> [T]`: input sizes, filter, out_backprop.
fn input_v2_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let shape = ValueType::Tensor(attr_index_type_or(node, "Tshape", DType::I32)?);
    Ok(OpSignature::new(vec![shape, t, t], vec![t]))
}

/// `[T, int32, T] -> [T]`: input, filter sizes, out_backprop.
fn filter_v2_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, ValueType::Tensor(DType::I32), t], vec![t]))
}

/// `[T, T, T] -> [T]`: input, filter, out_backprop (V1: shapes from tensors).
fn tensors_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, t, t], vec![t]))
}

struct Conv3DGrad {
    conv: Conv3D,
    wrt_input: bool,
    sizes_given: bool,
}

fn build<const WRT_INPUT: bool, const V2: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Conv3DGrad { conv: Conv3D::from_node(init.node)?, wrt_input: WRT_INPUT, sizes_given: V2 }))
}

/// A 5-element sizes operand.
fn sizes(t: &Tensor, what: &str) -> Result<[usize; 5]> {
    let values = index_values(t, what)?;
    let Ok(v) = <[i64; 5]>::try_from(values.as_slice()) else {
        bail!(invalid_argument, "{what} must have 5 elements, got shape {}", t.shape());
    };
    if v.iter().any(|&x| x < 0) {
        bail!(invalid_argument, "{what} must be non-negative, got {v:?}");
    }
    Ok(v.map(|x| x as usize))
}

impl OpKernel for Conv3DGrad {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (first, second, dy) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        // The operand whose shape is only needed, and the one whose values are.
        let (x_dims, f_dims) = match (self.wrt_input, self.sizes_given) {
            (true, true) => (sizes(first, "input_sizes")?, input_dims(second, "filter")?),
            (false, true) => (input_dims(first, "input")?, sizes(second, "filter_sizes")?),
            (_, false) => (input_dims(first, "input")?, input_dims(second, "filter")?),
        };
        let out = match dy.dtype() {
            DType::F32 => self.run::<f32>(x_dims, f_dims, first, second, dy)?,
            _ => self.run::<f64>(x_dims, f_dims, first, second, dy)?,
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

impl Conv3DGrad {
    fn run<T: Gemm + Element>(
        &self,
        [n, d, h, w, c]: [usize; 5],
        [kd, kh, kw, fc, o]: [usize; 5],
        first: &Tensor,
        second: &Tensor,
        dy: &Tensor,
    ) -> Result<Tensor> {
        if fc != c {
            bail!(invalid_argument, "Input depth {c} must equal the filter's input depth {fc}");
        }
        let axes = self.conv.axes([d, h, w], [kd, kh, kw])?;
        let want = [n, axes[0].output, axes[1].output, axes[2].output, o];
        if dy.dims() != want {
            bail!(invalid_argument, "out_backprop has shape {} but the convolution's output is {want:?}", dy.shape());
        }
        let voxels = n * axes[0].output * axes[1].output * axes[2].output;
        let patch = kd * kh * kw * c;
        let dy = dy.as_slice::<T>()?;
        let block = patch_block::<T>(patch);
        let dims = [d, h, w, c];
        if self.wrt_input {
            let f = second.as_slice::<T>()?;
            return Tensor::build::<T>([n, d, h, w, c].as_slice(), |dx| {
                dx.fill(T::ZERO);
                if voxels == 0 || patch == 0 || o == 0 {
                    return;
                }
                let mut rows_grad = vec![T::ZERO; block.min(voxels) * patch];
                for (b, dy_block) in dy.chunks(block * o).enumerate() {
                    let rows = dy_block.len() / o;
                    // Filter [patch, o] read transposed as [o, patch].
                    let f_t = Strided { data: f, rows: 1, cols: o };
                    T::gemm_over(
                        [rows, o, patch],
                        Strided::row_major(dy_block, o),
                        f_t,
                        &mut rows_grad[..rows * patch],
                    );
                    for (r, row) in rows_grad[..rows * patch].chunks_exact(patch).enumerate() {
                        for_each_tap(b * block + r, &axes, dims, |at, to| {
                            if let Some(to) = to {
                                for (x, &g) in dx[to..to + c].iter_mut().zip(&row[at..at + c]) {
                                    *x = x.add(g);
                                }
                            }
                        });
                    }
                }
            });
        }
        let x = first.as_slice::<T>()?;
        Tensor::build::<T>([kd, kh, kw, c, o].as_slice(), |df| {
            df.fill(T::ZERO);
            if voxels == 0 || patch == 0 || o == 0 {
                return;
            }
            let mut patches = vec![T::ZERO; block.min(voxels) * patch];
            let mut partial = vec![T::ZERO; patch * o];
            for (b, dy_block) in dy.chunks(block * o).enumerate() {
                let rows = dy_block.len() / o;
                for (r, row) in patches[..rows * patch].chunks_exact_mut(patch).enumerate() {
                    self.conv.gather_patch(b * block + r, &axes, dims, x, row);
                }
                // Patches [rows, patch] read transposed as [patch, rows].
                let p_t = Strided { data: &patches[..rows * patch], rows: 1, cols: patch };
                T::gemm_over([patch, rows, o], p_t, Strided::row_major(dy_block, o), &mut partial);
                for (acc, &p) in df.iter_mut().zip(&partial) {
                    *acc = acc.add(p);
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::{AttrList, AttrValue, NodeSpec};
    use crate::ops::testing::run_all;
    use crate::ops::testing::{node, ty};
    use crate::tensor::{DType, Tensor};

    fn attrs(op: &str, stride: i64, padding: &str) -> NodeSpec {
        node(op)
            .attr("T", ty(DType::F32))
            .attr("strides", AttrValue::List(AttrList::Int(vec![1, stride, stride, stride, 1])))
            .attr("padding", AttrValue::Bytes(padding.as_bytes().to_vec()))
    }
    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n).map(|i| ((i as u32 * 7 + seed * 13) % 11) as f32 / 4.0 - 1.0).collect()
    }

    /// d(sum(conv(x, f) * dy)) by the definition, through Conv3D itself:
    /// perturbing one element at a time (the function is linear in each
    /// operand, so a unit perturbation gives the exact derivative).
    fn numeric(stride: i64, padding: &str, x: &Tensor, f: &Tensor, dy: &[f32], wrt_input: bool) -> Vec<f32> {
        let conv = attrs("Conv3D", stride, padding);
        let dot = |x: &Tensor, f: &Tensor| -> f32 {
            let y = run_all(&conv, &[x.clone(), f.clone()]).unwrap().remove(0);
            y.as_slice::<f32>().unwrap().iter().zip(dy).map(|(a, b)| a * b).sum()
        };
        let base = if wrt_input { x } else { f };
        let mut grads = Vec::new();
        for i in 0..base.num_elements() {
            let mut unit = vec![0f32; base.num_elements()];
            unit[i] = 1.0;
            let unit = Tensor::from_slice::<f32>(base.dims(), &unit).unwrap();
            let zero_x = Tensor::zeros(DType::F32, x.dims()).unwrap();
            let zero_f = Tensor::zeros(DType::F32, f.dims()).unwrap();
            grads.push(if wrt_input { dot(&unit, f) - dot(&zero_x, f) } else { dot(x, &unit) - dot(x, &zero_f) });
        }
        grads
    }

    #[test]
    fn gradients_are_the_derivatives_of_conv3d() {
        for (stride, padding) in [(1, "SAME"), (2, "VALID"), (2, "SAME")] {
            let x = Tensor::from_slice::<f32>([1, 3, 4, 3, 2].as_slice(), &values(72, 1)).unwrap();
            let f = Tensor::from_slice::<f32>([2, 2, 2, 2, 3].as_slice(), &values(48, 2)).unwrap();
            let y = run_all(&attrs("Conv3D", stride, padding), &[x.clone(), f.clone()]).unwrap().remove(0);
            let dy = values(y.num_elements(), 3);
            let dy_t = Tensor::from_slice::<f32>(y.dims(), &dy).unwrap();
            let sizes = |dims: &[usize]| {
                Tensor::from_slice::<i32>([5].as_slice(), &dims.iter().map(|&d| d as i32).collect::<Vec<_>>()).unwrap()
            };
            let dx =
                run_all(&attrs("Conv3DBackpropInputV2", stride, padding), &[sizes(x.dims()), f.clone(), dy_t.clone()]);
            let dx = dx.unwrap().remove(0);
            let want = numeric(stride, padding, &x, &f, &dy, true);
            for (g, w) in dx.as_slice::<f32>().unwrap().iter().zip(&want) {
                assert!((g - w).abs() < 1e-4, "{padding}/{stride}: input grad {g} vs {w}");
            }
            let df =
                run_all(&attrs("Conv3DBackpropFilterV2", stride, padding), &[x.clone(), sizes(f.dims()), dy_t.clone()]);
            let df = df.unwrap().remove(0);
            assert_eq!(df.dims(), f.dims());
            let want = numeric(stride, padding, &x, &f, &dy, false);
            for (g, w) in df.as_slice::<f32>().unwrap().iter().zip(&want) {
                assert!((g - w).abs() < 1e-4, "{padding}/{stride}: filter grad {g} vs {w}");
            }
            let v1 = run_all(&attrs("Conv3DBackpropInput", stride, padding), &[x.clone(), f.clone(), dy_t])
                .unwrap()
                .remove(0);
            assert_eq!(v1.as_slice::<f32>().unwrap(), dx.as_slice::<f32>().unwrap());
        }
    }
}
