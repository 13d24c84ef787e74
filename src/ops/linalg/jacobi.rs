//! `Svd` (`tf.linalg.svd`, and what `tf.norm(ord=2)`, nuclear norms,
//! `tf.linalg.pinv` and `matrix_rank` are built on) and `SelfAdjointEigV2`
//! (`tf.linalg.eigh`, `eigvalsh`) of each innermost matrix, both by Jacobi
//! rotations.
//!
//! Owns: one-sided Jacobi SVD (Hestenes: rotate column pairs until all are
//! orthogonal) and cyclic two-sided Jacobi for symmetric matrices, in
//! float64 whatever the dtype and rounded once — Jacobi's values are
//! accurate to the last bits even for tiny singular values, which
//! TensorFlow's Eigen solvers (divide and conquer, tridiagonal QR) are
//! not always. Must not hold state beyond the attributes.
//!
//! Conventions, TensorFlow's where it has one: singular values descending,
//! eigenvalues ascending; `SelfAdjointEigV2` reads the lower triangle
//! only; a matrix with a NaN gives NaN everywhere; `compute_uv=False` /
//! `compute_v=False` leave the vector outputs as placeholders. Singular
//! and eigen vectors are unique only up to sign (and, for repeated values,
//! up to rotation); this module fixes each vector's sign so that its
//! largest-magnitude entry is positive, which TensorFlow does not promise
//! either (its own signs change between `full_matrices` settings).
//! Columns that no singular value determines (`full_matrices`, or zero
//! singular values) complete the basis by Gram–Schmidt over the unit
//! vectors, in order.

use super::{as_f64, from_f64};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Shape, Tensor};

/// Sweeps after which a rotation loop stops whatever is left (Jacobi
/// converges quadratically: well-scaled matrices take 6 to 10).
const MAX_SWEEPS: usize = 80;

/// A column-major `rows × cols` matrix.
#[derive(Clone)]
struct Columns {
    data: Vec<f64>,
    rows: usize,
    cols: usize,
}

impl Columns {
    fn identity(n: usize) -> Columns {
        let mut data = vec![0.0; n * n];
        for i in 0..n {
            data[i * n + i] = 1.0;
        }
        Columns { data, rows: n, cols: n }
    }

    /// From a row-major `rows × cols` slice, transposed when `transpose`.
    fn from_rows(values: &[f64], rows: usize, cols: usize, transpose: bool) -> Columns {
        if transpose {
            // Row i of the input is column i of the result.
            return Columns { data: values.to_vec(), rows: cols, cols: rows };
        }
        let mut data = vec![0.0; rows * cols];
        for r in 0..rows {
            for c in 0..cols {
                data[c * rows + r] = values[r * cols + c];
            }
        }
        Columns { data, rows, cols }
    }

    fn col(&self, j: usize) -> &[f64] {
        &self.data[j * self.rows..(j + 1) * self.rows]
    }

    fn col_mut(&mut self, j: usize) -> &mut [f64] {
        &mut self.data[j * self.rows..(j + 1) * self.rows]
    }

    /// Columns `p < q` as `(c·p − s·q, s·p + c·q)`.
    fn rotate(&mut self, p: usize, q: usize, c: f64, s: f64) {
        debug_assert!(p < q);
        let (head, tail) = self.data.split_at_mut(q * self.rows);
        let (x, y) = (&mut head[p * self.rows..(p + 1) * self.rows], &mut tail[..self.rows]);
        for (a, b) in x.iter_mut().zip(y.iter_mut()) {
            let (u, v) = (*a, *b);
            *a = c * u - s * v;
            *b = s * u + c * v;
        }
    }

    /// The columns in `order`, the first `keep` of them.
    fn reordered(&self, order: &[usize], keep: usize) -> Columns {
        let mut data = Vec::with_capacity(self.rows * keep);
        for &j in &order[..keep] {
            data.extend_from_slice(self.col(j));
        }
        Columns { data, rows: self.rows, cols: keep }
    }

