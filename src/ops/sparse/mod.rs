//! Sparse tensors (`tf.SparseTensor`, `tf.sparse`, the embedding lookups of
//! `tf.nn.embedding_lookup_sparse` and feature columns): a sparse tensor
//! travels as three dense tensors, `indices` (int64 `[N, R]`), `values`
//! (`[N]`) and `dense_shape` (int64 `[R]`), and each op here takes and
//! gives those parts.
//! - `to_dense`: `SparseToDense`;
//! - `segment`: `SparseSegmentSum`/`Mean`/`SqrtN` (with and without
//!   `num_segments`) and their gradients, the reductions of sparse
//!   embedding lookups;
//! - `rows`: ops that move entries, `SparseFillEmptyRows` (and its
//!   gradient), `SparseReshape`, `SparseReorder`, `SparseSlice`,
//!   `SparseConcat`;
//! - `arith`: arithmetic, `SparseTensorDenseMatMul`, `SparseAdd`,
//!   `SparseTensorDenseAdd`, `SparseDenseCwiseAdd`/`Mul`/`Div`,
//!   `SparseReduceSum`/`Max`, `SparseSoftmax`, `SparseSparseMaximum`/
//!   `Minimum`;
//! - `sets`: `tf.sets` (set operations and sizes over the last dimension);
//! - `cross`: feature crosses (`tf.sparse.cross`, `cross_hashed`).
//!
//! Owns: these kernels and the helpers below that read a sparse tensor's
//! parts and move its values whatever their dtype (strings included).
//! Must not hold state. As TensorFlow's kernels, the ops trust the order
//! of the entries where TensorFlow does (`SparseAdd` merges as if both
//! operands were sorted) and check every index they use to address
//! memory, naming the entry.

pub mod arith;
pub mod cross;
pub mod rows;
pub mod segment;
pub mod sets;
pub mod to_dense;

use crate::bail;
use crate::error::Result;
use crate::tensor::{DType, Tensor};

/// A sparse tensor's indices: `count` rows of `rank` coordinates.
pub(crate) struct Indices<'a> {
    pub flat: &'a [i64],
    pub count: usize,
    pub rank: usize,
}

impl<'a> Indices<'a> {
    /// `t` as an int64 matrix; `what` names the operand in errors.
    pub fn read(t: &'a Tensor, what: &str) -> Result<Indices<'a>> {
        if t.rank() != 2 {
            bail!(invalid_argument, "{what} should be a matrix but received shape {}", t.shape());
        }
        if t.dtype() != DType::I64 {
            bail!(invalid_argument, "{what} must be int64, got {}", t.dtype());
        }
        let (count, rank) = (t.dims()[0], t.dims()[1]);
        Ok(Indices { flat: t.as_slice::<i64>()?, count, rank })
    }

    /// Entry `i`'s coordinates.
    #[inline]
    pub fn row(&self, i: usize) -> &'a [i64] {
        &self.flat[i * self.rank..(i + 1) * self.rank]
    }

    /// `[a,b,c]`, as TensorFlow prints an entry's coordinates.
    pub fn describe(&self, i: usize) -> String {
        let parts: Vec<String> = self.row(i).iter().map(i64::to_string).collect();
        format!("[{}]", parts.join(","))
    }
}

/// An int64 vector operand (a dense shape, a start, a size).
pub(crate) fn shape_vector(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    if t.rank() != 1 {
        bail!(invalid_argument, "{what} should be a vector but received shape {}", t.shape());
    }
    if t.dtype() != DType::I64 {
        bail!(invalid_argument, "{what} must be int64, got {}", t.dtype());
    }
    Ok(t.as_slice::<i64>()?.to_vec())
}

/// Checks that `values` holds one element per entry.
pub(crate) fn check_values(values: &Tensor, indices: &Indices<'_>, what: &str) -> Result<()> {
    if values.rank() != 1 || values.dims()[0] != indices.count {
        bail!(
            invalid_argument,
            "{what} should be a vector of {} values (one per row of the indices) but received shape {}",
            indices.count,
            values.shape()
        );
    }
    Ok(())
}

