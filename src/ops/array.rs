//! Array-producing and pass-through ops: Const, Placeholder,
//! PlaceholderWithDefault, Identity, NoOp;
//! and, one file each under `array/`, the indexing and shaping ops Keras
//! models and TF1 graphs emit:
//! - StridedSlice and StridedSliceGrad in [`strided_slice`];
//! - GatherV2, Gather and ResourceGather in [`gather`];
//! - Range in [`range`], OneHot in [`one_hot`];
//! - Split, SplitV and Unpack in [`split`];
//! - Where (the one-input form; SelectV2 lives in `math`) in [`where_true`];
//! - Cumsum and Cumprod in [`scan`], TopKV2 in [`top_k`];
//! - ReverseV2, SpaceToBatchND/BatchToSpaceND and MatrixDiag* in [`layout`];
//! - Pad, PadV2 and MirrorPad in [`pad`];
//! - BroadcastTo and BroadcastArgs in [`broadcast_to`], MatrixBandPart in
//!   [`band_part`];
//! - GatherNd, ScatterNd and TensorScatterUpdate/Add/Sub/Max/Min in
//!   [`scatter_nd`];
//! - DepthToSpace and SpaceToDepth in [`depth_space`];
//! - Roll and ReverseSequence in [`roll`]; MatrixDiagPart* and
//!   MatrixSetDiag* in [`diag`];
//! - LowerBound, UpperBound and Bucketize in [`search`]; Diag and DiagPart
//!   in [`tensor_diag`]; Bitcast in [`bitcast`].
//!
//! Owns: these kernels and their signatures, plus the few helpers the
//! submodules share (below). Shape-manipulating ops that never index
//! (Reshape, Transpose, ConcatV2, Shape, Cast) live in `shape_ops`; ArgMax
//! and ArgMin in `reduce`. Must not hold state beyond parsed attributes
//! (ResourceGather looks its variable up on every run).

pub mod band_part;
pub mod bincount;
pub mod bitcast;
pub mod broadcast_to;
pub mod depth_space;
pub mod diag;
pub mod gather;
pub mod layout;
pub mod one_hot;
pub mod pad;
pub mod ragged_to_tensor;
pub mod range;
pub mod roll;
pub mod scan;
pub mod scatter_nd;
pub mod search;
pub mod split;
pub mod strided_slice;
pub mod string_moves;
pub mod tensor_diag;
pub mod top_k;
pub mod where_true;

use super::registry::OpDef;
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or};
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, INLINE_BYTES, Keepalive, Shape, TENSOR_ALIGN, Tensor};
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Const", const_signature, build_const),
    OpDef::kernel("Placeholder", placeholder_signature, build_placeholder),
    OpDef::kernel("PlaceholderWithDefault", placeholder_with_default_signature, build_identity),
    OpDef::kernel("Identity", identity_signature, build_identity),
    OpDef::kernel("EnsureShape", identity_signature, build_ensure_shape),
    OpDef::kernel("StopGradient", identity_signature, build_identity),
    OpDef::kernel("NoOp", no_op_signature, build_no_op),
];

fn const_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![], vec![ValueType::Tensor(node.attr_dtype("dtype")?)]))
}

/// Holds the decoded constant; each step hands out a reference to it.
struct ConstKernel {
    value: Tensor,
}

fn build_const(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let value = init.node.attr_tensor("value")?.to_tensor()?;
    let dtype = init.node.attr_dtype("dtype")?;
    if value.dtype() != dtype {
        return Err(Status::invalid_argument(format!("Const value is {} but attr dtype is {dtype}", value.dtype())));
    }
    Ok(Box::new(ConstKernel { value }))
}

impl OpKernel for ConstKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        ctx.set_output(0, self.value.clone());
        Ok(())
    }
}

fn placeholder_signature(node: &NodeSpec) -> Result<OpSignature> {
    // Frozen loops keep variant placeholders for their unused inputs
    // (`unused_control_flow_input_N`); they import, and fail only if run.
    Ok(OpSignature::new(vec![], vec![super::control_flow::value_type_attr(node, "dtype")?]))
}

/// `[dtype] -> [dtype]`: when not fed, passes its input on.
fn placeholder_with_default_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("dtype")?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

