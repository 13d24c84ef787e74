//! Einsum: a contraction of one or two tensors written as an equation
//! (`bhqd,bhkd->bhqk`), as frozen Keras attention blocks and BERT-style
//! models emit it.
//!
//! Owns: the equation's parser (once per node, at kernel build time), its
//! binding to input shapes, and the two ways of computing it: one operand is
//! a transpose, a sum, or a gather along a diagonal; two operands are a set
//! of strided products through [`Gemm`]. Must not copy an operand that the
//! gemm can read in place, and must not know what graph it is in.
//!
//! Equations: letters are labels; `,` separates the one or two operands,
//! `->` precedes the output (without it the output is every label used
//! once, sorted, after `...` if any operand has one, as `tf.einsum` builds
//! it), `...` stands for broadcast batch dimensions; whitespace is ignored.
//! A label repeated within an operand takes its diagonal (`ii->i`); a
//! label missing from the output is summed. Named labels must agree in size
//! exactly (TensorFlow does not broadcast them); only the dimensions under
//! `...` broadcast.
//!
//! How two operands are computed. Each distinct label, and each broadcast
//! dimension under `...`, is an *axis* with a size and a stride in each
//! operand and in the output (a repeated label's stride is the sum of its
//! strides: its diagonal, without a copy; a broadcast dimension's stride is
//! 0). Axes of size 1 play no part. A label in one operand only and not in
//! the output is summed out of that operand first (a copy). The rest are
//! batch axes (both operands and the output), free axes (one operand and
//! the output) and contracted axes (both operands only). Then:
//! - the contracted axes must form one stride in both operands (a chain
//!   `stride[outer] == stride[inner] * size[inner]`, in the same order);
//!   an operand where they do not is copied into a layout where they do;
//! - the longest chain of the first operand's free axes that is one stride
//!   in both that operand and the output becomes the gemm's `m`; the same
//!   for the second operand's and `n`; operands swap roles so that the
//!   output's innermost axis lands in `n` (row-major products);
//! - every other output axis (batch axes, free axes left out of a chain)
//!   is an outer loop, one gemm per index, each writing its `m x n` block
//!   straight into the output through strides.
//!
//! `bhqd,bhkd->bhqk` is then `b·h` products of `q x d` by `(k x d)ᵀ`, and
//! `acbe,aecd->abcd` writes each product into a strided slab of the
//! output: neither copies anything. Every output element belongs to exactly
//! one outer index and one `(i, j)` of its product (the output's strides
//! are row-major over distinct axes), which is what lets products run on
//! the device's threads and write the output without zeroing it first.

use super::super::broadcast::broadcast_shape;
use super::super::matmul::{CHUNK_MIN_MACS, CHUNK_MIN_ROWS, Gemm, INLINE_MAX_MACS, Strided, StridedOut};
use super::super::numeric::Num;
use super::super::reduce::{SumR, reduce};
use super::super::registry::OpDef;
use super::super::shape_ops::transpose;
use super::super::{
    IntraOpPool, KernelInit, OpContext, OpKernel, OpSignature, Value, ValueType, attr_count, unsupported_dtype,
};
use super::REAL;
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Shape, Tensor};
use smallvec::SmallVec;
use std::mem::MaybeUninit;

pub const DEFS: &[OpDef] = &[OpDef::kernel("Einsum", einsum_signature, build_einsum)];

/// `N * T -> T`.
fn einsum_signature(node: &NodeSpec) -> Result<OpSignature> {
    let n = attr_count(node, "N", 1)?;
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t; n], vec![t]))
}

/// Per-axis (or per-dimension) numbers; inline for the ranks models use.
type Axes = SmallVec<[usize; 8]>;

// ---------------------------------------------------------------------------
// Parsing

/// One operand's subscripts, or the output's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Subscripts {
    /// Label ids in order, the ellipsis left out.
    labels: SmallVec<[usize; 8]>,
    /// Where the ellipsis's dimensions go: before `labels[at]`.
    ellipsis: Option<usize>,
}

impl Subscripts {
    fn has_repeats(&self) -> bool {
        self.labels.iter().enumerate().any(|(i, l)| self.labels[..i].contains(l))
    }
}

/// A parsed equation. Label ids index `chars`.
#[derive(Debug)]
struct Equation {
    /// As given, for error messages.
    text: String,
    inputs: SmallVec<[Subscripts; 2]>,
    output: Subscripts,
    chars: SmallVec<[u8; 16]>,
}

/// Parses one operand's subscripts, adding new labels to `chars`.
fn parse_operand(s: &[u8], chars: &mut SmallVec<[u8; 16]>, equation: &str) -> Result<Subscripts> {
    let mut sub = Subscripts::default();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == b'.' {
            if !s[i..].starts_with(b"...") {
                bail!(invalid_argument, "Invalid ellipsis in einsum equation '{equation}': '.' must come as '...'");
            }
            if sub.ellipsis.is_some() {
                bail!(invalid_argument, "More than one ellipsis in one operand of einsum equation '{equation}'");
            }
            sub.ellipsis = Some(sub.labels.len());
            i += 3;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            bail!(
                invalid_argument,
                "Invalid character '{}' in einsum equation '{equation}': subscripts are letters, ',' between \
                 operands, '->' before the output and '...' for broadcast dimensions",
                c.escape_ascii()
            );
        }
        let id = match chars.iter().position(|&x| x == c) {
            Some(id) => id,
            None => {
                chars.push(c);
                chars.len() - 1
            }
        };
        sub.labels.push(id);
        i += 1;
    }
    Ok(sub)
}

fn parse(equation: &str) -> Result<Equation> {
    if let Some(c) = equation.chars().find(|c| !c.is_ascii()) {
        bail!(invalid_argument, "Invalid character '{c}' in einsum equation '{equation}'");
    }
    let squeezed: Vec<u8> = equation.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let (lhs, rhs) = match squeezed.windows(2).position(|w| w == b"->") {
        Some(at) => (&squeezed[..at], Some(&squeezed[at + 2..])),
        None => (&squeezed[..], None),
    };
    if rhs.is_some_and(|r| r.windows(2).any(|w| w == b"->")) {
        bail!(invalid_argument, "Expecting at most one '->' in einsum equation '{equation}'");
    }
    let operands: SmallVec<[&[u8]; 2]> = lhs.split(|&c| c == b',').collect();
    if operands.len() > 2 {
        bail!(
            invalid_argument,
            "Expecting 1 or 2 input subscripts in equation '{equation}' but got: {}",
            operands.len()
        );
    }
    let mut chars = SmallVec::new();
    let inputs = operands.iter().map(|s| parse_operand(s, &mut chars, equation)).collect::<Result<SmallVec<_>>>()?;
    let output = match rhs {
        Some(rhs) => {
            let known = chars.len();
            let output = parse_operand(rhs, &mut chars, equation)?;
            if let Some(&new) = output.labels.iter().find(|&&l| l >= known) {
                bail!(
                    invalid_argument,
                    "Output subscripts contain the label '{}' not present in the input subscripts of einsum \
                     equation '{equation}'",
                    chars[new] as char
                );
            }
            if output.has_repeats() {
                bail!(invalid_argument, "Output subscripts contain a label appearing more than once: {equation}");
            }
            output
        }
        None => implicit_output(&inputs, &chars),
    };
    Ok(Equation { text: equation.to_string(), inputs, output, chars })
}

