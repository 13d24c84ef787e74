//! Conv2D: NHWC input `[n, h, w, c]`, HWIO filter `[kh, kw, c / groups, o]`,
//! output `[n, oh, ow, o]`, with strides, dilations, VALID / SAME /
//! EXPLICIT padding and grouped convolution (input depth a multiple of the
//! filter's), for float32, float64 and int32 (TensorFlow's CPU types here;
//! int32 wraps as its Eigen product does).
//!
//! Owns: this kernel, and the checked shapes of a convolution (`Plan`)
//! and its patch gather (`Run::im2col`) that the gradients in
//! `conv_grad` reuse. Must not hold state beyond parsed attributes, and
//! must not spawn threads: large convolutions are split by output rows
//! over the device's intra-op pool.
//!
//! The product is one gemm per block of output pixels, through
//! [`Gemm`]: each output pixel's receptive field is copied into a row of a
//! patch matrix (im2col, `[kh][kw][c]` per row, zeros in the padding) and
//! multiplied by the filter seen as a `[kh * kw * c, o]` matrix, which
//! writes the NHWC output in place. A 1x1 stride-1 unpadded convolution,
//! and one whose single window spans the whole image, read the input as
//! that matrix directly, with no copy. Patch blocks are sized to stay in
//! cache (about `PATCH_BUDGET_BYTES`) and reused within a thread.
//!
//! Only NHWC runs, as on TensorFlow's CPU; NCHW is refused when the kernel
//! is built with an error saying so.

use super::window::{Axis, Padding, Work, explicit_paddings, nhwc_list, positive, require_nhwc, split_lines};
use crate::bail;
use crate::error::{Result, Status};
use crate::ops::math::binary_signature;
use crate::ops::matmul::{Gemm, Strided};
use crate::ops::registry::OpDef;
use crate::ops::{IntraOpPool, KernelInit, OpContext, OpKernel, Value, unsupported_dtype};
use crate::tensor::{DType, Tensor};
use std::mem::MaybeUninit;
use std::ops::Range;

pub const DEFS: &[OpDef] = &[OpDef::kernel("Conv2D", binary_signature, build_conv2d)];

const DTYPES: &[DType] = &[DType::F32, DType::F64, DType::I32];

/// About this many bytes of patch matrix per gemm call: big enough that
/// the filter's repacking per call is noise, small enough to stay in L2.
const PATCH_BUDGET_BYTES: usize = 1 << 20;
/// Fewest patch rows per gemm call (the gemm repacks the filter per call).
const MIN_BLOCK_ROWS: usize = 64;
/// Fewest output pixels in a chunk handed to another thread.
const MIN_CHUNK_ROWS: usize = 16;
/// The attributes, checked as TensorFlow's `InitConv2DParameters` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvAttrs {
    /// Row and column strides.
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    pub padding: Padding,
    /// `[[top, bottom], [left, right]]` for EXPLICIT padding.
    pub explicit: [[i64; 2]; 2],
}

impl ConvAttrs {
    pub fn from_node(node: &crate::graph::spec::NodeSpec) -> Result<ConvAttrs> {
        require_nhwc(node, &["NHWC", "NCHW"], Status::unimplemented)?;
        let dilations = nhwc_list(node, "dilations", &[1, 1, 1, 1], "dilations")?;
        let strides = nhwc_list(node, "strides", &[], "strides")?;
        if strides[0] != 1 || strides[3] != 1 {
            bail!(
                unimplemented,
                "Current implementation does not yet support strides in the batch and depth dimensions."
            );
        }
        let bad_stride = || Status::invalid_argument("Row and column strides should be larger than 0.");
        let strides = [positive(strides[1], bad_stride)?, positive(strides[2], bad_stride)?];
        if dilations[0] != 1 || dilations[3] != 1 {
            bail!(
                unimplemented,
                "Current implementation does not yet support dilations in the batch and depth dimensions."
            );
        }
        let bad_dilation = || Status::invalid_argument("Dilated rates should be larger than 0.");
        let dilations = [positive(dilations[1], bad_dilation)?, positive(dilations[2], bad_dilation)?];
        let padding = Padding::from_node(node, &[Padding::Same, Padding::Valid, Padding::Explicit])?;
        let explicit = explicit_paddings(node, padding, true)?;
        Ok(ConvAttrs { strides, dilations, padding, explicit })
    }
}