/// Runs only when a placeholder was not fed: always an error.
struct PlaceholderKernel {
    message: String,
}

fn build_placeholder(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = super::control_flow::value_type_attr(init.node, "dtype")?;
    let shape = init.node.attr_shape_or_unknown("shape")?;
    Ok(Box::new(PlaceholderKernel {
        message: format!(
            "You must feed a value for placeholder tensor '{}' with dtype {dtype} and shape {shape}",
            init.node.name
        ),
    }))
}

impl OpKernel for PlaceholderKernel {
    fn compute(&self, _ctx: &mut OpContext<'_>) -> Result<()> {
        Err(Status::invalid_argument(self.message.clone()))
    }
}

fn identity_signature(node: &NodeSpec) -> Result<OpSignature> {
    // Resource handles pass through Identity too (TF2 graphs route variable
    // handles through it, and through function-call boundaries).
    let t = super::control_flow::value_type_attr(node, "T")?;
    Ok(OpSignature::new(vec![t], vec![t]))
}

/// Forwards its input once its shape is one the `shape` attr admits
/// (`tf.ensure_shape`, Keras preprocessing layers).
struct EnsureShape {
    shape: crate::graph::spec::ShapeSpec,
    node: String,
}

fn build_ensure_shape(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(EnsureShape { shape: init.node.attr_shape_or_unknown("shape")?, node: init.node.name.clone() }))
}

impl OpKernel for EnsureShape {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let value = ctx.take_input_value(0)?;
        if let Some(tensor) = value.as_tensor()
            && !self.shape.admits(tensor.shape())
        {
            return Err(Status::invalid_argument(format!(
                "node '{}' (EnsureShape): Shape of tensor {} is not compatible with expected shape {}",
                self.node,
                tensor.shape(),
                self.shape
            )));
        }
        ctx.set_output_value(0, value);
        Ok(())
    }

    fn forwards_input(&self) -> bool {
        true
    }
}

/// Forwards its input; the executor has already read through a ref input.
struct IdentityKernel;

fn build_identity(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(IdentityKernel))
}

impl OpKernel for IdentityKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let value = ctx.take_input_value(0)?;
        ctx.set_output_value(0, value);
        Ok(())
    }

    fn forwards_input(&self) -> bool {
        true
    }
}

fn no_op_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::default())
}

struct NoOpKernel;

fn build_no_op(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(NoOpKernel))
}

