//! StridedSlice (numpy's basic indexing: `x[..., 1:3, tf.newaxis, 2]`) and
//! its gradient, StridedSliceGrad.
//!
//! Owns: the resolution of a sparse slice spec (begin, end, strides and the
//! five masks) into one walk per input dimension and the output shape, with
//! TensorFlow's rules and messages; and the strided copy. Must not hold
//! state beyond parsed attributes.
//!
//! Resolution, as TensorFlow does it:
//! 1. The spec is sparse: entry `i` is a range, an index (`shrink_axis_mask`
//!    bit `i`: the dimension is dropped), a new axis (`new_axis_mask`: a 1
//!    is inserted; its begin/end/stride are ignored) or the ellipsis
//!    (`ellipsis_mask`, at most one bit: as many full ranges as the input
//!    needs). Without an ellipsis one is implied after the last entry.
//! 2. Each input dimension then gets a begin, end and stride; masked begins
//!    and ends take the full range in the stride's direction, others are
//!    counted from the end when negative and clamped into range, so an
//!    out-of-range range is never an error; an out-of-range index is.
//!
//! The copy collapses dimensions that are walked contiguously (so `x[1:3]`
//! of a matrix is one memcpy per row, or one in all) and copies the
//! innermost run with a memcpy when its stride is 1. Identity slices hand
//! out the input's bytes under the new shape, and a slice that is one
//! contiguous window starting on an alignment boundary (`x[2:5]`) shares
//! them, as TensorFlow shares aligned slices of the first dimension.

use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values};
use super::{index_type_attr, window, write_run};
use crate::bail;
use crate::dispatch_dtype;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Shape, Tensor};
use smallvec::SmallVec;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("StridedSlice", strided_slice_signature, build_strided_slice),
    OpDef::kernel("StridedSliceGrad", strided_slice_grad_signature, build_strided_slice_grad),
];

/// `[T, Index, Index, Index] -> [T]`.
fn strided_slice_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let index = ValueType::Tensor(index_type_attr(node, "Index")?);
    Ok(OpSignature::new(vec![t, index, index, index], vec![t]))
}

/// `[Index (shape), Index, Index, Index, T (dy)] -> [T]`.
fn strided_slice_grad_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let index = ValueType::Tensor(index_type_attr(node, "Index")?);
    Ok(OpSignature::new(vec![index, index, index, index, t], vec![t]))
}

// ---------------------------------------------------------------------------
// The slice spec

/// The five mask attributes; TensorFlow reads them as int32, so a spec
/// entry at position 32 or later has no mask bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Masks {
    pub begin: u32,
    pub end: u32,
    pub ellipsis: u32,
    pub new_axis: u32,
    pub shrink_axis: u32,
}

impl Masks {
    fn from_node(node: &NodeSpec) -> Result<Masks> {
        let get = |key: &str| -> Result<u32> {
            let v = node.attr_int_or(key, 0)?;
            // The bit pattern of the int32 is what matters (-1 sets them all).
            i32::try_from(v).map(|m| m as u32).map_err(|_| {
                Status::invalid_argument(format!(
                    "node '{}' ({}): attr '{key}' has value {v} out of range for an int32",
                    node.name, node.op
                ))
            })
        };
        Ok(Masks {
            begin: get("begin_mask")?,
            end: get("end_mask")?,
            ellipsis: get("ellipsis_mask")?,
            new_axis: get("new_axis_mask")?,
            shrink_axis: get("shrink_axis_mask")?,
        })
    }
}

#[inline]
fn bit(mask: u32, i: usize) -> bool {
    i < 32 && mask & (1 << i) != 0
}

/// How the slice walks one input dimension: `len` indices from `begin`,
/// `stride` apart (`stride` may be negative; `begin` is a valid index
/// whenever `len > 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DimWalk {
    pub begin: i64,
    pub stride: i64,
    pub len: usize,
}

/// A resolved slice of an input of known shape.
#[derive(Debug, Clone, PartialEq)]
pub struct SlicePlan {
    /// One walk per input dimension.
    pub walks: SmallVec<[DimWalk; 8]>,
    /// The output's shape: the walks' lengths, shrunk dimensions removed
    /// and new axes inserted.
    pub out_shape: Shape,
    /// Every dimension is walked in full, forward, by 1: the output is the
    /// input, reshaped.
    pub identity: bool,
}

/// One input dimension's raw spec after the sparse spec is spread over the
/// input's dimensions.
#[derive(Clone, Copy)]
struct DenseEntry {
    begin: i64,
    end: i64,
    stride: i64,
    begin_masked: bool,
    end_masked: bool,
    shrink: bool,
}

