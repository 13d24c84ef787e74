//! DepthwiseConv2dNative: NHWC input `[n, h, w, c]`, filter
//! `[kh, kw, c, m]` (m the channel multiplier), output `[n, oh, ow, c * m]`
//! where output channel `ci * m + j` is input channel `ci` convolved with
//! `filter[.., .., ci, j]`; strides, VALID / SAME / EXPLICIT padding and
//! dilations; float32 and float64.
//!
//! Owns: this kernel. Must not hold state beyond parsed attributes, and
//! must not spawn threads: large convolutions are split by output lines
//! over the device's intra-op pool.
//!
//! Each output pixel accumulates its in-bounds taps in row-major filter
//! order, as a run over the `c * m` channels that the compiler vectorises
//! (taps in the padding add nothing, so they are skipped).
//!
//! A deliberate superset of TensorFlow: its kernel refuses dilations other
//! than 1 and unequal row and column strides (Unimplemented, on CPU and
//! GPU). Keras never emits either (it wraps dilated depthwise convolutions
//! in SpaceToBatchND instead), and the result is well defined, so this
//! kernel computes it. Only NHWC runs, as on TensorFlow's CPU.

use super::window::{Axis, Padding, Work, explicit_paddings, nhwc_list, positive, require_nhwc, split_lines};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::math::{FLOAT, binary_signature};
use crate::ops::numeric::Num;
use crate::ops::registry::OpDef;
use crate::ops::{IntraOpPool, KernelInit, OpContext, OpKernel, Value, unsupported_dtype};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[OpDef::kernel("DepthwiseConv2dNative", binary_signature, build_depthwise)];

/// A depthwise convolution with fewer multiply-adds than this runs on the
/// thread that made it ready.

#[derive(Debug, Clone, Copy)]
struct DepthwiseAttrs {
    strides: [usize; 2],
    dilations: [usize; 2],
    padding: Padding,
    explicit: [[i64; 2]; 2],
}

impl DepthwiseAttrs {
    fn from_node(node: &NodeSpec) -> Result<DepthwiseAttrs> {
        let strides = nhwc_list(node, "strides", &[], "strides")?;
        require_nhwc(node, &["NHWC", "NCHW"], Status::unimplemented)?;
        if strides[0] != 1 || strides[3] != 1 {
            bail!(
                invalid_argument,
                "Current implementation does not yet support strides in the batch and depth dimensions."
            );
        }
        let bad_stride = |s: i64| move || Status::invalid_argument(format!("Stride must be > 0, but got {s}"));
        let strides = [positive(strides[1], bad_stride(strides[1]))?, positive(strides[2], bad_stride(strides[2]))?];
        let padding = Padding::from_node(node, &[Padding::Same, Padding::Valid, Padding::Explicit])?;
        let explicit = explicit_paddings(node, padding, true)?;
        let dilations = nhwc_list(node, "dilations", &[1, 1, 1, 1], "dilations")?;
        if dilations[0] != 1 || dilations[3] != 1 {
            bail!(
                unimplemented,
                "Current implementation does not yet support dilations in the batch and depth dimensions."
            );
        }
        let bad_dilation = || Status::invalid_argument("Dilated rates should be larger than 0.");
        let dilations = [positive(dilations[1], bad_dilation)?, positive(dilations[2], bad_dilation)?];
        Ok(DepthwiseAttrs { strides, dilations, padding, explicit })
    }
}

type DepthwiseFn = fn(&DepthwiseAttrs, &Tensor, &Tensor, Option<&dyn IntraOpPool>) -> Result<Tensor>;

struct DepthwiseKernel {
    attrs: DepthwiseAttrs,
    compute: DepthwiseFn,
}

