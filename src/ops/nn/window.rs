//! Sliding-window geometry shared by the convolution and pooling kernels
//! and their gradients (Conv2D, DepthwiseConv2dNative, MaxPool, AvgPool,
//! Conv2DBackpropInput/Filter, MaxPoolGrad, AvgPoolGrad): the `padding`,
//! `explicit_paddings`, `strides`, `dilations` and `data_format` attributes
//! as TensorFlow parses and checks them, the output size and padding of one
//! spatial axis, and the driver that splits an NHWC output's lines across
//! the device's intra-op threads.
//!
//! Owns: [`Padding`], [`Axis`], [`split_lines`]. Must not compute any op:
//! the kernels own their loops.
//!
//! Output sizes follow TensorFlow's `GetWindowedOutputSize` exactly, in
//! integer arithmetic that truncates toward zero: VALID gives
//! `(in - eff + stride) / stride`, SAME `ceil(in / stride)` with the
//! padding split `needed / 2` before and the rest after, EXPLICIT
//! `(in + before + after - eff + stride) / stride`, where
//! `eff = (window - 1) * dilation + 1`. A negative size is an error; zero is
//! an empty output.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::IntraOpPool;
use crate::ops::attr_int_list_or;
use std::ops::Range;

/// The `padding` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    Valid,
    Same,
    /// Per-side amounts from `explicit_paddings`.
    Explicit,
}

impl Padding {
    /// The node's `padding`, which must be one of `allowed` (as the op's
    /// definition lists them).
    pub fn from_node(node: &NodeSpec, allowed: &[Padding]) -> Result<Padding> {
        let name = node.attr_str_or("padding", "")?;
        let parsed = match name.as_str() {
            "VALID" => Some(Padding::Valid),
            "SAME" => Some(Padding::Same),
            "EXPLICIT" => Some(Padding::Explicit),
            _ => None,
        };
        match parsed {
            Some(p) if allowed.contains(&p) => Ok(p),
            _ if name.is_empty() => {
                bail!(invalid_argument, "node '{}' ({}): missing attr 'padding'", node.name, node.op)
            }
            _ => {
                let names: Vec<String> = allowed.iter().map(|p| format!("\"{}\"", p.name())).collect();
                bail!(
                    invalid_argument,
                    "Value for attr 'padding' of \"{name}\" is not in the list of allowed values: {}",
                    names.join(", ")
                )
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Padding::Valid => "VALID",
            Padding::Same => "SAME",
            Padding::Explicit => "EXPLICIT",
        }
    }
}

/// Refuses every `data_format` but NHWC, the only layout TensorFlow's CPU
/// kernels of `op` run; `allowed` is what the op's definition accepts, so
/// a value outside it gets TensorFlow's attribute error instead. `refusal`
/// makes the status TensorFlow uses for this op (its code differs by op).
pub fn require_nhwc(node: &NodeSpec, allowed: &[&str], refusal: fn(String) -> Status) -> Result<()> {
    let format = node.attr_str_or("data_format", "NHWC")?;
    if format == "NHWC" {
        return Ok(());
    }
    if !allowed.contains(&format.as_str()) {
        let names: Vec<String> = allowed.iter().map(|f| format!("\"{f}\"")).collect();
        bail!(
            invalid_argument,
            "Value for attr 'data_format' of \"{format}\" is not in the list of allowed values: {}",
            names.join(", ")
        );
    }
    Err(refusal(format!(
        "{} on CPU supports only data_format NHWC (TensorFlow's CPU kernel refuses the others too); this node has \
         data_format {format}. Export the model channels-last, or transpose to NHWC around the op",
        node.op
    )))
}

/// A 4-entry NHWC list attribute (`strides`, `dilations`, `ksize`), with
/// TensorFlow's "must specify 4 dimensions" error naming `what`.
pub fn nhwc_list(node: &NodeSpec, key: &str, default: &[i64], what: &str) -> Result<[i64; 4]> {
    let v = attr_int_list_or(node, key, default)?;
    <[i64; 4]>::try_from(v.as_slice())
        .map_err(|_| Status::invalid_argument(format!("Sliding window {what} field must specify 4 dimensions")))
}

/// `explicit_paddings` as `[[top, bottom], [left, right]]`, checked as
/// TensorFlow's `CheckValidPadding` does; all zero unless `padding` is
/// EXPLICIT. `strict_empty` also refuses a non-empty list with another
/// padding (Conv2D and DepthwiseConv2dNative do, MaxPool does not).
pub fn explicit_paddings(node: &NodeSpec, padding: Padding, strict_empty: bool) -> Result<[[i64; 2]; 2]> {
    let list = attr_int_list_or(node, "explicit_paddings", &[])?;
    if padding != Padding::Explicit {
        if strict_empty && !list.is_empty() {
            bail!(
                invalid_argument,
                "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT"
            );
        }
        return Ok([[0, 0], [0, 0]]);
    }
    if list.len() != 8 {
        bail!(invalid_argument, "explicit_paddings attribute must contain 8 values, but got: {}", list.len());
    }
    if list.iter().any(|&p| p < 0) {
        bail!(invalid_argument, "All elements of explicit_paddings must be nonnegative");
    }
    // NHWC: pairs for N, H, W, C.
    if list[0] != 0 || list[1] != 0 || list[6] != 0 || list[7] != 0 {
        bail!(invalid_argument, "Nonzero explicit padding in the batch or depth dimensions is not supported");
    }
    Ok([[list[2], list[3]], [list[4], list[5]]])
}

/// One spatial axis of a sliding window: output `o` reads input positions
/// `o * stride + k * dilation - pad_before` for taps `k < window`; those
/// outside `[0, input)` are padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Axis {
    pub input: usize,
    pub window: usize,
    pub stride: usize,
    pub dilation: usize,
    pub pad_before: usize,
    pub output: usize,
}

