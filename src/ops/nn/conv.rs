//! Convolution and pooling over NHWC images: `Conv2D` (im2col + gemm, a
//! 1×1 stride-1 convolution a plain gemm), `DepthwiseConv2dNative`,
//! `MaxPool`, `AvgPool`, and `FusedBatchNorm`/`V2`/`V3` in inference mode.
//!
//! Owns: these kernels and the window geometry TensorFlow uses (VALID,
//! SAME, EXPLICIT padding; strides; dilations). Must not hold state beyond
//! parsed attributes. NCHW is refused, as TensorFlow's CPU kernels refuse
//! it, with an error that says so.

use super::super::matmul::{Gemm, Strided};
use super::super::numeric::Float;
use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_int_list_or, unsupported_dtype};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Conv2D", conv_signature, build_conv::<false>),
    OpDef::kernel("DepthwiseConv2dNative", conv_signature, build_conv::<true>),
    OpDef::kernel("MaxPool", pool_signature, build_pool::<true>),
    OpDef::kernel("AvgPool", pool_signature, build_pool::<false>),
    OpDef::kernel("FusedBatchNorm", batch_norm_signature::<5>, build_batch_norm),
    OpDef::kernel("FusedBatchNormV2", batch_norm_signature::<5>, build_batch_norm),
    OpDef::kernel("FusedBatchNormV3", batch_norm_signature::<6>, build_batch_norm),
];

pub(super) const FLOATS: &[DType] = &[DType::F32, DType::F64];

fn conv_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, t], vec![t]))
}

fn pool_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype_or("T", DType::F32)?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

/// How one spatial axis is covered by windows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Axis {
    pub input: usize,
    pub output: usize,
    /// Padding before the first element (windows may start above it).
    pub before: usize,
    pub window: usize,
    pub stride: usize,
    pub dilation: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Padding {
    Valid,
    Same,
    /// (before, after) per spatial axis.
    Explicit([[usize; 2]; 2]),
}

/// TensorFlow's output size and leading pad for one axis.
pub(super) fn axis(
    input: usize,
    window: usize,
    stride: usize,
    dilation: usize,
    padding: Padding,
    index: usize,
) -> Result<Axis> {
    let effective = (window - 1) * dilation + 1;
    let (output, before) = match padding {
        Padding::Valid => {
            if input < effective {
                bail!(
                    invalid_argument,
                    "Computed output size would be negative: input {input}, window {effective} (VALID padding)"
                );
            }
            ((input - effective) / stride + 1, 0)
        }
        Padding::Same => {
            let output = input.div_ceil(stride);
            let total = ((output.saturating_sub(1)) * stride + effective).saturating_sub(input);
            (output, total / 2)
        }
        Padding::Explicit(pads) => {
            let [before, after] = pads[index];
            let padded = input + before + after;
            if padded < effective {
                bail!(
                    invalid_argument,
                    "Computed output size would be negative: padded input {padded}, window {effective}"
                );
            }
            ((padded - effective) / stride + 1, before)
        }
    };
    Ok(Axis { input, output, before, window, stride, dilation })
}

impl Axis {
    /// The input position of window element `k` of output `o`, if inside.
    #[inline(always)]
    pub fn at(&self, o: usize, k: usize) -> Option<usize> {
        (o * self.stride + k * self.dilation).checked_sub(self.before).filter(|&i| i < self.input)
    }
}

/// The parsed window attrs of a conv or pool: strides, dilations, padding,
/// all NHWC.
pub(super) struct Window {
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    pub padding: Padding,
}

fn nhwc_only(node: &NodeSpec) -> Result<()> {
    let format = node.attr_str_or("data_format", "NHWC")?;
    if format != "NHWC" {
        bail!(
            unimplemented,
            "data_format {format} is not supported: the CPU kernels run NHWC only (as TensorFlow's CPU kernels do); export the graph with data_format NHWC"
        );
    }
    Ok(())
}

/// A 4-element NHWC attr list whose batch and channel entries are 1.
fn spatial_pair(node: &NodeSpec, key: &str) -> Result<[usize; 2]> {
    let v = attr_int_list_or(node, key, &[1, 1, 1, 1])?;
    if v.len() != 4 || v[0] != 1 || v[3] != 1 || v[1] < 1 || v[2] < 1 {
        bail!(invalid_argument, "{key} must be 4 positive values [1, h, w, 1] in NHWC, got {v:?}");
    }
    Ok([v[1] as usize, v[2] as usize])
}

