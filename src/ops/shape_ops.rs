//! Shape and layout ops: Reshape, Transpose, ConcatV2/Concat, Pack, Slice,
//! Tile, ExpandDims, Squeeze, Shape, Size, Rank, Cast, Fill, ZerosLike,
//! OnesLike.
//!
//! Owns: these kernels and their signatures. Ops that only change the shape
//! (Reshape, ExpandDims, Squeeze, a Cast to the same type, an identity
//! Transpose or full Slice, a single-input Concat) hand out the input's
//! bytes under the new shape and never copy; the others copy contiguous
//! runs where they can. Must not hold state beyond parsed attributes.
//!
//! Errors use TensorFlow's wording, so messages users search for match.

use super::numeric::CastTo;
use super::registry::OpDef;
use super::{
    ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_count, attr_index_type_or,
    attr_int_list_or, index_values,
};
use crate::bail;
use crate::dispatch_dtype;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Shape, Tensor};
use smallvec::SmallVec;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Reshape", reshape_signature, build_reshape),
    OpDef::kernel("Transpose", transpose_signature, build_transpose),
    OpDef::kernel("ConcatV2", concat_v2_signature, build_concat_v2),
    OpDef::kernel("Concat", concat_signature, build_concat),
    OpDef::kernel("Pack", pack_signature, build_pack),
    OpDef::kernel("Slice", slice_signature, build_slice),
    OpDef::kernel("Tile", tile_signature, build_tile),
    OpDef::kernel("ExpandDims", expand_dims_signature, build_expand_dims),
    OpDef::kernel("Squeeze", same_signature, build_squeeze),
    OpDef::kernel("Shape", shape_signature, build_shape),
    OpDef::kernel("Size", shape_signature, build_size),
    OpDef::kernel("Rank", rank_signature, build_rank),
    OpDef::kernel("Cast", cast_signature, build_cast),
    OpDef::kernel("Fill", fill_signature, build_fill),
    OpDef::kernel("Empty", empty_signature, build_empty),
    OpDef::kernel("ZerosLike", zeros_like_signature, build_zeros_like),
    OpDef::kernel("OnesLike", same_signature, build_ones_like),
];

// ---------------------------------------------------------------------------
// Signatures

fn t_of(node: &NodeSpec) -> Result<ValueType> {
    Ok(ValueType::Tensor(node.attr_dtype("T")?))
}

fn index_of(node: &NodeSpec, key: &str, default: DType) -> Result<ValueType> {
    Ok(ValueType::Tensor(attr_index_type_or(node, key, default)?))
}

/// `[T] -> [T]`.
fn same_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![t], vec![t]))
}

fn reshape_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![t, index_of(node, "Tshape", DType::I32)?], vec![t]))
}

fn transpose_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![t, index_of(node, "Tperm", DType::I32)?], vec![t]))
}

/// `N x T, Tidx -> T`: values first, axis last.
fn concat_v2_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    let n = attr_count(node, "N", 1)?;
    let mut inputs = vec![t; n];
    inputs.push(index_of(node, "Tidx", DType::I32)?);
    Ok(OpSignature::new(inputs, vec![t]))
}

/// `int32, N x T -> T`: axis first (the v1 op).
fn concat_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    let n = attr_count(node, "N", 1)?;
    let mut inputs = vec![ValueType::Tensor(DType::I32)];
    inputs.extend(std::iter::repeat_n(t, n));
    Ok(OpSignature::new(inputs, vec![t]))
}

fn pack_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    let n = attr_count(node, "N", 1)?;
    Ok(OpSignature::new(vec![t; n], vec![t]))
}

fn slice_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    let d = node.attr_dtype("Index")?;
    let index = index_of(node, "Index", d)?;
    Ok(OpSignature::new(vec![t, index, index], vec![t]))
}

fn tile_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![t, index_of(node, "Tmultiples", DType::I32)?], vec![t]))
}

fn expand_dims_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![t, index_of(node, "Tdim", DType::I32)?], vec![t]))
}

/// Shape and Size: `[T] -> [out_type]`, int32 by default.
fn shape_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![t_of(node)?], vec![index_of(node, "out_type", DType::I32)?]))
}

fn rank_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![t_of(node)?], vec![ValueType::Tensor(DType::I32)]))
}

fn cast_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(
        vec![ValueType::Tensor(node.attr_dtype("SrcT")?)],
        vec![ValueType::Tensor(node.attr_dtype("DstT")?)],
    ))
}

fn fill_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![index_of(node, "index_type", DType::I32)?, t], vec![t]))
}

// ---------------------------------------------------------------------------
// Helpers

/// The single integer in `t` (a scalar or one-element tensor).
fn single_index(t: &Tensor, what: &str) -> Result<i64> {
    let v = index_values(t, what)?;
    if v.len() != 1 {
        bail!(invalid_argument, "{what} must be a tensor with a single value, got shape {}", t.shape());
    }
    Ok(v[0])
}

/// `axis` normalised into `[0, rank)` from `[-rank, rank)`.
fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        None
    } else if axis < 0 {
        Some((axis + r) as usize)
    } else {
        Some(axis as usize)
    }
}

/// A dimension from a user-supplied i64, rejecting negatives.
fn dim_from(value: i64, what: &dyn Fn() -> String) -> Result<usize> {
    usize::try_from(value)
        .map_err(|_| Status::invalid_argument(format!("{} must be non-negative, got {value}", what())))
}

/// A vector of dimensions (`Fill`'s `dims`, `Empty`'s `shape`), each
/// non-negative, named `what[i]` in the error when not.
fn dims_from(t: &Tensor, what: &str) -> Result<Vec<usize>> {
    index_values(t, what)?.iter().enumerate().map(|(i, &d)| dim_from(d, &|| format!("{what}[{i}]"))).collect()
}

// ---------------------------------------------------------------------------
// Reshape

fn build_reshape(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(compute_reshape))
}

