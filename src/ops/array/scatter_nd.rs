//! Indexing by the innermost dimension of an index tensor: `GatherNd`,
//! `ScatterNd` and `TensorScatterUpdate`/`Add`/`Sub`/`Max`/`Min`
//! (`tf.gather_nd`, `tf.scatter_nd`, `tf.tensor_scatter_nd_*`).
//!
//! Owns: these kernels and the shared index check (every index inside its
//! dimension, or an error naming the index and the shape, as TensorFlow's
//! CPU kernels report it). Gathers and updates move fixed-width elements as
//! bytes; the accumulating forms work on the numeric dtypes. Must not hold
//! state; the variable-updating scatters live in `training`.

use super::super::numeric::Num;
use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values};
use super::broadcast_to::shape_values;
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::training::flat_position;
use crate::tensor::{DType, Element, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("GatherNd", gather_nd_signature, build_gather_nd),
    OpDef::kernel("ScatterNd", scatter_nd_signature, build_scatter_nd),
    OpDef::kernel("TensorScatterUpdate", tensor_scatter_signature, build_tensor_scatter),
    OpDef::kernel("TensorScatterAdd", tensor_scatter_signature, build_tensor_scatter),
    OpDef::kernel("TensorScatterSub", tensor_scatter_signature, build_tensor_scatter),
    OpDef::kernel("TensorScatterMax", tensor_scatter_signature, build_tensor_scatter),
    OpDef::kernel("TensorScatterMin", tensor_scatter_signature, build_tensor_scatter),
];

/// Where each index row of `indices` ([..., K]) points into `dims`: the
/// element offset of the slice it names (the slice being `dims[K..]`),
/// every coordinate checked. `what` names `dims` in errors ("param shape").
struct Slices {
    offsets: Vec<usize>,
    /// Elements per slice.
    slice: usize,
    /// `indices.shape[..-1]`.
    outer_dims: Vec<usize>,
    /// `dims[K..]`.
    slice_dims: Vec<usize>,
}

fn slices(indices: &Tensor, dims: &[usize], what: &str) -> Result<Slices> {
    let idx_dims = indices.dims();
    let Some((&k, outer_dims)) = idx_dims.split_last() else {
        bail!(invalid_argument, "indices must be at least a vector, got shape {}", indices.shape());
    };
    if k > dims.len() {
        bail!(invalid_argument, "index innermost dimension length must be <= {what} rank; saw: {k} vs. {}", dims.len());
    }
    let slice_dims = dims[k..].to_vec();
    let slice: usize = slice_dims.iter().product();
    let mut strides = vec![0usize; k];
    let mut stride = slice;
    for axis in (0..k).rev() {
        strides[axis] = stride;
        stride *= dims[axis];
    }
    let values = index_values(indices, "indices")?;
    let rows = outer_dims.iter().product::<usize>();
    let mut offsets = Vec::with_capacity(rows);
    for row in 0..rows {
        let coords = &values[row * k..][..k];
        let mut offset = 0usize;
        for (axis, &c) in coords.iter().enumerate() {
            match usize::try_from(c) {
                Ok(c) if c < dims[axis] => offset += c * strides[axis],
                _ => bail!(
                    invalid_argument,
                    "indices{} = {:?} does not index into {what} {}",
                    flat_position(&Shape::new(outer_dims), row),
                    coords,
                    Shape::new(dims)
                ),
            }
        }
        offsets.push(offset);
    }
    Ok(Slices { offsets, slice, outer_dims: outer_dims.to_vec(), slice_dims })
}

// ---------------------------------------------------------------------------
// GatherNd

fn gather_nd_signature(node: &NodeSpec) -> Result<OpSignature> {
    let params = ValueType::Tensor(node.attr_dtype("Tparams")?);
    let tindices = ValueType::Tensor(attr_index_type_or(node, "Tindices", DType::I32)?);
    Ok(OpSignature::new(vec![params, tindices], vec![params]))
}

struct GatherNd;

fn build_gather_nd(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "Tparams") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "Tparams", carriers, build_gather_nd);
    }
    Ok(Box::new(GatherNd))
}

impl OpKernel for GatherNd {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let params = ctx.input(0)?;
        let at = slices(ctx.input(1)?, params.dims(), "param shape")?;
        let size = super::element_size(params, "GatherNd")?;
        let run = at.slice * size;
        let src = params.as_bytes();
        let mut out = Vec::with_capacity(at.offsets.len() * run);
        for &offset in &at.offsets {
            out.extend_from_slice(&src[offset * size..][..run]);
        }
        let dims: Vec<usize> = at.outer_dims.iter().chain(&at.slice_dims).copied().collect();
        let t = Tensor::from_bytes(params.dtype(), Shape::from_vec(dims), &out)?;
        ctx.set_output(0, t);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// ScatterNd and TensorScatter*

fn scatter_nd_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let tindices = ValueType::Tensor(attr_index_type_or(node, "Tindices", DType::I32)?);
    Ok(OpSignature::new(vec![tindices, t, tindices], vec![t]))
}

