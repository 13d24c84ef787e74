//! Dense linear algebra on the innermost square matrices of a batch:
//! `MatrixInverse`, `MatrixDeterminant`, `LogMatrixDeterminant`,
//! `MatrixSolve`, `MatrixTriangularSolve` and `Cholesky`
//! (`tf.linalg.inv`, `det`, `slogdet`, `solve`, `triangular_solve`,
//! `cholesky`), `Lu` (`tf.linalg.lu`); `Qr` ([`qr`]); `Svd` and
//! `SelfAdjointEigV2` ([`jacobi`]); `MatrixSquareRoot` ([`sqrtm`]);
//! `TridiagonalSolve` ([`tridiagonal`]); `BandedTriangularSolve`
//! ([`banded`]); and `Cross` (`tf.linalg.cross`) of
//! 3-vectors.
//!
//! Owns: these kernels and the factorizations under them (LU with partial
//! pivoting, Cholesky), computed in float64 whatever the dtype and rounded
//! once at the end, so float32 results are as close to exact as
//! TensorFlow's Eigen ones or closer. Matrices here are small (covariances,
//! transforms, physics-informed models' systems): no blocking, no threads.
//! Must not hold state beyond parsed attributes. Matrix products are
//! `matmul`'s.

mod banded;
mod jacobi;
mod qr;
mod sqrtm;
mod tridiagonal;

use super::registry::OpDef;
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("MatrixInverse", unary_signature, build_linalg),
    OpDef::kernel("MatrixDeterminant", unary_signature, build_linalg),
    OpDef::kernel("LogMatrixDeterminant", slogdet_signature, build_linalg),
    OpDef::kernel("MatrixSolve", binary_signature, build_linalg),
    OpDef::kernel("MatrixTriangularSolve", binary_signature, build_linalg),
    OpDef::kernel("Cholesky", unary_signature, build_linalg),
    OpDef::kernel("Cross", binary_signature, build_cross),
    OpDef::kernel("Qr", qr::qr_signature, qr::build_qr),
    OpDef::kernel("Lu", lu_signature, build_lu),
    OpDef::kernel("Svd", jacobi::svd_signature, jacobi::build_svd),
    OpDef::kernel("SelfAdjointEigV2", jacobi::eigen_signature, jacobi::build_eigen),
    OpDef::kernel("MatrixSquareRoot", unary_signature, sqrtm::build_sqrtm),
    OpDef::kernel("TridiagonalSolve", binary_signature, tridiagonal::build),
    OpDef::kernel("BandedTriangularSolve", binary_signature, banded::build),
];

/// `[T] -> [T, output_idx_type]`.
fn lu_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t, ValueType::Tensor(node.attr_dtype_or("output_idx_type", DType::I32)?)]))
}

fn build_lu(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = float_dtype(node)?;
    let index = node.attr_dtype_or("output_idx_type", DType::I32)?;
    if !matches!(index, DType::I32 | DType::I64) {
        return Err(unsupported_dtype(&node.op, index, &[DType::I32, DType::I64]));
    }
    Ok(Box::new(LuOp { dtype, index }))
}

/// `Lu` (`tf.linalg.lu`, and `lu_solve`/`lu_matrix_inverse` after it):
/// L (unit diagonal, below) and U (on and above) packed in one matrix, and
/// the row permutation `p` with `A[p] = L U`.
struct LuOp {
    dtype: DType,
    index: DType,
}

impl OpKernel for LuOp {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let a = ctx.input(0)?.clone();
        let (count, n) = square_batch(&a, "input")?;
        let values = as_f64(&a)?;
        let (mut packed, mut perms) = (Vec::with_capacity(count * n * n), Vec::with_capacity(count * n));
        for b in 0..count {
            let lu = Lu::new(values[b * n * n..(b + 1) * n * n].to_vec(), n);
            if lu.is_singular() {
                bail!(invalid_argument, "Input is not invertible.");
            }
            packed.extend_from_slice(&lu.lu);
            perms.extend(lu.pivots.iter().map(|&p| p as i64));
        }
        let dims = a.dims();
        ctx.set_output(0, from_f64(self.dtype, a.shape().clone(), &packed)?);
        let perm_shape = Shape::from_vec(dims[..dims.len() - 1].to_vec());
        let perm = match self.index {
            DType::I32 => Tensor::from_map(perm_shape, &perms, |p| p as i32)?,
            _ => Tensor::from_slice::<i64>(perm_shape, &perms)?,
        };
        ctx.set_output(1, perm);
        Ok(())
    }
}