/// Resolves `begin`, `end`, `strides` (equal lengths) and `masks` against
/// an input of `dims`, with TensorFlow's rules and messages.
pub fn plan_slice(dims: &[usize], begin: &[i64], end: &[i64], strides: &[i64], masks: Masks) -> Result<SlicePlan> {
    if masks.ellipsis.count_ones() > 1 {
        bail!(invalid_argument, "Multiple ellipses in slice spec not allowed");
    }
    let rank = dims.len();
    let sparse_len = begin.len();
    let mut ellipsis_at = None;
    let mut new_axes_after_ellipsis = 0usize;
    for i in 0..sparse_len {
        if ellipsis_at.is_some() && bit(masks.new_axis, i) {
            new_axes_after_ellipsis += 1;
        }
        if ellipsis_at.is_none() && bit(masks.ellipsis, i) {
            ellipsis_at = Some(i);
        }
    }
    // Without an ellipsis, one is implied after the last entry.
    let (ellipsis_at, entries) = match ellipsis_at {
        Some(at) => (at, sparse_len),
        None => (sparse_len, sparse_len + 1),
    };

    // Spread the sparse spec over the input's dimensions; `finals` says
    // where each output dimension comes from.
    enum Final {
        Dim(usize),
        NewAxis,
    }
    let full_range = DenseEntry { begin: 0, end: 0, stride: 1, begin_masked: true, end_masked: true, shrink: false };
    let mut dense: SmallVec<[DenseEntry; 8]> = SmallVec::with_capacity(rank);
    let mut finals: SmallVec<[Final; 8]> = SmallVec::new();
    for i in 0..entries {
        if i == ellipsis_at {
            // The ellipsis covers what the entries after it leave over.
            let after = entries - i - 1 - new_axes_after_ellipsis;
            let until = rank.saturating_sub(after).max(dense.len());
            while dense.len() < until {
                finals.push(Final::Dim(dense.len()));
                dense.push(full_range);
            }
        } else if bit(masks.new_axis, i) {
            finals.push(Final::NewAxis);
        } else {
            if dense.len() == rank {
                if rank == 0 {
                    bail!(invalid_argument, "Attempting to slice scalar input.");
                }
                bail!(invalid_argument, "Index out of range using input dim {rank}; input has only {rank} dims");
            }
            let shrink = bit(masks.shrink_axis, i);
            if !shrink {
                finals.push(Final::Dim(dense.len()));
            }
            dense.push(DenseEntry {
                begin: begin[i],
                end: end[i],
                stride: strides[i],
                begin_masked: bit(masks.begin, i),
                end_masked: bit(masks.end, i),
                shrink,
            });
        }
    }
    // Entries exhausted before the input's dimensions (only possible when
    // an explicit ellipsis left some over): the rest are full ranges.
    while dense.len() < rank {
        finals.push(Final::Dim(dense.len()));
        dense.push(full_range);
    }

    let mut walks: SmallVec<[DimWalk; 8]> = SmallVec::with_capacity(rank);
    let mut identity = true;
    for (d, (e, &dim)) in dense.iter().zip(dims).enumerate() {
        let dim = dim as i64;
        let stride = e.stride;
        if stride == 0 {
            bail!(invalid_argument, "strides[{d}] must be non-zero");
        }
        if e.shrink && stride <= 0 {
            bail!(invalid_argument, "only stride 1 allowed on non-range indexing.");
        }
        let (begin, end) = if e.shrink {
            // An index: counted from the end when negative, never clamped.
            let index = if e.begin < 0 { dim.saturating_add(e.begin) } else { e.begin };
            if index < 0 || index >= dim {
                bail!(invalid_argument, "slice index {index} of dimension {d} out of bounds.");
            }
            (index, index + 1)
        } else {
            // The valid range of a begin or end in the stride's direction.
            let (lo, hi) = if stride > 0 { (0, dim) } else { (-1, dim - 1) };
            let canonical = |x: i64, masked: bool, is_end: bool| {
                if masked {
                    if (stride > 0) == is_end { hi } else { lo }
                } else {
                    let forward = if x < 0 { dim.saturating_add(x) } else { x };
                    forward.clamp(lo, hi)
                }
            };
            (canonical(e.begin, e.begin_masked, false), canonical(e.end, e.end_masked, true))
        };
        let interval = end - begin;
        let len = if interval == 0 || (interval < 0) != (stride < 0) {
            0
        } else {
            // Both have the same sign: a ceiling division.
            (interval / stride + i64::from(interval % stride != 0)) as usize
        };
        identity &= stride == 1 && begin == 0 && len as i64 == dim;
        walks.push(DimWalk { begin, stride, len });
    }
    let mut out_shape = Shape::scalar();
    for f in &finals {
        match *f {
            Final::Dim(d) => out_shape.push(walks[d].len),
            Final::NewAxis => out_shape.push(1),
        }
    }
    Ok(SlicePlan { walks, out_shape, identity })
}

