//! Cumsum, Cumprod and CumulativeLogsumexp: running sums, products and
//! log-sum-exps along one axis, inclusive or `exclusive` (each output leaves
//! its own element out), forward or in `reverse`.
//!
//! Owns: these kernels and their signatures. Must not hold state beyond
//! parsed attributes.
//!
//! Each line is accumulated in order in the element type, as TensorFlow's
//! (Eigen's) scan does, so float32 results match it bit for bit; integers
//! wrap. The log-sum-exp step is TensorFlow's too, NaN and infinity rules
//! included (see [`log_add_exp`]). With the axis not innermost, whole rows of the inner dimensions
//! are combined at once, so the loop runs over contiguous memory.

use super::super::math::{FLOAT, REAL};
use super::super::numeric::{Float, Num};
use super::super::registry::OpDef;
use super::super::{
    KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values, unsupported_dtype,
};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Cumsum", scan_signature, build_scan::<false>),
    OpDef::kernel("Cumprod", scan_signature, build_scan::<true>),
    OpDef::kernel("CumulativeLogsumexp", scan_signature, build_log_sum_exp_scan),
];

/// `[T, Tidx] -> [T]`; Tidx is int32 by default.
fn scan_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let idx = ValueType::Tensor(attr_index_type_or(node, "Tidx", DType::I32)?);
    Ok(OpSignature::new(vec![t, idx], vec![t]))
}

#[derive(Clone, Copy)]
struct ScanAttrs {
    exclusive: bool,
    reverse: bool,
}

struct ScanKernel {
    attrs: ScanAttrs,
    scan: fn(&Tensor, usize, ScanAttrs) -> Result<Tensor>,
}

fn build_scan<const PROD: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let scan = match dtype {
        DType::F32 => scan_arithmetic::<f32, PROD>,
        DType::F64 => scan_arithmetic::<f64, PROD>,
        DType::I32 => scan_arithmetic::<i32, PROD>,
        DType::I64 => scan_arithmetic::<i64, PROD>,
        _ => {
            return Err(unsupported_dtype(&init.node.op, dtype, REAL));
        }
    };
    Ok(Box::new(ScanKernel { attrs: scan_attrs(init.node)?, scan }))
}