/// The output `tf.einsum` writes for an equation without `->`: `...` if any
/// operand has it, then each label used exactly once, in character order.
fn implicit_output(inputs: &[Subscripts], chars: &[u8]) -> Subscripts {
    let mut counts: SmallVec<[usize; 16]> = SmallVec::from_elem(0, chars.len());
    for l in inputs.iter().flat_map(|s| &s.labels) {
        counts[*l] += 1;
    }
    let mut labels: SmallVec<[usize; 8]> = (0..chars.len()).filter(|&l| counts[l] == 1).collect();
    labels.sort_unstable_by_key(|&l| chars[l]);
    let ellipsis = inputs.iter().any(|s| s.ellipsis.is_some()).then_some(0);
    Subscripts { labels, ellipsis }
}

// ---------------------------------------------------------------------------
// Binding to shapes

/// The equation applied to concrete input shapes. Axis ids: the labels
/// first (by id), then the broadcast dimensions under `...`.
struct Bound {
    sizes: Axes,
    /// Per operand: each axis's stride (0 where the operand lacks the axis
    /// or broadcasts it; a repeated label's strides summed).
    strides: SmallVec<[Axes; 2]>,
    /// Per operand: the axis of each of its dimensions.
    dims_axes: SmallVec<[Axes; 2]>,
    /// The output's axes in order.
    out_axes: Axes,
    out_shape: Shape,
}

/// Row-major strides of `dims`.
fn row_major(dims: &[usize]) -> Axes {
    let mut strides: Axes = SmallVec::from_elem(1, dims.len());
    for d in (0..dims.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * dims[d + 1];
    }
    strides
}

impl Equation {
    fn bind(&self, inputs: &[&Tensor]) -> Result<Bound> {
        let eq = &self.text;
        if inputs.len() != self.inputs.len() {
            bail!(
                invalid_argument,
                "Expected {} inputs but got: {} for equation '{eq}'",
                self.inputs.len(),
                inputs.len()
            );
        }
        const UNSET: usize = usize::MAX;
        let labels = self.chars.len();
        let mut sizes: Axes = SmallVec::from_elem(UNSET, labels);
        let mut ellipsis_dims: SmallVec<[&[usize]; 2]> = SmallVec::new();
        for (i, (sub, x)) in self.inputs.iter().zip(inputs).enumerate() {
            let dims = x.dims();
            let named = sub.labels.len();
            match sub.ellipsis {
                None if dims.len() != named => bail!(
                    invalid_argument,
                    "Expected input {i} to have rank {named} but got: {} for equation '{eq}'",
                    dims.len()
                ),
                Some(_) if dims.len() < named => bail!(
                    invalid_argument,
                    "Expected input {i} to have rank at least {named} but got: {} for equation '{eq}'",
                    dims.len()
                ),
                _ => {}
            }
            let spread = dims.len() - named;
            for (pos, &label) in sub.labels.iter().enumerate() {
                let axis = match sub.ellipsis {
                    Some(at) if pos >= at => pos + spread,
                    _ => pos,
                };
                let d = dims[axis];
                if sizes[label] == UNSET {
                    sizes[label] = d;
                } else if sizes[label] != d {
                    bail!(
                        invalid_argument,
                        "Expected dimension {} at axis {axis} of input {i} shaped {} for label '{}' but got \
                         dimension {d}, in equation '{eq}'",
                        sizes[label],
                        x.shape(),
                        self.chars[label] as char
                    );
                }
            }
            let at = sub.ellipsis.unwrap_or(0);
            ellipsis_dims.push(if sub.ellipsis.is_some() { &dims[at..at + spread] } else { &[] });
        }
        let mut broadcast = Shape::new(ellipsis_dims[0]);
        if let Some(other) = ellipsis_dims.get(1) {
            broadcast = broadcast_shape(broadcast.dims(), other).map_err(|_| {
                Status::invalid_argument(format!(
                    "Invalid broadcasting dimensions: {} vs. {} in equation '{eq}'",
                    inputs[0].shape(),
                    inputs[1].shape()
                ))
            })?;
        }
        let spread = broadcast.rank();
        if spread > 0 && self.output.ellipsis.is_none() {
            bail!(
                invalid_argument,
                "Output contains {spread} broadcasting dimension(s) but no ellipsis (...) was found in the output \
                 subscripts of equation '{eq}'"
            );
        }
        sizes.extend_from_slice(broadcast.dims());
        let mut strides = SmallVec::new();
        let mut dims_axes = SmallVec::new();
        for (sub, x) in self.inputs.iter().zip(inputs) {
            let dims = x.dims();
            let raw = row_major(dims);
            let own = dims.len() - sub.labels.len();
            let axes = expand(sub, labels + spread - own, own);
            let mut s: Axes = SmallVec::from_elem(0, sizes.len());
            for (d, &axis) in axes.iter().enumerate() {
                if axis >= labels && dims[d] != sizes[axis] {
                    continue; // a broadcast dimension of size 1
                }
                s[axis] += raw[d];
            }
            strides.push(s);
            dims_axes.push(axes);
        }
        let out_axes = expand(&self.output, labels, spread);
        let out_shape = Shape::from_vec(out_axes.iter().map(|&a| sizes[a]).collect());
        Ok(Bound { sizes, strides, dims_axes, out_axes, out_shape })
    }
}

/// The axis of each dimension of a tensor with subscripts `sub` whose
/// ellipsis covers `count` dimensions, those being the axes from `first`.
fn expand(sub: &Subscripts, first: usize, count: usize) -> Axes {
    let at = sub.ellipsis.unwrap_or(sub.labels.len());
    let mut axes: Axes = sub.labels[..at].iter().copied().collect();
    if sub.ellipsis.is_some() {
        axes.extend(first..first + count);
    }
    axes.extend(sub.labels[at..].iter().copied());
    axes
}

// ---------------------------------------------------------------------------
// One operand

/// `out[i..] = Σ src[Σ i·stride + Σ s·stride]`: the output row-major over
/// the `keep` axes, each term over every index of the `sum` axes (both
/// `(size, stride)`). Sums accumulate as the reductions' do (f64 for f32).
fn gather_sum<T: Num>(src: &[T], keep: &[(usize, usize)], sum: &[(usize, usize)]) -> Result<Tensor> {
    let shape = Shape::from_vec(keep.iter().map(|k| k.0).collect());
    Tensor::build::<T>(shape, |out| {
        if out.is_empty() {
            return;
        }
        let (inner, inner_stride) = keep.last().copied().unwrap_or((1, 0));
        let outer = &keep[..keep.len().saturating_sub(1)];
        let mut index: Axes = SmallVec::from_elem(0, outer.len());
        let mut base = 0usize;
        for row in out.chunks_exact_mut(inner) {
            for (j, o) in row.iter_mut().enumerate() {
                let start = base + j * inner_stride;
                *o = if sum.is_empty() { src[start] } else { sum_from(src, start, sum) };
            }
            advance(&mut index, &mut base, outer);
        }
    })
}

/// The sum of `src` over every index of the `(size, stride)` axes `sum`
/// (non-empty), from `start`.
fn sum_from<T: Num>(src: &[T], start: usize, sum: &[(usize, usize)]) -> T {
    let (inner, inner_stride) = sum[sum.len() - 1];
    let outer = &sum[..sum.len() - 1];
    let rows: usize = outer.iter().map(|s| s.0).product();
    let mut index: Axes = SmallVec::from_elem(0, outer.len());
    let mut off = start;
    let mut acc = <T::Acc as Num>::ZERO;
    for _ in 0..rows {
        for t in 0..inner {
            acc = acc.add(src[off + t * inner_stride].widen());
        }
        advance(&mut index, &mut off, outer);
    }
    T::narrow(acc)
}