pub(super) fn window_of(node: &NodeSpec, dilations: bool) -> Result<Window> {
    nhwc_only(node)?;
    let strides = spatial_pair(node, "strides")?;
    let dilations = if dilations { spatial_pair(node, "dilations")? } else { [1, 1] };
    let padding = match node.attr_str_or("padding", "")?.as_str() {
        "VALID" => Padding::Valid,
        "SAME" => Padding::Same,
        "EXPLICIT" => {
            let p = attr_int_list_or(node, "explicit_paddings", &[])?;
            if p.len() != 8 || p.iter().any(|&x| x < 0) || p[0] != 0 || p[1] != 0 || p[6] != 0 || p[7] != 0 {
                bail!(
                    invalid_argument,
                    "explicit_paddings must be 8 non-negative values, zero for batch and depth, got {p:?}"
                );
            }
            Padding::Explicit([[p[2] as usize, p[3] as usize], [p[4] as usize, p[5] as usize]])
        }
        other => bail!(invalid_argument, "padding must be VALID, SAME or EXPLICIT, got '{other}'"),
    };
    Ok(Window { strides, dilations, padding })
}

struct Conv {
    window: Window,
    depthwise: bool,
    compute: fn(&Conv, &mut OpContext<'_>) -> Result<()>,
}

fn build_conv<const DEPTHWISE: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let window = window_of(init.node, true)?;
    let dtype = init.node.attr_dtype("T")?;
    let compute = match dtype {
        DType::F32 => conv::<f32>,
        DType::F64 => conv::<f64>,
        other => return Err(unsupported_dtype(&init.node.op, other, FLOATS)),
    };
    Ok(Box::new(Conv { window, depthwise: DEPTHWISE, compute }))
}

impl OpKernel for Conv {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(self, ctx)
    }

    fn is_expensive(&self) -> bool {
        true
    }

    fn worth_a_thread(&self, inputs: &[Option<crate::ops::Value>], lent: &[Option<crate::ops::Value>]) -> bool {
        let size = |i: usize| {
            inputs
                .get(i)
                .and_then(|v| v.as_ref())
                .or_else(|| lent.get(i).and_then(|v| v.as_ref()))
                .and_then(|v| v.as_tensor())
                .map_or(0, |t| t.num_elements())
        };
        size(0) * size(1).max(1) >= 1 << 16
    }
}

fn conv<T: Float + Gemm>(k: &Conv, ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let f = ctx.input(1)?;
    let (xd, fd) = (x.dims(), f.dims());
    if xd.len() != 4 || fd.len() != 4 {
        bail!(invalid_argument, "input and filter must be 4-D (NHWC, HWIO), got {xd:?} and {fd:?}");
    }
    let [n, h, w, c] = [xd[0], xd[1], xd[2], xd[3]];
    let [kh, kw, fc, m] = [fd[0], fd[1], fd[2], fd[3]];
    if k.depthwise && fc != c {
        bail!(invalid_argument, "input depth {c} must equal filter's in_channels {fc}");
    }
    if !k.depthwise && (fc == 0 || c % fc != 0) {
        bail!(invalid_argument, "input depth must be evenly divisible by filter depth: {c} vs {fc}");
    }
    if !k.depthwise && fc != c {
        return Err(Status::unimplemented(format!(
            "grouped convolution (input depth {c}, filter depth {fc}) is not supported"
        )));
    }
    let win = &k.window;
    let ay = axis(h, kh, win.strides[0], win.dilations[0], win.padding, 0)?;
    let ax = axis(w, kw, win.strides[1], win.dilations[1], win.padding, 1)?;
    let out_c = if k.depthwise { c * m } else { m };
    let xs = x.as_slice::<T>()?;
    let fs = f.as_slice::<T>()?;
    let rows = ay.output * ax.output;
    let out = if k.depthwise {
        Tensor::build::<T>([n, ay.output, ax.output, out_c], |o| depthwise(xs, fs, o, [n, h, w, c], m, &ay, &ax))?
    } else {
        let patch = kh * kw * c;
        let direct_gemm = kh == 1
            && kw == 1
            && ay.stride == 1
            && ax.stride == 1
            && ay.before == 0
            && ax.before == 0
            && ay.output == h
            && ax.output == w;
        Tensor::build::<T>([n, ay.output, ax.output, out_c], |o| {
            if direct_gemm {
                T::gemm_over([n * h * w, c, m], Strided::row_major(xs, c), Strided::row_major(fs, m), o);
                return;
            }
            let mut cols = vec![T::ZERO; rows * patch];
            for b in 0..n {
                im2col(&xs[b * h * w * c..][..h * w * c], w, c, &ay, &ax, &mut cols);
                let dst = &mut o[b * rows * m..][..rows * m];
                T::gemm_over([rows, patch, m], Strided::row_major(&cols, patch), Strided::row_major(fs, m), dst);
            }
        })?
    };
    ctx.set_output(0, out);
    Ok(())
}