/// The values of one of the begin, end and strides inputs.
type SpecValues = SmallVec<[i64; 8]>;

/// Reads and checks the begin, end and strides inputs.
fn spec_values(begin: &Tensor, end: &Tensor, strides: &Tensor) -> Result<(SpecValues, SpecValues, SpecValues)> {
    let n = begin.num_elements();
    if begin.rank() != 1
        || end.rank() != 1
        || strides.rank() != 1
        || end.num_elements() != n
        || strides.num_elements() != n
    {
        bail!(
            invalid_argument,
            "Expected begin, end, and strides to be 1D equal size tensors, but got shapes {}, {}, and {} instead.",
            begin.shape(),
            end.shape(),
            strides.shape()
        );
    }
    Ok((index_values(begin, "begin")?, index_values(end, "end")?, index_values(strides, "strides")?))
}

// ---------------------------------------------------------------------------
// The strided walk

/// The input elements a slice visits, in output order: runs of `len`
/// elements `step` apart, starting at the offsets an odometer over `outer`
/// `(count, step)` pairs gives from `base`. Dimensions walked contiguously
/// are merged, and dimensions of one index folded into `base`.
struct Runs {
    base: isize,
    outer: SmallVec<[(usize, isize); 8]>,
    len: usize,
    step: isize,
}

impl Runs {
    /// The runs of `walks` over an input of `dims`; every walk is non-empty.
    fn new(dims: &[usize], walks: &[DimWalk]) -> Runs {
        let mut in_stride = 1isize;
        let mut base = 0isize;
        // Innermost first while collecting.
        let mut merged: SmallVec<[(usize, isize); 8]> = SmallVec::new();
        for (w, &dim) in walks.iter().zip(dims).rev() {
            base += w.begin as isize * in_stride;
            let dim_stride = in_stride;
            in_stride *= dim as isize;
            if w.len == 1 {
                // Only here can the stride be huge (`x[0::2**62]`): unused.
                continue;
            }
            // Two or more steps fit in the dimension, so this cannot overflow.
            let step = w.stride as isize * dim_stride;
            match merged.last_mut() {
                // This dimension steps exactly over the inner run: one run.
                Some((len, inner_step)) if step == *inner_step * *len as isize => *len *= w.len,
                _ => merged.push((w.len, step)),
            }
        }
        let (len, step) = if merged.is_empty() { (1, 1) } else { merged.remove(0) };
        merged.reverse();
        Runs { base, outer: merged, len, step }
    }

    fn count(&self) -> usize {
        self.outer.iter().map(|o| o.0).product()
    }

    /// Calls `f` with the start offset of each run, in output order.
    #[inline]
    fn for_each_start(&self, mut f: impl FnMut(usize)) {
        let depth = self.outer.len();
        let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, depth);
        let mut offset = self.base;
        for _ in 0..self.count() {
            f(offset as usize);
            let mut d = depth;
            while d > 0 {
                d -= 1;
                let (count, step) = self.outer[d];
                index[d] += 1;
                offset += step;
                if index[d] < count {
                    break;
                }
                offset -= step * count as isize;
                index[d] = 0;
            }
        }
    }
}

/// The elements of `x` (of `dims`) the plan visits, as a tensor.
fn gather_slice<T: Element>(input: &Tensor, plan: &SlicePlan) -> Result<Tensor> {
    if plan.identity {
        return input.reshaped(plan.out_shape.clone());
    }
    if plan.out_shape.num_elements() == 0 {
        return Tensor::zeros(T::DTYPE, plan.out_shape.clone());
    }
    let x = input.as_slice::<T>()?;
    let runs = Runs::new(input.dims(), &plan.walks);
    let (len, step) = (runs.len, runs.step);
    if runs.count() * len != plan.out_shape.num_elements() {
        bail!(internal, "strided slice runs do not fill shape {}", plan.out_shape);
    }
    if runs.count() == 1 && step == 1 {
        // One contiguous window (`x[2:5]` of a batch): shared when aligned.
        if let Some(t) = window(input, runs.base as usize, len, &plan.out_shape) {
            return Ok(t);
        }
    }
    // SAFETY: the output holds `count * len` elements (checked above), and
    // `for_each_start` calls back `count` times, each writing the next
    // chunk of `len` in full.
    unsafe {
        Tensor::build_uninit::<T>(plan.out_shape.clone(), |out| {
            let mut chunks = out.chunks_exact_mut(len);
            runs.for_each_start(|start| {
                let Some(dst) = chunks.next() else { return };
                if step == 1 {
                    write_run(dst, &x[start..start + len]);
                } else {
                    let mut at = start as isize;
                    for d in dst {
                        d.write(x[at as usize]);
                        at += step;
                    }
                }
            })
        })
    }
}

