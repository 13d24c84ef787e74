//! Gradients of `Conv2D`: `Conv2DBackpropInput` (also what a transposed
//! convolution is) and `Conv2DBackpropFilter`, NHWC, float32 and float64,
//! with the forward op's attributes and checked shapes
//! ([`super::conv::ConvAttrs`], `super::conv::Plan`) over the shared
//! window geometry (`window.rs`). Grouped convolutions are refused.
//!
//! Owns: these kernels. Each is one gemm per image plus a scatter
//! (col2im) or the forward's gather (im2col). Must not hold state beyond
//! parsed attrs.

use super::conv::{ConvAttrs, Plan, Run};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::math::FLOAT;
use crate::ops::matmul::{Gemm, Strided};
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values, unsupported_dtype};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Conv2DBackpropInput", backprop_signature::<0>, build_backprop::<true>),
    OpDef::kernel("Conv2DBackpropFilter", backprop_signature::<1>, build_backprop::<false>),
];

/// `SIZES` is the index of the int32 sizes input (the others are `T`).
fn backprop_signature<const SIZES: usize>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let mut inputs = vec![t, t, t];
    inputs[SIZES] = ValueType::Tensor(DType::I32);
    Ok(OpSignature::new(inputs, vec![t]))
}

struct Backprop {
    attrs: ConvAttrs,
    compute: fn(&ConvAttrs, &mut OpContext<'_>) -> Result<()>,
}

fn build_backprop<const INPUT: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let compute = match (init.node.attr_dtype("T")?, INPUT) {
        (DType::F32, true) => backprop_input::<f32>,
        (DType::F64, true) => backprop_input::<f64>,
        (DType::F32, false) => backprop_filter::<f32>,
        (DType::F64, false) => backprop_filter::<f64>,
        (other, _) => return Err(unsupported_dtype(&init.node.op, other, FLOAT)),
    };
    Ok(Box::new(Backprop { attrs: ConvAttrs::from_node(init.node)?, compute }))
}

impl OpKernel for Backprop {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(&self.attrs, ctx)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn four(t: &Tensor, what: &str) -> Result<[usize; 4]> {
    let v = index_values(t, what)?;
    match v.as_slice() {
        [a, b, c, d] if v.iter().all(|&x| x >= 0) => Ok([*a as usize, *b as usize, *c as usize, *d as usize]),
        _ => bail!(invalid_argument, "{what} must be 4 non-negative sizes, got {v:?}"),
    }
}

fn dims4(t: &Tensor, what: &str) -> Result<[usize; 4]> {
    t.dims().try_into().map_err(|_| Status::invalid_argument(format!("{what} must be 4-dimensional: {}", t.shape())))
}

/// The forward convolution of `input` under `filter`, checked against the
/// gradient `dy`'s shape. Grouped convolutions are refused, as
/// TensorFlow's CPU gradient kernels refuse them.
fn geometry(attrs: &ConvAttrs, input: [usize; 4], filter: [usize; 4], dy: &Tensor) -> Result<Plan> {
    if filter[2] != input[3] {
        bail!(invalid_argument, "input depth {} must equal filter's in_channels {}", input[3], filter[2]);
    }
    let plan = Plan::from_dims(attrs, input, filter)?;
    if dy.dims() != plan.out_dims() {
        bail!(
            invalid_argument,
            "out_backprop has shape {:?}, the forward convolution gives {:?}",
            dy.dims(),
            plan.out_dims()
        );
    }
    Ok(plan)
}

/// dx: per image, dcols = dy · fᵀ, then each window row is added back
/// where it was gathered from (col2im).
fn backprop_input<T: Gemm>(attrs: &ConvAttrs, ctx: &mut OpContext<'_>) -> Result<()> {
    let sizes = four(ctx.input(0)?, "input_sizes")?;
    let f = ctx.input(1)?;
    let dy = ctx.input(2)?;
    let plan = geometry(attrs, sizes, dims4(f, "filter")?, dy)?;
    let [n, h, w, c] = sizes;
    let (ay, ax) = (&plan.rows, &plan.cols);
    let (m, patch) = (plan.out_depth, plan.patch_len());
    let rows = ay.output * ax.output;
    let (fs, dys) = (f.as_slice::<T>()?, dy.as_slice::<T>()?);
    let (row_taps, col_taps) = (ay.all_taps(), ax.all_taps());
    let dx = Tensor::build::<T>(sizes, |dx| {
        if rows == 0 || patch == 0 || m == 0 {
            return;
        }
        let mut dcols = vec![T::ZERO; rows * patch];
        for b in 0..n {
            let ft = Strided { data: fs, rows: 1, cols: m };
            T::gemm_over([rows, m, patch], Strided::row_major(&dys[b * rows * m..][..rows * m], m), ft, &mut dcols);
            let image = &mut dx[b * h * w * c..][..h * w * c];
            for oy in 0..ay.output {
                for ox in 0..ax.output {
                    let row = &dcols[(oy * ax.output + ox) * patch..][..patch];
                    for ky in row_taps[oy].clone() {
                        let iy = ay.position(oy, ky) as usize;
                        for kx in col_taps[ox].clone() {
                            let ix = ax.position(ox, kx) as usize;
                            let src = &row[(ky * ax.window + kx) * c..][..c];
                            for (d, &s) in image[(iy * w + ix) * c..][..c].iter_mut().zip(src) {
                                *d = d.add(s);
                            }
                        }
                    }
                }
            }
        }
    })?;
    ctx.set_output(0, dx);
    Ok(())
}

/// df: the sum over images of colsᵀ · dy.
fn backprop_filter<T: Gemm>(attrs: &ConvAttrs, ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let sizes = four(ctx.input(1)?, "filter_sizes")?;
    let dy = ctx.input(2)?;
    let xd = dims4(x, "input")?;
    let plan = geometry(attrs, xd, sizes, dy)?;
    let (m, patch) = (plan.out_depth, plan.patch_len());
    let rows = plan.rows.output * plan.cols.output;
    let (xs, dys) = (x.as_slice::<T>()?, dy.as_slice::<T>()?);
    let df = Tensor::build::<T>(sizes, |df| {
        if rows == 0 || patch == 0 || m == 0 {
            return;
        }
        let gather = Run::new(&plan, xs, &[]);
        let mut cols = vec![T::ZERO; rows * patch];
        let mut part = vec![T::ZERO; patch * m];
        for b in 0..xd[0] {
            gather.im2col(b * rows..(b + 1) * rows, 0, &mut cols);
            let cols_t = Strided { data: cols.as_slice(), rows: 1, cols: patch };
            T::gemm_over([patch, rows, m], cols_t, Strided::row_major(&dys[b * rows * m..][..rows * m], m), &mut part);
            for (d, &s) in df.iter_mut().zip(&part) {
                *d = d.add(s);
            }
        }
    })?;
    ctx.set_output(0, df);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::{AttrList, AttrValue};
    use crate::ops::testing::{node, ty};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};
    use crate::tensor::{DType, Tensor};