/// The target shape, with TensorFlow's rules for one `-1` and for zeros:
/// zero sizes are left out of the product the `-1` is inferred from.
pub fn reshape_target(input: &Shape, sizes: &Tensor) -> Result<Shape> {
    if sizes.rank() > 1 {
        bail!(invalid_argument, "sizes input must be 1-D, not {}", sizes.shape());
    }
    let values = index_values(sizes, "shape")?;
    let mut dims: SmallVec<[usize; 8]> = SmallVec::with_capacity(values.len());
    let mut unknown: Option<usize> = None;
    let mut product: usize = 1;
    let mut has_zero = false;
    for (d, &size) in values.iter().enumerate() {
        if size == -1 {
            if let Some(first) = unknown {
                bail!(invalid_argument, "Only one input size may be -1, not both {first} and {d}");
            }
            unknown = Some(d);
            dims.push(0);
        } else if size < 0 {
            bail!(invalid_argument, "Size {d} must be non-negative, not {size}");
        } else {
            let size = size as usize;
            if size == 0 {
                has_zero = true;
            } else {
                product = product
                    .checked_mul(size)
                    .ok_or_else(|| Status::invalid_argument(format!("requested shape {values:?} overflows")))?;
            }
            dims.push(size);
        }
    }
    let n = input.num_elements();
    if let Some(u) = unknown {
        // Input dimensions of size 0 are left out too when the requested
        // shape has a zero, so the other dimensions can still be inferred.
        let mut input_n: usize = 1;
        let mut input_has_zero = false;
        for &d in input.dims() {
            if d > 0 || !has_zero {
                input_n *= d;
            } else {
                input_has_zero = true;
            }
        }
        let missing = input_n / product;
        if !input_has_zero && missing * product != input_n {
            bail!(
                invalid_argument,
                "Input to reshape is a tensor with {input_n} values, but the requested shape requires a multiple of {product}"
            );
        }
        dims[u] = missing;
    }
    let shape = Shape::new(&dims);
    if shape.checked_num_elements() != Some(n) {
        bail!(
            invalid_argument,
            "Input to reshape is a tensor with {n} values, but the requested shape has {}",
            shape.checked_num_elements().map_or_else(|| "too many".to_string(), |v| v.to_string())
        );
    }
    Ok(shape)
}

fn compute_reshape(ctx: &mut OpContext<'_>) -> Result<()> {
    let input = ctx.input(0)?;
    let shape = reshape_target(input.shape(), ctx.input(1)?)?;
    let out = input.reshaped(shape)?;
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// Transpose

fn build_transpose(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_transpose);
    }
    Ok(FnKernel::boxed(compute_transpose))
}

/// Checks `perm` is a permutation of `0..rank`, in TensorFlow's words.
fn check_permutation(perm: &[i64], rank: usize) -> Result<SmallVec<[usize; 8]>> {
    if perm.len() != rank {
        bail!(
            invalid_argument,
            "transpose expects a vector of size {rank}. But input(1) is a vector of size {}",
            perm.len()
        );
    }
    let mut seen: SmallVec<[bool; 8]> = SmallVec::from_elem(false, rank);
    let mut out = SmallVec::with_capacity(rank);
    for &d in perm {
        if d < 0 || d >= rank as i64 {
            bail!(invalid_argument, "{d} is out of range [0 .. {rank})");
        }
        seen[d as usize] = true;
        out.push(d as usize);
    }
    if let Some(missing) = seen.iter().position(|s| !s) {
        let list: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
        bail!(invalid_argument, "{missing} is missing from {{{}}}.", list.join(","));
    }
    Ok(out)
}

/// Copies `x` (input dims `dims`) into `out` in the order of `perm`, over
/// the collapsed problem: output dimension `i` is input dimension
/// `perm[i]`.
fn permute<T: Element>(x: &[T], dims: &[usize], perm: &[usize], out: &mut [T]) {
    let rank = dims.len();
    let mut in_strides: SmallVec<[usize; 8]> = SmallVec::from_elem(1, rank);
    for d in (0..rank.saturating_sub(1)).rev() {
        in_strides[d] = in_strides[d + 1] * dims[d + 1];
    }
    let out_dims: SmallVec<[usize; 8]> = perm.iter().map(|&p| dims[p]).collect();
    let strides: SmallVec<[usize; 8]> = perm.iter().map(|&p| in_strides[p]).collect();
    if rank == 2 {
        // A plain matrix transpose: tile it so reads and writes both stay
        // in cache.
        const TILE: usize = 32;
        let (rows, cols) = (out_dims[0], out_dims[1]);
        let (rs, cs) = (strides[0], strides[1]);
        for r0 in (0..rows).step_by(TILE) {
            for c0 in (0..cols).step_by(TILE) {
                for r in r0..(r0 + TILE).min(rows) {
                    for c in c0..(c0 + TILE).min(cols) {
                        out[r * cols + c] = x[r * rs + c * cs];
                    }
                }
            }
        }
        return;
    }
    let inner = out_dims[rank - 1];
    let inner_stride = strides[rank - 1];
    let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, rank - 1);
    let mut off = 0usize;
    for row in out.chunks_exact_mut(inner) {
        for (j, o) in row.iter_mut().enumerate() {
            *o = x[off + j * inner_stride];
        }
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            index[d] += 1;
            off += strides[d];
            if index[d] < out_dims[d] {
                break;
            }
            off -= strides[d] * out_dims[d];
            index[d] = 0;
        }
    }
}

/// Transposes `input` by `perm` (already checked).
pub fn transpose(input: &Tensor, perm: &[usize]) -> Result<Tensor> {
    let dims = input.dims();
    let out_shape = Shape::from_vec(perm.iter().map(|&p| dims[p]).collect());
    // Collapse: size-1 dimensions do not move memory, and input dimensions
    // that stay adjacent and in order move as one.
    let kept: SmallVec<[usize; 8]> = perm.iter().copied().filter(|&p| dims[p] != 1).collect();
    let mut groups: SmallVec<[(usize, usize); 8]> = SmallVec::new(); // (first input dim, last)
    for &p in &kept {
        match groups.last_mut() {
            Some((_, last))
                if {
                    // The next kept input dimension after `last`, skipping 1s.
                    let mut next = *last + 1;
                    while next < dims.len() && dims[next] == 1 {
                        next += 1;
                    }
                    next == p
                } =>
            {
                *last = p
            }
            _ => groups.push((p, p)),
        }
    }
    if input.num_elements() == 0 {
        return Tensor::zeros(input.dtype(), out_shape);
    }
    let in_order = groups.windows(2).all(|w| w[0].0 < w[1].0);
    if groups.len() <= 1 || in_order {
        return input.reshaped(out_shape);
    }
    // Collapsed input dims in input order, and the permutation over them.
    let mut by_input: SmallVec<[(usize, usize); 8]> = groups.clone();
    by_input.sort_unstable();
    let size_of = |(a, b): (usize, usize)| dims[a..=b].iter().product::<usize>();
    let cdims: SmallVec<[usize; 8]> = by_input.iter().map(|&g| size_of(g)).collect();
    let cperm: SmallVec<[usize; 8]> =
        groups.iter().map(|g| by_input.iter().position(|h| h == g).unwrap_or(0)).collect();
    dispatch_dtype!(input.dtype(), T => {
        let x = input.as_slice::<T>()?;
        Tensor::build::<T>(out_shape, |out| permute(x, &cdims, &cperm, out))
    })
}

