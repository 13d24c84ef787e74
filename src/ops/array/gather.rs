//! GatherV2, Gather (v1: axis 0) and ResourceGather (a gather from a
//! resource variable: embedding lookups).
//!
//! Owns: these kernels, their signatures and the gather loop. Must not keep
//! a variable between runs: ResourceGather looks it up on every run, as
//! ReadVariableOp does.
//!
//! The output is `params.shape[:axis] + indices.shape[batch_dims:] +
//! params.shape[axis + 1:]`; viewed as `[batch, outer, N, inner]` every
//! output row of `inner` elements is one memcpy from params. Every index
//! is checked before anything is copied; an index outside
//! `[0, params.shape[axis])` is an InvalidArgument naming its position, as
//! TensorFlow's CPU kernel does (`indices[1,0] = 7 is not in [0, 5)`).

use super::super::registry::OpDef;
use super::super::resource::ResourceMgr;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values};
use super::{IndexElem, index_type_attr, write_run};
use crate::bail;
use crate::dispatch_dtype;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Shape, Tensor};
use std::sync::Arc;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("GatherV2", gather_v2_signature, build_gather_v2),
    OpDef::kernel("Gather", gather_signature, build_gather),
    // Reads mutable state: stateful like ReadVariableOp, so it is never
    // constant-folded and sits with its variable.
    OpDef::kernel("ResourceGather", resource_gather_signature, build_resource_gather).stateful(),
];

/// `[Tparams, Tindices, Taxis] -> [Tparams]`.
fn gather_v2_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("Tparams")?);
    let indices = ValueType::Tensor(index_type_attr(node, "Tindices")?);
    let axis = ValueType::Tensor(index_type_attr(node, "Taxis")?);
    Ok(OpSignature::new(vec![t, indices, axis], vec![t]))
}

/// `[Tparams, Tindices] -> [Tparams]`.
fn gather_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("Tparams")?);
    let indices = ValueType::Tensor(index_type_attr(node, "Tindices")?);
    Ok(OpSignature::new(vec![t, indices], vec![t]))
}

/// `[resource, Tindices] -> [dtype]`.
fn resource_gather_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("dtype")?);
    let indices = ValueType::Tensor(index_type_attr(node, "Tindices")?);
    Ok(OpSignature::new(vec![ValueType::Resource, indices], vec![t]))
}

// ---------------------------------------------------------------------------
// The gather

/// The gather's geometry: params as `[batch, outer, gather_dim, inner]`,
/// the output as `[batch, outer, N / batch, inner]`.
struct Geometry {
    batch: usize,
    outer: usize,
    gather_dim: usize,
    inner: usize,
    out_shape: Shape,
}

/// Checks `axis` (None: v1 Gather, which gathers along `batch_dims`) and
/// `batch_dims` against the shapes and lays the gather out, with
/// TensorFlow's messages.
fn geometry(params: &Shape, indices: &Shape, axis: Option<i64>, batch_dims: i64) -> Result<Geometry> {
    let p = params.dims();
    let rank = p.len() as i64;
    if rank == 0 {
        bail!(invalid_argument, "params must be at least 1 dimensional");
    }
    if rank < batch_dims {
        bail!(
            invalid_argument,
            "params must have at least {batch_dims} (batch_dims) dimensions but it has shape {params}"
        );
    }
    let mut axis_v = axis.unwrap_or(0);
    let min_rank = if axis_v < 0 { axis_v.saturating_neg() } else { axis_v.saturating_add(1) };
    if rank < min_rank {
        bail!(invalid_argument, "Shape must be at least rank {min_rank} but is rank {rank}");
    }
    if axis_v < 0 {
        axis_v += rank;
    }
    let index_rank = indices.rank() as i64;
    let mut batch = batch_dims;
    if batch != 0 {
        if batch < -index_rank || batch > index_rank {
            bail!(
                invalid_argument,
                "Expected batch_dims in the range [{}, {index_rank}], but got {batch}",
                -index_rank
            );
        }
        if batch < 0 {
            batch += index_rank;
        }
        if axis.is_none() {
            axis_v = batch;
        }
        if batch >= rank {
            bail!(invalid_argument, "batch_dims ({batch}) must be less than rank(params) ({rank}).");
        }
        if axis_v < batch {
            bail!(invalid_argument, "batch_dims ({batch}) must be less than or equal to axis ({axis_v}).");
        }
        for (i, (&pd, &id)) in p.iter().zip(indices.dims()).take(batch as usize).enumerate() {
            if pd != id {
                bail!(invalid_argument, "params.shape[{i}]: {pd} should be equal to indices.shape[{i}]: {id}");
            }
        }
    }
    let (axis, batch) = (axis_v as usize, batch as usize);
    let mut out_shape = Shape::scalar();
    for &d in &p[..axis] {
        out_shape.push(d);
    }
    for &d in &indices.dims()[batch..] {
        out_shape.push(d);
    }
    for &d in &p[axis + 1..] {
        out_shape.push(d);
    }
    Ok(Geometry {
        batch: p[..batch].iter().product(),
        outer: p[batch..axis].iter().product(),
        gather_dim: p[axis],
        inner: p[axis + 1..].iter().product(),
        out_shape,
    })
}