    fn attrs(op: &str, padding: &str, stride: i64, dilation: i64) -> crate::graph::spec::NodeSpec {
        node(op)
            .attr("T", ty(DType::F64))
            .attr("strides", AttrValue::List(AttrList::Int(vec![1, stride, stride, 1])))
            .attr("dilations", AttrValue::List(AttrList::Int(vec![1, dilation, dilation, 1])))
            .attr("padding", AttrValue::Bytes(padding.as_bytes().to_vec()))
    }

    fn run(n: &crate::graph::spec::NodeSpec, inputs: Vec<Tensor>) -> Tensor {
        let outs =
            run_kernel_once(n, inputs.into_iter().map(Value::Tensor).collect(), &ResourceMgr::default()).unwrap();
        outs[0].as_tensor().unwrap().clone()
    }

    fn det(dims: &[usize], seed: usize) -> Tensor {
        let count: usize = dims.iter().product();
        let v: Vec<f64> = (0..count).map(|i| (((i + seed) * 7919) % 23) as f64 / 23.0 - 0.5).collect();
        Tensor::from_slice::<f64>(dims, &v).unwrap()
    }

    /// ⟨conv(x, f), dy⟩ = ⟨x, dx⟩ = ⟨f, df⟩: both gradients agree with the
    /// forward convolution they differentiate.
    #[test]
    fn gradients_are_the_adjoints_of_the_forward_convolution() {
        let dot = |a: &Tensor, b: &Tensor| -> f64 {
            a.as_slice::<f64>().unwrap().iter().zip(b.as_slice::<f64>().unwrap()).map(|(x, y)| x * y).sum()
        };
        for (padding, stride, dilation) in [("SAME", 1, 1), ("VALID", 2, 1), ("SAME", 2, 1), ("VALID", 1, 2)] {
            let x = det(&[2, 7, 6, 3], 1);
            let f = det(&[3, 2, 3, 4], 2);
            let y = run(&attrs("Conv2D", padding, stride, dilation), vec![x.clone(), f.clone()]);
            let dy = det(y.dims(), 3);
            let sizes =
                |d: &[usize]| Tensor::from_slice::<i32>([4], &d.iter().map(|&v| v as i32).collect::<Vec<_>>()).unwrap();
            let dx = run(
                &attrs("Conv2DBackpropInput", padding, stride, dilation),
                vec![sizes(x.dims()), f.clone(), dy.clone()],
            );
            let df = run(
                &attrs("Conv2DBackpropFilter", padding, stride, dilation),
                vec![x.clone(), sizes(f.dims()), dy.clone()],
            );
            let forward = dot(&y, &dy);
            assert!((forward - dot(&x, &dx)).abs() < 1e-9, "{padding} {stride} {dilation}");
            assert!((forward - dot(&f, &df)).abs() < 1e-9, "{padding} {stride} {dilation}");
        }
    }

    #[test]
    fn a_mismatched_gradient_shape_is_an_error() {
        let n = attrs("Conv2DBackpropInput", "VALID", 1, 1);
        let sizes = Tensor::from_slice::<i32>([4], &[1, 4, 4, 1]).unwrap();
        let err = run_kernel_once(
            &n,
            vec![Value::Tensor(sizes), Value::Tensor(det(&[2, 2, 1, 1], 0)), Value::Tensor(det(&[1, 2, 2, 1], 0))],
            &ResourceMgr::default(),
        )
        .unwrap_err();
        assert!(err.message.contains("out_backprop has shape"), "{err}");
    }
}