/// The three parts of a sparse operand starting at input `first`, checked
/// against each other: `prefix` names them (`a_` gives `a_indices`...).
pub(crate) struct SparseOperand<'a> {
    pub indices: Indices<'a>,
    pub values: &'a Tensor,
    pub shape: Vec<i64>,
}

impl<'a> SparseOperand<'a> {
    pub fn read(indices: &'a Tensor, values: &'a Tensor, shape: &Tensor, prefix: &str) -> Result<SparseOperand<'a>> {
        let indices = Indices::read(indices, &format!("{prefix}indices"))?;
        check_values(values, &indices, &format!("{prefix}values"))?;
        let shape = shape_vector(shape, &format!("{prefix}shape"))?;
        if shape.len() != indices.rank {
            bail!(
                invalid_argument,
                "{prefix}indices have {} columns but {prefix}shape has {} dimensions",
                indices.rank,
                shape.len()
            );
        }
        Ok(SparseOperand { indices, values, shape })
    }

    /// Checks every entry lies inside the dense shape, naming the first
    /// that does not.
    pub fn check_bounds(&self, prefix: &str) -> Result<()> {
        for i in 0..self.indices.count {
            for (d, (&c, &n)) in self.indices.row(i).iter().zip(&self.shape).enumerate() {
                if c < 0 || c >= n {
                    bail!(
                        invalid_argument,
                        "{prefix}indices[{i}] = {} is out of bounds: dimension {d} is {c}, need 0 <= index < {n}",
                        self.indices.describe(i)
                    );
                }
            }
        }
        Ok(())
    }
}

/// Where an output element comes from: an element of the source, or the
/// fill value.
pub(crate) const FILL: usize = usize::MAX;

/// A vector of `picks.len()` elements: `source[p]` for each pick `p`,
/// `fill`'s one element for [`FILL`]. Any dtype, strings included.
pub(crate) fn pick_elements(source: &Tensor, picks: &[usize], fill: Option<&Tensor>) -> Result<Tensor> {
    debug_assert!(picks.iter().all(|&p| p == FILL || p < source.num_elements()), "picks inside the source");
    let dims = [picks.len()];
    if source.dtype() == DType::String {
        let strings = source.strings()?;
        let filler = match fill {
            Some(f) => Some(f.string_value()?),
            None => None,
        };
        let mut out: Vec<&[u8]> = Vec::with_capacity(picks.len());
        for &p in picks {
            match (p, filler) {
                (FILL, Some(f)) => out.push(f),
                (FILL, None) => bail!(internal, "a fill element was picked without a fill value"),
                (p, _) => out.push(strings.get(p).unwrap_or_default()),
            }
        }
        return Tensor::from_strings(dims.as_slice(), &out);
    }
    let Some(width) = source.dtype().size() else {
        bail!(invalid_argument, "sparse values of dtype {} are not supported", source.dtype());
    };
    let bytes = source.as_bytes();
    let filler = fill.map(Tensor::as_bytes);
    let mut out = Vec::with_capacity(picks.len() * width);
    for &p in picks {
        match (p, filler) {
            (FILL, Some(f)) => out.extend_from_slice(&f[..width]),
            (FILL, None) => bail!(internal, "a fill element was picked without a fill value"),
            (p, _) => out.extend_from_slice(&bytes[p * width..(p + 1) * width]),
        }
    }
    Tensor::from_bytes(source.dtype(), dims.as_slice(), &out)
}

/// An int64 matrix of `rows` rows of `rank` coordinates.
pub(crate) fn indices_tensor(flat: Vec<i64>, rows: usize, rank: usize) -> Result<Tensor> {
    debug_assert_eq!(flat.len(), rows * rank, "index matrix size");
    Tensor::from_slice::<i64>([rows, rank].as_slice(), &flat)
}

/// Row-major strides of a dense shape (in elements).
pub(crate) fn strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].wrapping_mul(shape[d + 1]);
    }
    strides
}

#[cfg(test)]
pub(crate) mod testing {
    use crate::tensor::Tensor;

    pub fn i64s(dims: &[usize], v: &[i64]) -> Tensor {
        Tensor::from_slice::<i64>(dims, v).unwrap()
    }

    pub fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(dims, v).unwrap()
    }
}