fn tensor_scatter_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let tindices = ValueType::Tensor(attr_index_type_or(node, "Tindices", DType::I32)?);
    Ok(OpSignature::new(vec![t, tindices, t], vec![t]))
}

/// How an update meets the element already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Combine {
    Replace,
    Add,
    Sub,
    Max,
    Min,
}

/// `ScatterNd` (onto zeros, duplicates summed) or one `TensorScatter*`.
struct Scatter {
    onto_zeros: bool,
    combine: Combine,
}

fn build_scatter_nd(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    require_numeric(init.node)?;
    Ok(Box::new(Scatter { onto_zeros: true, combine: Combine::Add }))
}

fn build_tensor_scatter(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let combine = match init.node.op.as_str() {
        "TensorScatterUpdate" => Combine::Replace,
        "TensorScatterAdd" => Combine::Add,
        "TensorScatterSub" => Combine::Sub,
        "TensorScatterMax" => Combine::Max,
        _ => Combine::Min,
    };
    if combine != Combine::Replace {
        require_numeric(init.node)?;
    }
    Ok(Box::new(Scatter { onto_zeros: false, combine }))
}

fn require_numeric(node: &NodeSpec) -> Result<()> {
    let dtype = node.attr_dtype("T")?;
    super::super::math::require_dtype(&node.op, dtype, super::super::math::REAL)
}