/// A tensor of `shape`, zero but where the plan visits, which get `dy`'s
/// elements in order.
fn scatter_slice<T: Element>(dims: &[usize], plan: &SlicePlan, dy: &Tensor) -> Result<Tensor> {
    let shape = Shape::new(dims);
    if plan.identity {
        return dy.reshaped(shape);
    }
    let mut out = Tensor::zeros(T::DTYPE, shape)?;
    if plan.out_shape.num_elements() == 0 {
        return Ok(out);
    }
    let values = dy.as_slice::<T>()?;
    let runs = Runs::new(dims, &plan.walks);
    let (len, step) = (runs.len, runs.step);
    let Some(slots) = out.try_slice_mut::<T>() else {
        bail!(internal, "a fresh tensor is uniquely owned");
    };
    let mut chunks = values.chunks_exact(len);
    runs.for_each_start(|start| {
        let Some(src) = chunks.next() else { return };
        if step == 1 {
            slots[start..start + len].copy_from_slice(src);
        } else {
            let mut at = start as isize;
            for &v in src {
                slots[at as usize] = v;
                at += step;
            }
        }
    });
    Ok(out)
}

// ---------------------------------------------------------------------------
// Kernels

struct StridedSliceKernel {
    masks: Masks,
    slice: fn(&Tensor, &SlicePlan) -> Result<Tensor>,
}

fn build_strided_slice(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let slice = match dtype {
        DType::Complex64 => gather_complex_slice,
        DType::String => gather_string_slice,
        _ => dispatch_dtype!(dtype, T => gather_slice::<T> as fn(&Tensor, &SlicePlan) -> Result<Tensor>),
    };
    Ok(Box::new(StridedSliceKernel { masks: Masks::from_node(init.node)?, slice }))
}

/// A complex64 slice: its elements are moved as the uint64 of their bits
/// (a spectrum's bins, as a DCT slices them).
fn gather_complex_slice(input: &Tensor, plan: &SlicePlan) -> Result<Tensor> {
    let bits = Tensor::from_bytes(DType::U64, input.shape().clone(), input.as_bytes())?;
    let out = gather_slice::<u64>(&bits, plan)?;
    Tensor::from_bytes(DType::Complex64, out.shape().clone(), out.as_bytes())
}

/// A string slice: the plan picks element indices, then the strings at
/// them are copied (a batch's first words, a file name's parts).
fn gather_string_slice(input: &Tensor, plan: &SlicePlan) -> Result<Tensor> {
    let view = input.strings()?;
    let count = i64::try_from(view.len()).map_err(|_| Status::invalid_argument("too many strings to slice"))?;
    let indices = Tensor::from_slice::<i64>(input.shape().clone(), &(0..count).collect::<Vec<_>>())?;
    let picked = gather_slice::<i64>(&indices, plan)?;
    let strings: Vec<&[u8]> =
        picked.as_slice::<i64>()?.iter().map(|&i| view.get(i as usize).unwrap_or_default()).collect();
    Tensor::from_strings(picked.shape().clone(), &strings)
}

impl OpKernel for StridedSliceKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let (begin, end, strides) = spec_values(ctx.input(1)?, ctx.input(2)?, ctx.input(3)?)?;
        let plan = plan_slice(input.dims(), &begin, &end, &strides, self.masks)?;
        let out = (self.slice)(input, &plan)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

struct StridedSliceGradKernel {
    masks: Masks,
    scatter: fn(&[usize], &SlicePlan, &Tensor) -> Result<Tensor>,
}

fn build_strided_slice_grad(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let scatter =
        dispatch_dtype!(dtype, T => scatter_slice::<T> as fn(&[usize], &SlicePlan, &Tensor) -> Result<Tensor>);
    Ok(Box::new(StridedSliceGradKernel { masks: Masks::from_node(init.node)?, scatter }))
}