fn build_depthwise(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: DepthwiseFn = match dtype {
        DType::F32 => depthwise::<f32>,
        DType::F64 => depthwise::<f64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(Box::new(DepthwiseKernel { attrs: DepthwiseAttrs::from_node(init.node)?, compute }))
}

impl OpKernel for DepthwiseKernel {
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

fn depthwise<T: Num>(
    attrs: &DepthwiseAttrs,
    input: &Tensor,
    filter: &Tensor,
    pool: Option<&dyn IntraOpPool>,
) -> Result<Tensor> {
    let &[batch, h, w, c] = input.dims() else {
        bail!(invalid_argument, "input must be 4-dimensional: {}", input.shape());
    };
    let &[kh, kw, filter_depth, multiplier] = filter.dims() else {
        bail!(invalid_argument, "filter must be 4-dimensional: {}", filter.shape());
    };
    if filter_depth != c {
        bail!(invalid_argument, "input and filter must have the same depth: {c} vs {filter_depth}");
    }
    let rows = Axis::new(h, kh, attrs.strides[0], attrs.dilations[0], attrs.padding, attrs.explicit[0])?;
    let cols = Axis::new(w, kw, attrs.strides[1], attrs.dilations[1], attrs.padding, attrs.explicit[1])?;
    let out_depth = c * multiplier;
    let out_dims = [batch, rows.output, cols.output, out_depth];
    let (x, f) = (input.as_slice::<T>()?, filter.as_slice::<T>()?);
    let (row_taps, col_taps) = (rows.all_taps(), cols.all_taps());
    let line_len = cols.output * out_depth;
    let work = Work { per_line: line_len * kh * kw, min_lines: 1 };
    // The output starts zeroed: every pixel is a sum from zero.
    Tensor::build::<T>(out_dims, |out| {
        split_lines(pool, out, line_len, work, &|lines, block| {
            for (line, out_line) in lines.zip(block.chunks_exact_mut(line_len)) {
                let (n, oy) = (line / rows.output, line % rows.output);
                let image = &x[n * h * w * c..(n + 1) * h * w * c];
                for (ox, out_px) in out_line.chunks_exact_mut(out_depth).enumerate() {
                    for ky in row_taps[oy].clone() {
                        let iy = rows.position(oy, ky) as usize;
                        for kx in col_taps[ox].clone() {
                            let ix = cols.position(ox, kx) as usize;
                            let in_px = &image[(iy * w + ix) * c..(iy * w + ix + 1) * c];
                            let tap = &f[(ky * kw + kx) * out_depth..(ky * kw + kx + 1) * out_depth];
                            accumulate(out_px, in_px, tap, multiplier);
                        }
                    }
                }
            }
        })
    })
}

/// `out[ci * m + j] += x[ci] * tap[ci * m + j]`.
#[inline(always)]
fn accumulate<T: Num>(out: &mut [T], x: &[T], tap: &[T], multiplier: usize) {
    if multiplier == 1 {
        for ((o, &v), &t) in out.iter_mut().zip(x).zip(tap) {
            *o = o.add(v.mul(t));
        }
        return;
    }
    for ((o, &v), t) in out.chunks_exact_mut(multiplier).zip(x).zip(tap.chunks_exact(multiplier)) {
        for (o, &t) in o.iter_mut().zip(t) {
            *o = o.add(v.mul(t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::window::testing::{assert_values, fs, ints, pool, run_with_pool, tensor, text, windowed, xs};
    use super::*;
    use crate::ops::testing::run1;

    fn dw(dtype: DType, strides: [i64; 2], padding: &str) -> NodeSpec {
        windowed("DepthwiseConv2dNative", dtype, strides, padding)
    }

    fn run(n: &NodeSpec, dtype: DType, x: [usize; 4], f: [usize; 4]) -> Result<Tensor> {
        let xv = xs(x.iter().product());
        let fv = fs(f.iter().product());
        run1(n, &[tensor(dtype, &x, &xv), tensor(dtype, &f, &fv)])
    }

    /// The definition, looped plainly (no padding geometry shared with the
    /// kernel): output channel `ci * m + j` of pixel (oy, ox).
    #[allow(clippy::too_many_arguments)]
    fn reference(
        x: &[f64],
        [n, h, w, c]: [usize; 4],
        f: &[f64],
        [kh, kw, _, m]: [usize; 4],
        strides: [usize; 2],
        dilations: [usize; 2],
        pads: [usize; 2],
        [oh, ow]: [usize; 2],
    ) -> Vec<f64> {
        let mut out = vec![0.0; n * oh * ow * c * m];
        for b in 0..n {
            for oy in 0..oh {
                for ox in 0..ow {
                    for ci in 0..c {
                        for j in 0..m {
                            let mut sum = 0.0;
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (oy * strides[0] + ky * dilations[0]) as isize - pads[0] as isize;
                                    let ix = (ox * strides[1] + kx * dilations[1]) as isize - pads[1] as isize;
                                    if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                                        let xv = x[((b * h + iy as usize) * w + ix as usize) * c + ci];
                                        sum += xv * f[((ky * kw + kx) * c + ci) * m + j];
                                    }
                                }
                            }
                            out[(((b * oh + oy) * ow + ox) * c + ci) * m + j] = sum;
                        }
                    }
                }
            }
        }
        out
    }

    // Expected values: TensorFlow 2.21's DepthwiseConv2dNative on CPU.
    #[test]
    fn matches_tensorflow() {
        for dtype in [DType::F32, DType::F64] {
            let out = run(&dw(dtype, [1, 1], "VALID"), dtype, [2, 4, 5, 3], [3, 3, 3, 1]).unwrap();
            let want = [
                24., 15., -9., -22., -16., -9., -24., -14., 24., 25., 3., -9., -10., -28., -9., -12., -48., -9., 6.,
                33., -9., 37., 24., -9., 24., 15., -9., -15., 21., 24., -6., 12., -9., 25., 3., -9.,
            ];
            assert_values(&out, &[2, 2, 3, 3], &want, "VALID, batch 2");
            let out = run(&dw(dtype, [2, 2], "SAME"), dtype, [1, 5, 5, 2], [3, 3, 2, 2]).unwrap();
            let want = [
                0., -3., 27., -18., 39., -25., -30., 13., -14., -2., 25., 4., -14., 28., -17., -12., 9., -7., -5., 45.,
                -11., -9., -12., -11., -7., 1., -11., -19., 16., -19., 6., 15., -2., 30., -4., -14.,
            ];
            assert_values(&out, &[1, 3, 3, 4], &want, "SAME stride 2, multiplier 2");
            let explicit = dw(dtype, [1, 1], "EXPLICIT").attr("explicit_paddings", ints(&[0, 0, 2, 0, 1, 1, 0, 0]));
            let out = run(&explicit, dtype, [1, 3, 3, 2], [2, 2, 2, 3]).unwrap();
            let want = [
                0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 5.,
                -20., 0., -8., 2., -6., 22., -13., 15., -16., 1., -9., 7., 2., 6., 22., -13., 24., -4., 1., -3., -6.,
                6., -9., -14., 26., -15., -2., 8., 0., -11., -28., -18., -25., 25., -15., 21., -18., 15., 9., -18., 9.,
                3., 3., 3., 2., 7., -6., 6., 0., 12., 8., -2., 6., -25., 46., -18., -11., 17., -9., -15., -21., -18.,
                -21., -15., -18., 13., -7., 9., 28., -13., 27.,
            ];
            assert_values(&out, &[1, 4, 4, 6], &want, "EXPLICIT, multiplier 3");
            let out = run(&dw(dtype, [1, 1], "SAME"), dtype, [1, 4, 4, 1], [2, 2, 1, 1]).unwrap();
            let want = [25., -26., 22., -5., -25., 23., 16., 0., 24., -27., -23., 5., -10., 22., -1., -1.];
            assert_values(&out, &[1, 4, 4, 1], &want, "SAME, even window pads after");
        }
    }

    #[test]
    fn dilations_and_unequal_strides_match_the_definition() {
        // (x, f, strides, dilations, padding, explicit [top, left], output)
        let cases = [
            ([1, 7, 6, 2], [3, 2, 2, 2], [1, 1], [2, 3], "VALID", [0, 0], [3, 3]),
            ([2, 6, 7, 3], [3, 3, 3, 1], [2, 1], [2, 2], "SAME", [1, 2], [3, 7]),
            ([1, 5, 5, 2], [2, 3, 2, 3], [1, 2], [1, 1], "SAME", [0, 1], [5, 3]),
        ];
        for (x, f, strides, dilations, padding, pads, out_hw) in cases {
            let n = dw(DType::F64, strides.map(|s| s as i64), padding)
                .attr("dilations", ints(&[1, dilations[0] as i64, dilations[1] as i64, 1]));
            let (xv, fv) = (xs(x.iter().product()), fs(f.iter().product()));
            let want = reference(&xv, x, &fv, f, strides, dilations, pads, out_hw);
            let out = run(&n, DType::F64, x, f).unwrap();
            assert_values(&out, &[x[0], out_hw[0], out_hw[1], x[3] * f[3]], &want, &format!("{x:?} {f:?}"));
        }
    }

    #[test]
    fn threads_split_lines_without_changing_bits() {
        let pool = pool(3);
        let (x, f) = ([2, 40, 40, 32], [3, 3, 32, 2]);
        let fill = |len: usize, seed: usize| -> Vec<f64> {
            (0..len).map(|i| ((i * 37 + seed * 11) % 101) as f64 / 7.3 - 6.1).collect()
        };
        let n = dw(DType::F32, [1, 1], "SAME");
        let inputs = [
            tensor(DType::F32, &x, &fill(x.iter().product(), 1)),
            tensor(DType::F32, &f, &fill(f.iter().product(), 2)),
        ];
        let whole = run1(&n, &inputs).unwrap();
        let split = run_with_pool(&n, &inputs, &pool);
        assert!(pool.count() > 0, "not split");
        assert_eq!(split.as_bytes(), whole.as_bytes());
    }

    #[test]
    fn empty_outputs_and_errors() {
        let f = DType::F32;
        let valid = dw(f, [1, 1], "VALID");
        assert_eq!(run(&valid, f, [1, 5, 5, 4], [2, 2, 4, 0]).unwrap().dims(), &[1, 4, 4, 0]);
        assert_eq!(run(&valid, f, [0, 5, 5, 4], [2, 2, 4, 1]).unwrap().dims(), &[0, 4, 4, 4]);
        // A filter with no rows sums nothing, as in TensorFlow.
        let out = run(&valid, f, [1, 3, 3, 1], [0, 2, 1, 1]).unwrap();
        assert_values(&out, &[1, 4, 2, 1], &[0.0; 8], "empty window");
        let err = |n: &NodeSpec, x: [usize; 4], fd: [usize; 4]| run(n, f, x, fd).unwrap_err().into_message();
        assert_eq!(err(&valid, [1, 5, 5, 4], [2, 2, 3, 2]), "input and filter must have the same depth: 4 vs 3");
        assert_eq!(
            err(&valid, [1, 5, 5, 4], [7, 2, 4, 2]),
            "Computed output size would be negative: -1 [input_size: 5, effective_filter_size: 7, stride: 1]"
        );
        let e = run1(&valid, &[tensor(f, &[5, 5, 4], &[0.; 100]), tensor(f, &[1, 1, 4, 1], &[1.; 4])]).unwrap_err();
        assert_eq!(e.message, "input must be 4-dimensional: [5,5,4]");
        let e = run1(&valid, &[tensor(f, &[1, 5, 5, 4], &[0.; 100]), tensor(f, &[1, 4, 1], &[1.; 4])]).unwrap_err();
        assert_eq!(e.message, "filter must be 4-dimensional: [1,4,1]");
        let build = |n: NodeSpec| run(&n, f, [1, 4, 4, 1], [1, 1, 1, 1]).unwrap_err();
        let nchw = build(valid.clone().attr("data_format", text("NCHW")));
        assert_eq!(nchw.code, crate::error::Code::Unimplemented);
        assert!(nchw.message.contains("supports only data_format NHWC") && nchw.message.contains("NCHW"), "{nchw}");
        let cases = [
            (dw(f, [1, 1], "FULL"), "Value for attr 'padding' of \"FULL\""),
            (valid.clone().attr("strides", ints(&[1, 1, 1])), "Sliding window strides field must specify 4 dimensions"),
            (valid.clone().attr("strides", ints(&[1, 1, 1, 2])), "does not yet support strides in the batch and depth"),
            (valid.clone().attr("strides", ints(&[1, 0, 1, 1])), "Stride must be > 0, but got 0"),
            (
                valid.clone().attr("dilations", ints(&[2, 1, 1, 1])),
                "does not yet support dilations in the batch and depth",
            ),
            (valid.clone().attr("dilations", ints(&[1, 1, 0, 1])), "Dilated rates should be larger than 0."),
            (
                dw(f, [1, 1], "SAME").attr("explicit_paddings", ints(&[0, 0, 1, 1, 1, 1, 0, 0])),
                "explicit_paddings attribute must be empty",
            ),
        ];
        for (node, want) in cases {
            let e = build(node);
            assert!(e.message.contains(want), "{e} does not say {want}");
        }
        for dtype in [DType::I32, DType::I64, DType::Bool] {
            let e = run1(&dw(dtype, [1, 1], "VALID"), &[]).unwrap_err();
            assert!(e.message.contains("DepthwiseConv2dNative does not support dtype"), "{e}");
        }
    }
}