/// `[i,j]` for flat position `flat` of `shape` ("" for a scalar), as
/// TensorFlow names a bad index.
fn position(shape: &Shape, flat: usize) -> String {
    if shape.rank() == 0 {
        return String::new();
    }
    let mut coords = vec![0usize; shape.rank()];
    let mut rest = flat;
    for (c, &d) in coords.iter_mut().zip(shape.dims()).rev() {
        *c = rest % d.max(1);
        rest /= d.max(1);
    }
    let coords: Vec<String> = coords.iter().map(|c| c.to_string()).collect();
    format!("[{}]", coords.join(","))
}

/// Gathers rows of `params` by `indices` per `geometry`.
fn gather<T: Element, I: IndexElem>(params: &Tensor, indices: &Tensor, g: &Geometry) -> Result<Tensor> {
    let idx = indices.as_slice::<I>()?;
    let total = g.out_shape.num_elements();
    if total == 0 {
        return Tensor::zeros(T::DTYPE, g.out_shape.clone());
    }
    let limit = g.gather_dim as i64;
    if let Some(bad) = idx.iter().position(|&i| !(0..limit).contains(&i.as_i64())) {
        bail!(
            invalid_argument,
            "indices{} = {} is not in [0, {limit})",
            position(indices.shape(), bad),
            idx[bad].as_i64()
        );
    }
    let x = params.as_slice::<T>()?;
    let per_batch = idx.len() / g.batch;
    let (inner, slab) = (g.inner, g.gather_dim * g.inner);
    // SAFETY: the output has batch * outer * per_batch * inner elements
    // (its shape is params' leading dims, then indices' dims, then params'
    // trailing ones); the loops below write each exactly once, in order.
    unsafe {
        Tensor::build_uninit::<T>(g.out_shape.clone(), |out| {
            let mut o = 0;
            for b in 0..g.batch {
                let batch_idx = &idx[b * per_batch..(b + 1) * per_batch];
                for r in 0..g.outer {
                    let src = &x[(b * g.outer + r) * slab..(b * g.outer + r + 1) * slab];
                    if inner == 1 {
                        for (dst, &i) in out[o..o + per_batch].iter_mut().zip(batch_idx) {
                            dst.write(src[i.as_i64() as usize]);
                        }
                        o += per_batch;
                    } else {
                        for &i in batch_idx {
                            let at = i.as_i64() as usize * inner;
                            write_run(&mut out[o..o + inner], &src[at..at + inner]);
                            o += inner;
                        }
                    }
                }
            }
        })
    }
}

type GatherFn = fn(&Tensor, &Tensor, &Geometry) -> Result<Tensor>;

/// The gather for params of `dtype` and indices of `index`, chosen once.
fn gather_fn(dtype: DType, index: DType) -> Result<GatherFn> {
    Ok(if index == DType::I32 {
        dispatch_dtype!(dtype, T => gather::<T, i32> as GatherFn)
    } else {
        dispatch_dtype!(dtype, T => gather::<T, i64> as GatherFn)
    })
}

// ---------------------------------------------------------------------------
// Kernels

/// GatherV2 (`axis` read from input 2) and Gather (no axis input).
struct GatherKernel {
    batch_dims: i64,
    has_axis: bool,
    gather: GatherFn,
}