impl OpKernel for StridedSliceGradKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = ctx.input(0)?;
        if shape.rank() != 1 {
            bail!(invalid_argument, "shape must be 1-D, got shape.shape = {}", shape.shape());
        }
        let mut dims: SmallVec<[usize; 8]> = SmallVec::new();
        for &d in index_values(shape, "shape")?.iter() {
            let Ok(d) = usize::try_from(d) else {
                bail!(invalid_argument, "Dimension {d} must be >= 0");
            };
            dims.push(d);
        }
        if Shape::new(&dims).checked_num_elements().is_none() {
            bail!(invalid_argument, "shape {dims:?} has too many elements");
        }
        let (begin, end, strides) = spec_values(ctx.input(1)?, ctx.input(2)?, ctx.input(3)?)?;
        let plan = plan_slice(&dims, &begin, &end, &strides, self.masks)?;
        let dy = ctx.input(4)?;
        if dy.shape() != &plan.out_shape {
            bail!(invalid_argument, "shape of dy was {} instead of {}", dy.shape(), plan.out_shape);
        }
        let out = (self.scatter)(&dims, &plan, dy)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};
    use crate::tensor::DType;

    fn iota(dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::from_slice::<f32>(dims, &(0..n).map(|i| i as f32).collect::<Vec<_>>()).unwrap()
    }
    fn i32v(v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>([v.len()], v).unwrap()
    }
    fn i64v(v: &[i64]) -> Tensor {
        Tensor::from_slice::<i64>([v.len()], v).unwrap()
    }
    /// A StridedSlice node with masks `[begin, end, ellipsis, new_axis, shrink]`.
    fn ss(t: DType, index: DType, m: [i64; 5]) -> NodeSpec {
        node("StridedSlice")
            .attr("T", ty(t))
            .attr("Index", ty(index))
            .attr("begin_mask", AttrValue::Int(m[0]))
            .attr("end_mask", AttrValue::Int(m[1]))
            .attr("ellipsis_mask", AttrValue::Int(m[2]))
            .attr("new_axis_mask", AttrValue::Int(m[3]))
            .attr("shrink_axis_mask", AttrValue::Int(m[4]))
    }
    /// Slices `x` (float32) with int32 begin/end/strides.
    fn slice(x: &Tensor, b: &[i32], e: &[i32], s: &[i32], m: [i64; 5]) -> Result<Tensor> {
        run1(&ss(DType::F32, DType::I32, m), &[x.clone(), i32v(b), i32v(e), i32v(s)])
    }
    fn values(t: &Tensor) -> Vec<f32> {
        t.as_slice::<f32>().unwrap().to_vec()
    }

    // Expected values below are TensorFlow 2.21's on x = tf.reshape(tf.range(60.), [3, 4, 5]).

    #[test]
    fn plain_ranges_clamp_and_count_from_the_end() {
        let x = iota(&[3, 4, 5]);
        // x[1:, -3:100, ::2]
        let out = slice(&x, &[1, -3, 0], &[0, 100, 0], &[1, 1, 2], [0b100, 0b101, 0, 0, 0]).unwrap();
        assert_eq!(out.dims(), &[2, 3, 3]);
        assert_eq!(
            values(&out),
            [25., 27., 29., 30., 32., 34., 35., 37., 39., 45., 47., 49., 50., 52., 54., 55., 57., 59.]
        );
        // x[-100:2] clamps the begin; x[5:9] is empty, not an error.
        let out = slice(&x, &[-100], &[2], &[1], [0; 5]).unwrap();
        assert_eq!(out.dims(), &[2, 4, 5]);
        assert_eq!(values(&out), (0..40).map(|i| i as f32).collect::<Vec<_>>());
        let out = slice(&x, &[5], &[9], &[1], [0; 5]).unwrap();
        assert_eq!(out.dims(), &[0, 4, 5]);
        // A stride larger than any dimension takes one element.
        let out = slice(&x, &[1], &[3], &[i32::MAX], [0; 5]).unwrap();
        assert_eq!(out.dims(), &[1, 4, 5]);
        assert_eq!(values(&out)[0], 20.);
        let out = run1(
            &ss(DType::F32, DType::I64, [0; 5]),
            &[x.clone(), i64v(&[0, -1]), i64v(&[2, -5]), i64v(&[i64::MAX, i64::MIN])],
        )
        .unwrap();
        assert_eq!(out.dims(), &[1, 1, 5]);
        assert_eq!(values(&out)[0], 15.);
        // Degenerate: x[2:1] is empty.
        let out = slice(&x, &[2], &[1], &[1], [0; 5]).unwrap();
        assert_eq!(out.dims(), &[0, 4, 5]);
    }

    #[test]
    fn strings_slice_as_numbers_do() {
        let words = Tensor::from_strings([2, 3], &["a", "bb", "", "d", "ee", "f"]).unwrap();
        // words[:, ::-2] and words[-1, 1]
        let out = run1(
            &ss(DType::String, DType::I32, [0b11, 0b11, 0, 0, 0]),
            &[words.clone(), i32v(&[0, 0]), i32v(&[0, 0]), i32v(&[1, -2])],
        )
        .unwrap();
        assert_eq!(out.dims(), &[2, 2]);
        assert_eq!(out.strings().unwrap().to_vec(), [&b""[..], b"a", b"f", b"d"]);
        let out = run1(
            &ss(DType::String, DType::I32, [0, 0, 0, 0, 0b11]),
            &[words, i32v(&[-1, 1]), i32v(&[0, 2]), i32v(&[1, 1])],
        )
        .unwrap();
        assert!(out.shape().is_scalar());
        assert_eq!(out.strings().unwrap().to_vec(), [&b"ee"[..]]);
    }

    #[test]
    fn negative_strides() {
        let x = iota(&[3, 4, 5]);
        // x[::-1]
        let out = slice(&x, &[0], &[0], &[-1], [1, 1, 0, 0, 0]).unwrap();
        assert_eq!(out.dims(), &[3, 4, 5]);
        let v = values(&out);
        assert_eq!((v[0], v[20], v[40], v[59]), (40., 20., 0., 19.));
        // x[::-2, 3:0:-2, -10:10:3]
        let out = slice(&x, &[0, 3, -10], &[0, 0, 10], &[-2, -2, 3], [0b001, 0b001, 0, 0, 0]).unwrap();
        assert_eq!(out.dims(), &[2, 2, 2]);
        assert_eq!(values(&out), [55., 58., 45., 48., 15., 18., 5., 8.]);
        // x[1, ::-1, 4:1:-1]: a full reversal of every dimension merges into one walk.
        let out = slice(&x, &[1, 0, 4], &[2, 0, 1], &[1, -1, -1], [0b010, 0b010, 0, 0, 0b001]).unwrap();
        assert_eq!(out.dims(), &[4, 3]);
        assert_eq!(values(&out), [39., 38., 37., 34., 33., 32., 29., 28., 27., 24., 23., 22.]);
        let v = iota(&[6]);
        // v[::-1] and v[-2:-7:-2] (the end clamps to before the start).
        let out = slice(&v, &[0], &[0], &[-1], [1, 1, 0, 0, 0]).unwrap();
        assert_eq!(values(&out), [5., 4., 3., 2., 1., 0.]);
        let out = slice(&v, &[-2], &[-7], &[-2], [0; 5]).unwrap();
        assert_eq!(values(&out), [4., 2., 0.]);
    }

    #[test]
    fn shrink_axis_indexes() {
        let x = iota(&[3, 4, 5]);
        // x[-1]
        let out = slice(&x, &[-1], &[0], &[1], [0, 0, 0, 0, 1]).unwrap();
        assert_eq!(out.dims(), &[4, 5]);
        assert_eq!(values(&out), (40..60).map(|i| i as f32).collect::<Vec<_>>());
        // x[1, 2, 3]: a scalar.
        let out = slice(&x, &[1, 2, 3], &[2, 3, 4], &[1, 1, 1], [0, 0, 0, 0, 0b111]).unwrap();
        assert!(out.shape().is_scalar());
        assert_eq!(values(&out), [33.]);
        // x[:, -1]
        let out = slice(&x, &[0, -1], &[0, 0], &[1, 1], [1, 1, 0, 0, 0b10]).unwrap();
        assert_eq!(out.dims(), &[3, 5]);
        assert_eq!(values(&out)[..6], [15., 16., 17., 18., 19., 35.]);
        let err = slice(&x, &[5], &[6], &[1], [0, 0, 0, 0, 1]).unwrap_err();
        assert_eq!(err.message, "slice index 5 of dimension 0 out of bounds.");
        let err = slice(&x, &[-4], &[-3], &[1], [0, 0, 0, 0, 1]).unwrap_err();
        assert_eq!(err.message, "slice index -1 of dimension 0 out of bounds.");
        let err = slice(&x, &[1], &[0], &[-1], [0, 0, 0, 0, 1]).unwrap_err();
        assert_eq!(err.message, "only stride 1 allowed on non-range indexing.");
    }

    #[test]
    fn ellipsis_and_new_axis() {
        let x = iota(&[3, 4, 5]);
        // x[..., 1:3, tf.newaxis, 2]
        let out = slice(&x, &[0, 1, 0, 2], &[0, 3, 0, 3], &[1, 1, 1, 1], [0, 0, 0b0001, 0b0100, 0b1000]).unwrap();
        assert_eq!(out.dims(), &[3, 2, 1]);
        assert_eq!(values(&out), [7., 12., 27., 32., 47., 52.]);
        // x[tf.newaxis, ..., tf.newaxis]
        let out = slice(&x, &[0, 0, 0], &[0, 0, 0], &[1, 1, 1], [0, 0, 0b010, 0b101, 0]).unwrap();
        assert_eq!(out.dims(), &[1, 3, 4, 5, 1]);
        assert!(out.shares_bytes_with(&x), "an identity slice is a reshape");
        // x[1, ...]: an ellipsis after an index.
        let out = slice(&x, &[1, 0], &[2, 0], &[1, 1], [0, 0, 0b10, 0, 0b01]).unwrap();
        assert_eq!(out.dims(), &[4, 5]);
        assert_eq!(values(&out)[0], 20.);
        // x[..., ::-1] reverses the last dimension only.
        let out = slice(&x, &[0, 0], &[0, 0], &[1, -1], [0b10, 0b10, 0b01, 0, 0]).unwrap();
        assert_eq!(values(&out)[..6], [4., 3., 2., 1., 0., 9.]);
        // New axis and shrink on the same entry: the new axis wins.
        let out = slice(&x, &[0], &[1], &[1], [0, 0, 0, 1, 1]).unwrap();
        assert_eq!(out.dims(), &[1, 3, 4, 5]);
        // x[tf.newaxis] on a scalar, and x[...] on one.
        let s = Tensor::scalar(7.0f32);
        let out = slice(&s, &[0], &[1], &[1], [0, 0, 0, 1, 0]).unwrap();
        assert_eq!(out.dims(), &[1]);
        let out = slice(&s, &[0], &[0], &[1], [0, 0, 1, 0, 0]).unwrap();
        assert!(out.shape().is_scalar());
    }

    #[test]
    fn every_dtype_and_int64_indices() {
        let m = [0b01, 0, 0, 0, 0b10];
        let b = i64v(&[0, 1]);
        let e = i64v(&[2, 2]);
        let s = i64v(&[1, 1]);
        for dtype in DType::NUMERIC {
            let x = Tensor::zeros(dtype, [3, 2]).unwrap();
            let out = run1(&ss(dtype, DType::I64, m), &[x, b.clone(), e.clone(), s.clone()]).unwrap();
            assert_eq!(out.dtype(), dtype);
            assert_eq!(out.dims(), &[2]);
        }
        let x = Tensor::from_slice::<i64>([3, 2], &[1, 2, 3, 4, 5, 6]).unwrap();
        let out = run1(&ss(DType::I64, DType::I64, m), &[x, b.clone(), e.clone(), s.clone()]).unwrap();
        assert_eq!(out.as_slice::<i64>().unwrap(), &[2, 4]);
        let x = Tensor::from_slice::<bool>([3, 2], &[true, false, false, true, true, false]).unwrap();
        let out =
            run1(&ss(DType::Bool, DType::I64, [0, 0, 0, 0, 0]), &[x, i64v(&[2]), i64v(&[0]), i64v(&[-1])]).unwrap();
        assert_eq!(out.dims(), &[2, 2]);
        assert_eq!(out.as_slice::<bool>().unwrap(), &[true, false, false, true]);
    }

    #[test]
    fn spec_errors() {
        let x = iota(&[3, 4, 5]);
        let err = slice(&x, &[0, 0], &[1, 1], &[1, 0], [0; 5]).unwrap_err();
        assert_eq!(err.message, "strides[1] must be non-zero");
        // The index named is the input dimension's: x[..., 0:1:0].
        let err = slice(&x, &[0, 0], &[0, 1], &[1, 0], [0, 0, 1, 0, 0]).unwrap_err();
        assert_eq!(err.message, "strides[2] must be non-zero");
        let err = slice(&x, &[0, 0], &[1, 1], &[1, 1], [0, 0, 0b11, 0, 0]).unwrap_err();
        assert_eq!(err.message, "Multiple ellipses in slice spec not allowed");
        let err = slice(&x, &[0, 0], &[1, 1], &[1], [0; 5]).unwrap_err();
        assert_eq!(
            err.message,
            "Expected begin, end, and strides to be 1D equal size tensors, but got shapes [2], [2], and [1] instead."
        );
        let err = slice(&x, &[0; 4], &[1; 4], &[1; 4], [0; 5]).unwrap_err();
        assert_eq!(err.message, "Index out of range using input dim 3; input has only 3 dims");
        let bad = ss(DType::F32, DType::I32, [1 << 40, 0, 0, 0, 0]);
        assert!(run1(&bad, &[x, i32v(&[0]), i32v(&[1]), i32v(&[1])]).is_err());
    }

    #[test]
    fn empty_inputs() {
        let e = Tensor::zeros(DType::F32, [0, 3]).unwrap();
        let out = slice(&e, &[0, 1], &[0, 3], &[1, 1], [1, 1, 0, 0, 0]).unwrap();
        assert_eq!(out.dims(), &[0, 2]);
        let err = slice(&e, &[0], &[1], &[1], [0, 0, 0, 0, 1]).unwrap_err();
        assert_eq!(err.message, "slice index 0 of dimension 0 out of bounds.");
    }

    #[test]
    fn aligned_windows_share_the_input() {
        // Rows of 16 floats are 64 bytes: x[2:5] starts on an alignment boundary.
        let x = iota(&[8, 16]);
        let out = slice(&x, &[2], &[5], &[1], [0; 5]).unwrap();
        assert!(out.is_borrowed());
        assert_eq!(out.data_ptr(), x.data_ptr().wrapping_add(2 * 16 * 4));
        assert_eq!(out.dims(), &[3, 16]);
        assert_eq!(values(&out)[0], 32.);
        // x[1:3, 4:] is not one window: copied.
        let out = slice(&x, &[1, 4], &[3, 0], &[1, 1], [0, 0b10, 0, 0, 0]).unwrap();
        assert!(!out.is_borrowed());
        assert_eq!(values(&out)[..3], [20., 21., 22.]);
    }

    #[test]
    fn plan_merges_contiguous_walks() {
        let plan = plan_slice(&[4, 6], &[1, 0], &[3, 0], &[1, 1], Masks { end: 2, ..Masks::default() }).unwrap();
        let runs = Runs::new(&[4, 6], &plan.walks);
        assert_eq!((runs.base, runs.len, runs.step, runs.count()), (6, 12, 1, 1), "rows 1..3 are one memcpy");
        let plan =
            plan_slice(&[4, 6], &[0, 2], &[0, 5], &[1, 1], Masks { begin: 1, end: 1, ..Masks::default() }).unwrap();
        let runs = Runs::new(&[4, 6], &plan.walks);
        assert_eq!((runs.base, runs.len, runs.step, runs.count()), (2, 3, 1, 4));
    }

    #[test]
    fn grad_scatters_into_zeros() {
        let grad = |m: [i64; 5]| {
            node("StridedSliceGrad")
                .attr("T", ty(DType::F32))
                .attr("Index", ty(DType::I32))
                .attr("begin_mask", AttrValue::Int(m[0]))
                .attr("end_mask", AttrValue::Int(m[1]))
                .attr("ellipsis_mask", AttrValue::Int(m[2]))
                .attr("new_axis_mask", AttrValue::Int(m[3]))
                .attr("shrink_axis_mask", AttrValue::Int(m[4]))
        };
        // d/dx of sum(x[1:, ::-2] * dy) on x of shape [3, 4]
        let dy = Tensor::from_slice::<f32>([2, 2], &[1., 2., 3., 4.]).unwrap();
        let out =
            run1(&grad([0b10, 0b11, 0, 0, 0]), &[i32v(&[3, 4]), i32v(&[1, 0]), i32v(&[0, 0]), i32v(&[1, -2]), dy])
                .unwrap();
        assert_eq!(out.dims(), &[3, 4]);
        assert_eq!(values(&out), [0., 0., 0., 0., 0., 2., 0., 1., 0., 4., 0., 3.]);
        // x[-1] of [2, 3]
        let dy = Tensor::from_slice::<f32>([3], &[5., 6., 7.]).unwrap();
        let out =
            run1(&grad([0, 0, 0, 0, 1]), &[i32v(&[2, 3]), i32v(&[-1]), i32v(&[0]), i32v(&[1]), dy.clone()]).unwrap();
        assert_eq!(values(&out), [0., 0., 0., 5., 6., 7.]);
        let err = run1(&grad([0; 5]), &[i32v(&[2, 3]), i32v(&[0]), i32v(&[1]), i32v(&[1]), dy.clone()]).unwrap_err();
        assert_eq!(err.message, "shape of dy was [3] instead of [1,3]");
        let err = run1(&grad([0; 5]), &[i32v(&[2, -3]), i32v(&[0]), i32v(&[1]), i32v(&[1]), dy.clone()]).unwrap_err();
        assert_eq!(err.message, "Dimension -3 must be >= 0");
        let shape = Tensor::from_slice::<i32>([1, 2], &[2, 3]).unwrap();
        let err = run1(&grad([0; 5]), &[shape, i32v(&[0]), i32v(&[1]), i32v(&[1]), dy]).unwrap_err();
        assert_eq!(err.message, "shape must be 1-D, got shape.shape = [1,2]");
    }
}
