//! `SparseToDense` (`tf.sparse.to_dense`, `tf.compat.v1.sparse_to_dense`):
//! a dense tensor of `default_value` with the listed coordinates set.
//!
//! Owns: this kernel and its checks. Must not hold state.
//!
//! As TensorFlow's: indices may be a scalar, a vector (one coordinate each)
//! or a matrix (a row per value); `validate_indices` (the default) wants
//! them sorted in row-major order without repeats; every index must lie
//! inside the shape either way, and without validation a repeated index
//! takes its last value. Elements move as bytes, so every fixed-width
//! dtype works; strings move as strings.

use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::array::broadcast_to::shape_values;
use crate::ops::array::element_size;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values};
use crate::tensor::Tensor;

pub const DEFS: &[OpDef] = &[OpDef::kernel("SparseToDense", sparse_to_dense_signature, build_sparse_to_dense)];

/// `[Tindices, Tindices, T, T] -> [T]`.
fn sparse_to_dense_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let i = ValueType::Tensor(attr_index_type_or(node, "Tindices", crate::tensor::DType::I32)?);
    Ok(OpSignature::new(vec![i, i, t, t], vec![t]))
}

struct SparseToDense {
    validate: bool,
}

fn build_sparse_to_dense(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(SparseToDense { validate: init.node.attr_bool_or("validate_indices", true)? }))
}