/// Steps an odometer over `(size, stride)` axes, keeping `offset` in step.
fn advance(index: &mut [usize], offset: &mut usize, axes: &[(usize, usize)]) {
    for d in (0..axes.len()).rev() {
        index[d] += 1;
        *offset += axes[d].1;
        if index[d] < axes[d].0 {
            return;
        }
        *offset -= axes[d].1 * axes[d].0;
        index[d] = 0;
    }
}

/// One operand: a transpose, a sum over the labels the output drops, or,
/// with a repeated label, a gather along its diagonal.
fn one_operand<T: Num>(eq: &Equation, bound: &Bound, x: &Tensor) -> Result<Tensor> {
    if bound.out_shape.num_elements() == 0 || x.num_elements() == 0 {
        return Tensor::zeros(T::DTYPE, bound.out_shape.clone());
    }
    let axes = &bound.dims_axes[0];
    if eq.inputs[0].has_repeats() {
        let strides = &bound.strides[0];
        let keep: SmallVec<[(usize, usize); 8]> =
            bound.out_axes.iter().map(|&a| (bound.sizes[a], strides[a])).collect();
        let mut sum: SmallVec<[(usize, usize); 8]> = SmallVec::new();
        for (a, &size) in bound.sizes.iter().enumerate() {
            if size > 1 && !bound.out_axes.contains(&a) {
                sum.push((size, strides[a]));
            }
        }
        return gather_sum(x.as_slice::<T>()?, &keep, &sum);
    }
    // Distinct labels: each dimension is one axis, and the optimised
    // reduction and transpose kernels apply.
    let summed: SmallVec<[i64; 8]> =
        (0..axes.len()).filter(|&d| !bound.out_axes.contains(&axes[d])).map(|d| d as i64).collect();
    let (reduced, kept) = if summed.is_empty() {
        (x.clone(), axes.clone())
    } else {
        let positions = Tensor::from_slice::<i64>([summed.len()], &summed)?;
        let kept: Axes = axes.iter().copied().filter(|a| bound.out_axes.contains(a)).collect();
        (reduce::<T, SumR>(x, &positions, false)?, kept)
    };
    let perm: Axes = bound.out_axes.iter().map(|a| kept.iter().position(|k| k == a).unwrap_or_default()).collect();
    transpose(&reduced, &perm)
}

// ---------------------------------------------------------------------------
// Two operands

/// An operand of the product: its tensor (the input, or a copy in a better
/// layout) and its stride along every axis.
struct Operand {
    tensor: Tensor,
    strides: Axes,
}

impl Operand {
    /// A contiguous copy holding the `keep` axes in that order, the `sum`
    /// axes summed out.
    fn materialise<T: Num>(&self, sizes: &[usize], keep: &[usize], sum: &[usize]) -> Result<Operand> {
        #[cfg(test)]
        tests::COPIES.with(|c| c.set(c.get() + 1));
        let pairs = |axes: &[usize]| -> SmallVec<[(usize, usize); 8]> {
            axes.iter().map(|&a| (sizes[a], self.strides[a])).collect()
        };
        let tensor = gather_sum(self.tensor.as_slice::<T>()?, &pairs(keep), &pairs(sum))?;
        let mut strides: Axes = SmallVec::from_elem(0, sizes.len());
        let kept: Axes = keep.iter().map(|&a| sizes[a]).collect();
        for (&a, s) in keep.iter().zip(row_major(&kept)) {
            strides[a] = s;
        }
        Ok(Operand { tensor, strides })
    }

    fn has(&self, axis: usize) -> bool {
        self.strides[axis] != 0
    }
}

/// `axes` ordered by decreasing stride: the order they lie in memory.
fn by_stride(axes: &[usize], strides: &[usize]) -> Axes {
    let mut sorted: Axes = axes.into();
    sorted.sort_by_key(|&a| std::cmp::Reverse(strides[a]));
    sorted
}

/// Whether `axes`, outermost first, step through memory as one index:
/// each stride is the next one's times the next one's size.
fn is_chain(axes: &[usize], strides: &[usize], sizes: &[usize]) -> bool {
    axes.windows(2).all(|w| strides[w[0]] == strides[w[1]] * sizes[w[1]])
}

/// The largest group of `axes` that is a chain both in `operand` and in
/// `out` (outermost first), so one stride in each walks all of it.
fn best_chain(axes: &[usize], operand: &[usize], out: &[usize], sizes: &[usize]) -> Axes {
    let mut best: Axes = SmallVec::new();
    let mut best_size = 0;
    for &base in axes {
        let mut chain: Axes = smallvec::smallvec![base];
        let mut size = sizes[base];
        loop {
            let outermost = chain[0];
            let next = axes.iter().copied().find(|&y| {
                !chain.contains(&y)
                    && operand[y] == operand[outermost] * sizes[outermost]
                    && out[y] == out[outermost] * sizes[outermost]
            });
            match next {
                Some(y) => {
                    chain.insert(0, y);
                    size *= sizes[y];
                }
                None => break,
            }
        }
        if size > best_size {
            (best, best_size) = (chain, size);
        }
    }
    best
}

/// A group of axes read as one index: its extent and its stride in each
/// tensor (`[first operand, second operand, output]`).
#[derive(Clone, Copy)]
struct Run {
    size: usize,
    strides: [usize; 3],
}

impl Run {
    /// The group `axes` (a chain, outermost first; empty: one element).
    fn of(axes: &[usize], sizes: &[usize], a: &Operand, b: &Operand, out: &[usize]) -> Run {
        match axes.last() {
            None => Run { size: 1, strides: [0; 3] },
            Some(&inner) => Run {
                size: axes.iter().map(|&x| sizes[x]).product(),
                strides: [a.strides[inner], b.strides[inner], out[inner]],
            },
        }
    }
}

/// The output buffer, shared by the threads that write disjoint elements of
/// it.
struct OutPtr<T>(*mut T);
// SAFETY: the pointer is only written through, at elements that the
// product plan gives to exactly one work item (see `contract`).
unsafe impl<T: Send> Sync for OutPtr<T> {}

impl<T> OutPtr<T> {
    fn get(&self) -> *mut T {
        self.0
    }
}

