//! `BandedTriangularSolve` (`tf.linalg.banded_triangular_solve`): solves
//! triangular systems given by their K diagonals, batch dimensions
//! broadcast.
//!
//! Owns: the band layout and the substitution, in float64 whatever the
//! dtype. Must not hold state beyond the attributes.
//!
//! TensorFlow's layout (`LEFT_RIGHT`): lower, row r of `bands` is the r-th
//! subdiagonal, padded on the left (A[i, i − r] = bands[r, i]); upper, the
//! diagonal is the last row and row r is the (K − 1 − r)-th superdiagonal,
//! padded on the right (A[i, i + d] = bands[r, i]). `adjoint` solves with
//! Aᵀ. A zero on the diagonal is "Input matrix is not invertible.".

use super::{as_f64, from_f64};
use crate::bail;
use crate::error::Result;
use crate::ops::broadcast::broadcast_shape;
use crate::ops::{KernelInit, OpContext, OpKernel};
use crate::tensor::{DType, Shape};

pub(super) fn build(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    Ok(Box::new(BandedTriangularSolve {
        dtype: super::float_dtype(node)?,
        lower: node.attr_bool_or("lower", true)?,
        adjoint: node.attr_bool_or("adjoint", false)?,
    }))
}

struct BandedTriangularSolve {
    dtype: DType,
    lower: bool,
    adjoint: bool,
}

/// The flat index in a batch of shape `dims` (broadcast to `out`) of the
/// member at flat index `at` of `out`.
fn source_index(at: usize, out: &[usize], dims: &[usize]) -> usize {
    let (mut rest, mut index, mut stride) = (at, 0, 1);
    for (axis, &size) in out.iter().enumerate().rev() {
        let coordinate = rest % size;
        rest /= size;
        let offset = out.len() - dims.len();
        if axis >= offset {
            let own = dims[axis - offset];
            if own != 1 {
                index += coordinate * stride;
            }
            stride *= own;
        }
    }
    index
}

impl OpKernel for BandedTriangularSolve {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (bands, rhs) = (ctx.input(0)?.clone(), ctx.input(1)?.clone());
        let (b_dims, r_dims) = (bands.dims(), rhs.dims());
        if b_dims.len() < 2 || r_dims.len() < 2 {
            bail!(invalid_argument, "bands and rhs must have rank >= 2, got {} and {}", bands.shape(), rhs.shape());
        }
        let (k, m) = (b_dims[b_dims.len() - 2], b_dims[b_dims.len() - 1]);
        let (rows, cols) = (r_dims[r_dims.len() - 2], r_dims[r_dims.len() - 1]);
        if rows != m {
            bail!(
                invalid_argument,
                "In[0] mismatch In[1] shape: {m} vs. {rows}: {} {} {} {}",
                bands.shape(),
                rhs.shape(),
                u8::from(self.lower),
                u8::from(self.adjoint)
            );
        }
        let (band_batch, rhs_batch) = (&b_dims[..b_dims.len() - 2], &r_dims[..r_dims.len() - 2]);
        let batch = broadcast_shape(band_batch, rhs_batch)?;
        let count = batch.num_elements();
        let (b, r) = (as_f64(&bands)?, as_f64(&rhs)?);
        let mut out = Vec::with_capacity(count * m * cols);
        for at in 0..count {
            let bi = source_index(at, batch.dims(), band_batch);
            let ri = source_index(at, batch.dims(), rhs_batch);
            let x = self.solve(&b[bi * k * m..(bi + 1) * k * m], k, m, &r[ri * m * cols..(ri + 1) * m * cols], cols)?;
            out.extend(x);
        }
        let shape = Shape::from_vec(batch.dims().iter().copied().chain([m, cols]).collect());
        ctx.set_output(0, from_f64(self.dtype, shape, &out)?);
        Ok(())
    }
}

impl BandedTriangularSolve {
    /// A[i, j] of the `m × m` matrix the `k × m` bands describe (0 off the
    /// band).
    fn entry(&self, bands: &[f64], k: usize, m: usize, i: usize, j: usize) -> f64 {
        if self.lower {
            let r = i.wrapping_sub(j);
            if j <= i && r < k { bands[r * m + i] } else { 0.0 }
        } else {
            let d = j.wrapping_sub(i);
            if i <= j && d < k { bands[(k - 1 - d) * m + i] } else { 0.0 }
        }
    }