    /// Row-major values of the first `cols` columns.
    fn to_rows(&self, cols: usize) -> Vec<f64> {
        let mut out = vec![0.0; self.rows * cols];
        for c in 0..cols {
            for r in 0..self.rows {
                out[r * cols + c] = self.data[c * self.rows + r];
            }
        }
        out
    }

    /// Flips column `j` so that its largest-magnitude entry is positive.
    fn fix_sign(&mut self, j: usize) -> f64 {
        let col = self.col(j);
        let largest = col.iter().fold(0.0f64, |m, &v| if v.abs() > m.abs() { v } else { m });
        let sign = if largest < 0.0 { -1.0 } else { 1.0 };
        if sign < 0.0 {
            self.col_mut(j).iter_mut().for_each(|v| *v = -*v);
        }
        sign
    }

    /// Replaces columns `from..` by unit vectors orthogonal to every
    /// column before them (Gram–Schmidt, twice, over e₀, e₁, …).
    fn complete(&mut self, from: usize) {
        let mut candidate = 0;
        for j in from..self.cols {
            loop {
                assert!(candidate < self.rows, "a basis of {} vectors needs no more candidates", self.rows);
                let mut v = vec![0.0; self.rows];
                v[candidate] = 1.0;
                candidate += 1;
                for _ in 0..2 {
                    for k in 0..j {
                        let dot: f64 = self.col(k).iter().zip(&v).map(|(a, b)| a * b).sum();
                        v.iter_mut().zip(self.col(k)).for_each(|(x, &u)| *x -= dot * u);
                    }
                }
                let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
                // Past 1/2 the vector is well away from the span so far.
                if norm > 0.5 {
                    self.col_mut(j).iter_mut().zip(&v).for_each(|(dst, x)| *dst = x / norm);
                    break;
                }
            }
        }
    }
}

/// The SVD of a `rows × cols` matrix with rows ≥ cols (column-major `a`):
/// singular values descending, U (`rows × cols`, unit columns where the
/// value is not zero), V (`cols × cols`).
fn tall_svd(mut a: Columns) -> (Vec<f64>, Columns, Columns) {
    let n = a.cols;
    let mut v = Columns::identity(n);
    for _ in 0..MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let (x, y) = (a.col(p), a.col(q));
                let alpha: f64 = x.iter().map(|t| t * t).sum();
                let beta: f64 = y.iter().map(|t| t * t).sum();
                let gamma: f64 = x.iter().zip(y).map(|(s, t)| s * t).sum();
                if gamma == 0.0 || gamma.abs() <= f64::EPSILON * (alpha * beta).sqrt() {
                    continue;
                }
                rotated = true;
                let zeta = (beta - alpha) / (2.0 * gamma);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                a.rotate(p, q, c, s);
                v.rotate(p, q, c, s);
            }
        }
        if !rotated {
            break;
        }
    }
    let norms: Vec<f64> = (0..n).map(|j| a.col(j).iter().map(|t| t * t).sum::<f64>().sqrt()).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| norms[j].total_cmp(&norms[i]));
    let values: Vec<f64> = order.iter().map(|&j| norms[j]).collect();
    let (mut u, mut v) = (a.reordered(&order, n), v.reordered(&order, n));
    let determined = values.iter().take_while(|&&s| s > 0.0).count();
    for (j, &s) in values.iter().enumerate().take(determined) {
        u.col_mut(j).iter_mut().for_each(|x| *x /= s);
    }
    u.complete(determined);
    for j in 0..n {
        // U and V's columns flip together: U Σ Vᵀ is unchanged.
        if u.fix_sign(j) < 0.0 {
            v.col_mut(j).iter_mut().for_each(|x| *x = -*x);
        }
    }
    (values, u, v)
}