/// The patch matrix of one image: row `oy · out_w + ox` holds the window
/// of that output position, `(ky, kx, channel)` in filter order, zeros
/// where the window leaves the image.
pub(super) fn im2col<T: Float>(image: &[T], w: usize, c: usize, ay: &Axis, ax: &Axis, cols: &mut [T]) {
    let patch = ay.window * ax.window * c;
    for oy in 0..ay.output {
        for ox in 0..ax.output {
            let row = &mut cols[(oy * ax.output + ox) * patch..][..patch];
            for ky in 0..ay.window {
                for kx in 0..ax.window {
                    let dst = &mut row[(ky * ax.window + kx) * c..][..c];
                    match (ay.at(oy, ky), ax.at(ox, kx)) {
                        (Some(iy), Some(ix)) => dst.copy_from_slice(&image[(iy * w + ix) * c..][..c]),
                        _ => dst.fill(T::ZERO),
                    }
                }
            }
        }
    }
}

/// Output channel `ch * m + q` is input channel `ch` convolved with filter
/// `[.., .., ch, q]`.
fn depthwise<T: Float>(xs: &[T], fs: &[T], o: &mut [T], [n, h, w, c]: [usize; 4], m: usize, ay: &Axis, ax: &Axis) {
    let out_c = c * m;
    for b in 0..n {
        for oy in 0..ay.output {
            for ox in 0..ax.output {
                let acc = &mut o[((b * ay.output + oy) * ax.output + ox) * out_c..][..out_c];
                acc.fill(T::ZERO);
                for ky in 0..ay.window {
                    let Some(iy) = ay.at(oy, ky) else { continue };
                    for kx in 0..ax.window {
                        let Some(ix) = ax.at(ox, kx) else { continue };
                        let pixel = &xs[((b * h + iy) * w + ix) * c..][..c];
                        let taps = &fs[(ky * ax.window + kx) * out_c..][..out_c];
                        for ((&v, acc), taps) in pixel.iter().zip(acc.chunks_mut(m)).zip(taps.chunks(m)) {
                            for (a, &t) in acc.iter_mut().zip(taps) {
                                *a = a.add(v.mul(t));
                            }
                        }
                    }
                }
            }
        }
    }
}

struct Pool {
    window: Window,
    ksize: [usize; 2],
    max: bool,
    compute: fn(&Pool, &mut OpContext<'_>) -> Result<()>,
}

fn build_pool<const MAX: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let window = window_of(init.node, false)?;
    if matches!(window.padding, Padding::Explicit(_)) && !MAX {
        bail!(invalid_argument, "AvgPool does not take EXPLICIT padding");
    }
    let ksize = spatial_pair(init.node, "ksize")?;
    let dtype = init.node.attr_dtype_or("T", DType::F32)?;
    let compute = match dtype {
        DType::F32 => pool::<f32>,
        DType::F64 => pool::<f64>,
        other => return Err(unsupported_dtype(&init.node.op, other, FLOATS)),
    };
    Ok(Box::new(Pool { window, ksize, max: MAX, compute }))
}

impl OpKernel for Pool {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(self, ctx)
    }
}