fn build_cross(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: super::ComputeFn = match dtype {
        DType::F32 => cross::<f32>,
        DType::F64 => cross::<f64>,
        DType::I32 => cross::<i32>,
        DType::I64 => cross::<i64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, super::math::REAL)),
    };
    Ok(super::FnKernel::boxed(compute))
}

/// `Cross` (`tf.linalg.cross`): the cross products of the innermost
/// 3-vectors of two tensors of one shape.
fn cross<T: super::numeric::Num>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if a.dims() != b.dims() {
        bail!(invalid_argument, "Both inputs must be of same shape: {} vs. {}", a.shape(), b.shape());
    }
    if a.dims().last() != Some(&3) {
        bail!(invalid_argument, "Last dimension must be 3, got shape {}", a.shape());
    }
    let (x, y) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
    let out = Tensor::build::<T>(a.dims(), |out| {
        for ((o, u), v) in out.chunks_exact_mut(3).zip(x.chunks_exact(3)).zip(y.chunks_exact(3)) {
            o[0] = u[1].mul(v[2]).sub(u[2].mul(v[1]));
            o[1] = u[2].mul(v[0]).sub(u[0].mul(v[2]));
            o[2] = u[0].mul(v[1]).sub(u[1].mul(v[0]));
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

const FLOATS: &[DType] = &[DType::F32, DType::F64];

/// A node's `T`, one of the float types these kernels compute.
fn float_dtype(node: &NodeSpec) -> Result<DType> {
    let dtype = node.attr_dtype("T")?;
    if !FLOATS.contains(&dtype) {
        return Err(unsupported_dtype(&node.op, dtype, FLOATS));
    }
    Ok(dtype)
}

fn unary_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

fn binary_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, t], vec![t]))
}

fn slogdet_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t, t]))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inverse,
    Determinant,
    LogDeterminant,
    Solve,
    TriangularSolve,
    Cholesky,
}

struct Linalg {
    op: Op,
    /// Use each matrix's adjoint (its transpose: the dtypes are real).
    adjoint: bool,
    /// MatrixTriangularSolve: the matrix is lower triangular (else upper).
    lower: bool,
}

fn build_linalg(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    float_dtype(node)?;
    let op = match node.op.as_str() {
        "MatrixInverse" => Op::Inverse,
        "MatrixDeterminant" => Op::Determinant,
        "LogMatrixDeterminant" => Op::LogDeterminant,
        "MatrixSolve" => Op::Solve,
        "MatrixTriangularSolve" => Op::TriangularSolve,
        _ => Op::Cholesky,
    };
    Ok(Box::new(Linalg { op, adjoint: node.attr_bool_or("adjoint", false)?, lower: node.attr_bool_or("lower", true)? }))
}

/// The batch of square matrices in `t`: their count and order.
fn square_batch(t: &Tensor, what: &str) -> Result<(usize, usize)> {
    let dims = t.dims();
    if dims.len() < 2 || dims[dims.len() - 1] != dims[dims.len() - 2] {
        bail!(invalid_argument, "{what} must be a batch of square matrices, got shape {}", t.shape());
    }
    let n = dims[dims.len() - 1];
    Ok((dims[..dims.len() - 2].iter().product(), n))
}

fn as_f64(t: &Tensor) -> Result<Vec<f64>> {
    match t.dtype() {
        DType::F32 => Ok(t.as_slice::<f32>()?.iter().map(|&v| v as f64).collect()),
        DType::F64 => Ok(t.as_slice::<f64>()?.to_vec()),
        other => Err(unsupported_dtype("linalg", other, FLOATS)),
    }
}