impl Axis {
    /// The geometry of one axis; `explicit` is `[before, after]`, used only
    /// with [`Padding::Explicit`]. `stride` and `dilation` are positive
    /// (checked when the kernel was built).
    pub fn new(
        input: usize,
        window: usize,
        stride: usize,
        dilation: usize,
        padding: Padding,
        explicit: [i64; 2],
    ) -> Result<Axis> {
        // i128: attributes are arbitrary int64s, and no sum of two of them
        // may wrap before it is checked.
        let (inp, s) = (input as i128, stride as i128);
        let eff = (window as i128 - 1) * dilation as i128 + 1;
        let (output, pad_before) = match padding {
            Padding::Valid => ((inp - eff + s) / s, 0),
            Padding::Same => {
                let out = (inp + s - 1) / s;
                let needed = ((out - 1) * s + eff - inp).max(0);
                (out, needed / 2)
            }
            Padding::Explicit => {
                let [before, after] = explicit;
                ((inp + before as i128 + after as i128 - eff + s) / s, before as i128)
            }
        };
        if output < 0 {
            bail!(
                invalid_argument,
                "Computed output size would be negative: {output} [input_size: {input}, effective_filter_size: {eff}, \
                 stride: {stride}]"
            );
        }
        let fit = |v: i128| {
            usize::try_from(v)
                .ok()
                .filter(|&v| v <= isize::MAX as usize)
                .ok_or_else(|| Status::invalid_argument(format!("window geometry overflows: {v}")))
        };
        // The furthest position any tap reads must fit in isize, so the
        // inner loops' arithmetic cannot wrap.
        fit((output - 1).max(0) * s + (eff - 1).max(0))?;
        Ok(Axis { input, window, stride, dilation, pad_before: fit(pad_before)?, output: fit(output)? })
    }

    /// The input position of tap `k` of output `o` (negative or past the
    /// end in the padding).
    #[inline(always)]
    pub fn position(&self, o: usize, k: usize) -> isize {
        (o * self.stride + k * self.dilation) as isize - self.pad_before as isize
    }

    /// The taps of output `o` that land inside the input: `lo..hi`, empty
    /// when all of them fall in the padding.
    #[inline]
    pub fn taps(&self, o: usize) -> Range<usize> {
        // i128: a dilation near isize::MAX is legal when the window is 1.
        let start = (o * self.stride) as i128 - self.pad_before as i128;
        let d = self.dilation as i128;
        let window = self.window as i128;
        let lo = if start < 0 { (-start + d - 1) / d } else { 0 }.min(window);
        let end = self.input as i128 - start;
        let hi = if end <= 0 { 0 } else { (end + d - 1) / d }.min(window);
        lo.min(hi) as usize..hi as usize
    }

