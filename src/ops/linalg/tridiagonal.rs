//! `TridiagonalSolve` (`tf.linalg.tridiagonal_solve`: splines, implicit
//! time steps, banded physics): solves each batch member's tridiagonal
//! system for its right-hand-side columns.
//!
//! Owns: Gaussian elimination on the three diagonals, with row
//! interchanges where the subdiagonal entry is larger (LAPACK `gtsv`'s
//! rule; one more superdiagonal of fill) or, with `partial_pivoting`
//! false, the plain Thomas sweep; float64 whatever the dtype. Must not
//! hold state beyond the attributes.
//!
//! The diagonals come in TensorFlow's compact form `[..., 3, M]`:
//! superdiagonal (its last entry unused), diagonal, subdiagonal (its first
//! entry unused). A zero pivot with pivoting is "The matrix is not
//! invertible."; without pivoting the division runs on, as there (NaN and
//! ∞ in the answer). `perturb_singular` moves a pivot below
//! ε·max|U| to that size (its sign kept, + for zero) instead of failing;
//! TensorFlow perturbs on the same scale, so answers agree wherever no
//! pivot was perturbed.

use super::{as_f64, from_f64};
use crate::bail;
use crate::error::Result;
use crate::ops::{KernelInit, OpContext, OpKernel};
use crate::tensor::DType;

pub(super) fn build(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    Ok(Box::new(TridiagonalSolve {
        dtype: super::float_dtype(node)?,
        pivoting: node.attr_bool_or("partial_pivoting", true)?,
        perturb: node.attr_bool_or("perturb_singular", false)?,
    }))
}

struct TridiagonalSolve {
    dtype: DType,
    pivoting: bool,
    perturb: bool,
}

impl OpKernel for TridiagonalSolve {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (diagonals, rhs) = (ctx.input(0)?.clone(), ctx.input(1)?.clone());
        let (d_dims, r_dims) = (diagonals.dims(), rhs.dims());
        if d_dims.len() < 2 || d_dims[d_dims.len() - 2] != 3 {
            bail!(
                invalid_argument,
                "Expected diagonals to be provided as a tensor of shape [..., 3, M], got {}",
                diagonals.shape()
            );
        }
        if r_dims.len() < 2 {
            bail!(invalid_argument, "Expected rhs to have rank at least 2, got {}", rhs.shape());
        }
        let (m, k) = (d_dims[d_dims.len() - 1], r_dims[r_dims.len() - 1]);
        if r_dims[r_dims.len() - 2] != m {
            bail!(
                invalid_argument,
                "Expected the same number of left-hand sides and right-hand sides, got {m} and {}.",
                r_dims[r_dims.len() - 2]
            );
        }
        if d_dims[..d_dims.len() - 2] != r_dims[..r_dims.len() - 2] {
            bail!(invalid_argument, "Batch shapes of diagonals {} and rhs {} differ", diagonals.shape(), rhs.shape());
        }
        let (d, b) = (as_f64(&diagonals)?, as_f64(&rhs)?);
        let count: usize = d_dims[..d_dims.len() - 2].iter().product();
        let mut out = Vec::with_capacity(b.len());
        for i in 0..count {
            let bands = &d[i * 3 * m..(i + 1) * 3 * m];
            let (upper, main, lower) = (&bands[..m], &bands[m..2 * m], &bands[2 * m..]);
            out.extend(self.solve(upper, main, lower, &b[i * m * k..(i + 1) * m * k], k)?);
        }
        ctx.set_output(0, from_f64(self.dtype, rhs.shape().clone(), &out)?);
        Ok(())
    }
}