fn compute_transpose(ctx: &mut OpContext<'_>) -> Result<()> {
    let input = ctx.input(0)?;
    let perm_t = ctx.input(1)?;
    if perm_t.rank() != 1 {
        bail!(invalid_argument, "perm must be a vector, not {}", perm_t.shape());
    }
    let perm = check_permutation(&index_values(perm_t, "perm")?, input.rank())?;
    let out = transpose(input, &perm)?;
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// Concat and Pack

/// Joins `values` along `axis` (already normalised): for each of the
/// `outer` rows, each input's contiguous chunk in turn.
fn join<T: Element>(values: &[&Tensor], outer: usize, out_shape: Shape) -> Result<Tensor> {
    let slices: SmallVec<[&[T]; 8]> = values.iter().map(|v| v.as_slice::<T>()).collect::<Result<_>>()?;
    let chunks: SmallVec<[usize; 8]> = slices.iter().map(|s| s.len() / outer.max(1)).collect();
    Tensor::build::<T>(out_shape, |out| {
        let mut o = 0;
        for r in 0..outer {
            for (s, &c) in slices.iter().zip(&chunks) {
                out[o..o + c].copy_from_slice(&s[r * c..(r + 1) * c]);
                o += c;
            }
        }
    })
}

/// ConcatV2 and Concat: `values` joined along the dimension in `axis`.
fn concat(values: &[&Tensor], axis: &Tensor) -> Result<Tensor> {
    if axis.num_elements() != 1 || axis.rank() > 1 {
        bail!(invalid_argument, "Concat dim tensor should be a scalar integer, but got shape {}", axis.shape());
    }
    let first = values[0];
    let rank = first.rank();
    let a = single_index(axis, "concat dim")?;
    let Some(axis) = normalize_axis(a, rank) else {
        if rank == 0 {
            bail!(invalid_argument, "ConcatOp : Can't concatenate scalars (use tf.stack instead)");
        }
        bail!(
            invalid_argument,
            "ConcatOp : Expected concatenating dimensions in the range [{}, {rank}), but got {a}",
            -(rank as i64)
        );
    };
    let mut axis_total = 0usize;
    for (i, v) in values.iter().enumerate() {
        if v.dtype() != first.dtype() {
            bail!(invalid_argument, "ConcatOp : input {i} is {}, input 0 is {}", v.dtype(), first.dtype());
        }
        if v.rank() != rank {
            bail!(
                invalid_argument,
                "ConcatOp : Ranks of all input tensors should match: shape[0] = {} vs. shape[{i}] = {}",
                first.shape(),
                v.shape()
            );
        }
        for d in 0..rank {
            if d != axis && v.dims()[d] != first.dims()[d] {
                bail!(
                    invalid_argument,
                    "ConcatOp : Dimension {d} in both shapes must be equal: shape[0] = {} vs. shape[{i}] = {}",
                    first.shape(),
                    v.shape()
                );
            }
        }
        axis_total += v.dims()[axis];
    }
    if values.len() == 1 {
        return Ok(first.clone());
    }
    let mut out_dims = first.dims().to_vec();
    out_dims[axis] = axis_total;
    let outer: usize = first.dims()[..axis].iter().product();
    dispatch_dtype!(first.dtype(), T => join::<T>(values, outer, Shape::from_vec(out_dims)))
}

/// Where the values and the axis sit among a concat's inputs.
struct ConcatKernel {
    axis_first: bool,
}

fn build_concat_v2(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::AllButLast;
        return crate::ops::array::string_moves::build(init, "T", carriers, build_concat_v2);
    }
    Ok(Box::new(ConcatKernel { axis_first: false }))
}

fn build_concat(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::AllButFirst;
        return crate::ops::array::string_moves::build(init, "T", carriers, build_concat);
    }
    Ok(Box::new(ConcatKernel { axis_first: true }))
}

impl OpKernel for ConcatKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let n = ctx.num_inputs();
        if n < 2 {
            bail!(internal, "concat has {n} inputs; needs values and an axis");
        }
        let (axis_at, range) = if self.axis_first { (0, 1..n) } else { (n - 1, 0..n - 1) };
        let mut values: SmallVec<[&Tensor; 8]> = SmallVec::new();
        for i in range {
            values.push(ctx.input(i)?);
        }
        let out = concat(&values, ctx.input(axis_at)?)?;
        // The borrowed inputs must be let go before the output is set.
        drop(values);
        ctx.set_output(0, out);
        Ok(())
    }
}

struct PackKernel {
    axis: i64,
}

fn build_pack(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(PackKernel { axis: init.node.attr_int_or("axis", 0)? }))
}

impl OpKernel for PackKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let mut values: SmallVec<[&Tensor; 8]> = SmallVec::new();
        for i in 0..ctx.num_inputs() {
            values.push(ctx.input(i)?);
        }
        let Some(&first) = values.first() else {
            bail!(internal, "Pack has no inputs");
        };
        let expanded = first.rank() + 1;
        let Some(axis) = normalize_axis(self.axis, expanded) else {
            bail!(invalid_argument, "axis = {} not in [{}, {expanded})", self.axis, -(expanded as i64));
        };
        for (i, v) in values.iter().enumerate() {
            if v.shape() != first.shape() || v.dtype() != first.dtype() {
                bail!(
                    invalid_argument,
                    "Shapes of all inputs must match: values[0].shape = {} != values[{i}].shape = {}",
                    first.shape(),
                    v.shape()
                );
            }
        }
        let mut out_dims = first.dims().to_vec();
        out_dims.insert(axis, values.len());
        let outer: usize = first.dims()[..axis].iter().product();
        let out_shape = Shape::from_vec(out_dims);
        let out = if first.dtype() == DType::String {
            join_strings(&values, outer, out_shape)?
        } else {
            dispatch_dtype!(first.dtype(), T => join::<T>(&values, outer, out_shape))?
        };
        drop(values);
        ctx.set_output(0, out);
        Ok(())
    }
}

/// [`join`] for string tensors (a sharded Saver packs its shards' names).
fn join_strings(values: &[&Tensor], outer: usize, out_shape: Shape) -> Result<Tensor> {
    let views: Vec<crate::tensor::Strings<'_>> = values.iter().map(|v| v.strings()).collect::<Result<_>>()?;
    let mut joined: Vec<&[u8]> = Vec::with_capacity(out_shape.num_elements());
    for r in 0..outer {
        for view in &views {
            let chunk = view.len() / outer.max(1);
            joined.extend((r * chunk..(r + 1) * chunk).map(|i| view.get(i).unwrap_or_default()));
        }
    }
    Tensor::from_strings(out_shape, &joined)
}

// ---------------------------------------------------------------------------
// Slice

fn build_slice(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_slice);
    }
    Ok(FnKernel::boxed(compute_slice))
}