impl OpKernel for SparseToDense {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (indices, shape, values, default) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.input(3)?);
        if indices.rank() > 2 {
            bail!(
                invalid_argument,
                "sparse_indices should be a scalar, vector, or matrix, got shape {}",
                indices.shape()
            );
        }
        let count = if indices.rank() > 0 { indices.dims()[0] } else { 1 };
        let rank = if indices.rank() > 1 { indices.dims()[1] } else { 1 };
        let dims = shape_values(shape, "output_shape")?;
        if dims.len() != rank {
            bail!(invalid_argument, "output_shape has incorrect number of elements: {} should be: {rank}", dims.len());
        }
        if !(values.rank() == 0 || values.dims() == [count]) {
            bail!(invalid_argument, "sparse_values has incorrect shape {}, should be [] or [{count}]", values.shape());
        }
        if default.rank() != 0 {
            bail!(invalid_argument, "default_value should be a scalar, got shape {}", default.shape());
        }
        if values.dtype() != default.dtype() {
            bail!(invalid_argument, "sparse_values are {} but default_value is {}", values.dtype(), default.dtype());
        }
        let coords = index_values(indices, "sparse_indices")?;
        let mut positions = Vec::with_capacity(count);
        for (i, index) in coords.chunks_exact(rank.max(1)).enumerate().take(count) {
            let name = || format!("[{}]", index.iter().map(i64::to_string).collect::<Vec<_>>().join(","));
            let mut flat = 0usize;
            for (&c, &d) in index.iter().zip(&dims) {
                if c < 0 || c as usize >= d {
                    let shape = dims.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
                    bail!(invalid_argument, "indices[{i}] = {} is out of bounds: need 0 <= index < [{shape}]", name());
                }
                flat = flat * d + c as usize;
            }
            if self.validate && i > 0 {
                let previous = &coords[(i - 1) * rank..i * rank];
                match previous.cmp(index) {
                    std::cmp::Ordering::Greater => bail!(
                        invalid_argument,
                        "indices[{i}] = {} is out of order. Many sparse ops require sorted indices. Use `tf.sparse.reorder` to create a correctly ordered copy.",
                        name()
                    ),
                    std::cmp::Ordering::Equal => bail!(invalid_argument, "indices[{i}] = {} is repeated", name()),
                    std::cmp::Ordering::Less => {}
                }
            }
            positions.push(flat);
        }
        let total: usize = dims.iter().product();
        if values.dtype() == crate::tensor::DType::String {
            let (given, fill) = (values.strings()?, default.string_value()?);
            let mut out: Vec<&[u8]> = vec![fill; total];
            for (i, &p) in positions.iter().enumerate() {
                out[p] = given.get(if values.rank() == 0 { 0 } else { i }).unwrap_or_default();
            }
            ctx.set_output(0, Tensor::from_strings(dims.as_slice(), &out)?);
            return Ok(());
        }
        let width = element_size(values, "SparseToDense")?;
        let fill = default.as_bytes();
        let mut bytes = Vec::with_capacity(total * width);
        for _ in 0..total {
            bytes.extend_from_slice(fill);
        }
        let source = values.as_bytes();
        for (i, &p) in positions.iter().enumerate() {
            let from = if values.rank() == 0 { 0 } else { i * width };
            bytes[p * width..(p + 1) * width].copy_from_slice(&source[from..from + width]);
        }
        ctx.set_output(0, Tensor::from_bytes(values.dtype(), dims.as_slice(), &bytes)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};
    use crate::tensor::DType;

    #[test]
    fn strings_fill_with_the_default_string() {
        let n = node("SparseToDense").attr("T", ty(DType::String)).attr("Tindices", ty(DType::I64));
        let indices = Tensor::from_slice::<i64>([2, 2], &[0, 1, 1, 0]).unwrap();
        let shape = Tensor::from_slice::<i64>([2], &[2, 2]).unwrap();
        let values = Tensor::from_strings([2], &["cat", "emu"]).unwrap();
        let out = run1(&n, &[indices, shape, values, Tensor::string_scalar("")]).unwrap();
        assert_eq!(out.strings().unwrap().to_vec(), [&b""[..], b"cat", b"emu", b""]);
    }

    fn op(validate: bool) -> NodeSpec {
        node("SparseToDense")
            .attr("T", ty(DType::F32))
            .attr("Tindices", ty(DType::I32))
            .attr("validate_indices", AttrValue::Bool(validate))
    }
    fn idx(dims: &[usize], v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>(dims, v).unwrap()
    }
    fn f(dims: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(dims, v).unwrap()
    }
    fn shape(v: &[i32]) -> Tensor {
        idx(&[v.len()], v)
    }

    #[test]
    fn dense_outputs_match_tensorflow() {
        // TensorFlow 2.21's outputs for the same calls.
        let t =
            run1(&op(true), &[idx(&[2, 2], &[0, 1, 1, 0]), shape(&[2, 3]), f(&[2], &[5., 6.]), Tensor::scalar(-1f32)]);
        let t = t.unwrap();
        assert_eq!(t.dims(), [2, 3]);
        assert_eq!(t.as_slice::<f32>().unwrap(), [-1., 5., -1., 6., -1., -1.]);
        let t = run1(
            &op(false),
            &[idx(&[2, 2], &[1, 0, 0, 1]), shape(&[2, 3]), Tensor::scalar(7f32), Tensor::scalar(-1f32)],
        );
        assert_eq!(t.unwrap().as_slice::<f32>().unwrap(), [-1., 7., -1., 7., -1., -1.]);
        let ints = node("SparseToDense").attr("T", ty(DType::I32)).attr("validate_indices", AttrValue::Bool(false));
        let t = run1(&ints, &[idx(&[2], &[2, 0]), shape(&[4]), idx(&[2], &[1, 2]), Tensor::scalar(0i32)]);
        assert_eq!(t.unwrap().as_slice::<i32>().unwrap(), [2, 0, 1, 0]);
        let t = run1(&ints, &[Tensor::scalar(3i32), shape(&[4]), Tensor::scalar(1i32), Tensor::scalar(0i32)]);
        assert_eq!(t.unwrap().as_slice::<i32>().unwrap(), [0, 0, 0, 1]);
        // Without validation a repeat takes the last value.
        let t = run1(&ints, &[idx(&[2], &[1, 1]), shape(&[2]), idx(&[2], &[4, 9]), Tensor::scalar(0i32)]);
        assert_eq!(t.unwrap().as_slice::<i32>().unwrap(), [0, 9]);
    }

    #[test]
    fn bad_indices_are_named_as_tensorflow_names_them() {
        let err = |indices: &[i32]| {
            run1(&op(true), &[idx(&[2, 2], indices), shape(&[2, 3]), f(&[2], &[5., 6.]), Tensor::scalar(-1f32)])
                .unwrap_err()
                .message
                .clone()
        };
        assert!(err(&[1, 0, 0, 1]).starts_with("indices[1] = [0,1] is out of order."));
        assert_eq!(err(&[0, 1, 0, 1]), "indices[1] = [0,1] is repeated");
        assert_eq!(err(&[0, 1, 2, 1]), "indices[1] = [2,1] is out of bounds: need 0 <= index < [2,3]");
        let wrong_rank =
            run1(&op(true), &[idx(&[1, 2], &[0, 1]), shape(&[6]), f(&[1], &[5.]), Tensor::scalar(-1f32)]).unwrap_err();
        assert_eq!(wrong_rank.message, "output_shape has incorrect number of elements: 1 should be: 2");
        let wrong_values =
            run1(&op(true), &[idx(&[1, 2], &[0, 1]), shape(&[2, 3]), f(&[2], &[5., 6.]), Tensor::scalar(-1f32)]);
        assert!(wrong_values.unwrap_err().message.contains("sparse_values has incorrect shape [2]"));
    }
}