fn build_gather_v2(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "Tparams") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "Tparams", carriers, build_gather_v2);
    }
    Ok(Box::new(GatherKernel {
        batch_dims: init.node.attr_int_or("batch_dims", 0)?,
        has_axis: true,
        gather: gather_fn(init.node.attr_dtype("Tparams")?, index_type_attr(init.node, "Tindices")?)?,
    }))
}

fn build_gather(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "Tparams") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "Tparams", carriers, build_gather);
    }
    Ok(Box::new(GatherKernel {
        batch_dims: 0,
        has_axis: false,
        gather: gather_fn(init.node.attr_dtype("Tparams")?, index_type_attr(init.node, "Tindices")?)?,
    }))
}

impl OpKernel for GatherKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let params = ctx.input(0)?;
        let indices = ctx.input(1)?;
        let axis = if self.has_axis {
            let axis = ctx.input(2)?;
            if axis.rank() != 0 {
                bail!(invalid_argument, "axis must be scalar");
            }
            Some(index_values(axis, "axis")?[0])
        } else {
            None
        };
        let g = geometry(params.shape(), indices.shape(), axis, self.batch_dims)?;
        let out = (self.gather)(params, indices, &g)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

/// ResourceGather gathers along `batch_dims` (no axis input). With
/// `batch_dims > 0` TensorFlow folds the batch into the index (so its
/// message names `index + batch * dim` and, worse, a negative index reads
/// the previous batch's row); here each index is checked against its own
/// dimension, as GatherV2 checks it.
struct ResourceGatherKernel {
    dtype: DType,
    batch_dims: i64,
    gather: GatherFn,
}

fn build_resource_gather(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    // `validate_indices` is ignored, as on TensorFlow's CPU: indices are
    // always checked.
    init.node.attr_bool_or("validate_indices", true)?;
    let dtype = init.node.attr_dtype("dtype")?;
    Ok(Box::new(ResourceGatherKernel {
        dtype,
        batch_dims: init.node.attr_int_or("batch_dims", 0)?,
        gather: gather_fn(dtype, index_type_attr(init.node, "Tindices")?)?,
    }))
}

/// The current value of the variable behind the handle, with
/// ReadVariableOp's errors.
fn read_variable(resources: &ResourceMgr, container: &str, name: &str, dtype: DType) -> Result<Tensor> {
    let var = resources.lookup(container, name).ok_or_else(|| {
        Status::failed_precondition(format!(
            "Could not find variable {name} (container '{container}'). It has not been created or initialized, or it has been destroyed."
        ))
    })?;
    if var.dtype() != dtype {
        bail!(
            invalid_argument,
            "Trying to read variable {} with wrong dtype. Expected {} got {dtype}",
            var.name(),
            var.dtype()
        );
    }
    var.read()
}