fn from_f64(dtype: DType, shape: Shape, values: &[f64]) -> Result<Tensor> {
    match dtype {
        DType::F32 => Tensor::from_map(shape, values, |v| v as f32),
        _ => Tensor::from_slice::<f64>(shape, values),
    }
}

fn transpose_in_place(m: &mut [f64], n: usize) {
    for i in 0..n {
        for j in i + 1..n {
            m.swap(i * n + j, j * n + i);
        }
    }
}

/// An LU factorization with partial pivoting of an `n × n` row-major
/// matrix: `lu` holds L (unit diagonal, below) and U (on and above).
struct Lu {
    lu: Vec<f64>,
    pivots: Vec<usize>,
    /// +1 or -1: the parity of the row swaps.
    sign: f64,
    n: usize,
}

impl Lu {
    fn new(mut lu: Vec<f64>, n: usize) -> Lu {
        let mut pivots: Vec<usize> = (0..n).collect();
        let mut sign = 1.0;
        for k in 0..n {
            // The first row of largest magnitude, as Eigen's PartialPivLU
            // picks it (the `Lu` op's permutation shows the choice).
            let p = (k..n).fold(k, |best, r| if lu[r * n + k].abs() > lu[best * n + k].abs() { r } else { best });
            if p != k {
                for j in 0..n {
                    lu.swap(k * n + j, p * n + j);
                }
                pivots.swap(k, p);
                sign = -sign;
            }
            let pivot = lu[k * n + k];
            if pivot == 0.0 {
                continue;
            }
            for i in k + 1..n {
                let factor = lu[i * n + k] / pivot;
                lu[i * n + k] = factor;
                for j in k + 1..n {
                    lu[i * n + j] -= factor * lu[k * n + j];
                }
            }
        }
        Lu { lu, pivots, sign, n }
    }

    fn is_singular(&self) -> bool {
        (0..self.n).any(|i| self.lu[i * self.n + i] == 0.0 || !self.lu[i * self.n + i].is_finite())
    }

    /// Solves for the `m` columns of the row-major `n × m` right-hand side.
    fn solve(&self, rhs: &[f64], m: usize) -> Vec<f64> {
        let n = self.n;
        let mut x = vec![0.0; n * m];
        for (i, &p) in self.pivots.iter().enumerate() {
            x[i * m..(i + 1) * m].copy_from_slice(&rhs[p * m..(p + 1) * m]);
        }
        for i in 0..n {
            for k in 0..i {
                let l = self.lu[i * n + k];
                for j in 0..m {
                    x[i * m + j] -= l * x[k * m + j];
                }
            }
        }
        for i in (0..n).rev() {
            for k in i + 1..n {
                let u = self.lu[i * n + k];
                for j in 0..m {
                    x[i * m + j] -= u * x[k * m + j];
                }
            }
            let d = self.lu[i * n + i];
            for j in 0..m {
                x[i * m + j] /= d;
            }
        }
        x
    }
}