/// `m × n` U, V of a general matrix, `full`: U `m × m` and V `n × n`.
fn svd(values: &[f64], m: usize, n: usize, full: bool) -> (Vec<f64>, Columns, Columns) {
    let wide = m < n;
    let a = Columns::from_rows(values, m, n, wide);
    let (s, mut left, mut right) = tall_svd(a);
    if wide {
        std::mem::swap(&mut left, &mut right);
    }
    if full {
        for side in [&mut left, &mut right] {
            let known = side.cols;
            if side.rows > known {
                side.data.resize(side.rows * side.rows, 0.0);
                side.cols = side.rows;
                side.complete(known);
            }
        }
    }
    (s, left, right)
}

/// Eigenvalues (ascending) and eigenvectors of the symmetric matrix whose
/// lower triangle is in `values` (row-major `n × n`).
fn symmetric_eigen(values: &[f64], n: usize) -> (Vec<f64>, Columns) {
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            a[i * n + j] = values[i * n + j];
            a[j * n + i] = values[i * n + j];
        }
    }
    let mut v = Columns::identity(n);
    for _ in 0..MAX_SWEEPS {
        let off: f64 = (0..n).flat_map(|i| (0..i).map(move |j| (i, j))).map(|(i, j)| a[i * n + j].powi(2)).sum();
        let total: f64 = a.iter().map(|x| x * x).sum();
        if off <= (f64::EPSILON * f64::EPSILON) * total || off == 0.0 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq == 0.0 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                // A ← Jᵀ A J with J the rotation in the (p, q) plane.
                for k in 0..n {
                    let (akp, akq) = (a[k * n + p], a[k * n + q]);
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[p * n + k], a[q * n + k]);
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                v.rotate(p, q, c, s);
            }
        }
    }
    let diagonal: Vec<f64> = (0..n).map(|i| a[i * n + i]).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| diagonal[i].total_cmp(&diagonal[j]));
    let mut vectors = v.reordered(&order, n);
    for j in 0..n {
        vectors.fix_sign(j);
    }
    (order.iter().map(|&i| diagonal[i]).collect(), vectors)
}

// ---------------------------------------------------------------------------
// Kernels

pub(super) fn svd_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t, t, t]))
}

pub(super) fn eigen_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t, t]))
}

pub(super) fn build_svd(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = super::float_dtype(node)?;
    Ok(Box::new(Svd {
        dtype,
        compute_uv: node.attr_bool_or("compute_uv", true)?,
        full_matrices: node.attr_bool_or("full_matrices", false)?,
    }))
}

pub(super) fn build_eigen(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    Ok(Box::new(SymmetricEigen { dtype: super::float_dtype(node)?, compute_v: node.attr_bool_or("compute_v", true)? }))
}

/// The batch dimensions and the innermost `rows × cols` of `t`.
fn matrices(t: &Tensor) -> Result<(Vec<usize>, usize, usize)> {
    let dims = t.dims();
    if dims.len() < 2 {
        bail!(invalid_argument, "Input tensor 0 must have rank >= 2, got shape {}", t.shape());
    }
    Ok((dims[..dims.len() - 2].to_vec(), dims[dims.len() - 2], dims[dims.len() - 1]))
}

fn batched(batch: &[usize], tail: &[usize]) -> Shape {
    Shape::from_vec(batch.iter().chain(tail).copied().collect())
}

/// The placeholder a vector output holds when it was not asked for.
fn placeholder(dtype: DType) -> Result<Tensor> {
    from_f64(dtype, Shape::from_vec(vec![0]), &[])
}

struct Svd {
    dtype: DType,
    compute_uv: bool,
    full_matrices: bool,
}