impl OpKernel for ResourceGatherKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let handle = Arc::clone(ctx.input_resource(0)?);
        let params = read_variable(ctx.resources(), &handle.container, &handle.name, self.dtype)?;
        let indices = ctx.input(1)?;
        // The variable is gathered along its first non-batch dimension.
        let g = geometry(params.shape(), indices.shape(), None, self.batch_dims)?;
        let out = (self.gather)(&params, indices, &g)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};
    use crate::ops::{ResourceHandle, Value, run_kernel_once};

    fn iota(dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::from_slice::<f32>(dims, &(0..n).map(|i| i as f32).collect::<Vec<_>>()).unwrap()
    }
    fn idx(dims: &[usize], v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>(dims, v).unwrap()
    }
    fn gather_v2(batch_dims: i64) -> NodeSpec {
        node("GatherV2")
            .attr("Tparams", ty(DType::F32))
            .attr("Tindices", ty(DType::I32))
            .attr("Taxis", ty(DType::I32))
            .attr("batch_dims", AttrValue::Int(batch_dims))
    }
    fn values(t: &Tensor) -> Vec<f32> {
        t.as_slice::<f32>().unwrap().to_vec()
    }

    // Expected values are TensorFlow 2.21's on p = tf.reshape(tf.range(24.), [2, 3, 4]).

    #[test]
    fn gathers_along_any_axis() {
        let p = iota(&[2, 3, 4]);
        // tf.gather(p, [2, 0], axis=1)
        let out = run1(&gather_v2(0), &[p.clone(), idx(&[2], &[2, 0]), Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out.dims(), &[2, 2, 4]);
        assert_eq!(values(&out), [8., 9., 10., 11., 0., 1., 2., 3., 20., 21., 22., 23., 12., 13., 14., 15.]);
        // tf.gather(p, [[3], [0]], axis=-1): scalar rows, 2-D indices.
        let out = run1(&gather_v2(0), &[p.clone(), idx(&[2, 1], &[3, 0]), Tensor::scalar(-1i64)]).unwrap();
        assert_eq!(out.dims(), &[2, 3, 2, 1]);
        assert_eq!(values(&out), [3., 0., 7., 4., 11., 8., 15., 12., 19., 16., 23., 20.]);
        // A scalar index drops the axis.
        let out = run1(&gather_v2(0), &[p.clone(), Tensor::scalar(1i32), Tensor::scalar(0i32)]).unwrap();
        assert_eq!(out.dims(), &[3, 4]);
        assert_eq!(values(&out)[0], 12.);
        // int64 indices, bool params.
        let b = Tensor::from_slice::<bool>([3], &[true, false, true]).unwrap();
        let n = node("GatherV2")
            .attr("Tparams", ty(DType::Bool))
            .attr("Tindices", ty(DType::I64))
            .attr("Taxis", ty(DType::I64));
        let out = run1(&n, &[b, Tensor::from_slice::<i64>([4], &[1, 0, 2, 1]).unwrap(), Tensor::scalar(0i64)]).unwrap();
        assert_eq!(out.as_slice::<bool>().unwrap(), &[false, true, true, false]);
    }

    #[test]
    fn batch_dims() {
        let p = iota(&[2, 3, 4]);
        // tf.gather(p, [[2, 0], [1, 1]], axis=1, batch_dims=1)
        let i = idx(&[2, 2], &[2, 0, 1, 1]);
        let out = run1(&gather_v2(1), &[p.clone(), i.clone(), Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out.dims(), &[2, 2, 4]);
        assert_eq!(values(&out), [8., 9., 10., 11., 0., 1., 2., 3., 16., 17., 18., 19., 16., 17., 18., 19.]);
        // tf.gather(p, [[3, 0], [1, 1]], axis=2, batch_dims=-1)
        let out = run1(&gather_v2(-1), &[p.clone(), idx(&[2, 2], &[3, 0, 1, 1]), Tensor::scalar(2i32)]).unwrap();
        assert_eq!(out.dims(), &[2, 3, 2]);
        assert_eq!(values(&out), [3., 0., 7., 4., 11., 8., 13., 13., 17., 17., 21., 21.]);
        let err = run1(&gather_v2(1), &[p.clone(), i.clone(), Tensor::scalar(0i32)]).unwrap_err();
        assert_eq!(err.message, "batch_dims (1) must be less than or equal to axis (0).");
        let err = run1(&gather_v2(3), &[p.clone(), i.clone(), Tensor::scalar(1i32)]).unwrap_err();
        assert_eq!(err.message, "Expected batch_dims in the range [-2, 2], but got 3");
        let err = run1(&gather_v2(1), &[p, idx(&[1, 2], &[2, 0]), Tensor::scalar(1i32)]).unwrap_err();
        assert_eq!(err.message, "params.shape[0]: 2 should be equal to indices.shape[0]: 1");
    }

    #[test]
    fn bad_indices_and_axes() {
        let p = iota(&[2, 3, 4]);
        let err = run1(&gather_v2(0), &[p.clone(), idx(&[1, 2], &[0, 5]), Tensor::scalar(1i32)]).unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
        assert_eq!(err.message, "indices[0,1] = 5 is not in [0, 3)");
        let err = run1(&gather_v2(0), &[p.clone(), Tensor::scalar(-1i32), Tensor::scalar(0i32)]).unwrap_err();
        assert_eq!(err.message, "indices = -1 is not in [0, 2)");
        let err = run1(&gather_v2(0), &[p.clone(), idx(&[1], &[1]), Tensor::scalar(-4i32)]).unwrap_err();
        assert_eq!(err.message, "Shape must be at least rank 4 but is rank 3");
        let err = run1(&gather_v2(0), &[p.clone(), idx(&[1], &[1]), Tensor::scalar(3i32)]).unwrap_err();
        assert_eq!(err.message, "Shape must be at least rank 4 but is rank 3");
        let err = run1(&gather_v2(0), &[p.clone(), idx(&[1], &[1]), idx(&[1], &[0])]).unwrap_err();
        assert_eq!(err.message, "axis must be scalar");
        let err = run1(&gather_v2(0), &[Tensor::scalar(1.0f32), idx(&[1], &[0]), Tensor::scalar(0i32)]).unwrap_err();
        assert_eq!(err.message, "params must be at least 1 dimensional");
    }

    #[test]
    fn empty_gathers() {
        let p = iota(&[2, 3]);
        let out = run1(&gather_v2(0), &[p.clone(), idx(&[0], &[]), Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out.dims(), &[2, 0]);
        // Nothing is gathered, so nothing is checked.
        let e = Tensor::zeros(DType::F32, [0, 3]).unwrap();
        let out = run1(&gather_v2(0), &[e, idx(&[2], &[7, 1]), Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out.dims(), &[0, 2]);
        let err =
            run1(&gather_v2(0), &[Tensor::zeros(DType::F32, [0]).unwrap(), idx(&[1], &[0]), Tensor::scalar(0i32)])
                .unwrap_err();
        assert_eq!(err.message, "indices[0] = 0 is not in [0, 0)");
    }

    #[test]
    fn gather_v1_is_axis_zero() {
        let n = node("Gather").attr("Tparams", ty(DType::F32)).attr("Tindices", ty(DType::I64));
        let out = run1(&n, &[iota(&[3, 2]), Tensor::from_slice::<i64>([2], &[2, 2]).unwrap()]).unwrap();
        assert_eq!(out.dims(), &[2, 2]);
        assert_eq!(values(&out), [4., 5., 4., 5.]);
    }

    #[test]
    fn resource_gather_reads_the_variable() {
        let resources = ResourceMgr::default();
        let var = resources.lookup_or_create("", "emb", DType::F32).unwrap();
        var.assign(iota(&[4, 2]), false).unwrap();
        let handle = |name: &str| {
            Value::Resource(Arc::new(ResourceHandle { container: String::new(), name: name.into(), dtype: DType::F32 }))
        };
        let n = node("ResourceGather").attr("dtype", ty(DType::F32)).attr("Tindices", ty(DType::I32));
        let out =
            run_kernel_once(&n, vec![handle("emb"), Value::Tensor(idx(&[2, 2], &[3, 0, 1, 3]))], &resources).unwrap();
        let out = out[0].as_tensor().unwrap();
        assert_eq!(out.dims(), &[2, 2, 2]);
        assert_eq!(values(out), [6., 7., 0., 1., 2., 3., 6., 7.]);
        let err = run_kernel_once(&n, vec![handle("emb"), Value::Tensor(idx(&[1], &[4]))], &resources).unwrap_err();
        assert_eq!(err.message, "indices[0] = 4 is not in [0, 4)");
        let err = run_kernel_once(&n, vec![handle("nope"), Value::Tensor(idx(&[1], &[0]))], &resources).unwrap_err();
        assert_eq!(err.code, Code::FailedPrecondition);
        let wrong = node("ResourceGather").attr("dtype", ty(DType::I32)).attr("Tindices", ty(DType::I32));
        let err = run_kernel_once(&wrong, vec![handle("emb"), Value::Tensor(idx(&[1], &[0]))], &resources).unwrap_err();
        assert!(err.message.contains("wrong dtype"), "{err}");
        // batch_dims=1 gathers along dimension 1 within each row.
        let batched = n.clone().attr("batch_dims", AttrValue::Int(1));
        let out =
            run_kernel_once(&batched, vec![handle("emb"), Value::Tensor(idx(&[4, 1], &[1, 0, 0, 1]))], &resources)
                .unwrap();
        assert_eq!(values(out[0].as_tensor().unwrap()), [1., 2., 4., 7.]);
    }

    #[test]
    fn positions_name_the_bad_index() {
        assert_eq!(position(&Shape::scalar(), 0), "");
        assert_eq!(position(&Shape::new(&[5]), 3), "[3]");
        assert_eq!(position(&Shape::new(&[2, 3, 4]), 23), "[1,2,3]");
    }
}
