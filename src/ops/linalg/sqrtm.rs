//! `MatrixSquareRoot` (`tf.linalg.sqrtm`, as FID scores and whitening
//! use it): the principal square root of each innermost square matrix.
//!
//! Owns: the scaled Denman–Beavers iteration (Y → √A, Z → √A⁻¹, each step
//! averaging one with the other's inverse, scaled by their determinants
//! until close), in float64 whatever the dtype. Must not hold state.
//!
//! TensorFlow's answers where no real principal root exists are kept: a
//! singular matrix, or one with a negative real eigenvalue, gives NaN in
//! every entry (the iteration then meets a singular step or never
//! settles). Complex eigenvalue pairs are fine: a rotation has a real
//! root.

use super::{Lu, as_f64, from_f64, square_batch};
use crate::error::Result;
use crate::ops::{KernelInit, OpContext, OpKernel};
use crate::tensor::DType;

/// Steps before an iteration that has not settled is given up (NaN).
const MAX_STEPS: usize = 100;

pub(super) fn build_sqrtm(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(MatrixSquareRoot { dtype: super::float_dtype(init.node)? }))
}

struct MatrixSquareRoot {
    dtype: DType,
}

impl OpKernel for MatrixSquareRoot {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let a = ctx.input(0)?.clone();
        let (count, n) = square_batch(&a, "Input matrix")?;
        let values = as_f64(&a)?;
        let mut out = Vec::with_capacity(values.len());
        for b in 0..count {
            let matrix = &values[b * n * n..(b + 1) * n * n];
            out.extend(principal_root(matrix, n).unwrap_or_else(|| vec![f64::NAN; n * n]));
        }
        ctx.set_output(0, from_f64(self.dtype, a.shape().clone(), &out)?);
        Ok(())
    }
}

/// The inverse of a row-major `n × n` matrix and its determinant, or
/// `None` when it is singular.
fn inverse_and_det(m: &[f64], n: usize) -> Option<(Vec<f64>, f64)> {
    let lu = Lu::new(m.to_vec(), n);
    if lu.is_singular() {
        return None;
    }
    let det = lu.sign * (0..n).map(|i| lu.lu[i * n + i]).product::<f64>();
    let mut identity = vec![0.0; n * n];
    for i in 0..n {
        identity[i * n + i] = 1.0;
    }
    Some((lu.solve(&identity, n), det))
}

fn frobenius(m: &[f64]) -> f64 {
    m.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// √A by the scaled Denman–Beavers iteration, or `None` where it has no
/// real principal value.
fn principal_root(a: &[f64], n: usize) -> Option<Vec<f64>> {
    if n == 0 {
        return Some(Vec::new());
    }
    if a.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut y = a.to_vec();
    let mut z = vec![0.0; n * n];
    for i in 0..n {
        z[i * n + i] = 1.0;
    }
    let mut scaling = true;
    for _ in 0..MAX_STEPS {
        let (y_inv, y_det) = inverse_and_det(&y, n)?;
        let (z_inv, z_det) = inverse_and_det(&z, n)?;
        // Determinant scaling balances Y and Z early; near the root it
        // would only add rounding.
        let mu = if scaling { (y_det * z_det).abs().powf(-0.5 / n as f64) } else { 1.0 };
        if !mu.is_finite() || mu == 0.0 {
            return None;
        }
        let next_y: Vec<f64> = y.iter().zip(&z_inv).map(|(a, b)| 0.5 * (mu * a + b / mu)).collect();
        let next_z: Vec<f64> = z.iter().zip(&y_inv).map(|(a, b)| 0.5 * (mu * a + b / mu)).collect();
        let change = frobenius(&next_y.iter().zip(&y).map(|(a, b)| a - b).collect::<Vec<_>>());
        let size = frobenius(&next_y);
        (y, z) = (next_y, next_z);
        if !size.is_finite() {
            return None;
        }
        if change <= 1e-2 * size {
            scaling = false;
        }
        if change <= 1e-14 * size {
            return Some(y);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
        (0..n * n).map(|k| (0..n).map(|j| a[(k / n) * n + j] * b[j * n + k % n]).sum()).collect()
    }

    #[test]
    fn roots_square_back_and_match_tensorflow_s() {
        // TensorFlow 2.21 (float32): sqrtm([[4, 1], [0, 9]]) and of a
        // quarter turn, whose eigenvalues are ±i.
        let root = principal_root(&[4.0, 1.0, 0.0, 9.0], 2).unwrap();
        for (got, want) in root.iter().zip([2.0, 0.2, 0.0, 3.0]) {
            assert!((got - want).abs() < 1e-12, "{root:?}");
        }
        let turn = principal_root(&[0.0, -1.0, 1.0, 0.0], 2).unwrap();
        let h = std::f64::consts::FRAC_1_SQRT_2;
        for (got, want) in turn.iter().zip([h, -h, h, h]) {
            assert!((got - want).abs() < 1e-12, "{turn:?}");
        }
        // The product of two covariances (not symmetric): its root squares
        // back to it.
        let a = [2.0, 0.3, 0.1, 0.3, 1.5, -0.2, 0.1, -0.2, 1.0];
        let b = [1.0, 0.5, 0.0, 0.5, 2.0, 0.4, 0.0, 0.4, 3.0];
        let ab = product(&a, &b, 3);
        let root = principal_root(&ab, 3).unwrap();
        for (x, y) in product(&root, &root, 3).iter().zip(&ab) {
            assert!((x - y).abs() < 1e-12);
        }
    }

    #[test]
    fn no_real_principal_root_is_nan_as_in_tensorflow() {
        // TensorFlow 2.21 gives NaN everywhere for each of these.
        for m in [[-1.0, 0.0, 0.0, 4.0], [0.0; 4], [1.0, 2.0, 3.0, 4.0]] {
            assert!(principal_root(&m, 2).is_none(), "{m:?}");
        }
        assert_eq!(principal_root(&[], 0), Some(vec![]));
    }
}