/// `size[i]` elements of `input` from `begin[i]` in every dimension.
pub fn slice(input: &Tensor, begin: &Tensor, size: &Tensor) -> Result<Tensor> {
    let rank = input.rank();
    let (b, s) = (index_values(begin, "begin")?, index_values(size, "size")?);
    if begin.rank() != 1 || size.rank() != 1 || b.len() != rank || s.len() != rank {
        bail!(
            invalid_argument,
            "Expected begin and size arguments to be 1-D tensors of size {rank}, but got shapes {} and {} instead.",
            begin.shape(),
            size.shape()
        );
    }
    let dims = input.dims();
    let mut starts: SmallVec<[usize; 8]> = SmallVec::with_capacity(rank);
    let mut sizes: SmallVec<[usize; 8]> = SmallVec::with_capacity(rank);
    for i in 0..rank {
        let dim = dims[i] as i64;
        let bi = b[i];
        let si = if s[i] == -1 { dim - bi } else { s[i] };
        if bi < 0 || bi > dim {
            bail!(invalid_argument, "Expected begin[{i}] in [0, {dim}], but got {bi}");
        }
        if si < 0 || bi + si > dim {
            bail!(invalid_argument, "Expected size[{i}] in [0, {}], but got {si}", dim - bi);
        }
        starts.push(bi as usize);
        sizes.push(si as usize);
    }
    let out_shape = Shape::new(&sizes);
    if sizes.as_slice() == dims {
        return Ok(input.clone());
    }
    if out_shape.num_elements() == 0 || rank == 0 {
        return Tensor::zeros(input.dtype(), out_shape);
    }
    let mut in_strides: SmallVec<[usize; 8]> = SmallVec::from_elem(1, rank);
    for d in (0..rank - 1).rev() {
        in_strides[d] = in_strides[d + 1] * dims[d + 1];
    }
    dispatch_dtype!(input.dtype(), T => {
        let x = input.as_slice::<T>()?;
        Tensor::build::<T>(out_shape, |out| {
            // Rows along the last dimension are contiguous in both.
            let inner = sizes[rank - 1];
            let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, rank - 1);
            let base: usize = (0..rank).map(|d| starts[d] * in_strides[d]).sum();
            let mut off = base;
            for row in out.chunks_exact_mut(inner) {
                row.copy_from_slice(&x[off..off + inner]);
                let mut d = rank - 1;
                while d > 0 {
                    d -= 1;
                    index[d] += 1;
                    off += in_strides[d];
                    if index[d] < sizes[d] {
                        break;
                    }
                    off -= in_strides[d] * sizes[d];
                    index[d] = 0;
                }
            }
        })
    })
}

fn compute_slice(ctx: &mut OpContext<'_>) -> Result<()> {
    let out = slice(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?)?;
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// Tile

fn build_tile(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(compute_tile))
}

/// Writes `x` (dims `dims`) tiled `reps` times per dimension into `out`.
fn tile_into<T: Element>(x: &[T], dims: &[usize], reps: &[usize], out: &mut [T]) {
    if dims.is_empty() {
        out[0] = x[0];
        return;
    }
    if dims.len() == 1 {
        for chunk in out.chunks_exact_mut(dims[0]) {
            chunk.copy_from_slice(x);
        }
        return;
    }
    // Tile each input sub-block once, then repeat the finished block.
    let sub_in: usize = dims[1..].iter().product();
    let sub_out: usize = dims[1..].iter().zip(&reps[1..]).map(|(d, r)| d * r).product();
    let block = dims[0] * sub_out;
    for i in 0..dims[0] {
        tile_into(&x[i * sub_in..(i + 1) * sub_in], &dims[1..], &reps[1..], &mut out[i * sub_out..(i + 1) * sub_out]);
    }
    for r in 1..reps[0] {
        out.copy_within(0..block, r * block);
    }
}

fn compute_tile(ctx: &mut OpContext<'_>) -> Result<()> {
    let input = ctx.input(0)?;
    let multiples = ctx.input(1)?;
    let m = index_values(multiples, "multiples")?;
    let rank = input.rank();
    if multiples.rank() != 1 || m.len() != rank {
        bail!(
            invalid_argument,
            "Expected multiples argument to be a vector of length {rank} but got length {}",
            m.len()
        );
    }
    let mut reps: SmallVec<[usize; 8]> = SmallVec::with_capacity(rank);
    for (i, &r) in m.iter().enumerate() {
        if r < 0 {
            bail!(invalid_argument, "Expected multiples[{i}] >= 0, but got {r}");
        }
        reps.push(r as usize);
    }
    if reps.iter().all(|&r| r == 1) {
        ctx.set_output(0, input.clone());
        return Ok(());
    }
    let dims = input.dims();
    let mut out_dims = Vec::with_capacity(rank);
    for (&d, &r) in dims.iter().zip(&reps) {
        out_dims.push(
            d.checked_mul(r)
                .ok_or_else(|| Status::invalid_argument(format!("tiling {} by {m:?} overflows", input.shape())))?,
        );
    }
    let out_shape = Shape::from_vec(out_dims);
    let out = if out_shape.checked_num_elements() == Some(0) {
        Tensor::zeros(input.dtype(), out_shape)?
    } else if input.dtype() == DType::String {
        // Tiles the element indices, then looks the strings up: a
        // classifier's class labels are tiled over the batch.
        let view = input.strings()?;
        let indices: Vec<i64> = (0..view.len() as i64).collect();
        let mut tiled = vec![0i64; out_shape.num_elements()];
        tile_into(&indices, dims, &reps, &mut tiled);
        let picked: Vec<&[u8]> = tiled.iter().map(|&i| view.get(i as usize).unwrap_or_default()).collect();
        Tensor::from_strings(out_shape, &picked)?
    } else {
        dispatch_dtype!(input.dtype(), T => {
            let x = input.as_slice::<T>()?;
            Tensor::build::<T>(out_shape, |out| tile_into(x, dims, &reps, out))?
        })
    };
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// ExpandDims and Squeeze

fn build_expand_dims(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(compute_expand_dims))
}

fn compute_expand_dims(ctx: &mut OpContext<'_>) -> Result<()> {
    let input = ctx.input(0)?;
    let dim_t = ctx.input(1)?;
    if dim_t.num_elements() != 1 {
        bail!(invalid_argument, "'dim' must be a tensor with a single value, got shape {}", dim_t.shape());
    }
    let dim = single_index(dim_t, "dim")?;
    let rank = input.rank();
    let Some(at) = normalize_axis(dim, rank + 1) else {
        bail!(invalid_argument, "Tried to expand dim index {dim} for tensor with {rank} dimensions.");
    };
    let mut dims = input.dims().to_vec();
    dims.insert(at, 1);
    let out = input.reshaped(Shape::from_vec(dims))?;
    ctx.set_output(0, out);
    Ok(())
}

