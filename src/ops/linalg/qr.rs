//! `Qr` (`tf.linalg.qr`, and the orthogonal initializer of TF1 graphs and
//! recurrent layers, which orthonormalizes a normal draw through it): the
//! QR decomposition of each innermost matrix by Householder reflections.
//!
//! Owns: the factorization, in float64 whatever the dtype and rounded once,
//! with Eigen's `HouseholderQR` conventions, which fix the signs TensorFlow
//! returns: a column whose part below the diagonal is already zero is left
//! as it is (no reflection, `R`'s diagonal keeps its sign); otherwise the
//! reflection sends it to `-sign(a_kk) * norm` (a zero `a_kk` counts as
//! positive). Must not hold state beyond the `full_matrices` attribute.

use super::{as_f64, from_f64};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Shape};

pub(super) fn qr_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t, t]))
}

pub(super) fn build_qr(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = super::float_dtype(init.node)?;
    Ok(Box::new(Qr { full_matrices: init.node.attr_bool_or("full_matrices", false)?, dtype }))
}

struct Qr {
    /// Q is `m × m` and R `m × n` (else `m × min(m, n)` and `min(m, n) × n`).
    full_matrices: bool,
    dtype: DType,
}

impl OpKernel for Qr {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let a = ctx.input(0)?.clone();
        let dims = a.dims();
        if dims.len() < 2 {
            bail!(invalid_argument, "Input tensor 0 must have rank >= 2, got shape {}", a.shape());
        }
        let (m, n) = (dims[dims.len() - 2], dims[dims.len() - 1]);
        let batch = &dims[..dims.len() - 2];
        let count: usize = batch.iter().product();
        let p = if self.full_matrices { m } else { m.min(n) };
        let tiny = if self.dtype == DType::F32 { f32::MIN_POSITIVE as f64 } else { f64::MIN_POSITIVE };
        let values = as_f64(&a)?;
        let (mut q_out, mut r_out) = (Vec::with_capacity(count * m * p), Vec::with_capacity(count * p * n));
        for b in 0..count {
            let factors = Householder::factor(values[b * m * n..(b + 1) * m * n].to_vec(), m, n, tiny);
            q_out.extend(factors.q(p));
            r_out.extend(factors.r(p));
        }
        let shape = |rows: usize, cols: usize| Shape::from_vec(batch.iter().copied().chain([rows, cols]).collect());
        ctx.set_output(0, from_f64(self.dtype, shape(m, p), &q_out)?);
        ctx.set_output(1, from_f64(self.dtype, shape(p, n), &r_out)?);
        Ok(())
    }
}

/// A factored `m × n` row-major matrix, as Eigen's `HouseholderQR` keeps
/// it: R on and above the diagonal, below it each reflection's vector
/// without its leading 1; `taus` the reflections' coefficients.
struct Householder {
    qr: Vec<f64>,
    taus: Vec<f64>,
    m: usize,
    n: usize,
}

impl Householder {
    /// Factors `a` (`m × n`, row-major). `tiny`: a column below the
    /// diagonal whose squared norm is at most this is taken as zero.
    fn factor(mut a: Vec<f64>, m: usize, n: usize, tiny: f64) -> Householder {
        let size = m.min(n);
        let mut taus = Vec::with_capacity(size);
        for k in 0..size {
            let c0 = a[k * n + k];
            let tail_sq: f64 = (k + 1..m).map(|i| a[i * n + k] * a[i * n + k]).sum();
            if tail_sq <= tiny {
                for i in k + 1..m {
                    a[i * n + k] = 0.0;
                }
                taus.push(0.0);
                continue;
            }
            let norm = (c0 * c0 + tail_sq).sqrt();
            let beta = if c0 >= 0.0 { -norm } else { norm };
            let scale = 1.0 / (c0 - beta);
            for i in k + 1..m {
                a[i * n + k] *= scale;
            }
            let tau = (beta - c0) / beta;
            a[k * n + k] = beta;
            taus.push(tau);
            // The remaining columns: x -= tau * v * (v . x), v = [1; essential].
            for j in k + 1..n {
                let dot = a[k * n + j] + (k + 1..m).map(|i| a[i * n + k] * a[i * n + j]).sum::<f64>();
                let t = tau * dot;
                a[k * n + j] -= t;
                for i in k + 1..m {
                    a[i * n + j] -= t * a[i * n + k];
                }
            }
        }
        Householder { qr: a, taus, m, n }
    }