impl OpKernel for Svd {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let (batch, m, n) = matrices(input)?;
        let p = m.min(n);
        let (u_cols, v_cols) = if self.full_matrices { (m, n) } else { (p, p) };
        let values = as_f64(input)?;
        let count: usize = batch.iter().product();
        let (mut s_out, mut u_out, mut v_out) = (Vec::new(), Vec::new(), Vec::new());
        for b in 0..count {
            let a = &values[b * m * n..(b + 1) * m * n];
            if a.iter().any(|x| x.is_nan()) {
                s_out.extend(std::iter::repeat_n(f64::NAN, p));
                u_out.extend(std::iter::repeat_n(f64::NAN, m * u_cols));
                v_out.extend(std::iter::repeat_n(f64::NAN, n * v_cols));
                continue;
            }
            let (s, u, v) = svd(a, m, n, self.full_matrices && self.compute_uv);
            s_out.extend(s);
            if self.compute_uv {
                u_out.extend(u.to_rows(u_cols));
                v_out.extend(v.to_rows(v_cols));
            }
        }
        ctx.set_output(0, from_f64(self.dtype, batched(&batch, &[p]), &s_out)?);
        if self.compute_uv {
            ctx.set_output(1, from_f64(self.dtype, batched(&batch, &[m, u_cols]), &u_out)?);
            ctx.set_output(2, from_f64(self.dtype, batched(&batch, &[n, v_cols]), &v_out)?);
        } else {
            ctx.set_output(1, placeholder(self.dtype)?);
            ctx.set_output(2, placeholder(self.dtype)?);
        }
        Ok(())
    }
}

struct SymmetricEigen {
    dtype: DType,
    compute_v: bool,
}