/// Two operands: sums of single-operand labels first, then strided
/// products, one per index of the outer axes.
fn two_operands<T: Gemm>(bound: &Bound, x: &Tensor, y: &Tensor, pool: Option<&dyn IntraOpPool>) -> Result<Tensor> {
    let out_shape = bound.out_shape.clone();
    if out_shape.num_elements() == 0 || x.num_elements() == 0 || y.num_elements() == 0 {
        // An empty operand leaves either no output or empty sums.
        return Tensor::zeros(T::DTYPE, out_shape);
    }
    let sizes = &bound.sizes[..];
    let mut out_strides: Axes = SmallVec::from_elem(0, sizes.len());
    for (&a, s) in bound.out_axes.iter().zip(row_major(out_shape.dims())) {
        out_strides[a] = s;
    }
    let live: Axes = (0..sizes.len()).filter(|&a| sizes[a] > 1).collect();
    let mut a = Operand { tensor: x.clone(), strides: bound.strides[0].clone() };
    let mut b = Operand { tensor: y.clone(), strides: bound.strides[1].clone() };
    let in_out = |axis: usize| out_strides[axis] != 0;

    // Labels of one operand that the output drops: sum them out first.
    let sum_own = |this: &Operand, other: &Operand| -> Result<Option<Operand>> {
        let (summed, kept): (Axes, Axes) =
            live.iter().copied().filter(|&ax| this.has(ax)).partition(|&ax| !other.has(ax) && !in_out(ax));
        if summed.is_empty() {
            return Ok(None);
        }
        this.materialise::<T>(sizes, &by_stride(&kept, &this.strides), &summed).map(Some)
    };
    if let Some(summed) = sum_own(&a, &b)? {
        a = summed;
    }
    if let Some(summed) = sum_own(&b, &a)? {
        b = summed;
    }

    // Contracted axes: one chain, in the same order, in both operands.
    let contracted: Axes = live.iter().copied().filter(|&ax| a.has(ax) && b.has(ax) && !in_out(ax)).collect();
    let both = |order: &[usize], a: &Operand, b: &Operand| {
        is_chain(order, &a.strides, sizes) && is_chain(order, &b.strides, sizes)
    };
    let a_order = by_stride(&contracted, &a.strides);
    let b_order = by_stride(&contracted, &b.strides);
    let k_axes = if both(&a_order, &a, &b) {
        a_order
    } else if both(&b_order, &a, &b) {
        b_order
    } else {
        // Copy what does not fit into [other axes, contracted axes].
        let relayout = |op: &Operand, order: &[usize]| -> Result<Operand> {
            let mut keep: Axes = live.iter().copied().filter(|&ax| op.has(ax) && !order.contains(&ax)).collect();
            keep = by_stride(&keep, &op.strides);
            keep.extend_from_slice(order);
            op.materialise::<T>(sizes, &keep, &[])
        };
        if is_chain(&a_order, &a.strides, sizes) {
            b = relayout(&b, &a_order)?;
            a_order
        } else if is_chain(&b_order, &b.strides, sizes) {
            a = relayout(&a, &b_order)?;
            b_order
        } else {
            a = relayout(&a, &a_order)?;
            b = relayout(&b, &a_order)?;
            a_order
        }
    };

    // Free axes; the output's innermost axis goes to `n`.
    let free = |op: &Operand, other: &Operand| -> Axes {
        live.iter().copied().filter(|&ax| in_out(ax) && op.has(ax) && !other.has(ax)).collect()
    };
    let innermost = bound.out_axes.iter().rev().copied().find(|&ax| sizes[ax] > 1);
    if innermost.is_some_and(|ax| a.has(ax) && !b.has(ax)) {
        std::mem::swap(&mut a, &mut b);
    }
    let (free_a, free_b) = (free(&a, &b), free(&b, &a));
    let m_axes = best_chain(&free_a, &a.strides, &out_strides, sizes);
    let n_axes = best_chain(&free_b, &b.strides, &out_strides, sizes);
    let (m, k, n) = (
        Run::of(&m_axes, sizes, &a, &b, &out_strides),
        Run::of(&k_axes, sizes, &a, &b, &out_strides),
        Run::of(&n_axes, sizes, &a, &b, &out_strides),
    );
    let mut outer: Axes =
        live.iter().copied().filter(|&ax| in_out(ax) && !m_axes.contains(&ax) && !n_axes.contains(&ax)).collect();
    outer.sort_by_key(|&ax| std::cmp::Reverse(out_strides[ax]));
    let outer: SmallVec<[Run; 8]> = outer
        .iter()
        .map(|&ax| Run { size: sizes[ax], strides: [a.strides[ax], b.strides[ax], out_strides[ax]] })
        .collect();
    let outer_count: usize = outer.iter().map(|r| r.size).product();
    // Each output element is one (outer index, i, j): a broken plan must
    // never leave elements unwritten in an uninitialised buffer.
    assert_eq!(outer_count * m.size * n.size, out_shape.num_elements(), "Einsum: products do not tile the output");

    let (sa, sb) = (a.tensor.as_slice::<T>()?, b.tensor.as_slice::<T>()?);
    // Work items: ranges of outer indices, or row blocks of one product.
    let macs = outer_count.saturating_mul(m.size).saturating_mul(k.size).saturating_mul(n.size);
    let threads = pool.map_or(1, |p| p.threads());
    let chunks = (threads * 2).min(macs / CHUNK_MIN_MACS);
    let (outer_per_item, rows_per_item) = if threads < 2 || chunks < 2 {
        (outer_count, m.size)
    } else if outer_count >= chunks {
        (outer_count.div_ceil(chunks), m.size)
    } else {
        let blocks = chunks.div_ceil(outer_count).min(m.size / CHUNK_MIN_ROWS).max(1);
        (1, m.size.div_ceil(blocks))
    };
    let row_items = m.size.div_ceil(rows_per_item);
    let items = outer_count.div_ceil(outer_per_item) * row_items;

    let fill = |c: &mut [MaybeUninit<T>]| {
        let out = OutPtr(c.as_mut_ptr().cast::<T>());
        let run_item = |item: usize| {
            let first = (item / row_items) * outer_per_item;
            let rows_first = (item % row_items) * rows_per_item;
            let rows = rows_per_item.min(m.size - rows_first);
            for index in first..(first + outer_per_item).min(outer_count) {
                let mut off = [rows_first * m.strides[0], 0, rows_first * m.strides[2]];
                let mut rest = index;
                for run in outer.iter().rev() {
                    let i = rest % run.size;
                    rest /= run.size;
                    for (o, s) in off.iter_mut().zip(run.strides) {
                        *o += i * s;
                    }
                }
                let lhs = Strided { data: &sa[off[0]..], rows: m.strides[0], cols: k.strides[0] };
                let rhs = Strided { data: &sb[off[1]..], rows: k.strides[1], cols: n.strides[1] };
                // SAFETY: `off[2] + i * m + j * n` (i < rows, j < n.size) is
                // the row-major offset of a distinct output element: the
                // output's axes are the outer axes, the `m` chain and the
                // `n` chain, each a distinct set with the output's own
                // strides, and the assert above shows they tile it. Items
                // take distinct (outer index, row) pairs, so no element is
                // written twice, on any thread; `c` outlives the items.
                unsafe {
                    let c = StridedOut { ptr: out.get().add(off[2]), rows: m.strides[2], cols: n.strides[2] };
                    T::gemm_strided([rows, k.size, n.size], lhs, rhs, c);
                }
            }
        };
        match pool {
            Some(pool) if items > 1 => pool.run_chunks(items, &run_item),
            _ => (0..items).for_each(run_item),
        }
    };
    // SAFETY: the work items write every element (see above).
    unsafe { Tensor::build_uninit::<T>(out_shape, fill) }
}

// ---------------------------------------------------------------------------
// Kernel

type EinsumFn = fn(&Equation, &[&Tensor], Option<&dyn IntraOpPool>) -> Result<Tensor>;

struct EinsumKernel {
    equation: Equation,
    compute: EinsumFn,
}

fn einsum<T: Gemm>(eq: &Equation, inputs: &[&Tensor], pool: Option<&dyn IntraOpPool>) -> Result<Tensor> {
    let bound = eq.bind(inputs)?;
    match inputs {
        [x] => one_operand::<T>(eq, &bound, x),
        [x, y] => two_operands::<T>(&bound, x, y, pool),
        _ => bail!(internal, "Einsum: {} operands", inputs.len()),
    }
}

fn build_einsum(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    if node.get_attr("equation").is_none() {
        bail!(invalid_argument, "node '{}' ({}): missing attr 'equation' (a string)", node.name, node.op);
    }
    let equation = parse(&node.attr_str_or("equation", "")?)?;
    let n = attr_count(node, "N", 1)?;
    if n != equation.inputs.len() {
        bail!(
            invalid_argument,
            "Expected {} inputs but got: {n} for equation '{}'",
            equation.inputs.len(),
            equation.text
        );
    }
    let dtype = node.attr_dtype("T")?;
    let compute: EinsumFn = match dtype {
        DType::F32 => einsum::<f32>,
        DType::F64 => einsum::<f64>,
        DType::I32 => einsum::<i32>,
        DType::I64 => einsum::<i64>,
        _ => {
            return Err(unsupported_dtype(&node.op, dtype, REAL));
        }
    };
    Ok(Box::new(EinsumKernel { equation, compute }))
}