type ConvFn = fn(&ConvAttrs, &Tensor, &Tensor, Option<&dyn IntraOpPool>) -> Result<Tensor>;

struct Conv2DKernel {
    attrs: ConvAttrs,
    compute: ConvFn,
}

fn build_conv2d(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ConvFn = match dtype {
        DType::F32 => conv2d::<f32>,
        DType::F64 => conv2d::<f64>,
        DType::I32 => conv2d::<i32>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, DTYPES)),
    };
    Ok(Box::new(Conv2DKernel { attrs: ConvAttrs::from_node(init.node)?, compute }))
}

impl OpKernel for Conv2DKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let out = (self.compute)(&self.attrs, ctx.input(0)?, ctx.input(1)?, ctx.intra_op())?;
        ctx.set_output(0, out);
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }

    fn worth_a_thread(&self, inputs: &[Option<Value>], lent: &[Option<Value>]) -> bool {
        super::window::filter_worth_a_thread(self.attrs.strides, inputs, lent)
    }
}

/// The shapes of one convolution, checked.
pub(super) struct Plan {
    pub batch: usize,
    pub rows: Axis,
    pub cols: Axis,
    pub in_depth: usize,
    /// Input channels per group: the filter's depth.
    pub group_depth: usize,
    pub out_depth: usize,
    pub groups: usize,
}

impl Plan {
    fn new(attrs: &ConvAttrs, input: &Tensor, filter: &Tensor) -> Result<Plan> {
        let &[batch, h, w, in_depth] = input.dims() else {
            bail!(invalid_argument, "convolution input must be 4-dimensional: {}", input.shape());
        };
        let &[kh, kw, group_depth, out_depth] = filter.dims() else {
            bail!(invalid_argument, "convolution filter must be 4-dimensional: {}", filter.shape());
        };
        Plan::from_dims(attrs, [batch, h, w, in_depth], [kh, kw, group_depth, out_depth])
    }

    /// The plan of an NHWC `input` under an HWIO `filter` shape.
    pub fn from_dims(attrs: &ConvAttrs, input: [usize; 4], filter: [usize; 4]) -> Result<Plan> {
        let [batch, h, w, in_depth] = input;
        let [kh, kw, group_depth, out_depth] = filter;
        if group_depth == 0 {
            bail!(invalid_argument, "filter depth must be strictly positive, got {group_depth}");
        }
        if in_depth % group_depth != 0 {
            bail!(
                invalid_argument,
                "input depth must be evenly divisible by filter depth: {in_depth} vs {group_depth}"
            );
        }
        // No input channels: TensorFlow gives zeros of the output's shape.
        let groups = (in_depth / group_depth).max(1);
        if out_depth % groups != 0 {
            bail!(
                invalid_argument,
                "output depth must be evenly divisible by number of groups: {out_depth} vs {groups}"
            );
        }
        let [sh, sw] = attrs.strides;
        let [dh, dw] = attrs.dilations;
        let rows = Axis::new(h, kh, sh, dh, attrs.padding, attrs.explicit[0])?;
        let cols = Axis::new(w, kw, sw, dw, attrs.padding, attrs.explicit[1])?;
        Ok(Plan { batch, rows, cols, in_depth, group_depth, out_depth, groups })
    }

    pub fn out_dims(&self) -> [usize; 4] {
        [self.batch, self.rows.output, self.cols.output, self.out_depth]
    }

    /// Columns of the patch matrix of one group.
    pub fn patch_len(&self) -> usize {
        self.rows.window * self.cols.window * self.group_depth
    }

    /// Whether the input, read as a row-major `[pixels, patch_len]` matrix,
    /// already is the patch matrix.
    fn input_is_patches(&self) -> bool {
        self.groups == 1
            && ((self.rows.is_identity() && self.cols.is_identity()) || (self.rows.is_whole() && self.cols.is_whole()))
    }
}