impl OpKernel for NoOpKernel {
    fn compute(&self, _ctx: &mut OpContext<'_>) -> Result<()> {
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Helpers shared by the submodules

/// Bytes per element of `t`, for the ops here that move fixed-width
/// elements as bytes; a string tensor is an error naming `op`.
pub(crate) fn element_size(t: &Tensor, op: &str) -> Result<usize> {
    t.dtype().size().ok_or_else(|| Status::invalid_argument(format!("{op} does not support dtype {}", t.dtype())))
}

/// A required index-type attribute (`Tindices`, `Index`, ...): int32 or
/// int64.
fn index_type_attr(node: &NodeSpec, key: &str) -> Result<DType> {
    let d = node.attr_dtype(key)?;
    attr_index_type_or(node, key, d)
}

/// The element types of index tensors, read as i64 in the inner loops
/// without a per-element dtype match.
trait IndexElem: Element {
    fn as_i64(self) -> i64;
}

impl IndexElem for i32 {
    #[inline(always)]
    fn as_i64(self) -> i64 {
        self as i64
    }
}

impl IndexElem for i64 {
    #[inline(always)]
    fn as_i64(self) -> i64 {
        self
    }
}

/// Initialises `dst` with a copy of `src` (one memcpy).
#[inline(always)]
fn write_run<T: Copy>(dst: &mut [MaybeUninit<T>], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "a run is copied whole");
    // SAFETY: equal lengths, `MaybeUninit<T>` has the layout of `T`, and
    // `dst` is a `&mut` so it cannot overlap `src`.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<T>(), src.len()) }
}

/// `rows` runs of `width` elements of `x`, one from each row of `row_len`
/// elements starting at column `start`, as a tensor of `shape`: the piece
/// of an outer × row layout that Split, SplitV and Unpack hand out.
fn copy_columns<T: Element>(x: &[T], row_len: usize, start: usize, width: usize, shape: Shape) -> Result<Tensor> {
    let rows = x.len().checked_div(row_len).unwrap_or(0);
    if rows * width != shape.num_elements() {
        return Err(Status::internal(format!("{rows} rows of {width} do not fill shape {shape}")));
    }
    if width == 0 || rows == 0 {
        return Tensor::zeros(T::DTYPE, shape);
    }
    // SAFETY: the output holds `rows * width` elements (checked above) and
    // `chunks_exact_mut(width)` visits each of them once, in `rows` chunks.
    unsafe {
        Tensor::build_uninit::<T>(shape, |out| {
            for (dst, row) in out.chunks_exact_mut(width).zip(x.chunks_exact(row_len)) {
                write_run(dst, &row[start..start + width]);
            }
        })
    }
}

/// Elements `start .. start + len` of `input` as a tensor of `shape`
/// without a copy, when they start on an alignment boundary and are too
/// large to store inline (never for strings, whose elements are not at
/// fixed offsets).
fn window(input: &Tensor, start: usize, len: usize, shape: &Shape) -> Option<Tensor> {
    let size = input.dtype().size()?;
    let bytes = input.as_bytes().get(start * size..(start + len) * size)?;
    if bytes.len() <= INLINE_BYTES || bytes.as_ptr() as usize % TENSOR_ALIGN != 0 {
        return None;
    }
    let ptr = NonNull::new(bytes.as_ptr() as *mut u8)?;
    let keepalive: Keepalive = Arc::new(input.clone());
    // SAFETY: the bytes belong to `input`, which the keepalive holds; a
    // tensor's bytes are never written once it is shared, and the
    // keepalive's clone shares them. The length is `shape`'s, checked by
    // `from_borrowed`, as is the alignment.
    unsafe { Tensor::from_borrowed(input.dtype(), shape.clone(), ptr, bytes.len(), keepalive).ok() }
}

/// The row-major shape `dims` without dimension `axis`.
fn shape_without(dims: &[usize], axis: usize) -> Shape {
    let mut shape = Shape::scalar();
    for (i, &d) in dims.iter().enumerate() {
        if i != axis {
            shape.push(d);
        }
    }
    shape
}

/// The rows (slices along dimension 0) of `t` that `order` names, in that
/// order (any dtype; rows may repeat or be left out): what a shuffle or a
/// gather of whole rows builds.
pub fn take_rows(t: &Tensor, order: &[usize]) -> Result<Tensor> {
    let mut dims = t.dims().to_vec();
    let Some(first) = dims.first_mut() else {
        return Err(Status::invalid_argument(format!("cannot take rows of a scalar ({})", t.shape())));
    };
    let rows = *first;
    if let Some(bad) = order.iter().find(|&&r| r >= rows) {
        return Err(Status::internal(format!("row {bad} of a tensor of {rows} rows")));
    }
    *first = order.len();
    let per_row: usize = dims[1..].iter().product();
    if t.dtype() == DType::String {
        let strings = t.strings()?;
        let mut values = Vec::with_capacity(order.len() * per_row);
        for &r in order {
            for i in r * per_row..(r + 1) * per_row {
                values.push(strings.get(i).unwrap_or_default());
            }
        }
        return Tensor::from_strings(Shape::from_vec(dims), &values);
    }
    let Some(size) = t.dtype().size() else {
        return Err(Status::unimplemented(format!("moving rows of {} tensors", t.dtype())));
    };
    let (bytes, row_bytes) = (t.as_bytes(), per_row * size);
    let mut out = Vec::with_capacity(order.len() * row_bytes);
    for &r in order {
        out.extend_from_slice(&bytes[r * row_bytes..(r + 1) * row_bytes]);
    }
    Tensor::from_bytes(t.dtype(), Shape::from_vec(dims), &out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrValue, ShapeSpec, TensorValue};
    use crate::ops::testing::{node, run1, ty};
    use crate::ops::{Value, run_kernel_once};
    use crate::tensor::DType;

    #[test]
    fn const_hands_out_shared_bytes() {
        let value = Tensor::from_slice::<f32>([20], &[1.5; 20]).unwrap();
        let n = node("Const")
            .attr("value", AttrValue::Tensor(TensorValue::from_tensor(&value)))
            .attr("dtype", ty(DType::F32));
        assert!(run1(&n, &[]).unwrap().bit_eq(&value));
        let bad = n.clone().attr("dtype", ty(DType::I32));
        assert!(run1(&bad, &[]).unwrap_err().message.contains("attr dtype is int32"));
    }

    #[test]
    fn unfed_placeholder_names_itself() {
        let n = NodeSpec::new("x", "Placeholder")
            .attr("dtype", ty(DType::F32))
            .attr("shape", AttrValue::Shape(ShapeSpec { dims: Some(vec![-1, 16]) }));
        let err = run1(&n, &[]).unwrap_err();
        assert_eq!(err.message, "You must feed a value for placeholder tensor 'x' with dtype float32 and shape [?,16]");
    }

    #[test]
    fn identity_forwards_without_copy() {
        let t = Tensor::from_slice::<i64>([100], &[7; 100]).unwrap();
        let out = run1(&node("Identity").attr("T", ty(DType::I64)), std::slice::from_ref(&t)).unwrap();
        assert!(out.shares_bytes_with(&t));
    }

    #[test]
    fn string_tensors_pass_through_const_identity_and_reshape() {
        use crate::graph::spec::{AttrList, DataType};
        use crate::ops::{ResourceMgr, Value, run_kernel_once};
        let names = Tensor::from_strings([2, 2], &["w", "b", "", "global_step"]).unwrap();
        let c = node("Const")
            .attr("value", AttrValue::Tensor(TensorValue::from_tensor(&names)))
            .attr("dtype", ty(DType::String));
        assert!(run1(&c, &[]).unwrap().bit_eq(&names));
        let out = run1(&node("Identity").attr("T", ty(DType::String)), std::slice::from_ref(&names)).unwrap();
        assert!(out.shares_bytes_with(&names));
        let n = node("IdentityN").attr(
            "T",
            AttrValue::List(AttrList::Type(vec![DataType::Tensor(DType::String), DataType::Tensor(DType::F32)])),
        );
        let inputs = vec![Value::Tensor(names.clone()), Value::Tensor(Tensor::scalar(1.0f32))];
        let outs = run_kernel_once(&n, inputs, &ResourceMgr::default()).unwrap();
        assert!(outs[0].clone().into_tensor().unwrap().bit_eq(&names));
        let reshape = node("Reshape").attr("T", ty(DType::String)).attr("Tshape", ty(DType::I32));
        let flat = run1(&reshape, &[names.clone(), Tensor::from_slice::<i32>([1], &[-1]).unwrap()]).unwrap();
        assert_eq!(flat.dims(), &[4]);
        assert_eq!(flat.strings().unwrap().get(3), Some(&b"global_step"[..]));
    }

    #[test]
    fn arithmetic_and_numeric_kernels_refuse_strings_by_name() {
        let err = run1(&node("AddV2").attr("T", ty(DType::String)), &[]).unwrap_err();
        assert!(err.message.starts_with("AddV2 does not support dtype string (supported: "), "{err}");
        let err = run1(&node("Neg").attr("T", ty(DType::String)), &[]).unwrap_err();
        assert!(err.message.starts_with("Neg does not support dtype string"), "{err}");
        // Kernels without a named list refuse through their dtype dispatch.
        let top_k = node("TopKV2").attr("T", ty(DType::String));
        let words = Tensor::from_strings([2], &["a", "b"]).unwrap();
        let err = run1(&top_k, &[words, Tensor::scalar(1i32)]).unwrap_err();
        assert!(err.message.contains("string"), "{err}");
        // Kernels that only move elements move strings (`string_moves`).
        let split = node("Split").attr("T", ty(DType::String)).attr("num_split", AttrValue::Int(2));
        let words = Tensor::from_strings([4], &["a", "b", "c", "d"]).unwrap();
        let halves = run_kernel_once(
            &split,
            vec![Value::Tensor(Tensor::scalar(0i32)), Value::Tensor(words)],
            &crate::ops::ResourceMgr::default(),
        )
        .unwrap();
        let Value::Tensor(second) = &halves[1] else { panic!("a tensor") };
        assert_eq!(second.strings().unwrap().to_vec(), [&b"c"[..], b"d"]);
    }
}