impl OpKernel for EinsumKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let out = match self.equation.inputs.len() {
            1 => (self.compute)(&self.equation, &[ctx.input(0)?], ctx.intra_op())?,
            _ => (self.compute)(&self.equation, &[ctx.input(0)?, ctx.input(1)?], ctx.intra_op())?,
        };
        ctx.set_output(0, out);
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }

    fn worth_a_thread(&self, inputs: &[Option<Value>], lent: &[Option<Value>]) -> bool {
        // About one multiply-add per index of every label: the product of
        // the inputs' sizes over their distinct labels.
        let mut work = 1usize;
        let mut seen: SmallVec<[usize; 16]> = SmallVec::new();
        for (i, sub) in self.equation.inputs.iter().enumerate() {
            let x = match inputs.get(i).and_then(Option::as_ref).or_else(|| lent.get(i)?.as_ref()) {
                Some(Value::Tensor(x)) => x,
                // A variable read through a ref: its size is known once read.
                _ => return true,
            };
            let spread = x.rank().saturating_sub(sub.labels.len());
            let at = sub.ellipsis.unwrap_or(sub.labels.len());
            for (d, &size) in x.dims().iter().enumerate() {
                let label = match sub.ellipsis {
                    Some(_) if d >= at + spread => sub.labels.get(d - spread),
                    Some(_) if d >= at => None,
                    _ => sub.labels.get(d),
                };
                match label {
                    Some(l) if seen.contains(l) => {}
                    Some(&l) => {
                        seen.push(l);
                        work = work.saturating_mul(size);
                    }
                    // Broadcast dimensions: counted from the first operand.
                    None if i == 0 => work = work.saturating_mul(size),
                    None => {}
                }
            }
        }
        work >= INLINE_MAX_MACS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};
    use std::cell::Cell;

    thread_local! {
        /// Operands copied into another layout on this thread.
        pub(super) static COPIES: Cell<usize> = const { Cell::new(0) };
    }

    fn einsum_node(equation: &str, n: usize, dtype: DType) -> NodeSpec {
        node("Einsum")
            .attr("T", ty(dtype))
            .attr("N", AttrValue::Int(n as i64))
            .attr("equation", AttrValue::Bytes(equation.as_bytes().to_vec()))
    }

    /// Small integers, as the TensorFlow cases below were fed:
    /// `((i * 7 + seed * 3) % 11) - 5`.
    fn values(len: usize, seed: usize) -> Vec<f64> {
        (0..len).map(|i| ((i * 7 + seed * 3) % 11) as f64 - 5.0).collect()
    }

    fn tensor(dtype: DType, dims: &[usize], v: &[f64]) -> Tensor {
        match dtype {
            DType::F32 => Tensor::from_slice::<f32>(dims, &v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
            DType::F64 => Tensor::from_slice::<f64>(dims, v),
            DType::I32 => Tensor::from_slice::<i32>(dims, &v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
            _ => Tensor::from_slice::<i64>(dims, &v.iter().map(|&x| x as i64).collect::<Vec<_>>()),
        }
        .unwrap()
    }

    fn run(equation: &str, dtype: DType, shapes: &[&[usize]]) -> Result<Tensor> {
        let inputs: Vec<Tensor> = shapes
            .iter()
            .enumerate()
            .map(|(i, dims)| tensor(dtype, dims, &values(dims.iter().product(), i + 1)))
            .collect();
        run1(&einsum_node(equation, shapes.len(), dtype), &inputs)
    }

    /// (equation, input shapes, output shape, output values)
    type Case = (&'static str, &'static [&'static [usize]], &'static [usize], &'static [i64]);

    #[test]
    fn matches_tensorflow() {
        // tf.einsum(eq, *inputs) in TensorFlow 2.21 on the inputs `values`
        // makes (float32; integer values, so exact in every dtype).
        let cases: &[Case] = &[
            ("ij,jk->ik", &[&[2, 3], &[3, 4]], &[2, 4], &[-20, 19, -8, -24, -19, 21, -16, -20]),
            ("ij->ji", &[&[2, 3]], &[3, 2], &[-2, -3, 5, 4, 1, 0]),
            ("ii->i", &[&[3, 3]], &[3], &[-2, 4, -1]),
            ("ii->", &[&[3, 3]], &[], &[1]),
            ("ij->", &[&[2, 3]], &[], &[5]),
            ("i,j->ij", &[&[2], &[3]], &[2, 3], &[-2, 6, -8, 5, -15, 20]),
            (
                "...ij,...jk->...ik",
                &[&[2, 1, 2, 3], &[3, 3, 2]],
                &[2, 3, 2, 2],
                &[14, 9, 13, 9, 17, 1, 11, 7, 9, -29, 9, -28, 12, 9, 11, 9, 5, 13, -1, 19, 9, -27, 9, -26],
            ),
            (
                "bhqd,bhkd->bhqk",
                &[&[1, 2, 2, 3], &[1, 2, 3, 3]],
                &[1, 2, 2, 3],
                &[-13, -17, -21, -15, -16, -17, 22, 24, 26, 18, 23, 28],
            ),
            (
                "acbe,aecd->abcd",
                &[&[1, 2, 2, 3], &[1, 3, 2, 2]],
                &[1, 2, 2, 2],
                &[-20, 19, -24, -16, -19, 21, -32, -12],
            ),
            ("abc,cde->abde", &[&[1, 2, 3], &[3, 2, 2]], &[1, 2, 2, 2], &[-20, 19, -8, -24, -19, 21, -16, -20]),
            ("iij,jk->ik", &[&[2, 2, 3], &[3, 2]], &[2, 2], &[14, 9, 11, 9]),
            ("ij,ik->j", &[&[2, 3], &[2, 4]], &[3], &[17, -18, 2]),
            ("abc,cd->ad", &[&[2, 3, 2], &[2, 2]], &[2, 2], &[11, -9, -19, 9]),
            // Implicit output, as tf.einsum completes it: "ba,ca->bc".
            ("ba,ca", &[&[2, 3], &[4, 3]], &[2, 4], &[-13, -17, -21, 30, -15, -16, -17, 26]),
            ("i...,i...->...", &[&[2, 4, 1], &[2, 1, 3]], &[4, 3], &[-2, -10, 4, 5, -15, 20, 1, 13, -8, -3, -3, -3]),
            ("ab,ab->a", &[&[2, 3], &[2, 3]], &[2], &[-13, -16]),
            ("ij,jk->ki", &[&[2, 3], &[3, 4]], &[4, 2], &[-20, -19, 19, 21, -8, -16, -24, -20]),
        ];
        for &(equation, shapes, out_dims, want) in cases {
            for dtype in [DType::F32, DType::F64, DType::I32, DType::I64] {
                let out = run(equation, dtype, shapes).unwrap_or_else(|e| panic!("{equation}: {e}"));
                assert_eq!(out.dtype(), dtype);
                assert_eq!(out.dims(), out_dims, "{equation} {dtype}");
                let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
                assert_eq!(out.to_f64_vec(), want, "{equation} {dtype}");
            }
        }
    }

    /// A plain loop over every assignment of the labels: the definition of
    /// einsum, with a size-1 dimension broadcast against any size (as
    /// `...` does). No ellipsis: callers spell its dimensions as letters.
    fn brute_force(equation: &str, inputs: &[(&[usize], Vec<f64>)]) -> (Vec<usize>, Vec<f64>) {
        let (lhs, rhs) = equation.split_once("->").unwrap();
        let operands: Vec<&[u8]> = lhs.split(',').map(str::as_bytes).collect();
        let mut labels: Vec<u8> = Vec::new();
        let mut sizes: Vec<usize> = Vec::new();
        for (sub, (dims, _)) in operands.iter().zip(inputs) {
            for (&c, &d) in sub.iter().zip(dims.iter()) {
                match labels.iter().position(|&l| l == c) {
                    Some(p) => sizes[p] = sizes[p].max(d),
                    None => {
                        labels.push(c);
                        sizes.push(d);
                    }
                }
            }
        }
        let pos = |c: u8| labels.iter().position(|&l| l == c).unwrap();
        let out_dims: Vec<usize> = rhs.bytes().map(|c| sizes[pos(c)]).collect();
        let mut out = vec![0.0; out_dims.iter().product()];
        let mut index = vec![0usize; labels.len()];
        let total: usize = sizes.iter().product();
        for _ in 0..total {
            let mut term = 1.0;
            for (sub, (dims, v)) in operands.iter().zip(inputs) {
                let mut off = 0;
                for (&c, &d) in sub.iter().zip(dims.iter()) {
                    off = off * d + if d == 1 { 0 } else { index[pos(c)] };
                }
                term *= v[off];
            }
            let mut off = 0;
            for (c, &d) in rhs.bytes().zip(&out_dims) {
                off = off * d + index[pos(c)];
            }
            out[off] += term;
            for l in (0..labels.len()).rev() {
                index[l] += 1;
                if index[l] < sizes[l] {
                    break;
                }
                index[l] = 0;
            }
        }
        (out_dims, out)
    }

    /// (equation, the same with letters for `...`, shapes, copies expected)
    const LAYOUTS: &[(&str, &str, &[&[usize]], usize)] = &[
        // Attention: scores and context, no copies.
        ("bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", &[&[2, 4, 8, 16], &[2, 4, 9, 16]], 0),
        ("bhqk,bhkd->bhqd", "bhqk,bhkd->bhqd", &[&[2, 4, 8, 9], &[2, 4, 9, 16]], 0),
        ("aecd,abcd->acbe", "aecd,abcd->acbe", &[&[2, 7, 3, 5], &[2, 6, 3, 5]], 0),
        ("acbe,aecd->abcd", "acbe,aecd->abcd", &[&[2, 3, 5, 4], &[2, 4, 3, 6]], 0),
        // EinsumDense projections in and out of heads.
        ("abc,cde->abde", "abc,cde->abde", &[&[3, 4, 5], &[5, 2, 3]], 0),
        ("abde,cde->abc", "abde,cde->abc", &[&[3, 4, 2, 3], &[5, 2, 3]], 0),
        // Transposed operands and outputs, read in place.
        ("ij,kj->ik", "ij,kj->ik", &[&[5, 7], &[6, 7]], 0),
        ("ji,jk->ik", "ji,jk->ik", &[&[7, 5], &[7, 6]], 0),
        ("ij,jk->ki", "ij,jk->ki", &[&[5, 7], &[7, 6]], 0),
        ("abc,bd->adc", "abc,bd->adc", &[&[3, 4, 5], &[4, 6]], 0),
        // Contracted labels in different orders: one operand copied.
        ("ijk,jil->kl", "ijk,jil->kl", &[&[3, 4, 5], &[4, 3, 6]], 1),
        ("abcd,dcbe->ae", "abcd,dcbe->ae", &[&[2, 3, 4, 5], &[5, 4, 3, 6]], 1),
        // Diagonals read through strides; summed-out labels copied.
        ("ii,ij->j", "ii,ij->j", &[&[4, 4], &[4, 5]], 0),
        ("iij,jk->ik", "iij,jk->ik", &[&[3, 3, 4], &[4, 5]], 0),
        ("abc,abd->", "abc,abd->", &[&[2, 3, 4], &[2, 3, 5]], 2),
        ("ab,cd->", "ab,cd->", &[&[2, 3], &[4, 5]], 2),
        ("abc,cd->ad", "abc,cd->ad", &[&[2, 3, 4], &[4, 5]], 1),
        // Batch-like, dot, outer, matrix-vector.
        ("ij,jk->ijk", "ij,jk->ijk", &[&[3, 4], &[4, 5]], 0),
        ("i,i->", "i,i->", &[&[7], &[7]], 0),
        ("i,j->ij", "i,j->ij", &[&[3], &[4]], 0),
        ("ij,j->i", "ij,j->i", &[&[3, 4], &[4]], 0),
        ("j,ij->i", "j,ij->i", &[&[4], &[3, 4]], 0),
        // Broadcast batch dimensions.
        ("...ij,...jk->...ik", "xyij,yjk->xyik", &[&[2, 1, 3, 4], &[5, 4, 6]], 0),
        ("...ij,jk->...ik", "xyij,jk->xyik", &[&[3, 2, 4, 5], &[5, 2]], 0),
        ("ij,...jk->...ik", "ij,xjk->xik", &[&[4, 5], &[3, 5, 2]], 0),
        ("...ij,...jk->...ik", "xyij,xyjk->xyik", &[&[3, 1, 2, 4], &[1, 2, 4, 3]], 0),
        // Size-1 dimensions.
        ("ij,jk->ik", "ij,jk->ik", &[&[1, 3], &[3, 1]], 0),
        ("bij,bjk->bik", "bij,bjk->bik", &[&[4, 2, 1], &[4, 1, 2]], 0),
    ];

    #[test]
    fn matches_the_definition_across_layouts() {
        for &(equation, lettered, shapes, copies) in LAYOUTS {
            let inputs: Vec<(&[usize], Vec<f64>)> =
                shapes.iter().enumerate().map(|(i, &d)| (d, values(d.iter().product(), i + 1))).collect();
            let (dims, want) = brute_force(lettered, &inputs);
            for dtype in [DType::F32, DType::F64, DType::I64] {
                COPIES.with(|c| c.set(0));
                let out = run(equation, dtype, shapes).unwrap_or_else(|e| panic!("{equation}: {e}"));
                assert_eq!(out.dims(), &dims[..], "{equation}");
                assert_eq!(out.to_f64_vec(), want, "{equation} {dtype}");
                assert_eq!(COPIES.with(Cell::get), copies, "{equation}: operands copied");
            }
        }
    }

    #[test]
    fn one_operand_forms() {
        let x = values(24, 1);
        let cases: &[(&str, &str, &[usize])] = &[
            ("ijk->kji", "ijk->kji", &[2, 3, 4]),
            ("ijk->ik", "ijk->ik", &[2, 3, 4]),
            ("ijk->ki", "ijk->ki", &[2, 3, 4]),
            ("ijk->", "ijk->", &[2, 3, 4]),
            ("ijk->ijk", "ijk->ijk", &[2, 3, 4]),
            ("...k->k...", "ijk->kij", &[2, 3, 4]),
            ("i...->...", "ijk->jk", &[2, 3, 4]),
            ("iji->j", "iji->j", &[2, 6, 2]),
            ("iji->ji", "iji->ji", &[2, 6, 2]),
            ("iij->", "iij->", &[2, 2, 6]),
            ("ijk", "ijk->ijk", &[2, 3, 4]),
            ("kji", "kji->ijk", &[2, 3, 4]),
        ];
        for &(equation, lettered, dims) in cases {
            let (want_dims, want) = brute_force(lettered, &[(dims, x.clone())]);
            for dtype in [DType::F32, DType::F64, DType::I32] {
                let out = run1(&einsum_node(equation, 1, dtype), &[tensor(dtype, dims, &x)])
                    .unwrap_or_else(|e| panic!("{equation}: {e}"));
                assert_eq!(out.dims(), &want_dims[..], "{equation}");
                assert_eq!(out.to_f64_vec(), want, "{equation} {dtype}");
            }
        }
        // No reordering and nothing summed: the input itself, not a copy.
        let t = tensor(DType::F32, &[2, 3, 4], &x);
        let out = run1(&einsum_node("ijk->ijk", 1, DType::F32), std::slice::from_ref(&t)).unwrap();
        assert!(out.shares_bytes_with(&t));
        // A scalar.
        let out = run1(&einsum_node("->", 1, DType::F32), &[Tensor::scalar(2.5f32)]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[2.5]);
        let out = run1(&einsum_node(",->", 2, DType::F64), &[Tensor::scalar(2.5f64), Tensor::scalar(-2.0f64)]).unwrap();
        assert_eq!(out.as_slice::<f64>().unwrap(), &[-5.0]);
    }

    #[test]
    fn empty_operands() {
        let out = run("ij,jk->ik", DType::F32, &[&[2, 0], &[0, 3]]).unwrap();
        assert_eq!(out.dims(), &[2, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[0.0; 6]);
        let out = run("ij,jk->ik", DType::F32, &[&[0, 2], &[2, 3]]).unwrap();
        assert_eq!(out.dims(), &[0, 3]);
        let out = run("i->", DType::F64, &[&[0]]).unwrap();
        assert_eq!(out.as_slice::<f64>().unwrap(), &[0.0]);
        let out = run("ii->i", DType::F64, &[&[0, 0]]).unwrap();
        assert_eq!(out.dims(), &[0]);
    }

    #[test]
    fn whitespace_and_float_values() {
        // Non-integer f32 values: sums in another order would round
        // differently, so compare with a tolerance against f64.
        let a: Vec<f64> = (0..6).map(|i| 0.1 * i as f64 - 0.23).collect();
        let b: Vec<f64> = (0..12).map(|i| 0.37 - 0.05 * i as f64).collect();
        let out = run1(
            &einsum_node(" ij , jk -> ik ", 2, DType::F32),
            &[tensor(DType::F32, &[2, 3], &a), tensor(DType::F32, &[3, 4], &b)],
        )
        .unwrap();
        let (_, want) = brute_force("ij,jk->ik", &[(&[2, 3], a), (&[3, 4], b)]);
        let want = Tensor::from_slice::<f32>([2, 4], &want.iter().map(|&v| v as f32).collect::<Vec<_>>()).unwrap();
        out.all_close(&want, 1e-6, 1e-7).unwrap();
    }

    fn build_error(equation: &str, n: usize) -> String {
        let node = einsum_node(equation, n, DType::F32);
        let inputs = vec![Tensor::zeros(DType::F32, [1]).unwrap(); n];
        let err = run1(&node, &inputs).unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument, "{equation}");
        err.message.clone()
    }

    #[test]
    fn malformed_equations_are_named() {
        let cases: &[(&str, usize, &str)] = &[
            ("ij,jk,kl->il", 3, "Expecting 1 or 2 input subscripts in equation 'ij,jk,kl->il' but got: 3"),
            ("ij->j->", 1, "Expecting at most one '->' in einsum equation 'ij->j->'"),
            ("i1->i", 1, "Invalid character '1' in einsum equation 'i1->i'"),
            ("i.j->ij", 1, "Invalid ellipsis in einsum equation 'i.j->ij'"),
            ("...i...->i", 1, "More than one ellipsis in one operand of einsum equation '...i...->i'"),
            ("ij->ik", 1, "the label 'k' not present in the input subscripts of einsum equation 'ij->ik'"),
            ("ij->jj", 1, "Output subscripts contain a label appearing more than once: ij->jj"),
            ("ij,jk->ik", 1, "Expected 2 inputs but got: 1 for equation 'ij,jk->ik'"),
            ("ij->i", 2, "Expected 1 inputs but got: 2 for equation 'ij->i'"),
            ("ij→j", 1, "Invalid character '→' in einsum equation 'ij→j'"),
        ];
        for &(equation, n, want) in cases {
            let got = build_error(equation, n);
            assert!(got.contains(want), "{equation}: {got}");
        }
        let missing = node("Einsum").attr("T", ty(DType::F32)).attr("N", AttrValue::Int(1));
        let err = run1(&missing, &[Tensor::scalar(1.0f32)]).unwrap_err();
        assert!(err.message.contains("missing attr 'equation'"), "{err}");
        let err =
            run1(&einsum_node("ij->i", 1, DType::Bool), &[Tensor::zeros(DType::Bool, [1, 1]).unwrap()]).unwrap_err();
        assert!(err.message.contains("Einsum does not support dtype bool"), "{err}");
    }

    #[test]
    fn shape_errors_name_input_axis_and_label() {
        let err = run("ij,jk->ik", DType::F32, &[&[2, 3], &[4, 5]]).unwrap_err();
        assert_eq!(
            err.message,
            "Expected dimension 3 at axis 0 of input 1 shaped [4,5] for label 'j' but got dimension 4, in \
             equation 'ij,jk->ik'"
        );
        // Named labels do not broadcast, as in TensorFlow.
        let err = run("ij,jk->ik", DType::F32, &[&[2, 1], &[3, 4]]).unwrap_err();
        assert!(err.message.starts_with("Expected dimension 1 at axis 0 of input 1"), "{err}");
        let err = run("ii->i", DType::F32, &[&[2, 3]]).unwrap_err();
        assert!(err.message.starts_with("Expected dimension 2 at axis 1 of input 0 shaped [2,3] for label 'i'"));
        let err = run("ijk->ijk", DType::F32, &[&[2, 3]]).unwrap_err();
        assert_eq!(err.message, "Expected input 0 to have rank 3 but got: 2 for equation 'ijk->ijk'");
        let err = run("ij...,jk->ik...", DType::F32, &[&[2], &[2, 2]]).unwrap_err();
        assert_eq!(err.message, "Expected input 0 to have rank at least 2 but got: 1 for equation 'ij...,jk->ik...'");
        let err = run("...ij,...jk->...ik", DType::F32, &[&[2, 2, 2, 3], &[5, 3, 4]]).unwrap_err();
        assert_eq!(
            err.message,
            "Invalid broadcasting dimensions: [2,2,2,3] vs. [5,3,4] in equation '...ij,...jk->...ik'"
        );
        let err = run("...ij->ij", DType::F32, &[&[2, 2, 3]]).unwrap_err();
        assert!(err.message.starts_with("Output contains 1 broadcasting dimension(s) but no ellipsis"), "{err}");
        // An ellipsis over no dimensions needs none in the output.
        assert_eq!(run("...ij->ij", DType::F32, &[&[2, 3]]).unwrap().dims(), &[2, 3]);
        assert_eq!(run("ij,jk->ik...", DType::F32, &[&[2, 3], &[3, 4]]).unwrap().dims(), &[2, 4]);
    }

    #[test]
    fn work_split_across_a_pool_gives_the_bits_of_one_thread() {
        /// The device pool, counting the work items handed to it.
        struct CountingPool(crate::executor::ThreadPool, std::sync::atomic::AtomicUsize);
        impl IntraOpPool for CountingPool {
            fn threads(&self) -> usize {
                self.0.threads()
            }
            fn run_chunks(&self, chunks: usize, f: &(dyn Fn(usize) + Sync)) {
                self.1.fetch_add(chunks, std::sync::atomic::Ordering::Relaxed);
                self.0.run_chunks(chunks, f)
            }
        }
        let options = crate::executor::PoolOptions { threads: 4, ..Default::default() };
        let pool = CountingPool(crate::executor::ThreadPool::new(options).unwrap(), Default::default());
        // Non-integer values: any change in summation order would show.
        let fill = |len: usize, seed: usize| -> Vec<f64> {
            (0..len).map(|i| ((i * 37 + seed * 11) % 101) as f64 / 7.3 - 6.1).collect()
        };
        let cases: &[(&str, &[&[usize]])] = &[
            // Many outer indices: ranges of them per item.
            ("bhqd,bhkd->bhqk", &[&[2, 4, 64, 64], &[2, 4, 64, 64]]),
            // A strided output slab per product.
            ("acbe,aecd->abcd", &[&[1, 12, 64, 64], &[1, 64, 12, 64]]),
            // One product: row blocks.
            ("abc,cd->abd", &[&[2, 128, 96], &[96, 200]]),
        ];
        for &(equation, shapes) in cases {
            let inputs: Vec<Tensor> = shapes
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let v: Vec<f32> = fill(d.iter().product(), i).iter().map(|&x| x as f32).collect();
                    Tensor::from_slice::<f32>(*d, &v).unwrap()
                })
                .collect();
            let refs: Vec<&Tensor> = inputs.iter().collect();
            let eq = parse(equation).unwrap();
            let alone = einsum::<f32>(&eq, &refs, None).unwrap();
            let before = pool.1.load(std::sync::atomic::Ordering::Relaxed);
            let split = einsum::<f32>(&eq, &refs, Some(&pool)).unwrap();
            assert!(pool.1.load(std::sync::atomic::Ordering::Relaxed) >= before + 2, "{equation} was not split");
            assert!(alone.bit_eq(&split), "{equation}");
            let (dims, want) =
                brute_force(equation, &[(shapes[0], refs[0].to_f64_vec()), (shapes[1], refs[1].to_f64_vec())]);
            let want =
                Tensor::from_slice::<f32>(&dims[..], &want.iter().map(|&v| v as f32).collect::<Vec<_>>()).unwrap();
            alone.all_close(&want, 1e-4, 1e-3).unwrap_or_else(|e| panic!("{equation}: {e}"));
        }
    }

    /// Einsum's gemm path against the same products by direct `Gemm`
    /// calls (and BatchMatMulV2, which TensorFlow's own Einsum would run).
    /// Timings only mean something in an optimised build:
    /// `cargo test --lib --config 'profile.dev.package.ringflow.opt-level=3'
    /// --config 'profile.dev.package.matrixmultiply.opt-level=3' --
    /// --ignored --nocapture einsum_against_direct_gemm`.
    #[test]
    #[ignore = "a measurement: prints timings, asserts nothing about them"]
    fn einsum_against_direct_gemm() {
        use std::time::Instant;
        fn median_us(mut f: impl FnMut()) -> f64 {
            for _ in 0..20 {
                f();
            }
            let mut samples: Vec<f64> = (0..15)
                .map(|_| {
                    let start = Instant::now();
                    for _ in 0..40 {
                        f();
                    }
                    start.elapsed().as_secs_f64() * 1e6 / 40.0
                })
                .collect();
            samples.sort_by(f64::total_cmp);
            samples[samples.len() / 2]
        }
        let fill = |dims: &[usize], seed: usize| {
            let v: Vec<f32> =
                (0..dims.iter().product::<usize>()).map(|i| ((i * 37 + seed) % 101) as f32 / 50.0 - 1.0).collect();
            Tensor::from_slice::<f32>(dims, &v).unwrap()
        };
        // (b, h, q, k, d)
        for (b, h, q, k, d) in [(2, 4, 64, 64, 32), (1, 12, 128, 128, 64)] {
            let query = fill(&[b, h, q, d], 1);
            let key = fill(&[b, h, k, d], 2);
            let eq = parse("bhqd,bhkd->bhqk").unwrap();
            let einsum_us = median_us(|| {
                std::hint::black_box(einsum::<f32>(&eq, &[&query, &key], None).unwrap());
            });
            let (sq, sk) = (query.as_slice::<f32>().unwrap(), key.as_slice::<f32>().unwrap());
            let mut out = vec![0.0f32; b * h * q * k];
            let gemm_us = median_us(|| {
                for (i, c) in out.chunks_exact_mut(q * k).enumerate() {
                    let lhs = Strided::row_major(&sq[i * q * d..(i + 1) * q * d], d);
                    // key read as its transpose: (p, j) at j * d + p.
                    let rhs = Strided { data: &sk[i * k * d..(i + 1) * k * d], rows: 1, cols: d };
                    f32::gemm_over([q, d, k], lhs, rhs, c);
                }
                std::hint::black_box(&out);
            });
            let bmm = node("BatchMatMulV2").attr("T", ty(DType::F32)).attr("adj_y", AttrValue::Bool(true));
            let bmm_us = median_us(|| {
                std::hint::black_box(run1(&bmm, &[query.clone(), key.clone()]).unwrap());
            });
            let einsum_node = einsum_node("bhqd,bhkd->bhqk", 2, DType::F32);
            let kernel_us = median_us(|| {
                std::hint::black_box(run1(&einsum_node, &[query.clone(), key.clone()]).unwrap());
            });
            println!(
                "bhqd,bhkd->bhqk b={b} h={h} q={q} k={k} d={d}: direct gemm {gemm_us:.1} us, einsum {einsum_us:.1} us \
                 (ratio {:.3}); through run1 (kernel build per call): Einsum {kernel_us:.1} us, BatchMatMulV2 \
                 {bmm_us:.1} us",
                einsum_us / gemm_us
            );
            // The context product writes strided slabs of its output.
            let value = fill(&[b, k, h, d], 4);
            let ctx_eq = parse("acbe,aecd->abcd").unwrap();
            let probs = fill(&[b, h, q, k], 5);
            let ctx_us = median_us(|| {
                std::hint::black_box(einsum::<f32>(&ctx_eq, &[&probs, &value], None).unwrap());
            });
            let (sp, sv) = (probs.as_slice::<f32>().unwrap(), value.as_slice::<f32>().unwrap());
            let mut out = vec![0.0f32; b * h * q * d];
            let direct_ctx_us = median_us(|| {
                for (i, c) in out.chunks_exact_mut(q * d).enumerate() {
                    let (batch, head) = (i / h, i % h);
                    let lhs = Strided::row_major(&sp[i * q * k..(i + 1) * q * k], k);
                    // value [b, k, h, d]: (p, j) of this head at p * h * d + j.
                    let at = batch * k * h * d + head * d;
                    let rhs = Strided { data: &sv[at..], rows: h * d, cols: 1 };
                    f32::gemm_over([q, k, d], lhs, rhs, c);
                }
                std::hint::black_box(&out);
            });
            println!(
                "acbe,aecd->abcd (same sizes): direct gemm into [b,h,q,d] {direct_ctx_us:.1} us, einsum into \
                 [b,q,h,d] {ctx_us:.1} us (ratio {:.3})",
                ctx_us / direct_ctx_us
            );
        }
    }

    #[test]
    fn worth_a_thread_follows_the_work() {
        let kernel = build_einsum(&KernelInit {
            node: &einsum_node("bqd,bkd->bqk", 2, DType::F32),
            signature: &OpSignature::default(),
        })
        .unwrap();
        assert!(kernel.is_expensive());
        let t = |dims: &[usize]| Some(Value::Tensor(Tensor::zeros(DType::F32, dims).unwrap()));
        assert!(!kernel.worth_a_thread(&[t(&[1, 8, 8]), t(&[1, 8, 8])], &[]));
        assert!(kernel.worth_a_thread(&[t(&[2, 64, 64]), t(&[2, 64, 64])], &[]));
    }
}