impl OpKernel for SymmetricEigen {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let (batch, m, n) = matrices(input)?;
        if m != n {
            bail!(invalid_argument, "Input matrix must be square, got shape {}", input.shape());
        }
        let values = as_f64(input)?;
        let count: usize = batch.iter().product();
        let (mut e_out, mut v_out) = (Vec::with_capacity(count * n), Vec::with_capacity(count * n * n));
        for b in 0..count {
            let a = &values[b * n * n..(b + 1) * n * n];
            let lower_has_nan = (0..n).any(|i| (0..=i).any(|j| a[i * n + j].is_nan()));
            if lower_has_nan {
                e_out.extend(std::iter::repeat_n(f64::NAN, n));
                v_out.extend(std::iter::repeat_n(f64::NAN, n * n));
                continue;
            }
            let (e, v) = symmetric_eigen(a, n);
            e_out.extend(e);
            v_out.extend(v.to_rows(n));
        }
        ctx.set_output(0, from_f64(self.dtype, batched(&batch, &[n]), &e_out)?);
        let vectors = if self.compute_v {
            from_f64(self.dtype, batched(&batch, &[n, n]), &v_out)?
        } else {
            placeholder(self.dtype)?
        };
        ctx.set_output(1, vectors);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, run_all, ty};

    /// U diag(s) Vᵀ, row-major `u.rows × v.rows`.
    fn rebuild(s: &[f64], u: &Columns, v: &Columns) -> Vec<f64> {
        let (m, n) = (u.rows, v.rows);
        (0..m * n).map(|at| (0..s.len()).map(|k| u.col(k)[at / n] * s[k] * v.col(k)[at % n]).sum()).collect()
    }

    fn assert_orthonormal_columns(q: &[f64], rows: usize, cols: usize) {
        for a in 0..cols {
            for b in 0..cols {
                let dot: f64 = (0..rows).map(|r| q[r * cols + a] * q[r * cols + b]).sum();
                let want = if a == b { 1.0 } else { 0.0 };
                assert!((dot - want).abs() < 1e-12, "columns {a}, {b}: {dot}");
            }
        }
    }

    #[test]
    fn singular_values_are_tensorflow_s_and_the_factors_rebuild_the_matrix() {
        let a = [2.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 4.0, 1.0, 0.0, 1.0];
        let transposed: Vec<f64> = (0..12).map(|i| a[(i % 4) * 3 + i / 4]).collect();
        for (m, n, values) in [(4, 3, a.to_vec()), (3, 4, transposed)] {
            for full in [false, true] {
                let (s, u, v) = svd(&values, m, n, full);
                // TensorFlow 2.21 (float32, to its rounding) for the 4 × 3
                // matrix; its transpose has the same values.
                for (got, want) in s.iter().zip([4.841517925262451, 2.999999761581421, 1.5999040603637695]) {
                    assert!((got - want).abs() < 3e-6, "{s:?}"); // float32 rounding: a few ulps
                }
                let (u_cols, v_cols) = if full { (m, n) } else { (3, 3) };
                let rebuilt = rebuild(&s, &u, &v);
                assert_orthonormal_columns(&u.to_rows(u_cols), m, u_cols);
                assert_orthonormal_columns(&v.to_rows(v_cols), n, v_cols);
                for (x, y) in rebuilt.iter().zip(&values) {
                    assert!((x - y).abs() < 1e-12, "{rebuilt:?} vs {values:?}");
                }
            }
        }
        // Rank one: one value, the rest of U completed orthonormally.
        let (s, u, _) = svd(&[1.0, 2.0, 2.0, 4.0, 3.0, 6.0], 3, 2, true);
        assert!((s[0] - 70f64.sqrt()).abs() < 1e-12 && s[1].abs() < 1e-12, "{s:?}");
        assert_orthonormal_columns(&u.to_rows(3), 3, 3);
    }

    #[test]
    fn eigen_decomposition_is_tensorflow_s_and_reads_the_lower_triangle() {
        // The upper triangle is garbage: only the lower one is read.
        let a = [2.0, 99.0, -7.0, 1.0, 3.0, 42.0, 0.0, 1.0, 4.0];
        let (e, v) = symmetric_eigen(&a, 3);
        // TensorFlow 2.21 (float32): 3 ∓ √3 and 3.
        for (got, want) in e.iter().zip([1.267948865890503, 2.999999761581421, 4.732051372528076]) {
            assert!((got - want).abs() < 1e-6, "{e:?}");
        }
        let v = v.to_rows(3);
        assert_orthonormal_columns(&v, 3, 3);
        let sym = [2.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 4.0];
        for k in 0..3 {
            for i in 0..3 {
                let av: f64 = (0..3).map(|j| sym[i * 3 + j] * v[j * 3 + k]).sum();
                assert!((av - e[k] * v[i * 3 + k]).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn kernels_shape_their_outputs_as_tensorflow_does() {
        let a = Tensor::from_slice::<f32>([2, 3, 2], &[1., 2., 3., 4., 5., 6., 0., 1., 1., 0., 2., 2.]).unwrap();
        let out = run_all(
            &node("Svd").attr("T", ty(DType::F32)).attr("full_matrices", crate::graph::spec::AttrValue::Bool(true)),
            std::slice::from_ref(&a),
        )
        .unwrap();
        assert_eq!((out[0].dims(), out[1].dims(), out[2].dims()), (&[2, 2][..], &[2, 3, 3][..], &[2, 2, 2][..]));
        let out = run_all(
            &node("Svd").attr("T", ty(DType::F32)).attr("compute_uv", crate::graph::spec::AttrValue::Bool(false)),
            &[a],
        )
        .unwrap();
        assert_eq!(out[0].dims(), [2, 2]);
        let nan = Tensor::from_slice::<f32>([2, 2], &[f32::NAN, 1., 0., 1.]).unwrap();
        let out = run_all(&node("SelfAdjointEigV2").attr("T", ty(DType::F32)), &[nan]).unwrap();
        assert!(out[0].as_slice::<f32>().unwrap().iter().all(|x| x.is_nan()));
        let err = run_all(
            &node("SelfAdjointEigV2").attr("T", ty(DType::F64)),
            &[Tensor::from_slice::<f64>([2, 3], &[0.; 6]).unwrap()],
        )
        .unwrap_err();
        assert!(err.message.contains("must be square"), "{}", err.message);
    }
}