impl OpKernel for Linalg {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        // A handle (a reference count), so outputs can be set while its
        // shape is read.
        let a = ctx.input(0)?.clone();
        let (count, n) = square_batch(&a, "input")?;
        let values = as_f64(&a)?;
        let dims = a.dims();
        let batch_dims = &dims[..dims.len() - 2];
        let matrix = |b: usize| {
            let mut m = values[b * n * n..(b + 1) * n * n].to_vec();
            if self.adjoint {
                transpose_in_place(&mut m, n);
            }
            m
        };
        match self.op {
            Op::Inverse => {
                let identity: Vec<f64> = (0..n * n).map(|i| if i / n == i % n { 1.0 } else { 0.0 }).collect();
                let mut out = Vec::with_capacity(values.len());
                for b in 0..count {
                    let lu = Lu::new(matrix(b), n);
                    if lu.is_singular() {
                        bail!(invalid_argument, "Input is not invertible.");
                    }
                    out.extend(lu.solve(&identity, n));
                }
                ctx.set_output(0, from_f64(a.dtype(), a.shape().clone(), &out)?);
            }
            Op::Determinant | Op::LogDeterminant => {
                let (mut signs, mut logs, mut dets) = (Vec::new(), Vec::new(), Vec::new());
                for b in 0..count {
                    let lu = Lu::new(matrix(b), n);
                    let (mut sign, mut log) = (lu.sign, 0.0f64);
                    for i in 0..n {
                        let d = lu.lu[i * n + i];
                        sign *= d.signum();
                        log += d.abs().ln();
                    }
                    if lu.is_singular() {
                        (sign, log) = (0.0, f64::NEG_INFINITY);
                    }
                    dets.push(if sign == 0.0 { 0.0 } else { sign * log.exp() });
                    signs.push(sign);
                    logs.push(log);
                }
                let shape = Shape::new(batch_dims);
                if self.op == Op::Determinant {
                    ctx.set_output(0, from_f64(a.dtype(), shape, &dets)?);
                } else {
                    ctx.set_output(0, from_f64(a.dtype(), shape.clone(), &signs)?);
                    ctx.set_output(1, from_f64(a.dtype(), shape, &logs)?);
                }
            }
            Op::Solve | Op::TriangularSolve => {
                let rhs_t = ctx.input(1)?.clone();
                let rhs_dims = rhs_t.dims();
                if rhs_dims.len() != dims.len() || rhs_dims[..dims.len() - 1] != dims[..dims.len() - 1] {
                    bail!(
                        invalid_argument,
                        "the right-hand sides must have shape [..., {n}, K] matching the matrices {}, got {}",
                        a.shape(),
                        rhs_t.shape()
                    );
                }
                let m = rhs_dims[rhs_dims.len() - 1];
                let rhs = as_f64(&rhs_t)?;
                let mut out = Vec::with_capacity(rhs.len());
                for b in 0..count {
                    let block = &rhs[b * n * m..(b + 1) * n * m];
                    if self.op == Op::Solve {
                        let lu = Lu::new(matrix(b), n);
                        if lu.is_singular() {
                            bail!(invalid_argument, "Input matrix is not invertible.");
                        }
                        out.extend(lu.solve(block, m));
                    } else {
                        out.extend(self.triangular(&values[b * n * n..(b + 1) * n * n], n, block, m));
                    }
                }
                ctx.set_output(0, from_f64(a.dtype(), rhs_t.shape().clone(), &out)?);
            }
            Op::Cholesky => {
                let mut out = Vec::with_capacity(values.len());
                for b in 0..count {
                    out.extend(cholesky(&values[b * n * n..(b + 1) * n * n], n)?);
                }
                ctx.set_output(0, from_f64(a.dtype(), a.shape().clone(), &out)?);
            }
        }
        Ok(())
    }
}

impl Linalg {
    /// Solves `op(A) X = B` for a triangular `A` (its other triangle is not
    /// read), by substitution; a zero diagonal gives infinities, as
    /// TensorFlow's does.
    fn triangular(&self, a: &[f64], n: usize, rhs: &[f64], m: usize) -> Vec<f64> {
        // The element (i, k) of the triangle op(A) as used.
        let at = |i: usize, k: usize| if self.adjoint { a[k * n + i] } else { a[i * n + k] };
        // op(A) is lower triangular when A is lower and not transposed, or
        // upper and transposed.
        let forward = self.lower != self.adjoint;
        let mut x = rhs.to_vec();
        let order: Vec<usize> = if forward { (0..n).collect() } else { (0..n).rev().collect() };
        for (step, &i) in order.iter().enumerate() {
            for &k in &order[..step] {
                let l = at(i, k);
                for j in 0..m {
                    x[i * m + j] -= l * x[k * m + j];
                }
            }
            let d = at(i, i);
            for j in 0..m {
                x[i * m + j] /= d;
            }
        }
        x
    }
}