    /// The first `p` columns of Q = H_0 H_1 ... H_{k-1}, row-major `m × p`:
    /// the reflections applied, last first, to the identity's columns.
    fn q(&self, p: usize) -> Vec<f64> {
        let (m, n) = (self.m, self.n);
        let mut q: Vec<f64> = (0..m * p).map(|i| if i / p == i % p { 1.0 } else { 0.0 }).collect();
        for (k, &tau) in self.taus.iter().enumerate().rev() {
            if tau == 0.0 {
                continue;
            }
            for j in 0..p {
                let dot = q[k * p + j] + (k + 1..m).map(|i| self.qr[i * n + k] * q[i * p + j]).sum::<f64>();
                let t = tau * dot;
                q[k * p + j] -= t;
                for i in k + 1..m {
                    q[i * p + j] -= t * self.qr[i * n + k];
                }
            }
        }
        q
    }

    /// R's first `p` rows, `p × n`: the factored matrix on and above the
    /// diagonal, zeros below (rows past `min(m, n)` all zero).
    fn r(&self, p: usize) -> Vec<f64> {
        let n = self.n;
        (0..p * n).map(|i| if i % n >= i / n && i / n < self.m { self.qr[i] } else { 0.0 }).collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::{node, run_all, ty};
    use crate::tensor::{DType, Tensor};

    fn qr(dims: &[usize], values: &[f64], full: bool) -> (Tensor, Tensor) {
        let spec =
            node("Qr").attr("T", ty(DType::F64)).attr("full_matrices", crate::graph::spec::AttrValue::Bool(full));
        let mut out = run_all(&spec, &[Tensor::from_slice::<f64>(dims, values).unwrap()]).unwrap();
        let r = out.pop().unwrap();
        (out.pop().unwrap(), r)
    }

    fn close(got: &Tensor, want: &[f64]) {
        let got = got.as_slice::<f64>().unwrap();
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn factors_match_tensorflow_with_its_signs() {
        // tf.linalg.qr of [[1, 2], [3, 4], [5, 6]] (float64), reduced and full.
        let a = [1., 2., 3., 4., 5., 6.];
        let (q, r) = qr(&[3, 2], &a, false);
        assert_eq!((q.dims(), r.dims()), (&[3usize, 2][..], &[2usize, 2][..]));
        close(
            &q,
            &[
                -0.16903085094570325,
                0.89708522714506,
                -0.5070925528371099,
                0.27602622373694297,
                -0.8451542547285166,
                -0.34503277967117774,
            ],
        );
        close(&r, &[-5.916079783099616, -7.437357441610944, 0.0, 0.8280786712108239]);
        let (q, r) = qr(&[3, 2], &a, true);
        assert_eq!((q.dims(), r.dims()), (&[3usize, 3][..], &[3usize, 2][..]));
        close(
            &q,
            &[
                -0.16903085094570325,
                0.89708522714506,
                0.40824829046386474,
                -0.5070925528371099,
                0.27602622373694297,
                -0.8164965809277257,
                -0.8451542547285166,
                -0.34503277967117774,
                0.4082482904638624,
            ],
        );
        close(&r, &[-5.916079783099616, -7.437357441610944, 0.0, 0.8280786712108239, 0.0, 0.0]);
    }

    #[test]
    fn a_column_already_reduced_keeps_its_sign() {
        // The last column of a square matrix has nothing below the diagonal:
        // no reflection, so R's last diagonal entry keeps the sign it has.
        let (q, r) = qr(&[2, 2], &[2., 1., 0., -3.], false);
        close(&q, &[1., 0., 0., 1.]);
        close(&r, &[2., 1., 0., -3.]);
        let (q, r) = qr(&[2, 2], &[0., 1., 0., -3.], false);
        close(&q, &[1., 0., 0., 1.]);
        close(&r, &[0., 1., 0., -3.]);
        // A wide matrix, batched: Q is 2 × 2, R 2 × 3, both Q Rs give A back.
        let a = [0., 1., 2., 3., 4., 5., 1., -1., 2., 0.5, 0., -2.];
        let (q, r) = qr(&[2, 2, 3], &a, false);
        let (q, r) = (q.as_slice::<f64>().unwrap(), r.as_slice::<f64>().unwrap());
        for b in 0..2 {
            for i in 0..2 {
                for j in 0..3 {
                    let qr: f64 = (0..2).map(|k| q[b * 4 + i * 2 + k] * r[b * 6 + k * 3 + j]).sum();
                    assert!((qr - a[b * 6 + i * 3 + j]).abs() < 1e-12);
                }
            }
        }
    }

    #[test]
    fn vectors_and_integers_are_errors() {
        let spec = node("Qr").attr("T", ty(DType::F64));
        let err = run_all(&spec, &[Tensor::from_slice::<f64>([3], &[1., 2., 3.]).unwrap()]).unwrap_err();
        assert!(err.message.contains("rank >= 2"), "{err}");
        let ints = node("Qr").attr("T", ty(DType::I32));
        assert!(run_all(&ints, &[Tensor::from_slice::<i32>([1, 1], &[1]).unwrap()]).is_err());
    }
}
