//! 3-D convolution and pooling on NDHWC volumes (video, medical images;
//! Keras' `Conv3D`, `MaxPooling3D`, `AveragePooling3D`): `Conv3D` with a
//! DHWIO filter `[kd, kh, kw, c, o]`, strides, dilations, VALID / SAME
//! padding; `MaxPool3D` and `AvgPool3D` (an average over the taps inside
//! the volume, as TensorFlow's CPU kernel divides).
//!
//! Owns: these kernels. The convolution is one gemm per block of output
//! voxels: each voxel's receptive field is copied into a row of a patch
//! matrix (`[kd][kh][kw][c]`, zeros in the padding) and multiplied by the
//! filter seen as a `[kd * kh * kw * c, o]` matrix, as `conv` does in 2-D.
//! Axis geometry (sizes, SAME padding) is `window`'s. Only NDHWC, as on
//! TensorFlow's CPU. Must not hold state beyond parsed attributes.

use super::window::{Axis, Padding};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::math::{binary_signature, unary_signature};
use crate::ops::matmul::{Gemm, Strided};
use crate::ops::numeric::Num;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, attr_int_list_or, unsupported_dtype};
use crate::tensor::{DType, Element, Tensor};

/// Patch rows per gemm call: about 1 MiB of patches (the gradients block
/// their products the same way).
pub(super) fn patch_block<T>(patch: usize) -> usize {
    (PATCH_BUDGET_BYTES / (patch.max(1) * size_of::<T>())).max(16)
}

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Conv3D", binary_signature, build_conv3d),
    OpDef::kernel("MaxPool3D", unary_signature, build_pool3d),
    OpDef::kernel("AvgPool3D", unary_signature, build_pool3d),
];

const FLOATS: &[DType] = &[DType::F32, DType::F64];

/// Patch rows per gemm call: about 1 MiB of patches.
const PATCH_BUDGET_BYTES: usize = 1 << 20;

/// A 5-entry NDHWC list attribute whose batch and channel entries must be
/// 1; its three spatial entries.
fn spatial_list(node: &NodeSpec, key: &str, default: &[i64]) -> Result<[usize; 3]> {
    let v = attr_int_list_or(node, key, default)?;
    let Ok([n, d, h, w, c]) = <[i64; 5]>::try_from(v.as_slice()) else {
        bail!(invalid_argument, "node '{}' ({}): {key} must specify 5 dimensions, got {v:?}", node.name, node.op);
    };
    if n != 1 || c != 1 {
        bail!(
            unimplemented,
            "node '{}' ({}): {key} in the batch and depth dimensions must be 1, got {v:?}",
            node.name,
            node.op
        );
    }
    let positive = |x: i64| {
        usize::try_from(x).ok().filter(|&x| x > 0).ok_or_else(|| {
            Status::invalid_argument(format!("node '{}' ({}): {key} must be positive, got {v:?}", node.name, node.op))
        })
    };
    Ok([positive(d)?, positive(h)?, positive(w)?])
}

fn require_ndhwc(node: &NodeSpec) -> Result<()> {
    let format = node.attr_str_or("data_format", "NDHWC")?;
    if format != "NDHWC" {
        bail!(
            unimplemented,
            "node '{}' ({}): only data_format NDHWC runs on CPU (as in TensorFlow), got {format}",
            node.name,
            node.op
        );
    }
    Ok(())
}

pub(super) fn input_dims(x: &Tensor, what: &str) -> Result<[usize; 5]> {
    <[usize; 5]>::try_from(x.dims())
        .map_err(|_| Status::invalid_argument(format!("{what} must be 5-dimensional, got shape {}", x.shape())))
}

// ---------------------------------------------------------------------------
// Conv3D

/// A 3-D convolution's geometry (shared with its gradients in
/// `volume_grad`).
pub(super) struct Conv3D {
    strides: [usize; 3],
    dilations: [usize; 3],
    padding: Padding,
}

impl Conv3D {
    /// The geometry from a node's attrs (any of the Conv3D family).
    pub(super) fn from_node(node: &NodeSpec) -> Result<Conv3D> {
        let dtype = node.attr_dtype("T")?;
        if !FLOATS.contains(&dtype) {
            return Err(unsupported_dtype(&node.op, dtype, FLOATS));
        }
        require_ndhwc(node)?;
        Ok(Conv3D {
            strides: spatial_list(node, "strides", &[])?,
            dilations: spatial_list(node, "dilations", &[1, 1, 1, 1, 1])?,
            padding: Padding::from_node(node, &[Padding::Valid, Padding::Same])?,
        })
    }