fn conv2d<T: Gemm>(
    attrs: &ConvAttrs,
    input: &Tensor,
    filter: &Tensor,
    pool: Option<&dyn IntraOpPool>,
) -> Result<Tensor> {
    let plan = Plan::new(attrs, input, filter)?;
    let (x, f) = (input.as_slice::<T>()?, filter.as_slice::<T>()?);
    let out_dims = plan.out_dims();
    match crate::tensor::Shape::new(&out_dims).checked_num_elements() {
        Some(0) => return Tensor::zeros(T::DTYPE, out_dims),
        Some(_) => {}
        None => bail!(invalid_argument, "Conv2D output shape {out_dims:?} overflows"),
    }
    if plan.rows.window == 0 || plan.cols.window == 0 {
        bail!(invalid_argument, "filter must not have zero elements (i.e. all dimensions must be non-zero)");
    }
    if plan.in_depth == 0 {
        return Tensor::zeros(T::DTYPE, out_dims);
    }
    let run = Run::new(&plan, x, f);
    let work = Work { per_line: plan.patch_len() * plan.out_depth / 4 + 1, min_lines: MIN_CHUNK_ROWS };
    let fill = |out: &mut [MaybeUninit<T>]| {
        let written = std::sync::atomic::AtomicUsize::new(0);
        split_lines(pool, out, plan.out_depth, work, &|pixels, block| {
            run.pixels_into(pixels.clone(), block);
            written.fetch_add(pixels.len(), std::sync::atomic::Ordering::Relaxed);
        });
        // Unwritten elements would be read uninitialised: never go on.
        assert_eq!(written.into_inner() * plan.out_depth, out.len(), "Conv2D: blocks do not cover the output");
    };
    // SAFETY: `pixels_into` writes every element of the block it is given
    // (the `Gemm` contract for whole rows; every group's columns when
    // scattering), and the assert above shows the blocks cover the output.
    unsafe { Tensor::build_uninit::<T>(out_dims, fill) }
}

/// One call's operands and precomputed in-bounds taps.
pub(super) struct Run<'a, T> {
    plan: &'a Plan,
    x: &'a [T],
    f: &'a [T],
    row_taps: Vec<Range<usize>>,
    col_taps: Vec<Range<usize>>,
}

impl<'a, T: Gemm> Run<'a, T> {
    /// The operands `x` (the input) and `f` (the filter; empty when only
    /// [`Run::im2col`] is used) of `plan`.
    pub fn new(plan: &'a Plan, x: &'a [T], f: &'a [T]) -> Self {
        Run { plan, x, f, row_taps: plan.rows.all_taps(), col_taps: plan.cols.all_taps() }
    }

    /// Computes output pixels `pixels` (flat over `[n, oh, ow]`) into
    /// `out`, their `pixels.len() * o` elements, writing every one.
    fn pixels_into(&self, pixels: Range<usize>, out: &mut [MaybeUninit<T>]) {
        let p = self.plan;
        let (k, o) = (p.patch_len(), p.out_depth);
        if p.input_is_patches() {
            let a = Strided::row_major(&self.x[pixels.start * k..pixels.end * k], k);
            return T::gemm([pixels.len(), k, o], a, Strided::row_major(self.f, o), out);
        }
        let block_rows = (PATCH_BUDGET_BYTES / (k * size_of::<T>()).max(1)).max(MIN_BLOCK_ROWS);
        // Equal blocks, so none is a sliver that the gemm would treat
        // differently from its neighbours.
        let blocks = pixels.len().div_ceil(block_rows);
        let per_block = pixels.len().div_ceil(blocks);
        let mut patches: Vec<T> = Vec::new();
        let mut group_out: Vec<T> = Vec::new();
        let group_o = o / p.groups;
        for (b, out_block) in out.chunks_mut(per_block * o).enumerate() {
            let first = pixels.start + b * per_block;
            let rows = out_block.len() / o;
            patches.resize(rows * k, T::ZERO);
            for g in 0..p.groups {
                self.im2col(first..first + rows, g * p.group_depth, &mut patches);
                let a = Strided::row_major(&patches[..], k);
                if p.groups == 1 {
                    T::gemm([rows, k, o], a, Strided::row_major(self.f, o), out_block);
                    continue;
                }
                // This group's output channels: columns `g * group_o..` of
                // the filter matrix, written to scratch then scattered.
                let b = Strided { data: &self.f[g * group_o..], rows: o, cols: 1 };
                group_out.resize(rows * group_o, T::ZERO);
                T::gemm_over([rows, k, group_o], a, b, &mut group_out);
                for (dst, src) in out_block.chunks_exact_mut(o).zip(group_out.chunks_exact(group_o)) {
                    for (d, &s) in dst[g * group_o..(g + 1) * group_o].iter_mut().zip(src) {
                        d.write(s);
                    }
                }
            }
        }
    }