impl OpKernel for Scatter {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (base, indices, updates) = if self.onto_zeros {
            let shape = shape_values(ctx.input(2)?, "shape")?;
            let updates = ctx.input(1)?;
            (Tensor::zeros(updates.dtype(), Shape::new(&shape))?, ctx.input(0)?, updates)
        } else {
            (ctx.input(0)?.clone(), ctx.input(1)?, ctx.input(2)?)
        };
        let what = if self.onto_zeros { "shape" } else { "tensor shape" };
        let at = slices(indices, base.dims(), what)?;
        let want: Vec<usize> = at.outer_dims.iter().chain(&at.slice_dims).copied().collect();
        if updates.dims() != want.as_slice() {
            bail!(
                invalid_argument,
                "updates must have shape indices.shape[:-1] + {what}[K:] = {}, got {}",
                Shape::new(&want),
                updates.shape()
            );
        }
        let out = match (self.combine, base.dtype()) {
            (Combine::Replace, _) => replace(&base, updates, &at)?,
            (combine, DType::F32) => accumulate::<f32>(&base, updates, &at, combine)?,
            (combine, DType::F64) => accumulate::<f64>(&base, updates, &at, combine)?,
            (combine, DType::I32) => accumulate::<i32>(&base, updates, &at, combine)?,
            (combine, DType::I64) => accumulate::<i64>(&base, updates, &at, combine)?,
            (_, other) => bail!(invalid_argument, "scatter does not support dtype {other}"),
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

/// `base` with each indexed slice replaced by its update (in index order,
/// so the last of duplicate indices wins).
fn replace(base: &Tensor, updates: &Tensor, at: &Slices) -> Result<Tensor> {
    let size = super::element_size(base, "TensorScatterUpdate")?;
    let run = at.slice * size;
    let mut out = base.as_bytes().to_vec();
    for (&offset, update) in at.offsets.iter().zip(updates.as_bytes().chunks_exact(run.max(1))) {
        out[offset * size..][..run].copy_from_slice(update);
    }
    Tensor::from_bytes(base.dtype(), base.shape().clone(), &out)
}

fn accumulate<T: Element + Num>(base: &Tensor, updates: &Tensor, at: &Slices, combine: Combine) -> Result<Tensor> {
    let from = base.as_slice::<T>()?;
    let updates = updates.as_slice::<T>()?;
    Tensor::build::<T>(base.shape().clone(), |out| {
        out.copy_from_slice(from);
        if at.slice == 0 {
            return;
        }
        for (&offset, update) in at.offsets.iter().zip(updates.chunks_exact(at.slice)) {
            for (slot, &u) in out[offset..][..at.slice].iter_mut().zip(update) {
                *slot = match combine {
                    Combine::Replace => u,
                    Combine::Add => slot.add(u),
                    Combine::Sub => slot.sub(u),
                    Combine::Max => slot.max_nan(u),
                    Combine::Min => slot.min_nan(u),
                };
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, run1, ty};

    fn params() -> Tensor {
        Tensor::from_map([2, 3, 2], &(0..12).collect::<Vec<i32>>(), |v| v as f32).unwrap()
    }

    #[test]
    fn gather_nd_takes_elements_rows_and_matrices() {
        let gather = node("GatherNd").attr("Tparams", ty(DType::F32)).attr("Tindices", ty(DType::I32));
        let elements = Tensor::from_slice::<i32>([2, 3], &[0, 1, 1, 1, 2, 0]).unwrap();
        let out = run1(&gather, &[params(), elements]).unwrap();
        assert_eq!((out.dims(), out.as_slice::<f32>().unwrap()), (&[2][..], &[3.0, 10.0][..]));
        let rows = Tensor::from_slice::<i32>([2, 1, 2], &[1, 0, 0, 2]).unwrap();
        let out = run1(&gather, &[params(), rows]).unwrap();
        assert_eq!(out.dims(), &[2, 1, 2]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[6.0, 7.0, 4.0, 5.0]);
        let matrices = Tensor::from_slice::<i32>([1, 1], &[1]).unwrap();
        let out = run1(&gather, &[params(), matrices]).unwrap();
        assert_eq!(out.dims(), &[1, 3, 2]);
        assert_eq!(out.as_slice::<f32>().unwrap()[0], 6.0);
    }

    #[test]
    fn an_index_outside_the_params_is_an_error_naming_it() {
        let gather = node("GatherNd").attr("Tparams", ty(DType::F32)).attr("Tindices", ty(DType::I64));
        let bad = Tensor::from_slice::<i64>([2, 2], &[0, 1, 2, 0]).unwrap();
        let err = run1(&gather, &[params(), bad]).unwrap_err();
        assert!(err.message.contains("indices[1] = [2, 0] does not index into param shape [2,3,2]"), "{err}");
        let too_deep = Tensor::from_slice::<i64>([1, 4], &[0, 0, 0, 0]).unwrap();
        assert!(run1(&gather, &[params(), too_deep]).unwrap_err().message.contains("innermost dimension"));
    }

    #[test]
    fn scatter_nd_sums_duplicates_onto_zeros() {
        let scatter = node("ScatterNd").attr("T", ty(DType::F32)).attr("Tindices", ty(DType::I32));
        let indices = Tensor::from_slice::<i32>([3, 1], &[1, 3, 1]).unwrap();
        let updates = Tensor::from_slice::<f32>([3, 2], &[1., 2., 3., 4., 5., 6.]).unwrap();
        let shape = Tensor::from_slice::<i32>([2], &[4, 2]).unwrap();
        let out = run1(&scatter, &[indices.clone(), updates.clone(), shape]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[0., 0., 6., 8., 0., 0., 3., 4.]);
        let small = Tensor::from_slice::<i32>([2], &[3, 2]).unwrap();
        let err = run1(&scatter, &[indices, updates, small]).unwrap_err();
        assert!(err.message.contains("indices[1] = [3] does not index into shape [3,2]"), "{err}");
    }

    #[test]
    fn tensor_scatters_replace_add_and_keep_extremes() {
        let base = Tensor::from_slice::<i64>([4], &[10, 20, 30, 40]).unwrap();
        let indices = Tensor::from_slice::<i32>([2, 1], &[3, 0]).unwrap();
        let updates = Tensor::from_slice::<i64>([2], &[25, 5]).unwrap();
        let run = |op: &str| {
            let n = node(op).attr("T", ty(DType::I64)).attr("Tindices", ty(DType::I32));
            run1(&n, &[base.clone(), indices.clone(), updates.clone()]).unwrap().as_slice::<i64>().unwrap().to_vec()
        };
        assert_eq!(run("TensorScatterUpdate"), [5, 20, 30, 25]);
        assert_eq!(run("TensorScatterAdd"), [15, 20, 30, 65]);
        assert_eq!(run("TensorScatterSub"), [5, 20, 30, 15]);
        assert_eq!(run("TensorScatterMax"), [10, 20, 30, 40]);
        assert_eq!(run("TensorScatterMin"), [5, 20, 30, 25]);
        let wrong = Tensor::from_slice::<i64>([3], &[1, 2, 3]).unwrap();
        let n = node("TensorScatterUpdate").attr("T", ty(DType::I64)).attr("Tindices", ty(DType::I32));
        let err = run1(&n, &[base, indices, wrong]).unwrap_err();
        assert!(err.message.contains("updates must have shape"), "{err}");
    }
}