/// The lower-triangular `L` with `L Lᵀ = A` (only A's lower triangle is
/// read), zeros above the diagonal.
fn cholesky(a: &[f64], n: usize) -> Result<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        if d <= 0.0 || !d.is_finite() {
            return Err(Status::invalid_argument(
                "Cholesky decomposition was not successful. The input might not be valid.",
            ));
        }
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / d;
        }
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn op(name: &str) -> NodeSpec {
        node(name).attr("T", ty(DType::F64))
    }

    fn m(dims: &[usize], v: &[f64]) -> Tensor {
        Tensor::from_slice::<f64>(dims, v).unwrap()
    }

    fn close(got: &Tensor, want: &[f64]) {
        let g = got.as_slice::<f64>().unwrap();
        assert_eq!(g.len(), want.len());
        assert!(g.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{g:?} vs {want:?}");
    }

    #[test]
    fn inverse_solve_and_determinants_agree() {
        // [[4, 7], [2, 6]]: determinant 10, inverse [[0.6, -0.7], [-0.2, 0.4]].
        let a = m(&[1, 2, 2], &[4., 7., 2., 6.]);
        close(&run1(&op("MatrixInverse"), std::slice::from_ref(&a)).unwrap(), &[0.6, -0.7, -0.2, 0.4]);
        let adjoint = op("MatrixInverse").attr("adjoint", AttrValue::Bool(true));
        close(&run1(&adjoint, std::slice::from_ref(&a)).unwrap(), &[0.6, -0.2, -0.7, 0.4]);
        close(&run1(&op("MatrixDeterminant"), std::slice::from_ref(&a)).unwrap(), &[10.0]);
        let b = m(&[1, 2, 1], &[1., 2.]);
        close(&run1(&op("MatrixSolve"), &[a.clone(), b]).unwrap(), &[0.6 - 1.4, -0.2 + 0.8]);
        let swapped = m(&[2, 2], &[0., 1., 1., 0.]);
        let out = run_kernel_once(&op("LogMatrixDeterminant"), vec![Value::Tensor(swapped)], &ResourceMgr::default())
            .unwrap();
        let (sign, log) = (out[0].as_tensor().unwrap(), out[1].as_tensor().unwrap());
        close(sign, &[-1.0]);
        close(log, &[0.0]);
    }

    #[test]
    fn triangular_solves_and_cholesky() {
        let lower = m(&[2, 2], &[2., 99., 1., 4.]);
        let rhs = m(&[2, 1], &[4., 10.]);
        close(&run1(&op("MatrixTriangularSolve"), &[lower.clone(), rhs.clone()]).unwrap(), &[2.0, 2.0]);
        // Solving with the transpose of the lower triangle: [[2, 1], [0, 4]].
        let adjoint = op("MatrixTriangularSolve").attr("adjoint", AttrValue::Bool(true));
        close(&run1(&adjoint, &[lower, rhs]).unwrap(), &[0.75, 2.5]);
        let spd = m(&[2, 2], &[4., 2., 2., 5.]);
        close(&run1(&op("Cholesky"), &[spd]).unwrap(), &[2., 0., 1., 2.]);
    }

    #[test]
    fn singular_and_indefinite_inputs_are_errors() {
        let singular = m(&[2, 2], &[1., 2., 2., 4.]);
        let err = run1(&op("MatrixInverse"), std::slice::from_ref(&singular)).unwrap_err();
        assert!(err.message.contains("not invertible"), "{err}");
        close(&run1(&op("MatrixDeterminant"), std::slice::from_ref(&singular)).unwrap(), &[0.0]);
        let err = run1(&op("Cholesky"), &[m(&[2, 2], &[1., 2., 2., 1.])]).unwrap_err();
        assert!(err.message.contains("Cholesky decomposition was not successful"), "{err}");
        assert!(run1(&op("MatrixInverse"), &[m(&[2, 3], &[0.; 6])]).unwrap_err().message.contains("square"));
        let ints = node("MatrixInverse").attr("T", ty(DType::I32));
        assert!(run1(&ints, &[Tensor::from_slice::<i32>([1, 1], &[1]).unwrap()]).is_err());
    }
}