    /// The three spatial axes of input `[d, h, w]` under window `[kd, kh, kw]`.
    pub(super) fn axes(&self, input: [usize; 3], window: [usize; 3]) -> Result<Vec<Axis>> {
        if window.contains(&0) {
            bail!(invalid_argument, "filter must not have zero elements (i.e. all dimensions must be non-zero)");
        }
        (0..3)
            .map(|i| Axis::new(input[i], window[i], self.strides[i], self.dilations[i], self.padding, [0, 0]))
            .collect()
    }
}

fn build_conv3d(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Conv3D::from_node(init.node)?))
}

impl OpKernel for Conv3D {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (input, filter) = (ctx.input(0)?, ctx.input(1)?);
        let out = match input.dtype() {
            DType::F32 => self.conv::<f32>(input, filter)?,
            DType::F64 => self.conv::<f64>(input, filter)?,
            other => return Err(unsupported_dtype("Conv3D", other, FLOATS)),
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

impl Conv3D {
    fn conv<T: Gemm + Element>(&self, input: &Tensor, filter: &Tensor) -> Result<Tensor> {
        let [n, d, h, w, c] = input_dims(input, "input")?;
        let [kd, kh, kw, fc, o] = input_dims(filter, "filter")?;
        if fc != c {
            bail!(invalid_argument, "Input depth {c} must equal the filter's input depth {fc}");
        }
        let axes = self.axes([d, h, w], [kd, kh, kw])?;
        let out_dims = [n, axes[0].output, axes[1].output, axes[2].output, o];
        let voxels = n * axes[0].output * axes[1].output * axes[2].output;
        let (x, f) = (input.as_slice::<T>()?, filter.as_slice::<T>()?);
        let patch = kd * kh * kw * c;
        Tensor::build::<T>(out_dims, |out| {
            if voxels == 0 || o == 0 || patch == 0 {
                return;
            }
            let block = patch_block::<T>(patch);
            let mut patches = vec![T::ZERO; block.min(voxels) * patch];
            for (b, out_block) in out.chunks_mut(block * o).enumerate() {
                let rows = out_block.len() / o;
                let first = b * block;
                for (r, row) in patches[..rows * patch].chunks_exact_mut(patch).enumerate() {
                    self.gather_patch(first + r, &axes, [d, h, w, c], x, row);
                }
                T::gemm_over(
                    [rows, patch, o],
                    Strided::row_major(&patches[..rows * patch], patch),
                    Strided::row_major(f, o),
                    out_block,
                );
            }
        })
    }

    /// The receptive field of output voxel `voxel` (flat over
    /// `[n, od, oh, ow]`) into `row`, zeros where it lies in the padding.
    pub(super) fn gather_patch<T: Num>(&self, voxel: usize, axes: &[Axis], dims: [usize; 4], x: &[T], row: &mut [T]) {
        let c = dims[3];
        for_each_tap(voxel, axes, dims, |at, from| {
            let dst = &mut row[at..at + c];
            match from {
                Some(from) => dst.copy_from_slice(&x[from..from + c]),
                None => dst.fill(T::ZERO),
            }
        });
    }
}

/// Calls `tap(offset in the patch row, offset in the input or None in the
/// padding)` for each tap of output voxel `voxel` (flat over
/// `[n, od, oh, ow]`), in the patch row's order `[kd][kh][kw]`.
pub(super) fn for_each_tap(
    voxel: usize,
    axes: &[Axis],
    [d, h, w, c]: [usize; 4],
    mut tap: impl FnMut(usize, Option<usize>),
) {
    let (od, oh, ow) = (axes[0].output, axes[1].output, axes[2].output);
    let (ow_i, rest) = (voxel % ow, voxel / ow);
    let (oh_i, rest) = (rest % oh, rest / oh);
    let (od_i, batch) = (rest % od, rest / od);
    let mut at = 0;
    for a in 0..axes[0].window {
        let z = axes[0].position(od_i, a);
        for b in 0..axes[1].window {
            let y = axes[1].position(oh_i, b);
            for e in 0..axes[2].window {
                let xx = axes[2].position(ow_i, e);
                let inside =
                    (0..d as isize).contains(&z) && (0..h as isize).contains(&y) && (0..w as isize).contains(&xx);
                let from = inside.then(|| (((batch * d + z as usize) * h + y as usize) * w + xx as usize) * c);
                tap(at, from);
                at += c;
            }
        }
    }
}

impl Conv3D {}

// ---------------------------------------------------------------------------
// MaxPool3D, AvgPool3D

struct Pool3D {
    window: [usize; 3],
    strides: [usize; 3],
    padding: Padding,
    max: bool,
}

fn build_pool3d(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    if !FLOATS.contains(&dtype) {
        return Err(unsupported_dtype(&node.op, dtype, FLOATS));
    }
    require_ndhwc(node)?;
    Ok(Box::new(Pool3D {
        window: spatial_list(node, "ksize", &[])?,
        strides: spatial_list(node, "strides", &[])?,
        padding: Padding::from_node(node, &[Padding::Valid, Padding::Same])?,
        max: node.op == "MaxPool3D",
    }))
}

impl OpKernel for Pool3D {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let out = match input.dtype() {
            DType::F32 => self.pool::<f32>(input)?,
            DType::F64 => self.pool::<f64>(input)?,
            other => return Err(unsupported_dtype(if self.max { "MaxPool3D" } else { "AvgPool3D" }, other, FLOATS)),
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

impl Pool3D {
    fn pool<T: Num + Element>(&self, input: &Tensor) -> Result<Tensor> {
        let [n, d, h, w, c] = input_dims(input, "input")?;
        let axes = [d, h, w]
            .iter()
            .enumerate()
            .map(|(i, &size)| Axis::new(size, self.window[i], self.strides[i], 1, self.padding, [0, 0]))
            .collect::<Result<Vec<Axis>>>()?;
        let taps: Vec<Vec<std::ops::Range<usize>>> = axes.iter().map(Axis::all_taps).collect();
        let x = input.as_slice::<T>()?;
        let out_dims = [n, axes[0].output, axes[1].output, axes[2].output, c];
        Tensor::build::<T>(out_dims, |out| {
            let mut at = 0;
            let mut acc = vec![T::ZERO; c];
            for batch in 0..n {
                for (od, zs) in taps[0].iter().enumerate() {
                    for (oh, ys) in taps[1].iter().enumerate() {
                        for (ow, xs) in taps[2].iter().enumerate() {
                            acc.fill(if self.max { T::BOTTOM } else { T::ZERO });
                            let mut count = 0usize;
                            for a in zs.clone() {
                                let z = axes[0].position(od, a) as usize;
                                for b in ys.clone() {
                                    let y = axes[1].position(oh, b) as usize;
                                    for e in xs.clone() {
                                        let xx = axes[2].position(ow, e) as usize;
                                        let from = (((batch * d + z) * h + y) * w + xx) * c;
                                        for (slot, &v) in acc.iter_mut().zip(&x[from..from + c]) {
                                            *slot = if self.max { slot.max_nan(v) } else { slot.add(v) };
                                        }
                                        count += 1;
                                    }
                                }
                            }
                            let dst = &mut out[at..at + c];
                            if self.max {
                                dst.copy_from_slice(&acc);
                            } else {
                                let count = T::from_usize(count.max(1));
                                for (o, &s) in dst.iter_mut().zip(&acc) {
                                    *o = s.div(count);
                                }
                            }
                            at += c;
                        }
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrList, AttrValue};
    use crate::ops::testing::{node, run1, ty};

    fn list(v: &[i64]) -> AttrValue {
        AttrValue::List(AttrList::Int(v.to_vec()))
    }

    fn pad(p: &str) -> AttrValue {
        AttrValue::Bytes(p.as_bytes().to_vec())
    }

    fn volume(dims: [usize; 5]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::from_map(dims, &(0..n).collect::<Vec<_>>(), |v| v as f32).unwrap()
    }

    /// The convolution by definition, voxel by voxel.
    fn direct(x: &Tensor, f: &Tensor, stride: usize, same: bool) -> Vec<f32> {
        let [n, d, h, w, c] = <[usize; 5]>::try_from(x.dims()).unwrap();
        let [kd, kh, kw, _, o] = <[usize; 5]>::try_from(f.dims()).unwrap();
        let padding = if same { Padding::Same } else { Padding::Valid };
        let ax: Vec<Axis> = [(d, kd), (h, kh), (w, kw)]
            .iter()
            .map(|&(s, k)| Axis::new(s, k, stride, 1, padding, [0, 0]).unwrap())
            .collect();
        let (xs, fs) = (x.as_slice::<f32>().unwrap(), f.as_slice::<f32>().unwrap());
        let mut out = Vec::new();
        for b in 0..n {
            for od in 0..ax[0].output {
                for oh in 0..ax[1].output {
                    for ow in 0..ax[2].output {
                        for oc in 0..o {
                            let mut s = 0.0f32;
                            for a in 0..kd {
                                for bb in 0..kh {
                                    for e in 0..kw {
                                        let (z, y, xx) =
                                            (ax[0].position(od, a), ax[1].position(oh, bb), ax[2].position(ow, e));
                                        if z < 0
                                            || y < 0
                                            || xx < 0
                                            || z >= d as isize
                                            || y >= h as isize
                                            || xx >= w as isize
                                        {
                                            continue;
                                        }
                                        for ic in 0..c {
                                            let xi =
                                                (((b * d + z as usize) * h + y as usize) * w + xx as usize) * c + ic;
                                            let fi = (((a * kh + bb) * kw + e) * c + ic) * o + oc;
                                            s += xs[xi] * fs[fi];
                                        }
                                    }
                                }
                            }
                            out.push(s);
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn conv3d_matches_the_definition() {
        let x = volume([2, 4, 5, 3, 2]);
        let f = Tensor::from_map([2, 3, 2, 2, 3], &(0..72).collect::<Vec<i32>>(), |v| (v % 7) as f32 - 3.0).unwrap();
        for (stride, same) in [(1, false), (1, true), (2, true), (2, false)] {
            let op = node("Conv3D")
                .attr("T", ty(DType::F32))
                .attr("strides", list(&[1, stride, stride, stride, 1]))
                .attr("padding", pad(if same { "SAME" } else { "VALID" }));
            let out = run1(&op, &[x.clone(), f.clone()]).unwrap();
            assert_eq!(
                out.as_slice::<f32>().unwrap(),
                direct(&x, &f, stride as usize, same).as_slice(),
                "{stride} {same}"
            );
        }
    }

    #[test]
    fn pools_take_the_max_and_the_mean_of_the_taps_inside() {
        let x = volume([1, 3, 3, 3, 1]);
        let pool = |op: &str| {
            let n = node(op)
                .attr("T", ty(DType::F32))
                .attr("ksize", list(&[1, 2, 2, 2, 1]))
                .attr("strides", list(&[1, 2, 2, 2, 1]))
                .attr("padding", pad("SAME"));
            run1(&n, std::slice::from_ref(&x)).unwrap()
        };
        let max = pool("MaxPool3D");
        assert_eq!(max.dims(), &[1, 2, 2, 2, 1]);
        assert_eq!(max.as_slice::<f32>().unwrap(), &[13., 14., 16., 17., 22., 23., 25., 26.]);
        let avg = pool("AvgPool3D");
        // The last voxel's window holds only element 26: padding is not counted.
        assert_eq!(avg.as_slice::<f32>().unwrap()[0], (0. + 1. + 3. + 4. + 9. + 10. + 12. + 13.) / 8.);
        assert_eq!(avg.as_slice::<f32>().unwrap()[7], 26.);
    }

    #[test]
    fn batch_strides_and_other_layouts_are_refused() {
        let op = node("Conv3D")
            .attr("T", ty(DType::F32))
            .attr("strides", list(&[2, 1, 1, 1, 1]))
            .attr("padding", pad("SAME"));
        assert!(run1(&op, &[volume([1, 2, 2, 2, 1]), volume([1, 1, 1, 1, 1])]).is_err());
        let op = node("MaxPool3D")
            .attr("T", ty(DType::F32))
            .attr("ksize", list(&[1, 2, 2, 2, 1]))
            .attr("strides", list(&[1, 1, 1, 1, 1]))
            .attr("padding", pad("VALID"))
            .attr("data_format", pad("NCDHW"));
        assert!(run1(&op, &[volume([1, 2, 2, 2, 1])]).unwrap_err().message.contains("NDHWC"));
    }
}