struct SqueezeKernel {
    dims: Vec<i64>,
}

fn build_squeeze(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(SqueezeKernel { dims: attr_int_list_or(init.node, "squeeze_dims", &[])? }))
}

impl OpKernel for SqueezeKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let dims = input.dims();
        let rank = dims.len();
        let mut drop: SmallVec<[bool; 8]> = SmallVec::from_elem(false, rank);
        if self.dims.is_empty() {
            for (d, &size) in dims.iter().enumerate() {
                drop[d] = size == 1;
            }
        }
        for &s in &self.dims {
            let Some(d) = normalize_axis(s, rank) else {
                bail!(invalid_argument, "Tried to squeeze dim index {s} for tensor with {rank} dimensions.");
            };
            if dims[d] != 1 {
                bail!(invalid_argument, "Can not squeeze dim[{d}], expected a dimension of 1, got {}", dims[d]);
            }
            drop[d] = true;
        }
        let kept: Vec<usize> = dims.iter().zip(&drop).filter(|(_, dropped)| !**dropped).map(|(&d, _)| d).collect();
        let out = input.reshaped(Shape::from_vec(kept))?;
        ctx.set_output(0, out);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Shape, Size, Rank

fn index_tensor(values: &[usize], dtype: DType, what: &str) -> Result<Tensor> {
    let len = [values.len()];
    if dtype == DType::I32 {
        let mut v = SmallVec::<[i32; 8]>::with_capacity(values.len());
        for &x in values {
            v.push(i32::try_from(x).map_err(|_| {
                Status::invalid_argument(format!("{what} {x} does not fit the int32 output; use out_type int64"))
            })?);
        }
        Tensor::from_slice::<i32>(len, &v)
    } else {
        let v: SmallVec<[i64; 8]> = values.iter().map(|&x| x as i64).collect();
        Tensor::from_slice::<i64>(len, &v)
    }
}

struct ShapeKernel {
    out: DType,
}

fn build_shape(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ShapeKernel { out: attr_index_type_or(init.node, "out_type", DType::I32)? }))
}

impl OpKernel for ShapeKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let out = index_tensor(ctx.input(0)?.dims(), self.out, "dimension")?;
        ctx.set_output(0, out);
        Ok(())
    }
}

struct SizeKernel {
    out: DType,
}

fn build_size(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(SizeKernel { out: attr_index_type_or(init.node, "out_type", DType::I32)? }))
}

impl OpKernel for SizeKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let n = ctx.input(0)?.num_elements();
        let v = index_tensor(&[n], self.out, "size")?;
        ctx.set_output(0, v.reshaped(Shape::scalar())?);
        Ok(())
    }
}

fn build_rank(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(|ctx| {
        let rank = ctx.input(0)?.rank() as i32;
        ctx.set_output(0, Tensor::scalar(rank));
        Ok(())
    }))
}

// ---------------------------------------------------------------------------
// Cast

fn cast_values<S: Element + CastTo<D>, D: Element>(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let src = x.as_slice::<S>()?;
    let out = Tensor::from_map(x.shape().clone(), src, |v: S| -> D { v.cast_to() })?;
    ctx.set_output(0, out);
    Ok(())
}

fn forward(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.take_input(0)?;
    ctx.set_output(0, x);
    Ok(())
}

/// The conversion function from `S` to `dst`, a numeric dtype.
fn cast_from<S>(dst: DType) -> Result<ComputeFn>
where
    S: Element + CastTo<f32> + CastTo<f64> + CastTo<i32> + CastTo<i64> + CastTo<bool> + CastTo<u8> + CastTo<u64>,
{
    Ok(dispatch_dtype!(dst, D => cast_values::<S, D> as ComputeFn))
}

/// complex64 to a real type: the real part, as TensorFlow's Cast keeps it.
fn cast_from_complex<D: Element>(ctx: &mut OpContext<'_>) -> Result<()>
where
    f32: CastTo<D>,
{
    let x = ctx.input(0)?;
    let real: Vec<f32> = x.complex_parts().into_iter().map(|(re, _)| re).collect();
    let out = Tensor::from_map(x.shape().clone(), &real, |v| v.cast_to())?;
    ctx.set_output(0, out);
    Ok(())
}

/// A real type to complex64: the value as float32, imaginary part 0.
fn cast_to_complex(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let mut bytes = Vec::with_capacity(x.num_elements() * 8);
    for v in x.to_f64_vec() {
        bytes.extend_from_slice(&(v as f32).to_le_bytes());
        bytes.extend_from_slice(&0f32.to_le_bytes());
    }
    let out = Tensor::from_bytes(DType::Complex64, x.shape().clone(), &bytes)?;
    ctx.set_output(0, out);
    Ok(())
}

fn build_cast(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let src = init.node.attr_dtype("SrcT")?;
    let dst = init.node.attr_dtype("DstT")?;
    if src == dst {
        return Ok(FnKernel::boxed(forward));
    }
    if src == DType::String || dst == DType::String {
        bail!(unimplemented, "Cast {src} to {dst} is not supported");
    }
    if src == DType::Complex64 {
        return Ok(FnKernel::boxed(crate::dispatch_dtype!(dst, D => cast_from_complex::<D> as ComputeFn)));
    }
    if dst == DType::Complex64 {
        return Ok(FnKernel::boxed(cast_to_complex));
    }
    let compute = dispatch_dtype!(src, S => cast_from::<S>(dst)?);
    Ok(FnKernel::boxed(compute))
}

// ---------------------------------------------------------------------------
// Fill, ZerosLike, OnesLike

fn build_fill(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[1]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_fill);
    }
    Ok(FnKernel::boxed(compute_fill))
}

fn compute_fill(ctx: &mut OpContext<'_>) -> Result<()> {
    let dims_t = ctx.input(0)?;
    let value = ctx.input(1)?;
    if dims_t.rank() != 1 {
        bail!(invalid_argument, "dims must be a vector, got shape {}", dims_t.shape());
    }
    if !value.shape().is_scalar() {
        bail!(invalid_argument, "value must be a scalar, got shape {}", value.shape());
    }
    let dims = dims_from(dims_t, "dims")?;
    let out = dispatch_dtype!(value.dtype(), T => {
        let v = value.scalar_value::<T>()?;
        Tensor::build::<T>(Shape::from_vec(dims), |out| out.fill(v))?
    });
    ctx.set_output(0, out);
    Ok(())
}

/// `[int32] -> [dtype]`.
fn empty_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Tensor(DType::I32)], vec![ValueType::Tensor(node.attr_dtype("dtype")?)]))
}