    /// Fills one row of `patches` per pixel of `pixels`: the receptive
    /// field's channels `first_channel..+group_depth`, `[kh][kw][c]`, zero
    /// where it falls in the padding.
    pub fn im2col(&self, pixels: Range<usize>, first_channel: usize, patches: &mut [T]) {
        let p = self.plan;
        let (rows, cols) = (&p.rows, &p.cols);
        let (c, cg) = (p.in_depth, p.group_depth);
        let row_len = cols.window * cg;
        let image_len = rows.input * cols.input * c;
        let contiguous = cols.dilation == 1 && cg == c;
        let (mut ox, mut oy, mut n) = (pixels.start % cols.output, pixels.start / cols.output, 0);
        n += oy / rows.output;
        oy %= rows.output;
        for patch in patches.chunks_exact_mut(rows.window * row_len).take(pixels.len()) {
            let image = &self.x[n * image_len..(n + 1) * image_len];
            let row_taps = &self.row_taps[oy];
            let col_taps = self.col_taps[ox].clone();
            for (ky, dst) in patch.chunks_exact_mut(row_len).enumerate() {
                if !row_taps.contains(&ky) {
                    dst.fill(T::ZERO);
                    continue;
                }
                let iy = rows.position(oy, ky) as usize;
                let src = &image[iy * cols.input * c..(iy + 1) * cols.input * c];
                dst[..col_taps.start * cg].fill(T::ZERO);
                dst[col_taps.end * cg..].fill(T::ZERO);
                if col_taps.is_empty() {
                    continue;
                }
                if contiguous {
                    let ix = cols.position(ox, col_taps.start) as usize;
                    dst[col_taps.start * c..col_taps.end * c].copy_from_slice(&src[ix * c..(ix + col_taps.len()) * c]);
                } else {
                    for kx in col_taps.clone() {
                        let ix = cols.position(ox, kx) as usize;
                        let from = ix * c + first_channel;
                        dst[kx * cg..(kx + 1) * cg].copy_from_slice(&src[from..from + cg]);
                    }
                }
            }
            ox += 1;
            if ox == cols.output {
                ox = 0;
                oy += 1;
                if oy == rows.output {
                    oy = 0;
                    n += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::window::testing::{assert_values, fs, ints, pool, run_with_pool, tensor, text, windowed, xs};
    use super::*;
    use crate::graph::spec::NodeSpec;
    use crate::ops::testing::run1;

    fn conv(dtype: DType, strides: [i64; 2], padding: &str) -> NodeSpec {
        windowed("Conv2D", dtype, strides, padding)
    }

    /// Runs Conv2D on the test ramps of these shapes.
    fn run(n: &NodeSpec, dtype: DType, x: [usize; 4], f: [usize; 4]) -> Result<Tensor> {
        let xv = xs(x.iter().product());
        let fv = fs(f.iter().product());
        run1(n, &[tensor(dtype, &x, &xv), tensor(dtype, &f, &fv)])
    }

    // Expected values: TensorFlow 2.21's Conv2D on CPU, on the same ramps.
    #[test]
    fn matches_tensorflow() {
        for dtype in [DType::F32, DType::F64] {
            let out = run(&conv(dtype, [1, 1], "VALID"), dtype, [2, 5, 5, 3], [3, 3, 3, 2]).unwrap();
            let want = [
                -12., -57., -34., -13., -34., 53., 10., -13., -1., -13., -12., 42., 10., -46., -12., -57., -34., -13.,
                -12., 42., 43., 9., 10., -13., -1., 20., 43., -24., 10., -46., -34., 53., -12., 42., 43., 9.,
            ];
            assert_values(&out, &[2, 3, 3, 2], &want, "VALID stride 1, batch 2");
            let out = run(&conv(dtype, [2, 2], "SAME"), dtype, [1, 5, 5, 3], [3, 3, 3, 2]).unwrap();
            let want = [-14., 8., -30., 28., 19., 0., 45., 5., -1., -13., 2., 3., 30., 6., -8., -16., 2., 26.];
            assert_values(&out, &[1, 3, 3, 2], &want, "SAME stride 2, odd size");
            let dilated = conv(dtype, [1, 1], "SAME").attr("dilations", ints(&[1, 2, 2, 1]));
            let out = run(&dilated, dtype, [1, 5, 4, 2], [2, 3, 2, 2]).unwrap();
            let want = [
                3., -2., 8., -46., 5., 0., 8., 8., -9., 8., 26., -10., -5., -15., 26., -55., -1., 2., 12., 6., -13.,
                -10., 18., -6., 18., -48., -13., 11., 12., -27., -1., 32., 20., -8., -5., 7., 6., -40., 1., 22.,
            ];
            assert_values(&out, &[1, 5, 4, 2], &want, "SAME dilation 2");
            let explicit = conv(dtype, [2, 1], "EXPLICIT").attr("explicit_paddings", ints(&[0, 0, 1, 2, 0, 1, 0, 0]));
            let out = run(&explicit, dtype, [1, 4, 5, 2], [3, 2, 2, 3]).unwrap();
            let want = [
                -3., -24., -9., 17., -20., 24., 15., 6., 24., -42., 21., -42., 26., -26., 21., -7., -5., -21., 12.,
                -24., 12., -2., 23., 12., 6., -18., 12., -10., 22., -9., -5., -31., -12., 27., -21., 21., 15., 0., 21.,
                -19., 43., -12., -13., -8., -12.,
            ];
            assert_values(&out, &[1, 3, 5, 3], &want, "EXPLICIT, strides 2x1");
            let out = run(&conv(dtype, [1, 1], "VALID"), dtype, [1, 3, 4, 4], [2, 2, 2, 6]).unwrap();
            let want = [
                -19., -11., -21., 21., 21., 21., 28., -7., 30., 10., -34., 3., -24., -3., -18., 21., -12., 18., 15.,
                -6., 18., -12., 21., -18., -4., 31., 3., 32., -23., 30., 21., -42., 21., -23., 32., -21.,
            ];
            assert_values(&out, &[1, 2, 3, 6], &want, "2 groups");
        }
    }

    #[test]
    fn int32_products_wrap_as_tensorflow_does() {
        let n = conv(DType::I32, [2, 2], "SAME");
        let x: Vec<f64> = xs(32).iter().map(|v| v * 100_000.0).collect();
        let f: Vec<f64> = fs(36).iter().map(|v| v * 10_000.0).collect();
        let out = run1(&n, &[tensor(DType::I32, &[1, 4, 4, 2], &x), tensor(DType::I32, &[3, 3, 2, 2], &f)]).unwrap();
        let want = [935228928, 834574848, -640261632, 820130816, -1705032704, -1345294336, -2115098112, 935228928];
        assert_eq!(out.as_slice::<i32>().unwrap(), &want);
    }

    /// A plain loop over TensorFlow's definition, computed independently of
    /// the kernel's geometry: the oracle for shapes too big to paste.
    struct Case {
        x: [usize; 4],
        f: [usize; 4],
        strides: [usize; 2],
        dilations: [usize; 2],
        padding: &'static str,
        explicit: [[usize; 2]; 2],
    }

    impl Case {
        fn new(
            x: [usize; 4],
            f: [usize; 4],
            strides: [usize; 2],
            dilations: [usize; 2],
            padding: &'static str,
        ) -> Case {
            Case { x, f, strides, dilations, padding, explicit: [[0, 0], [0, 0]] }
        }

        fn node(&self, dtype: DType) -> NodeSpec {
            let [s0, s1] = self.strides.map(|s| s as i64);
            let [d0, d1] = self.dilations.map(|d| d as i64);
            let mut n = conv(dtype, [s0, s1], self.padding).attr("dilations", ints(&[1, d0, d1, 1]));
            if self.padding == "EXPLICIT" {
                let [[t, b], [l, r]] = self.explicit.map(|p| p.map(|v| v as i64));
                n = n.attr("explicit_paddings", ints(&[0, 0, t, b, l, r, 0, 0]));
            }
            n
        }

        /// (output size, padding before) of axis `a`.
        fn axis(&self, a: usize) -> (usize, usize) {
            let (input, k, s, d) = (self.x[a + 1], self.f[a], self.strides[a], self.dilations[a]);
            let eff = (k - 1) * d + 1;
            match self.padding {
                "VALID" => ((input - eff) / s + 1, 0),
                "SAME" => {
                    let out = input.div_ceil(s);
                    (out, ((out - 1) * s + eff).saturating_sub(input) / 2)
                }
                _ => ((input + self.explicit[a][0] + self.explicit[a][1] - eff) / s + 1, self.explicit[a][0]),
            }
        }

        fn reference(&self, x: &[f64], f: &[f64]) -> (Vec<usize>, Vec<f64>) {
            let [n, h, w, c] = self.x;
            let [kh, kw, cf, o] = self.f;
            let (groups, ((oh, top), (ow, left))) = (c / cf, (self.axis(0), self.axis(1)));
            let og = o / groups;
            let mut out = vec![0.0; n * oh * ow * o];
            for b in 0..n {
                for oy in 0..oh {
                    for ox in 0..ow {
                        for oc in 0..o {
                            let mut sum = 0.0;
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (oy * self.strides[0] + ky * self.dilations[0]) as isize - top as isize;
                                    let ix = (ox * self.strides[1] + kx * self.dilations[1]) as isize - left as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                        continue;
                                    }
                                    for ci in 0..cf {
                                        let xi = ((b * h + iy as usize) * w + ix as usize) * c + (oc / og) * cf + ci;
                                        sum += x[xi] * f[((ky * kw + kx) * cf + ci) * o + oc];
                                    }
                                }
                            }
                            out[((b * oh + oy) * ow + ox) * o + oc] = sum;
                        }
                    }
                }
            }
            (vec![n, oh, ow, o], out)
        }

        fn check(&self, dtype: DType) {
            let (x, f) = (xs(self.x.iter().product()), fs(self.f.iter().product()));
            let (dims, want) = self.reference(&x, &f);
            let out = run1(&self.node(dtype), &[tensor(dtype, &self.x, &x), tensor(dtype, &self.f, &f)]).unwrap();
            let what = format!(
                "{dtype} x{:?} f{:?} s{:?} d{:?} {}",
                self.x, self.f, self.strides, self.dilations, self.padding
            );
            assert_values(&out, &dims, &want, &what);
        }
    }

    #[test]
    fn every_path_matches_the_definition() {
        let cases = [
            // 1x1, stride 1, unpadded: the input is the patch matrix.
            Case::new([2, 3, 5, 4], [1, 1, 4, 3], [1, 1], [1, 1], "VALID"),
            Case::new([1, 4, 4, 3], [1, 1, 3, 5], [1, 1], [1, 1], "SAME"),
            // 1x1 strided: through im2col.
            Case::new([2, 5, 5, 3], [1, 1, 3, 2], [2, 2], [1, 1], "VALID"),
            Case::new([1, 5, 6, 3], [1, 1, 3, 2], [2, 3], [1, 1], "SAME"),
            // One window over the whole image, as a dense layer.
            Case::new([3, 3, 4, 2], [3, 4, 2, 5], [1, 1], [1, 1], "VALID"),
            Case::new([2, 3, 4, 2], [3, 4, 2, 5], [2, 2], [1, 1], "VALID"),
            // Odd and even sizes, strides 1 to 3, dilations.
            Case::new([2, 7, 6, 3], [3, 3, 3, 4], [1, 1], [1, 1], "SAME"),
            Case::new([1, 8, 8, 2], [3, 3, 2, 3], [2, 2], [1, 1], "SAME"),
            Case::new([1, 8, 7, 2], [2, 2, 2, 3], [2, 2], [1, 1], "SAME"),
            Case::new([2, 9, 7, 2], [3, 2, 2, 2], [3, 2], [2, 3], "SAME"),
            Case::new([1, 9, 9, 3], [3, 3, 3, 2], [1, 1], [3, 3], "VALID"),
            Case::new([1, 4, 4, 1], [5, 5, 1, 2], [1, 1], [1, 1], "SAME"),
            Case { explicit: [[3, 0], [1, 4]], ..Case::new([1, 5, 4, 2], [2, 3, 2, 2], [2, 3], [2, 1], "EXPLICIT") },
            // Groups: 2, and one per channel.
            Case::new([2, 5, 5, 6], [3, 3, 3, 4], [1, 1], [1, 1], "SAME"),
            Case::new([1, 6, 5, 4], [3, 2, 1, 8], [2, 1], [1, 2], "VALID"),
            Case::new([1, 3, 3, 4], [1, 1, 2, 2], [1, 1], [1, 1], "VALID"),
        ];
        for case in &cases {
            case.check(DType::F32);
            case.check(DType::F64);
        }
        cases[6].check(DType::I32);
    }

    #[test]
    fn large_convolutions_split_into_blocks_and_threads_without_changing_bits() {
        // 1800 pixels of 576-element patches: several patch blocks (more in
        // f64), and both split across 3 threads.
        let case = Case::new([2, 30, 30, 64], [3, 3, 64, 8], [1, 1], [1, 1], "SAME");
        case.check(DType::F32);
        case.check(DType::F64);
        let pool = pool(3);
        let fill = |len: usize, seed: usize| -> Vec<f64> {
            (0..len).map(|i| ((i * 37 + seed * 11) % 101) as f64 / 7.3 - 6.1).collect()
        };
        for (x, f, strides, padding) in [
            ([2, 30, 30, 64], [3, 3, 64, 32], [1, 1], "SAME"),
            ([2, 28, 28, 64], [1, 1, 64, 128], [1, 1], "VALID"),
            ([1, 61, 59, 32], [3, 3, 16, 32], [2, 2], "SAME"),
        ] {
            let node = conv(DType::F32, strides, padding);
            let inputs = [
                tensor(DType::F32, &x, &fill(x.iter().product(), 1)),
                tensor(DType::F32, &f, &fill(f.iter().product(), 2)),
            ];
            let whole = run1(&node, &inputs).unwrap();
            let before = pool.count();
            let split = run_with_pool(&node, &inputs, &pool);
            assert!(pool.count() > before, "x{x:?} f{f:?} was not split");
            assert_eq!(split.as_bytes(), whole.as_bytes(), "x{x:?} f{f:?}");
        }
    }

    #[test]
    fn empty_outputs_and_errors() {
        let f32s = DType::F32;
        // An empty batch, no output channels, a window one wider than the
        // input: empty outputs, as TensorFlow gives.
        assert_eq!(run(&conv(f32s, [1, 1], "VALID"), f32s, [0, 5, 5, 1], [2, 2, 1, 3]).unwrap().dims(), &[0, 4, 4, 3]);
        assert_eq!(run(&conv(f32s, [1, 1], "VALID"), f32s, [1, 5, 5, 1], [2, 2, 1, 0]).unwrap().dims(), &[1, 4, 4, 0]);
        assert_eq!(run(&conv(f32s, [1, 1], "VALID"), f32s, [1, 5, 5, 1], [6, 1, 1, 1]).unwrap().dims(), &[1, 0, 5, 1]);
        // No input channels: zeros.
        let out = run(&conv(f32s, [1, 1], "VALID"), f32s, [1, 5, 5, 0], [2, 2, 2, 3]).unwrap();
        assert_values(&out, &[1, 4, 4, 3], &[0.0; 48], "input depth 0");
        let err = |n: &NodeSpec, x: [usize; 4], f: [usize; 4]| run(n, f32s, x, f).unwrap_err().into_message();
        let valid = conv(f32s, [1, 1], "VALID");
        assert_eq!(
            err(&valid, [1, 5, 5, 1], [7, 1, 1, 1]),
            "Computed output size would be negative: -1 [input_size: 5, effective_filter_size: 7, stride: 1]"
        );
        assert_eq!(
            err(&valid, [1, 4, 4, 3], [1, 1, 2, 4]),
            "input depth must be evenly divisible by filter depth: 3 vs 2"
        );
        assert_eq!(
            err(&valid, [1, 4, 4, 4], [1, 1, 2, 3]),
            "output depth must be evenly divisible by number of groups: 3 vs 2"
        );
        assert_eq!(err(&valid, [1, 4, 4, 2], [1, 1, 0, 3]), "filter depth must be strictly positive, got 0");
        assert_eq!(
            err(&valid, [1, 5, 5, 1], [0, 2, 1, 3]),
            "filter must not have zero elements (i.e. all dimensions must be non-zero)"
        );
        let e = run1(&valid, &[tensor(f32s, &[5, 5, 1], &[0.; 25]), tensor(f32s, &[1, 1, 1, 1], &[1.])]).unwrap_err();
        assert_eq!(e.message, "convolution input must be 4-dimensional: [5,5,1]");
        let e = run1(&valid, &[tensor(f32s, &[1, 5, 5, 1], &[0.; 25]), tensor(f32s, &[1, 1, 1], &[1.])]).unwrap_err();
        assert_eq!(e.message, "convolution filter must be 4-dimensional: [1,1,1]");
        // Attributes are checked when the kernel is built.
        let build = |n: NodeSpec| run(&n, f32s, [1, 4, 4, 1], [1, 1, 1, 1]).unwrap_err();
        let nchw = build(valid.clone().attr("data_format", text("NCHW")));
        assert_eq!(nchw.code, crate::error::Code::Unimplemented);
        assert!(
            nchw.message.starts_with("Conv2D on CPU supports only data_format NHWC")
                && nchw.message.contains("this node has data_format NCHW"),
            "{nchw}"
        );
        let bad = build(conv(f32s, [1, 1], "FULL"));
        assert_eq!(
            bad.message,
            "Value for attr 'padding' of \"FULL\" is not in the list of allowed values: \"SAME\", \"VALID\", \"EXPLICIT\""
        );
        let cases = [
            (valid.clone().attr("data_format", text("NWHC")), "Value for attr 'data_format' of \"NWHC\""),
            (valid.clone().attr("strides", ints(&[1, 1, 1])), "Sliding window strides field must specify 4 dimensions"),
            (
                valid.clone().attr("dilations", ints(&[1, 1])),
                "Sliding window dilations field must specify 4 dimensions",
            ),
            (valid.clone().attr("strides", ints(&[2, 1, 1, 1])), "does not yet support strides in the batch and depth"),
            (valid.clone().attr("strides", ints(&[1, 0, 1, 1])), "Row and column strides should be larger than 0."),
            (
                valid.clone().attr("dilations", ints(&[1, 1, 1, 2])),
                "does not yet support dilations in the batch and depth",
            ),
            (valid.clone().attr("dilations", ints(&[1, 0, 1, 1])), "Dilated rates should be larger than 0."),
            (
                conv(f32s, [1, 1], "SAME").attr("explicit_paddings", ints(&[0, 0, 1, 1, 1, 1, 0, 0])),
                "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT",
            ),
            (
                conv(f32s, [1, 1], "EXPLICIT").attr("explicit_paddings", ints(&[0, 0, 1, 1, 1, 1])),
                "explicit_paddings attribute must contain 8 values, but got: 6",
            ),
            (
                conv(f32s, [1, 1], "EXPLICIT").attr("explicit_paddings", ints(&[0, 0, -1, 1, 1, 1, 0, 0])),
                "All elements of explicit_paddings must be nonnegative",
            ),
            (
                conv(f32s, [1, 1], "EXPLICIT").attr("explicit_paddings", ints(&[1, 0, 1, 1, 1, 1, 0, 0])),
                "Nonzero explicit padding in the batch or depth dimensions is not supported",
            ),
        ];
        for (node, want) in cases {
            let e = build(node);
            assert!(e.message.contains(want), "{e} does not say {want}");
        }
        for dtype in [DType::I64, DType::Bool] {
            let e = run1(&conv(dtype, [1, 1], "VALID"), &[]).unwrap_err();
            assert!(e.message.contains("Conv2D does not support dtype"), "{e}");
        }
    }

    /// Conv2D against one plain gemm of the same `[m, k, n]`, single
    /// thread: what im2col and blocking cost. Timing only, so ignored; run
    /// `cargo test --release --lib conv_against_plain_gemm -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn conv_against_plain_gemm() {
        let best = |f: &mut dyn FnMut()| {
            (0..7)
                .map(|_| {
                    let start = std::time::Instant::now();
                    f();
                    start.elapsed()
                })
                .min()
                .unwrap_or_default()
        };
        for (x, f, stride) in [
            ([1, 56, 56, 64], [3, 3, 64, 64], 1),
            ([1, 112, 112, 32], [3, 3, 32, 64], 2),
            ([1, 28, 28, 128], [1, 1, 128, 256], 1),
            ([8, 14, 14, 256], [3, 3, 256, 256], 1),
        ] {
            let node = conv(DType::F32, [stride, stride], "SAME");
            let inputs =
                [tensor(DType::F32, &x, &xs(x.iter().product())), tensor(DType::F32, &f, &fs(f.iter().product()))];
            let conv_time = best(&mut || drop(run1(&node, &inputs).unwrap()));
            let out = run1(&node, &inputs).unwrap();
            let (m, k, n) = (out.num_elements() / f[3], f[0] * f[1] * f[2], f[3]);
            let a = vec![0.5f32; m * k];
            let mut c = vec![0f32; m * n];
            let filter = inputs[1].as_slice::<f32>().unwrap();
            let gemm_time = best(&mut || {
                f32::gemm_over([m, k, n], Strided::row_major(&a, k), Strided::row_major(filter, n), &mut c)
            });
            println!(
                "x{x:?} f{f:?} s{stride}: [m,k,n]=[{m},{k},{n}] conv {conv_time:?} gemm {gemm_time:?} ratio {:.2}",
                conv_time.as_secs_f64() / gemm_time.as_secs_f64()
            );
        }
    }
}