/// Max over the window's in-bounds elements, or their mean (TensorFlow
/// divides by the number of in-bounds elements, padding not counted).
fn pool<T: Float>(p: &Pool, ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let d = x.dims();
    if d.len() != 4 {
        bail!(invalid_argument, "input must be 4-dimensional (NHWC), got {d:?}");
    }
    let [n, h, w, c] = [d[0], d[1], d[2], d[3]];
    let ay = axis(h, p.ksize[0], p.window.strides[0], 1, p.window.padding, 0)?;
    let ax = axis(w, p.ksize[1], p.window.strides[1], 1, p.window.padding, 1)?;
    let xs = x.as_slice::<T>()?;
    let out = Tensor::build::<T>([n, ay.output, ax.output, c], |o| {
        for b in 0..n {
            for oy in 0..ay.output {
                for ox in 0..ax.output {
                    let acc = &mut o[((b * ay.output + oy) * ax.output + ox) * c..][..c];
                    acc.fill(if p.max { T::BOTTOM } else { T::ZERO });
                    let mut count = 0usize;
                    for ky in 0..ay.window {
                        let Some(iy) = ay.at(oy, ky) else { continue };
                        for kx in 0..ax.window {
                            let Some(ix) = ax.at(ox, kx) else { continue };
                            count += 1;
                            let pixel = &xs[((b * h + iy) * w + ix) * c..][..c];
                            for (a, &v) in acc.iter_mut().zip(pixel) {
                                #[allow(clippy::eq_op)] // v != v: NaN wins a max, as in TensorFlow
                                let nan = v != v;
                                *a = if p.max { if v > *a || nan { v } else { *a } } else { a.add(v) };
                            }
                        }
                    }
                    if !p.max && count > 0 {
                        let count = T::from_f64(count as f64);
                        acc.iter_mut().for_each(|a| *a = a.div(count));
                    }
                }
            }
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

fn batch_norm_signature<const OUTPUTS: usize>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let u = ValueType::Tensor(node.attr_dtype_or("U", DType::F32)?);
    Ok(OpSignature::new(vec![t, u, u, u, u], [vec![t], vec![u; OUTPUTS - 1]].concat()))
}

struct BatchNorm {
    epsilon: f64,
    exponential_avg_factor: f64,
    outputs: usize,
}

fn build_batch_norm(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    nhwc_only(init.node)?;
    if init.node.attr_bool_or("is_training", true)? {
        bail!(
            unimplemented,
            "{} with is_training=true (batch statistics) is not supported yet; inference graphs set is_training=false",
            init.node.op
        );
    }
    let dtype = init.node.attr_dtype("T")?;
    if dtype != DType::F32 || init.node.attr_dtype_or("U", DType::F32)? != DType::F32 {
        return Err(unsupported_dtype(&init.node.op, dtype, &[DType::F32]));
    }
    Ok(Box::new(BatchNorm {
        epsilon: init.node.attr_float_or("epsilon", 1e-4)? as f64,
        exponential_avg_factor: init.node.attr_float_or("exponential_avg_factor", 1.0)? as f64,
        outputs: init.signature.outputs.len(),
    }))
}

impl OpKernel for BatchNorm {
    /// y = (x − mean) · rsqrt(var + ε) · scale + offset, per channel; the
    /// mean and variance pass through as outputs 1 and 2 (and 3, 4), the
    /// last output of V3 is empty, as TensorFlow's inference kernel gives.
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let _ = self.exponential_avg_factor;
        let x = ctx.input(0)?;
        let c = *x.dims().last().ok_or_else(|| Status::invalid_argument("input must be 4-dimensional"))?;
        if x.dims().len() != 4 {
            bail!(invalid_argument, "input must be 4-dimensional, got {:?}", x.dims());
        }
        let params: Vec<&Tensor> = (1..5).map(|i| ctx.input(i)).collect::<Result<_>>()?;
        for (name, p) in ["scale", "offset", "mean", "variance"].iter().zip(&params) {
            if p.dims() != [c] {
                bail!(
                    invalid_argument,
                    "{name} must have the same number of elements as the channels of x, got {:?} and {c}",
                    p.dims()
                );
            }
        }
        let [scale, offset, mean, var] =
            [0, 1, 2, 3].map(|i| params[i].as_slice::<f32>().map(|s| s.to_vec()).unwrap_or_default());
        let factor: Vec<f32> =
            (0..c).map(|i| ((var[i] as f64 + self.epsilon).sqrt().recip() as f32) * scale[i]).collect();
        let shift: Vec<f32> = (0..c).map(|i| offset[i] - mean[i] * factor[i]).collect();
        let xs = x.as_slice::<f32>()?;
        let y = Tensor::build::<f32>(x.shape().clone(), |o| {
            for (oc, xc) in o.chunks_mut(c.max(1)).zip(xs.chunks(c.max(1))) {
                for i in 0..c {
                    oc[i] = xc[i] * factor[i] + shift[i];
                }
            }
        })?;
        let (mean_t, var_t) = (params[2].clone(), params[3].clone());
        ctx.set_output(0, y);
        ctx.set_output(1, mean_t.clone());
        ctx.set_output(2, var_t.clone());
        ctx.set_output(3, mean_t);
        ctx.set_output(4, var_t);
        if self.outputs == 6 {
            ctx.set_output(5, Tensor::zeros(DType::F32, [0])?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrList, AttrValue};
    use crate::ops::testing::{node, run1, ty};

    fn ints(v: &[i64]) -> AttrValue {
        AttrValue::List(AttrList::Int(v.to_vec()))
    }

    fn s(v: &str) -> AttrValue {
        AttrValue::Bytes(v.as_bytes().to_vec())
    }

    fn seq(dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::from_slice::<f32>(dims, &(0..n).map(|v| v as f32).collect::<Vec<_>>()).unwrap()
    }

    /// A direct 4-loop convolution to check im2col against.
    fn naive(x: &Tensor, f: &Tensor, ay: &Axis, ax: &Axis) -> Vec<f32> {
        let (xd, fd) = (x.dims(), f.dims());
        let (xs, fs) = (x.as_slice::<f32>().unwrap(), f.as_slice::<f32>().unwrap());
        let (n, h, w, c, m) = (xd[0], xd[1], xd[2], xd[3], fd[3]);
        let _ = h;
        let mut out = vec![0.0f32; n * ay.output * ax.output * m];
        for b in 0..n {
            for oy in 0..ay.output {
                for ox in 0..ax.output {
                    for q in 0..m {
                        let mut acc = 0.0;
                        for ky in 0..fd[0] {
                            for kx in 0..fd[1] {
                                if let (Some(iy), Some(ix)) = (ay.at(oy, ky), ax.at(ox, kx)) {
                                    for ch in 0..c {
                                        acc += xs[((b * xd[1] + iy) * w + ix) * c + ch]
                                            * fs[((ky * fd[1] + kx) * c + ch) * m + q];
                                    }
                                }
                            }
                        }
                        out[((b * ay.output + oy) * ax.output + ox) * m + q] = acc;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn same_padding_matches_tensorflow() {
        // tf.nn.conv2d(arange(16).reshape(1,4,4,1), ones(3,3,1,1), 1, 'SAME')
        let x = seq(&[1, 4, 4, 1]);
        let f = Tensor::from_slice::<f32>([3, 3, 1, 1], &[1.0; 9]).unwrap();
        let n =
            node("Conv2D").attr("T", ty(DType::F32)).attr("strides", ints(&[1, 1, 1, 1])).attr("padding", s("SAME"));
        let y = run1(&n, &[x, f]).unwrap();
        assert_eq!(
            y.as_slice::<f32>().unwrap(),
            &[10., 18., 24., 18., 27., 45., 54., 39., 51., 81., 90., 63., 42., 66., 72., 50.]
        );
    }

    #[test]
    fn im2col_agrees_with_direct_loops_over_strides_dilations_and_padding() {
        let x = seq(&[2, 7, 6, 3]);
        let f = Tensor::from_slice::<f32>([3, 2, 3, 4], &(0..72).map(|v| (v % 7) as f32 - 3.0).collect::<Vec<_>>())
            .unwrap();
        for (padding, strides, dilations) in
            [("VALID", [1, 1], [1, 1]), ("SAME", [2, 2], [1, 1]), ("SAME", [1, 2], [2, 1]), ("VALID", [2, 1], [1, 2])]
        {
            let n = node("Conv2D")
                .attr("T", ty(DType::F32))
                .attr("strides", ints(&[1, strides[0], strides[1], 1]))
                .attr("dilations", ints(&[1, dilations[0], dilations[1], 1]))
                .attr("padding", s(padding));
            let y = run1(&n, &[x.clone(), f.clone()]).unwrap();
            let pad = if padding == "SAME" { Padding::Same } else { Padding::Valid };
            let ay = axis(7, 3, strides[0] as usize, dilations[0] as usize, pad, 0).unwrap();
            let ax = axis(6, 2, strides[1] as usize, dilations[1] as usize, pad, 1).unwrap();
            assert_eq!(y.dims(), &[2, ay.output, ax.output, 4], "{padding} {strides:?} {dilations:?}");
            assert_eq!(y.as_slice::<f32>().unwrap(), naive(&x, &f, &ay, &ax).as_slice(), "{padding} {strides:?}");
        }
    }

    #[test]
    fn nchw_and_bad_padding_are_named() {
        let n = node("Conv2D").attr("T", ty(DType::F32)).attr("padding", s("SAME")).attr("data_format", s("NCHW"));
        let err = run1(&n, &[seq(&[1, 1, 2, 2]), seq(&[1, 1, 2, 1])]).unwrap_err();
        assert!(err.message.contains("data_format NCHW"), "{err}");
        let n = node("Conv2D").attr("T", ty(DType::F32)).attr("padding", s("FULL"));
        assert!(run1(&n, &[seq(&[1, 2, 2, 1]), seq(&[1, 1, 1, 1])]).unwrap_err().message.contains("VALID, SAME"));
    }

    #[test]
    fn depthwise_with_a_multiplier() {
        // Channel 0 filter [1, 2], channel 1 filter [3, 4] (1x1 windows, multiplier 2).
        let x = Tensor::from_slice::<f32>([1, 1, 2, 2], &[1., 10., 2., 20.]).unwrap();
        let f = Tensor::from_slice::<f32>([1, 1, 2, 2], &[1., 2., 3., 4.]).unwrap();
        let n = node("DepthwiseConv2dNative")
            .attr("T", ty(DType::F32))
            .attr("strides", ints(&[1, 1, 1, 1]))
            .attr("padding", s("VALID"));
        let y = run1(&n, &[x, f]).unwrap();
        assert_eq!(y.dims(), &[1, 1, 2, 4]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[1., 2., 30., 40., 2., 4., 60., 80.]);
    }

    #[test]
    fn pools_count_only_in_bounds_elements() {
        let x = seq(&[1, 3, 3, 1]);
        let pool = |op: &str, padding: &str| {
            node(op)
                .attr("T", ty(DType::F32))
                .attr("ksize", ints(&[1, 2, 2, 1]))
                .attr("strides", ints(&[1, 2, 2, 1]))
                .attr("padding", s(padding))
        };
        let y = run1(&pool("MaxPool", "SAME"), std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.as_slice::<f32>().unwrap(), &[4., 5., 7., 8.]);
        let y = run1(&pool("AvgPool", "SAME"), std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.as_slice::<f32>().unwrap(), &[2., 3.5, 6.5, 8.]);
        let y = run1(&pool("AvgPool", "VALID"), &[x]).unwrap();
        assert_eq!(y.as_slice::<f32>().unwrap(), &[2.]);
    }

    #[test]
    fn batch_norm_inference() {
        let x = Tensor::from_slice::<f32>([1, 1, 2, 2], &[1., 2., 3., 4.]).unwrap();
        let v = |a: f32, b: f32| Tensor::from_slice::<f32>([2], &[a, b]).unwrap();
        let n = node("FusedBatchNormV3")
            .attr("T", ty(DType::F32))
            .attr("U", ty(DType::F32))
            .attr("epsilon", AttrValue::Float(0.0))
            .attr("is_training", AttrValue::Bool(false));
        let outs = crate::ops::run_kernel_once(
            &n,
            [x, v(2., 1.), v(0., 1.), v(1., 2.), v(4., 1.)].into_iter().map(crate::ops::Value::Tensor).collect(),
            &crate::ops::ResourceMgr::default(),
        )
        .unwrap();
        let y = outs[0].as_tensor().unwrap();
        // channel 0: (x-1)/2*2+0; channel 1: (x-2)/1*1+1.
        assert_eq!(y.as_slice::<f32>().unwrap(), &[0., 1., 2., 3.]);
        assert_eq!(outs.len(), 6);
        let training = n.clone().attr("is_training", AttrValue::Bool(true));
        assert!(
            crate::ops::run_kernel_once(&training, vec![], &Default::default())
                .unwrap_err()
                .message
                .contains("is_training")
        );
    }
}