/// `Empty` (`tf.raw_ops.Empty`, which `tf.nn.ctc_loss` and
/// `TensorArray`-free scans allocate with): a tensor of the given shape
/// whose contents TensorFlow leaves unspecified unless `init` is set; here
/// they are always zeros, so a step never reads another step's bytes.
fn build_empty(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("dtype")?;
    Ok(Box::new(EmptyKernel { dtype }))
}

struct EmptyKernel {
    dtype: DType,
}

impl OpKernel for EmptyKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape_t = ctx.input(0)?;
        if shape_t.rank() != 1 {
            bail!(invalid_argument, "shape must be a vector of int32, got shape {}", shape_t.shape());
        }
        let dims = dims_from(shape_t, "shape")?;
        let out = Tensor::zeros(self.dtype, Shape::from_vec(dims))?;
        ctx.set_output(0, out);
        Ok(())
    }
}

/// `[T] -> [T]` where `T` may also be a `variant` (a TensorList).
fn zeros_like_signature(node: &NodeSpec) -> Result<OpSignature> {
    match super::control_flow::value_type_attr(node, "T")? {
        ValueType::Variant => Ok(OpSignature::new(vec![ValueType::Variant], vec![ValueType::Variant])),
        _ => same_signature(node),
    }
}

fn build_zeros_like(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if super::control_flow::value_type_attr(init.node, "T")? == ValueType::Variant {
        return Ok(FnKernel::boxed(|ctx| {
            let zeros = ctx.input_list(0)?.zeros_like()?;
            ctx.set_output_value(0, super::Value::List(std::sync::Arc::new(zeros)));
            Ok(())
        }));
    }
    Ok(FnKernel::boxed(|ctx| {
        let x = ctx.input(0)?;
        let out = Tensor::zeros(x.dtype(), x.shape().clone())?;
        ctx.set_output(0, out);
        Ok(())
    }))
}

fn ones<T: Element>(shape: &Shape) -> Result<Tensor>
where
    bool: CastTo<T>,
{
    let one: T = true.cast_to();
    Tensor::build::<T>(shape.clone(), |out| out.fill(one))
}