impl TridiagonalSolve {
    /// The solution of one `m × m` system for the row-major `m × k` `rhs`.
    fn solve(&self, upper: &[f64], main: &[f64], lower: &[f64], rhs: &[f64], k: usize) -> Result<Vec<f64>> {
        let m = main.len();
        let mut x = rhs.to_vec();
        if m == 0 {
            return Ok(x);
        }
        // U's three bands as elimination leaves them: diagonal, first and
        // second superdiagonals.
        let mut u0 = main.to_vec();
        let mut u1: Vec<f64> = (0..m).map(|i| if i + 1 < m { upper[i] } else { 0.0 }).collect();
        let mut u2 = vec![0.0; m];
        for i in 0..m.saturating_sub(1) {
            let below = lower[i + 1];
            if !self.pivoting || u0[i].abs() >= below.abs() {
                if self.pivoting && u0[i] == 0.0 && !self.perturb {
                    // Both candidates are zero: column i is.
                    bail!(invalid_argument, "The matrix is not invertible.");
                }
                let f = below / u0[i];
                u0[i + 1] -= f * u1[i];
                for j in 0..k {
                    x[(i + 1) * k + j] -= f * x[i * k + j];
                }
            } else {
                let f = u0[i] / below;
                let (old_u1, next_u0, next_u1) = (u1[i], u0[i + 1], u1[i + 1]);
                (u0[i], u1[i], u2[i]) = (below, next_u0, next_u1);
                u0[i + 1] = old_u1 - f * next_u0;
                u1[i + 1] = -f * next_u1;
                for j in 0..k {
                    x.swap(i * k + j, (i + 1) * k + j);
                    x[(i + 1) * k + j] -= f * x[i * k + j];
                }
            }
        }
        if self.perturb {
            let scale = f64::EPSILON * u0.iter().chain(&u1).chain(&u2).fold(0.0f64, |acc, v| acc.max(v.abs()));
            for pivot in &mut u0 {
                if pivot.abs() < scale {
                    *pivot = if *pivot < 0.0 { -scale } else { scale };
                }
            }
        } else if self.pivoting && u0.contains(&0.0) {
            bail!(invalid_argument, "The matrix is not invertible.");
        }
        for i in (0..m).rev() {
            for j in 0..k {
                let mut v = x[i * k + j];
                if i + 1 < m {
                    v -= u1[i] * x[(i + 1) * k + j];
                }
                if i + 2 < m {
                    v -= u2[i] * x[(i + 2) * k + j];
                }
                x[i * k + j] = v / u0[i];
            }
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solver(pivoting: bool) -> TridiagonalSolve {
        TridiagonalSolve { dtype: DType::F64, pivoting, perturb: false }
    }

    #[test]
    fn solutions_are_tensorflow_s() {
        // TensorFlow 2.21 (float32): compact diagonals [[1, 2, 3, _], [4,
        // 5, 6, 7], [_, 1, 2, 3]], right-hand sides [[1, 2], ..., [7, 8]].
        let (upper, main, lower) = ([1.0, 2.0, 3.0, 0.0], [4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0]);
        let rhs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        #[rustfmt::skip]
        let want = [0.12815535068511963, 0.34563106298446655, 0.48737862706184387, 0.617475688457489,
                    0.2174757421016693, 0.283495157957077, 0.9067960977554321, 1.0213592052459717];
        for pivoting in [true, false] {
            let x = solver(pivoting).solve(&upper, &main, &lower, &rhs, 2).unwrap();
            for (g, w) in x.iter().zip(want) {
                assert!((g - w).abs() < 1e-6, "{x:?}");
            }
        }
        // A zero first pivot needs the interchange: [[0, 1, 0], [1, 1, 1],
        // [0, 1, 1]] x = 1 gives [0, 1, 0] with pivoting, NaN without.
        let (upper, main, lower) = ([1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [0.0, 1.0, 1.0]);
        assert_eq!(solver(true).solve(&upper, &main, &lower, &[1.0; 3], 1).unwrap(), [0.0, 1.0, 0.0]);
        assert!(solver(false).solve(&upper, &main, &lower, &[1.0; 3], 1).unwrap().iter().all(|v| v.is_nan()));
    }

    #[test]
    fn a_singular_system_is_refused_unless_perturbed() {
        // [[1, 1], [1, 1]]: singular.
        let (upper, main, lower) = ([1.0, 0.0], [1.0, 1.0], [0.0, 1.0]);
        let err = solver(true).solve(&upper, &main, &lower, &[1.0, 2.0], 1).unwrap_err();
        assert_eq!(err.message, "The matrix is not invertible.");
        let perturbed = TridiagonalSolve { dtype: DType::F64, pivoting: true, perturb: true };
        assert!(perturbed.solve(&upper, &main, &lower, &[1.0, 2.0], 1).unwrap().iter().all(|v| v.is_finite()));
    }
}