    /// [`Axis::taps`] for every output position, computed once per call so
    /// inner loops need no bounds arithmetic.
    pub fn all_taps(&self) -> Vec<Range<usize>> {
        (0..self.output).map(|o| self.taps(o)).collect()
    }

    /// The positions read with no padding and no gaps: every output's
    /// window lies inside the input and the windows tile it exactly.
    pub fn is_identity(&self) -> bool {
        self.window == 1 && self.stride == 1 && self.pad_before == 0 && self.output == self.input
    }

    /// One window, unpadded and undilated, spanning the whole input.
    pub fn is_whole(&self) -> bool {
        self.window == self.input
            && self.output == 1
            && self.pad_before == 0
            && (self.dilation == 1 || self.window == 1)
    }
}

/// Fewest element operations worth a chunk on another thread: a hand-off
/// costs tens of microseconds.
pub const CHUNK_MIN_WORK: usize = 1 << 18;

/// How [`split_lines`] may cut an output.
#[derive(Debug, Clone, Copy)]
pub struct Work {
    /// Element operations per line (a multiply-add of a gemm counts a
    /// quarter: it runs vectorised and blocked).
    pub per_line: usize,
    /// Fewest lines in a chunk (a gemm repacks its right operand per call).
    pub min_lines: usize,
}

/// Runs `fill(lines, block)` over `out`, seen as lines of `line_len`
/// elements, either once on the calling thread or in contiguous blocks of
/// lines across `pool` when there is enough work. Each line is handed to
/// exactly one call.
pub fn split_lines<E: Send>(
    pool: Option<&dyn IntraOpPool>,
    out: &mut [E],
    line_len: usize,
    work: Work,
    fill: &(dyn Fn(Range<usize>, &mut [E]) + Sync),
) {
    if line_len == 0 || out.is_empty() {
        return;
    }
    let lines = out.len() / line_len;
    let threads = pool.map_or(1, |p| p.threads());
    let by_work = lines.saturating_mul(work.per_line) / CHUNK_MIN_WORK;
    let chunks = (threads * 2).min(by_work).min(lines / work.min_lines.max(1));
    let (Some(pool), true) = (pool, threads >= 2 && chunks >= 2) else {
        return fill(0..lines, out);
    };
    let per_chunk = lines.div_ceil(chunks);
    let blocks: Vec<parking_lot::Mutex<&mut [E]>> =
        out.chunks_mut(per_chunk * line_len).map(parking_lot::Mutex::new).collect();
    pool.run_chunks(blocks.len(), &|i| {
        let mut block = blocks[i].lock();
        let first = i * per_chunk;
        let count = block.len() / line_len;
        fill(first..first + count, &mut block);
    });
}

/// A positive stride or dilation as usize, or `error`.
pub fn positive(v: i64, error: impl FnOnce() -> Status) -> Result<usize> {
    match usize::try_from(v) {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(error()),
    }
}

/// A filtered window op (input `[N,H,W,C]`, filter of rank 4) smaller than
/// this many multiply-adds runs inline: a pool thread's hand-off costs more.
const INLINE_MAX_MACS: usize = 1 << 15;