fn build_ones_like(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(|ctx| {
        let x = ctx.input(0)?;
        let out = dispatch_dtype!(x.dtype(), T => ones::<T>(x.shape())?);
        ctx.set_output(0, out);
        Ok(())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::graph::spec::{AttrList, AttrValue};
    use crate::ops::testing::{node, run1, ty};

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(shape, v).unwrap()
    }
    fn iota(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        f32s(shape, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
    }
    fn i32v(v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>([v.len()], v).unwrap()
    }
    fn op(name: &str) -> NodeSpec {
        node(name).attr("T", ty(DType::F32))
    }

    #[test]
    fn pack_stacks_strings_on_any_axis() {
        let pack = |axis: i64| {
            node("Pack").attr("T", ty(DType::String)).attr("N", AttrValue::Int(2)).attr("axis", AttrValue::Int(axis))
        };
        let a = Tensor::from_strings([2], &["a0", "a1"]).unwrap();
        let b = Tensor::from_strings([2], &["b0", "b1"]).unwrap();
        let rows = run1(&pack(0), &[a.clone(), b.clone()]).unwrap();
        assert_eq!(rows.dims(), &[2, 2]);
        assert_eq!(rows.strings().unwrap().to_vec(), [&b"a0"[..], b"a1", b"b0", b"b1"]);
        let columns = run1(&pack(1), &[a, b]).unwrap();
        assert_eq!(columns.strings().unwrap().to_vec(), [&b"a0"[..], b"b0", b"a1", b"b1"]);
        let scalars = run1(&pack(0), &[Tensor::string_scalar("p0"), Tensor::string_scalar("p1")]).unwrap();
        assert_eq!(scalars.dims(), &[2]);
    }
    #[test]
    fn reshape_infers_and_never_copies() {
        let x = iota(&[4, 6]);
        let out = run1(&op("Reshape"), &[x.clone(), i32v(&[2, -1, 3])]).unwrap();
        assert_eq!(out.dims(), &[2, 4, 3]);
        assert!(out.shares_bytes_with(&x), "no copy");
        let out = run1(&op("Reshape"), &[x.clone(), Tensor::from_slice::<i64>([1], &[-1]).unwrap()]).unwrap();
        assert_eq!(out.dims(), &[24]);
        let out = run1(&op("Reshape"), &[Tensor::scalar(3.0f32), i32v(&[])]).unwrap();
        assert!(out.shape().is_scalar());
        // Zero-sized: a -1 beside a 0 is inferred from the non-zero dims.
        let e = Tensor::zeros(DType::F32, [0, 3]).unwrap();
        let out = run1(&op("Reshape"), &[e, i32v(&[0, -1])]).unwrap();
        assert_eq!(out.dims(), &[0, 3]);
        let six = iota(&[6]);
        let err = run1(&op("Reshape"), &[six.clone(), i32v(&[2, 4])]).unwrap_err();
        assert_eq!(err.message, "Input to reshape is a tensor with 6 values, but the requested shape has 8");
        let err = run1(&op("Reshape"), &[six.clone(), i32v(&[-1, 4])]).unwrap_err();
        assert_eq!(
            err.message,
            "Input to reshape is a tensor with 6 values, but the requested shape requires a multiple of 4"
        );
        let err = run1(&op("Reshape"), &[six.clone(), i32v(&[-1, -1])]).unwrap_err();
        assert_eq!(err.message, "Only one input size may be -1, not both 0 and 1");
        let err = run1(&op("Reshape"), &[six, i32v(&[-2, 3])]).unwrap_err();
        assert_eq!(err.message, "Size 0 must be non-negative, not -2");
    }

    #[test]
    fn transpose_rank3_and_collapsing() {
        let x = iota(&[2, 3, 4]);
        let out = run1(&op("Transpose"), &[x.clone(), i32v(&[2, 0, 1])]).unwrap();
        assert_eq!(out.dims(), &[4, 2, 3]);
        // numpy: np.arange(24).reshape(2,3,4).transpose(2,0,1).ravel()
        assert_eq!(
            out.as_slice::<f32>().unwrap(),
            &[
                0., 4., 8., 12., 16., 20., 1., 5., 9., 13., 17., 21., 2., 6., 10., 14., 18., 22., 3., 7., 11., 15.,
                19., 23.
            ]
        );
        let out = run1(&op("Transpose"), &[x.clone(), i32v(&[1, 0, 2])]).unwrap();
        assert_eq!(&out.as_slice::<f32>().unwrap()[..8], &[0., 1., 2., 3., 12., 13., 14., 15.]);
        // Identity and size-1 moves are reshapes, not copies.
        let out = run1(&op("Transpose"), &[x.clone(), i32v(&[0, 1, 2])]).unwrap();
        assert!(out.shares_bytes_with(&x));
        let y = iota(&[1, 24, 1]);
        let out = run1(&op("Transpose"), &[y.clone(), i32v(&[2, 1, 0])]).unwrap();
        assert!(out.shares_bytes_with(&y));
        // A 2-D transpose larger than one tile.
        let m = iota(&[37, 45]);
        let out = run1(&op("Transpose"), &[m, i32v(&[1, 0])]).unwrap();
        assert_eq!(out.dims(), &[45, 37]);
        let v = out.as_slice::<f32>().unwrap();
        assert_eq!(v[1], 45.0);
        assert_eq!(v[44 * 37 + 36], (36 * 45 + 44) as f32);
        let err = run1(&op("Transpose"), &[x.clone(), i32v(&[0, 1])]).unwrap_err();
        assert_eq!(err.message, "transpose expects a vector of size 3. But input(1) is a vector of size 2");
        let err = run1(&op("Transpose"), &[x.clone(), i32v(&[0, 0, 1])]).unwrap_err();
        assert_eq!(err.message, "2 is missing from {0,0,1}.");
        let err = run1(&op("Transpose"), &[x, i32v(&[0, 3, 1])]).unwrap_err();
        assert_eq!(err.message, "3 is out of range [0 .. 3)");
    }

    #[test]
    fn concat_axes_and_errors() {
        let n = op("ConcatV2").attr("N", AttrValue::Int(2));
        let a = iota(&[2, 2]);
        let b = f32s(&[2, 1], &[10., 11.]);
        let out = run1(&n, &[a.clone(), b.clone(), Tensor::scalar(-1i32)]).unwrap();
        assert_eq!(out.dims(), &[2, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[0., 1., 10., 2., 3., 11.]);
        let c = f32s(&[1, 2], &[7., 8.]);
        let out = run1(&n, &[a.clone(), c.clone(), Tensor::scalar(0i64)]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[0., 1., 2., 3., 7., 8.]);
        let v1 = op("Concat").attr("N", AttrValue::Int(2));
        let out = run1(&v1, &[Tensor::scalar(0i32), a.clone(), c]).unwrap();
        assert_eq!(out.dims(), &[3, 2]);
        let err = run1(&n, &[a.clone(), b.clone(), Tensor::scalar(0i32)]).unwrap_err();
        assert_eq!(
            err.message,
            "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [2,2] vs. shape[1] = [2,1]"
        );
        let err = run1(&n, &[a.clone(), f32s(&[2], &[1., 2.]), Tensor::scalar(0i32)]).unwrap_err();
        assert_eq!(
            err.message,
            "ConcatOp : Ranks of all input tensors should match: shape[0] = [2,2] vs. shape[1] = [2]"
        );
        let err = run1(&n, &[a.clone(), b, Tensor::scalar(2i32)]).unwrap_err();
        assert_eq!(err.message, "ConcatOp : Expected concatenating dimensions in the range [-2, 2), but got 2");
        let s = Tensor::scalar(1.0f32);
        let err = run1(&n, &[s.clone(), s, Tensor::scalar(0i32)]).unwrap_err();
        assert!(err.message.contains("Can't concatenate scalars"), "{err}");
        let sig = (crate::ops::lookup("ConcatV2").unwrap().signature)(&n).unwrap();
        assert_eq!(sig.inputs.len(), 3);
        assert_eq!(sig.inputs[2], ValueType::Tensor(DType::I32));
    }

    #[test]
    fn pack_slice_tile() {
        let pack = op("Pack").attr("N", AttrValue::Int(2));
        let (a, b) = (f32s(&[2], &[1., 2.]), f32s(&[2], &[3., 4.]));
        let out = run1(&pack, &[a.clone(), b.clone()]).unwrap();
        assert_eq!(out.dims(), &[2, 2]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 2., 3., 4.]);
        let out = run1(&pack.clone().attr("axis", AttrValue::Int(-1)), &[a.clone(), b]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 3., 2., 4.]);
        let err = run1(&pack, &[a, f32s(&[3], &[0.; 3])]).unwrap_err();
        assert!(err.message.contains("values[1].shape = [3]"), "{err}");

        let sl = op("Slice").attr("Index", ty(DType::I32));
        let x = iota(&[3, 4]);
        let out = run1(&sl, &[x.clone(), i32v(&[1, 1]), i32v(&[2, -1])]).unwrap();
        assert_eq!(out.dims(), &[2, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[5., 6., 7., 9., 10., 11.]);
        let out = run1(&sl, &[x.clone(), i32v(&[0, 0]), i32v(&[-1, -1])]).unwrap();
        assert!(out.shares_bytes_with(&x));
        let err = run1(&sl, &[x.clone(), i32v(&[1, 1]), i32v(&[3, 1])]).unwrap_err();
        assert_eq!(err.message, "Expected size[0] in [0, 2], but got 3");
        let err = run1(&sl, &[x.clone(), i32v(&[1]), i32v(&[1])]).unwrap_err();
        assert!(err.message.contains("1-D tensors of size 2"), "{err}");

        let tile = op("Tile");
        let m = f32s(&[2, 2], &[1., 2., 3., 4.]);
        let out = run1(&tile, &[m.clone(), i32v(&[2, 3])]).unwrap();
        assert_eq!(out.dims(), &[4, 6]);
        // numpy: np.tile([[1,2],[3,4]], (2,3))
        assert_eq!(
            out.as_slice::<f32>().unwrap(),
            &[1., 2., 1., 2., 1., 2., 3., 4., 3., 4., 3., 4., 1., 2., 1., 2., 1., 2., 3., 4., 3., 4., 3., 4.]
        );
        let out = run1(&tile, &[m.clone(), i32v(&[0, 2])]).unwrap();
        assert_eq!(out.dims(), &[0, 4]);
        let err = run1(&tile, &[m, i32v(&[2])]).unwrap_err();
        assert!(err.message.contains("vector of length 2"), "{err}");
        // Strings: a classifier's labels tiled over a batch.
        let labels = Tensor::from_strings([1, 3], &["cat", "dog", "bird"]).unwrap();
        let out = run1(&tile, &[labels, i32v(&[2, 1])]).unwrap();
        assert_eq!(out.dims(), &[2, 3]);
        let got: Vec<&[u8]> = out.strings().unwrap().iter().collect();
        assert_eq!(got, [&b"cat"[..], b"dog", b"bird", b"cat", b"dog", b"bird"]);
        let pair = Tensor::from_strings([2], &["a", "bc"]).unwrap();
        let out = run1(&tile, &[pair, i32v(&[3])]).unwrap();
        let got: Vec<&[u8]> = out.strings().unwrap().iter().collect();
        assert_eq!(got, [&b"a"[..], b"bc", b"a", b"bc", b"a", b"bc"]);
    }

    #[test]
    fn expand_squeeze_shape_size_rank() {
        let x = iota(&[2, 3]);
        let ed = op("ExpandDims");
        let out = run1(&ed, &[x.clone(), Tensor::scalar(-1i32)]).unwrap();
        assert_eq!(out.dims(), &[2, 3, 1]);
        let out = run1(&ed, &[x.clone(), Tensor::scalar(0i64)]).unwrap();
        assert_eq!(out.dims(), &[1, 2, 3]);
        let err = run1(&ed, &[x.clone(), Tensor::scalar(3i32)]).unwrap_err();
        assert_eq!(err.message, "Tried to expand dim index 3 for tensor with 2 dimensions.");

        let y = iota(&[1, 3, 1]);
        let out = run1(&op("Squeeze"), std::slice::from_ref(&y)).unwrap();
        assert_eq!(out.dims(), &[3]);
        let sq = |dims: Vec<i64>| op("Squeeze").attr("squeeze_dims", AttrValue::List(AttrList::Int(dims)));
        let out = run1(&sq(vec![-1]), std::slice::from_ref(&y)).unwrap();
        assert_eq!(out.dims(), &[1, 3]);
        let err = run1(&sq(vec![1]), std::slice::from_ref(&y)).unwrap_err();
        assert_eq!(err.message, "Can not squeeze dim[1], expected a dimension of 1, got 3");
        let err = run1(&sq(vec![3]), &[y]).unwrap_err();
        assert!(err.message.contains("Tried to squeeze dim index 3"), "{err}");

        let shape = run1(&op("Shape"), std::slice::from_ref(&x)).unwrap();
        assert_eq!(shape.dtype(), DType::I32);
        assert_eq!(shape.as_slice::<i32>().unwrap(), &[2, 3]);
        let shape64 = run1(&op("Shape").attr("out_type", ty(DType::I64)), std::slice::from_ref(&x)).unwrap();
        assert_eq!(shape64.as_slice::<i64>().unwrap(), &[2, 3]);
        let scalar_shape = run1(&op("Shape"), &[Tensor::scalar(1.0f32)]).unwrap();
        assert_eq!(scalar_shape.dims(), &[0]);
        let size = run1(&op("Size"), std::slice::from_ref(&x)).unwrap();
        assert!(size.shape().is_scalar());
        assert_eq!(size.scalar_value::<i32>().unwrap(), 6);
        let rank = run1(&op("Rank"), &[x]).unwrap();
        assert_eq!(rank.scalar_value::<i32>().unwrap(), 2);
    }

    #[test]
    fn cast_pairs_and_edge_cases() {
        let cast = |src: DType, dst: DType| node("Cast").attr("SrcT", ty(src)).attr("DstT", ty(dst));
        let f = f32s(&[6], &[-1.7, -0.5, 0.0, 0.5, 2.9, f32::NAN]);
        let out = run1(&cast(DType::F32, DType::I32), std::slice::from_ref(&f)).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[-1, 0, 0, 0, 2, i32::MIN]);
        let out = run1(&cast(DType::F32, DType::Bool), std::slice::from_ref(&f)).unwrap();
        assert_eq!(out.as_slice::<bool>().unwrap(), &[true, true, false, true, true, true]);
        let out = run1(&cast(DType::F32, DType::F32), std::slice::from_ref(&f)).unwrap();
        assert!(out.shares_bytes_with(&f));
        let b = Tensor::from_slice::<bool>([2], &[true, false]).unwrap();
        let out = run1(&cast(DType::Bool, DType::F64), &[b]).unwrap();
        assert_eq!(out.as_slice::<f64>().unwrap(), &[1.0, 0.0]);
        let big = Tensor::from_slice::<i64>([2], &[(1 << 32) + 5, -1]).unwrap();
        let out = run1(&cast(DType::I64, DType::I32), &[big]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[5, -1]);
        let out = run1(&cast(DType::I32, DType::F32), &[i32v(&[16_777_217, -3])]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[16_777_216.0, -3.0]);
        // complex64: to it the imaginary part is 0; from it the real part stays.
        let z = run1(&cast(DType::I32, DType::Complex64), &[i32v(&[2, -5])]).unwrap();
        assert_eq!(z.complex_parts(), [(2.0, 0.0), (-5.0, 0.0)]);
        let back = run1(&cast(DType::Complex64, DType::I64), &[z]).unwrap();
        assert_eq!(back.as_slice::<i64>().unwrap(), &[2, -5]);
        // Every pair builds and keeps the shape; strings cast only to
        // themselves, as in TensorFlow.
        for src in DType::ALL {
            for dst in DType::ALL {
                let x = Tensor::zeros(src, [2, 0, 3]).unwrap();
                let out = run1(&cast(src, dst), &[x]);
                if (src == DType::String || dst == DType::String) && src != dst {
                    let err = out.unwrap_err();
                    assert!(err.message.contains(&format!("Cast {src} to {dst} is not supported")), "{err}");
                    continue;
                }
                let out = out.unwrap();
                assert_eq!(out.dtype(), dst);
                assert_eq!(out.dims(), &[2, 0, 3]);
            }
        }
    }

    #[test]
    fn fill_and_likes() {
        let fill = op("Fill");
        let out = run1(&fill, &[i32v(&[2, 3]), Tensor::scalar(1.5f32)]).unwrap();
        assert_eq!(out.dims(), &[2, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1.5; 6]);
        let err = run1(&fill, &[i32v(&[2, -1]), Tensor::scalar(1.5f32)]).unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
        assert!(err.message.contains("dims[1]"), "{err}");
        let err = run1(&fill, &[Tensor::scalar(2i32), Tensor::scalar(1.5f32)]).unwrap_err();
        assert!(err.message.contains("dims must be a vector"), "{err}");
        let x = Tensor::from_slice::<i64>([3], &[5, 6, 7]).unwrap();
        let z = run1(&node("ZerosLike").attr("T", ty(DType::I64)), std::slice::from_ref(&x)).unwrap();
        assert_eq!(z.as_slice::<i64>().unwrap(), &[0, 0, 0]);
        let o = run1(&node("OnesLike").attr("T", ty(DType::I64)), &[x]).unwrap();
        assert_eq!(o.as_slice::<i64>().unwrap(), &[1, 1, 1]);
        let bo =
            run1(&node("OnesLike").attr("T", ty(DType::Bool)), &[Tensor::zeros(DType::Bool, [2]).unwrap()]).unwrap();
        assert_eq!(bo.as_slice::<bool>().unwrap(), &[true, true]);
    }
}