    fn solve(&self, bands: &[f64], k: usize, m: usize, rhs: &[f64], cols: usize) -> Result<Vec<f64>> {
        // (A or Aᵀ) x = rhs: the solved matrix is lower triangular, and
        // solved first row first, when exactly one of `lower` and
        // `adjoint` holds.
        let at = |i: usize, j: usize| {
            if self.adjoint { self.entry(bands, k, m, j, i) } else { self.entry(bands, k, m, i, j) }
        };
        let forward = self.lower != self.adjoint;
        let mut x = rhs.to_vec();
        let reach = k.saturating_sub(1);
        let order: Vec<usize> = if forward { (0..m).collect() } else { (0..m).rev().collect() };
        for &i in &order {
            let diagonal = at(i, i);
            if diagonal == 0.0 {
                bail!(invalid_argument, "Input matrix is not invertible.");
            }
            let band: Vec<usize> =
                if forward { (i.saturating_sub(reach)..i).collect() } else { (i + 1..m.min(i + reach + 1)).collect() };
            for c in 0..cols {
                let mut v = x[i * cols + c];
                for &j in &band {
                    v -= at(i, j) * x[j * cols + c];
                }
                x[i * cols + c] = v / diagonal;
            }
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, run1, ty};
    use crate::tensor::Tensor;

    fn solve(lower: bool, adjoint: bool, bands: &[f32], k: usize, rhs: &[f32], rhs_dims: &[usize]) -> Vec<f32> {
        let n = node("BandedTriangularSolve")
            .attr("T", ty(DType::F32))
            .attr("lower", crate::graph::spec::AttrValue::Bool(lower))
            .attr("adjoint", crate::graph::spec::AttrValue::Bool(adjoint));
        let m = bands.len() / k;
        let inputs =
            [Tensor::from_slice::<f32>([k, m], bands).unwrap(), Tensor::from_slice::<f32>(rhs_dims, rhs).unwrap()];
        run1(&n, &inputs).unwrap().as_slice::<f32>().unwrap().to_vec()
    }

    fn close(got: &[f32], want: &[f64]) {
        for (&g, w) in got.iter().zip(want) {
            assert!((f64::from(g) - w).abs() <= 2e-6 * w.abs().max(1.0), "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn solutions_follow_tensorflow_s_band_layout() {
        // TensorFlow 2.21: bands [[1, 2, 3, 4], [5, 6, 7, 8]], rhs
        // [[1, 2], ..., [7, 8]], each of lower/adjoint.
        let bands = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let rhs: Vec<f32> = (1..=8).map(|v| v as f32).collect();
        #[rustfmt::skip]
        let cases: [(bool, bool, [f64; 8]); 4] = [
            (true, false, [1.0, 2.0, -1.5, -4.0, 5.166666030883789, 11.333333015441895, -8.583333015441895, -20.66666603088379]),
            (true, true, [-71.0, -80.0, 12.0, 13.666666030883789, -3.0, -3.3333330154418945, 1.75, 2.0]),
            (false, false, [0.12261900305747986, 0.2952379882335663, 0.3869050145149231, 0.5238100290298462,
                            0.3392859995365143, 0.4285709857940674, 0.875, 1.0]),
            (false, true, [0.20000000298023224, 0.4000000059604645, 0.4666669964790344, 0.6000000238418579,
                           0.580951988697052, 0.6857140064239502, 0.6571429967880249, 0.7428569793701172]),
        ];
        for (lower, adjoint, want) in cases {
            close(&solve(lower, adjoint, &bands, 2, &rhs, &[4, 2]), &want);
        }
        // More bands than rows: the extra ones lie outside the matrix.
        close(&solve(true, false, &[1.0; 12], 4, &[1.0; 3], &[3, 1]), &[1.0, 0.0, 0.0]);
    }

    #[test]
    fn bad_systems_are_refused_with_tensorflow_s_messages() {
        let n = node("BandedTriangularSolve").attr("T", ty(DType::F32));
        let zero_pivot = [
            Tensor::from_slice::<f32>([2, 3], &[0.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap(),
            Tensor::from_slice::<f32>([3, 1], &[1.0; 3]).unwrap(),
        ];
        assert_eq!(run1(&n, &zero_pivot).unwrap_err().message, "Input matrix is not invertible.");
        let mismatch = [
            Tensor::from_slice::<f32>([2, 3], &[1.0; 6]).unwrap(),
            Tensor::from_slice::<f32>([4, 1], &[1.0; 4]).unwrap(),
        ];
        assert_eq!(run1(&n, &mismatch).unwrap_err().message, "In[0] mismatch In[1] shape: 3 vs. 4: [2,3] [4,1] 1 0");
        // Batch dimensions broadcast: [2] bands against one rhs.
        let batched = [
            Tensor::from_slice::<f32>([2, 2, 3], &[1.0; 12]).unwrap(),
            Tensor::from_slice::<f32>([3, 1], &[1.0; 3]).unwrap(),
        ];
        assert_eq!(run1(&n, &batched).unwrap().dims(), [2, 3, 1]);
    }
}