/// Whether a convolution-like kernel is worth a pool thread, from its
/// input and filter shapes and strides (unknown inputs: yes).
pub(super) fn filter_worth_a_thread(
    strides: [usize; 2],
    inputs: &[Option<crate::ops::Value>],
    lent: &[Option<crate::ops::Value>],
) -> bool {
    use crate::ops::Value;
    let input = |i: usize| inputs.get(i).and_then(Option::as_ref).or_else(|| lent.get(i)?.as_ref());
    match (input(0), input(1)) {
        (Some(Value::Tensor(x)), Some(Value::Tensor(f))) if x.rank() == 4 && f.rank() == 4 => {
            let (xd, fd) = (x.dims(), f.dims());
            let pixels = xd[0].saturating_mul(xd[1].div_ceil(strides[0])).saturating_mul(xd[2].div_ceil(strides[1]));
            pixels.saturating_mul(fd.iter().product()) >= INLINE_MAX_MACS
        }
        (Some(Value::Tensor(_)), Some(Value::Tensor(_))) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(input: usize, window: usize, stride: usize, dilation: usize, padding: Padding) -> Axis {
        Axis::new(input, window, stride, dilation, padding, [0, 0]).unwrap()
    }

    #[test]
    fn output_sizes_follow_tensorflow() {
        // VALID: (5 - 3 + 2) / 2 = 2; SAME: ceil(5 / 2) = 3, needed 2, 1 before.
        assert_eq!(axis(5, 3, 2, 1, Padding::Valid).output, 2);
        let same = axis(5, 3, 2, 1, Padding::Same);
        assert_eq!((same.output, same.pad_before), (3, 1));
        // Even input, even window: needed 1 goes after.
        let same = axis(4, 2, 1, 1, Padding::Same);
        assert_eq!((same.output, same.pad_before), (4, 0));
        // Dilation 2 makes a 3-tap window 5 wide.
        assert_eq!(axis(7, 3, 1, 2, Padding::Valid).output, 3);
        let same = axis(7, 3, 1, 2, Padding::Same);
        assert_eq!((same.output, same.pad_before), (7, 2));
        // A window one wider than the input is an empty output; truncation
        // toward zero keeps (5 - 8 + 2) / 2 at 0 too, as TensorFlow does.
        assert_eq!(axis(5, 6, 1, 1, Padding::Valid).output, 0);
        assert_eq!(axis(5, 8, 2, 1, Padding::Valid).output, 0);
        let err = Axis::new(5, 7, 1, 1, Padding::Valid, [0, 0]).unwrap_err();
        assert_eq!(
            err.message,
            "Computed output size would be negative: -1 [input_size: 5, effective_filter_size: 7, stride: 1]"
        );
        let explicit = Axis::new(5, 2, 1, 1, Padding::Explicit, [3, 0]).unwrap();
        assert_eq!((explicit.output, explicit.pad_before), (7, 3));
        // Attributes too large to index with are refused, not wrapped.
        assert!(Axis::new(5, 3, 1, 1 << 62, Padding::Same, [0, 0]).is_err());
        assert!(Axis::new(5, 2, 1, 1, Padding::Explicit, [i64::MAX, i64::MAX]).is_err());
        let wide = Axis::new(5, 1, 1, usize::MAX / 2, Padding::Valid, [0, 0]).unwrap();
        assert_eq!((wide.output, wide.taps(4)), (5, 0..1));
    }

    #[test]
    fn taps_skip_the_padding() {
        let same = axis(5, 3, 2, 1, Padding::Same);
        // Outputs read rows -1..=1, 1..=3, 3..=5.
        assert_eq!(same.all_taps(), vec![1..3, 0..3, 0..2]);
        let dilated = Axis::new(4, 3, 1, 2, Padding::Explicit, [3, 3]).unwrap();
        // Output 0 reads -3, -1, 1; output 4 reads 1, 3, 5.
        assert_eq!(dilated.taps(0), 2..3);
        assert_eq!(dilated.taps(4), 0..2);
        // Output 1 reads -2, 0, 2; all padding windows give an empty range.
        assert_eq!(dilated.taps(1), 1..3);
        let far = Axis::new(2, 2, 1, 1, Padding::Explicit, [0, 5]).unwrap();
        assert_eq!(far.taps(4), 0..0);
        for o in 0..same.output {
            for k in same.taps(o) {
                let p = same.position(o, k);
                assert!(p >= 0 && (p as usize) < same.input);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Shorthands for the convolution and pooling tests.
    use crate::graph::spec::{AttrList, AttrValue, NodeSpec};
    use crate::ops::testing::{node, ty};
    use crate::ops::{IntraOpPool, KernelInit, OpContext, ResourceMgr, Value, lookup};
    use crate::tensor::{DType, Tensor};

    /// A pooling node over NHWC windows `ksize`, moved by `strides`.
    pub fn pool_node(op: &str, dtype: DType, ksize: [i64; 2], strides: [i64; 2], padding: &str) -> NodeSpec {
        node(op)
            .attr("T", ty(dtype))
            .attr("ksize", ints(&[1, ksize[0], ksize[1], 1]))
            .attr("strides", ints(&[1, strides[0], strides[1], 1]))
            .attr("padding", text(padding))
    }

    /// `(i * mul + add) % modulo - sub` for `i < len`: small integers, so
    /// float sums of their products are exact in any order. The test
    /// generators that fed TensorFlow use the same formula.
    pub fn ramp(len: usize, mul: usize, add: usize, modulo: usize, sub: i64) -> Vec<f64> {
        (0..len).map(|i| ((i * mul + add) % modulo) as i64 - sub).map(|v| v as f64).collect()
    }

    /// Inputs of the TensorFlow cases: `ramp(.., 7, 0, 11, 5)`.
    pub fn xs(len: usize) -> Vec<f64> {
        ramp(len, 7, 0, 11, 5)
    }

    /// Filters of the TensorFlow cases: `ramp(.., 5, 3, 9, 4)`.
    pub fn fs(len: usize) -> Vec<f64> {
        ramp(len, 5, 3, 9, 4)
    }

    pub fn tensor(dtype: DType, dims: &[usize], v: &[f64]) -> Tensor {
        match dtype {
            DType::F32 => Tensor::from_slice::<f32>(dims, &v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
            DType::F64 => Tensor::from_slice::<f64>(dims, v),
            DType::I32 => Tensor::from_slice::<i32>(dims, &v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
            DType::I64 => Tensor::from_slice::<i64>(dims, &v.iter().map(|&x| x as i64).collect::<Vec<_>>()),
            DType::Bool => Tensor::from_slice::<bool>(dims, &v.iter().map(|&x| x != 0.0).collect::<Vec<_>>()),
            DType::U8 => Tensor::from_slice::<u8>(dims, &v.iter().map(|&x| x as u8).collect::<Vec<_>>()),
            DType::U64 => Tensor::from_slice::<u64>(dims, &v.iter().map(|&x| x as u64).collect::<Vec<_>>()),
            _ => panic!("no {dtype} test tensors"),
        }
        .unwrap()
    }

    pub fn ints(v: &[i64]) -> AttrValue {
        AttrValue::List(AttrList::Int(v.to_vec()))
    }

    pub fn text(s: &str) -> AttrValue {
        AttrValue::Bytes(s.as_bytes().to_vec())
    }

    /// A windowed op node: `T`, NHWC `strides`, `padding`.
    pub fn windowed(op: &str, dtype: DType, strides: [i64; 2], padding: &str) -> NodeSpec {
        node(op)
            .attr("T", ty(dtype))
            .attr("strides", ints(&[1, strides[0], strides[1], 1]))
            .attr("padding", text(padding))
    }

    /// A device pool that counts the chunks kernels hand it.
    pub struct CountingPool {
        pool: crate::executor::ThreadPool,
        pub chunks: std::sync::atomic::AtomicUsize,
    }

    impl IntraOpPool for CountingPool {
        fn threads(&self) -> usize {
            self.pool.threads()
        }
        fn run_chunks(&self, chunks: usize, f: &(dyn Fn(usize) + Sync)) {
            self.chunks.fetch_add(chunks, std::sync::atomic::Ordering::Relaxed);
            self.pool.run_chunks(chunks, f)
        }
    }

    impl CountingPool {
        /// Chunks handed over so far.
        pub fn count(&self) -> usize {
            self.chunks.load(std::sync::atomic::Ordering::Relaxed)
        }
    }

    /// A device pool of `threads`.
    pub fn pool(threads: usize) -> CountingPool {
        let options = crate::executor::PoolOptions { threads, ..Default::default() };
        CountingPool { pool: crate::executor::ThreadPool::new(options).unwrap(), chunks: Default::default() }
    }

    /// Runs a single-output kernel with `pool` lent for intra-op work.
    pub fn run_with_pool(n: &NodeSpec, inputs: &[Tensor], pool: &dyn IntraOpPool) -> Tensor {
        let def = lookup(&n.op).unwrap();
        let sig = (def.signature)(n).unwrap();
        let crate::ops::Implementation::Kernel(build) = def.implementation else { panic!("not a kernel") };
        let kernel = build(&KernelInit { node: n, signature: &sig }).unwrap();
        let resources = ResourceMgr::default();
        let mut ins: Vec<Option<Value>> = inputs.iter().map(|t| Some(Value::Tensor(t.clone()))).collect();
        let mut outs = vec![None];
        kernel.compute(&mut OpContext::new(&mut ins, &mut outs, &resources).with_intra_op(pool)).unwrap();
        match outs.pop().flatten() {
            Some(Value::Tensor(t)) => t,
            _ => panic!("no tensor output"),
        }
    }

    /// Asserts `got` holds exactly `want` (values exact in f64).
    pub fn assert_values(got: &Tensor, dims: &[usize], want: &[f64], what: &str) {
        assert_eq!(got.dims(), dims, "{what}: shape");
        assert_eq!(got.to_f64_vec(), want, "{what}");
    }
}