fn build_log_sum_exp_scan(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let scan = match dtype {
        DType::F32 => scan_log_sum_exp::<f32>,
        DType::F64 => scan_log_sum_exp::<f64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(Box::new(ScanKernel { attrs: scan_attrs(init.node)?, scan }))
}

fn scan_attrs(node: &NodeSpec) -> Result<ScanAttrs> {
    Ok(ScanAttrs { exclusive: node.attr_bool_or("exclusive", false)?, reverse: node.attr_bool_or("reverse", false)? })
}

impl OpKernel for ScanKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let axis_t = ctx.input(1)?;
        if axis_t.rank() != 0 {
            bail!(invalid_argument, "ScanOp: axis must be a scalar, not {}", axis_t.shape());
        }
        let rank = input.rank() as i64;
        let a = index_values(axis_t, "axis")?[0];
        // TensorFlow names the axis after adding the rank to a negative one.
        let axis = if a < 0 { a + rank } else { a };
        if !(0..rank).contains(&axis) {
            bail!(invalid_argument, "ScanOp: Expected scan axis in the range [{}, {rank}), but got {axis}", -rank);
        }
        let out = (self.scan)(input, axis as usize, self.attrs)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

/// Scans `input` along `axis` (valid), sums or (with `PROD`) products.
fn scan_arithmetic<T: Num, const PROD: bool>(input: &Tensor, axis: usize, attrs: ScanAttrs) -> Result<Tensor> {
    let identity = if PROD { T::ONE } else { T::ZERO };
    scan(input, axis, attrs, identity, |a: T, b: T| if PROD { a.mul(b) } else { a.add(b) })
}

/// Scans `input` along `axis` (valid) with [`log_add_exp`], from −∞.
fn scan_log_sum_exp<T: Float>(input: &Tensor, axis: usize, attrs: ScanAttrs) -> Result<Tensor> {
    scan(input, axis, attrs, T::BOTTOM, log_add_exp)
}

/// ln(eᵃᶜᶜ + eˣ) as TensorFlow's scan reducer computes it: the larger plus
/// log1p(exp(smaller − larger)), picked with plain comparisons in that
/// operand order (so a NaN `x` meeting a finite sum counts as equal to it),
/// and −∞ when the larger is −∞ (not the NaN of −∞ − −∞).
#[inline]
fn log_add_exp<T: Float>(acc: T, x: T) -> T {
    let larger = if acc < x { x } else { acc };
    let smaller = if x < acc { x } else { acc };
    if larger == T::BOTTOM { larger } else { smaller.sub(larger).exp().ln_1p().add(larger) }
}

/// Scans `input` along `axis` (valid): each line accumulates from
/// `identity` with `combine(accumulated, element)`.
fn scan<T: Num>(
    input: &Tensor,
    axis: usize,
    attrs: ScanAttrs,
    identity: T,
    combine: impl Fn(T, T) -> T,
) -> Result<Tensor> {
    let x = input.as_slice::<T>()?;
    let dims = input.dims();
    let n = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    Tensor::build::<T>(input.shape().clone(), |out| {
        if out.is_empty() {
            return;
        }
        let line = n * inner;
        let mut acc = vec![identity; inner];
        for (src, dst) in x.chunks_exact(line).zip(out.chunks_exact_mut(line)) {
            acc.fill(identity);
            for step in 0..n {
                let k = if attrs.reverse { n - 1 - step } else { step };
                let (xr, or) = (&src[k * inner..(k + 1) * inner], &mut dst[k * inner..(k + 1) * inner]);
                if attrs.exclusive {
                    for ((o, a), &v) in or.iter_mut().zip(acc.iter_mut()).zip(xr) {
                        *o = *a;
                        *a = combine(*a, v);
                    }
                } else {
                    for ((o, a), &v) in or.iter_mut().zip(acc.iter_mut()).zip(xr) {
                        *a = combine(*a, v);
                        *o = *a;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn scan_node(op: &str, t: DType, exclusive: bool, reverse: bool) -> NodeSpec {
        node(op)
            .attr("T", ty(t))
            .attr("exclusive", AttrValue::Bool(exclusive))
            .attr("reverse", AttrValue::Bool(reverse))
    }
    fn m() -> Tensor {
        Tensor::from_slice::<f32>([2, 3], &[1., 2., 3., 4., 5., 6.]).unwrap()
    }
    fn values(t: &Tensor) -> Vec<f32> {
        t.as_slice::<f32>().unwrap().to_vec()
    }

    #[test]
    fn cumsum_flavours() {
        // tf.math.cumsum(m, axis, exclusive, reverse) on [[1, 2, 3], [4, 5, 6]]
        let run = |axis: i32, ex: bool, rev: bool| {
            values(&run1(&scan_node("Cumsum", DType::F32, ex, rev), &[m(), Tensor::scalar(axis)]).unwrap())
        };
        assert_eq!(run(1, false, false), [1., 3., 6., 4., 9., 15.]);
        assert_eq!(run(-1, true, false), [0., 1., 3., 0., 4., 9.]);
        assert_eq!(run(1, false, true), [6., 5., 3., 15., 11., 6.]);
        assert_eq!(run(1, true, true), [5., 3., 0., 11., 6., 0.]);
        assert_eq!(run(0, false, false), [1., 2., 3., 5., 7., 9.]);
        assert_eq!(run(-2, true, true), [4., 5., 6., 0., 0., 0.]);
    }

    #[test]
    fn cumprod_and_integer_types() {
        let out = run1(&scan_node("Cumprod", DType::F32, false, false), &[m(), Tensor::scalar(1i64)]).unwrap();
        assert_eq!(values(&out), [1., 2., 6., 4., 20., 120.]);
        let out = run1(&scan_node("Cumprod", DType::F32, true, true), &[m(), Tensor::scalar(0i32)]).unwrap();
        assert_eq!(values(&out), [4., 5., 6., 1., 1., 1.]);
        let i = Tensor::from_slice::<i32>([3], &[i32::MAX, 1, 2]).unwrap();
        let out = run1(&scan_node("Cumsum", DType::I32, false, false), &[i, Tensor::scalar(0i32)]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[i32::MAX, i32::MIN, i32::MIN + 2], "wraps");
        let l = Tensor::from_slice::<i64>([4], &[1, 2, 3, 4]).unwrap();
        let out = run1(&scan_node("Cumprod", DType::I64, true, false), &[l, Tensor::scalar(0i32)]).unwrap();
        assert_eq!(out.as_slice::<i64>().unwrap(), &[1, 1, 2, 6]);
        let d = Tensor::from_slice::<f64>([3], &[0.5, 0.25, 0.125]).unwrap();
        let out = run1(&scan_node("Cumsum", DType::F64, false, true), &[d, Tensor::scalar(0i32)]).unwrap();
        assert_eq!(out.as_slice::<f64>().unwrap(), &[0.875, 0.375, 0.125]);
    }

    #[test]
    fn float32_accumulates_in_float32() {
        // tf.math.cumsum([1e8, 1., 1., -1e8]) == [1e8, 1e8, 1e8, 0.]: each 1 is lost in float32.
        let x = Tensor::from_slice::<f32>([4], &[1e8, 1., 1., -1e8]).unwrap();
        let out = run1(&scan_node("Cumsum", DType::F32, false, false), &[x, Tensor::scalar(0i32)]).unwrap();
        assert_eq!(values(&out), [1e8, 1e8, 1e8, 0.]);
    }

    #[test]
    fn empty_and_errors() {
        let e = Tensor::zeros(DType::F32, [0, 3]).unwrap();
        let out = run1(&scan_node("Cumsum", DType::F32, false, false), &[e, Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out.dims(), &[0, 3]);
        let n = scan_node("Cumsum", DType::F32, false, false);
        let err = run1(&n, &[m(), Tensor::scalar(-5i32)]).unwrap_err();
        assert_eq!(err.message, "ScanOp: Expected scan axis in the range [-2, 2), but got -3");
        let err = run1(&n, &[m(), Tensor::scalar(2i32)]).unwrap_err();
        assert_eq!(err.message, "ScanOp: Expected scan axis in the range [-2, 2), but got 2");
        let err = run1(&n, &[m(), Tensor::from_slice::<i32>([1], &[1]).unwrap()]).unwrap_err();
        assert_eq!(err.message, "ScanOp: axis must be a scalar, not [1]");
        let err = run1(&n, &[Tensor::scalar(1.0f32), Tensor::scalar(0i32)]).unwrap_err();
        assert_eq!(err.message, "ScanOp: Expected scan axis in the range [0, 0), but got 0");
    }

    #[test]
    fn cumulative_logsumexp_keeps_tensorflow_s_infinity_and_nan_rules() {
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        let run = |x: Vec<f32>, dims: Vec<usize>, exclusive, reverse, axis: i32| {
            let t = Tensor::from_slice::<f32>(dims.as_slice(), &x).unwrap();
            let out =
                run1(&scan_node("CumulativeLogsumexp", DType::F32, exclusive, reverse), &[t, Tensor::scalar(axis)]);
            out.unwrap().as_slice::<f32>().unwrap().to_vec()
        };
        let same = |got: Vec<f32>, want: &[f32]| {
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(want) {
                assert!(
                    g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-6 * w.abs(),
                    "{got:?} against {want:?}"
                );
            }
        };
        // TensorFlow 2.21's outputs.
        let c = vec![1.0, -inf, 2.0, inf, -inf, -inf, -inf, 0.0, nan, 1.0];
        same(
            run(c.clone(), vec![2, 5], false, false, 1),
            &[1.0, 1.0, 2.3132617, inf, inf, -inf, -inf, 0.0, std::f32::consts::LN_2, 1.5514448],
        );
        same(
            run(c, vec![2, 5], true, true, -1),
            &[inf, inf, inf, -inf, -inf, 1.8619947, 1.8619947, 1.6931472, 1.0, -inf],
        );
        same(run(vec![nan, 1.0, 2.0], vec![3], false, false, 0), &[-inf, 1.0, 2.3132617]);
        same(run(vec![1.0, nan, 2.0], vec![3], false, false, 0), &[1.0, 1.6931472, 2.5514448]);
        same(run(vec![inf, inf], vec![2], false, false, 0), &[inf, nan]);
        same(run(vec![1000.0, 1000.0, -1000.0], vec![3], false, false, 0), &[1000.0, 1000.6932, 1000.6932]);
        // Along the outer axis, whole rows at once.
        same(
            run(vec![0.0, 1.0, 0.0, 1.0], vec![2, 2], false, false, 0),
            &[0.0, 1.0, std::f32::consts::LN_2, 1.0 + std::f32::consts::LN_2],
        );
        let ints = node("CumulativeLogsumexp").attr("T", ty(DType::I32));
        let err = run1(&ints, &[Tensor::from_slice::<i32>([1], &[1]).unwrap(), Tensor::scalar(0i32)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("CumulativeLogsumexp") && err.contains("int32"), "{err}");
    }
}
