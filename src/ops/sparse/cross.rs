//! Feature crosses (`tf.sparse.cross`, `tf.sparse.cross_hashed`, Keras'
//! `HashedCrossing`, feature columns' `crossed_column`): `SparseCross`
//! (hashed to int64 or joined as strings, per `hashed_output`) and
//! `SparseCrossV2` (strings joined by a separator input). Each input is a
//! batch of features, sparse `[batch, n]` tensors first, then dense
//! matrices; each batch row gives the cartesian product of its features,
//! the last column varying fastest.
//!
//! Owns: these kernels, TensorFlow's checks and its hashing: a string
//! feature is its Fingerprint64, an int64 feature its own bits, folded
//! from `hash_key` with `FingerprintCat64`, then taken modulo
//! `num_buckets` (or int64's max). Must not hold state.
//! `SparseCrossHashed` is not here: TensorFlow 2.21 hashes 4 of each
//! int64's 8 bytes in it and crashes on some inputs.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::{DataType, NodeSpec};
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("SparseCross", signature::<false>, build::<false>),
    OpDef::kernel("SparseCrossV2", signature::<true>, build::<true>),
];

fn feature_types(node: &NodeSpec, key: &str) -> Result<Vec<DType>> {
    if !node.attrs.contains_key(key) {
        return Ok(Vec::new()); // an empty list, stripped as a default
    }
    let mut types = Vec::new();
    for t in node.attr_type_list(key)? {
        match t {
            DataType::Tensor(d @ (DType::I64 | DType::String)) => types.push(d),
            other => bail!(
                invalid_argument,
                "node '{}' ({}): {key} must be int64 or string, got {other:?}",
                node.name,
                node.op
            ),
        }
    }
    Ok(types)
}

/// `[N × int64 indices, N values, N × int64 shapes, dense..., (sep)] ->
/// [indices, values, shape]`.
fn signature<const V2: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let (sparse, dense) = (feature_types(node, "sparse_types")?, feature_types(node, "dense_types")?);
    let i = ValueType::Tensor(DType::I64);
    let mut inputs = vec![i; sparse.len()];
    inputs.extend(sparse.iter().map(|&d| ValueType::Tensor(d)));
    inputs.extend(std::iter::repeat_n(i, sparse.len()));
    inputs.extend(dense.iter().map(|&d| ValueType::Tensor(d)));
    let out = if V2 {
        inputs.push(ValueType::Tensor(DType::String));
        DType::String
    } else {
        let out = node.attr_dtype("out_type")?;
        if !matches!(out, DType::I64 | DType::String) {
            bail!(invalid_argument, "node '{}' (SparseCross): out_type must be int64 or string, got {out}", node.name);
        }
        out
    };
    Ok(OpSignature::new(inputs, vec![i, ValueType::Tensor(out), i]))
}

/// How crosses are made.
enum Crosser {
    /// Features joined by the separator (`SparseCrossV2`'s comes as an input).
    Strings {
        separator: Option<Vec<u8>>,
    },
    Hashed {
        num_buckets: u64,
        hash_key: u64,
    },
}

struct SparseCross {
    sparse: usize,
    dense: usize,
    crosser: Crosser,
    /// `SparseCross` with a string `internal_type` refuses int64 features.
    strings_only: bool,
}

fn build<const V2: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let (sparse, dense) = (feature_types(node, "sparse_types")?.len(), feature_types(node, "dense_types")?.len());
    if V2 {
        return Ok(Box::new(SparseCross {
            sparse,
            dense,
            crosser: Crosser::Strings { separator: None },
            strings_only: false,
        }));
    }
    let hashed = node.attr_bool_or("hashed_output", false)?;
    let out_type = node.attr_dtype("out_type")?;
    if hashed != (out_type == DType::I64) {
        bail!(invalid_argument, "node '{}' (SparseCross): out_type {out_type} with hashed_output {hashed}", node.name);
    }
    let crosser = if hashed {
        let num_buckets = node.attr_int_or("num_buckets", 0)?;
        if num_buckets < 0 {
            bail!(invalid_argument, "node '{}' (SparseCross): num_buckets must be >= 0, got {num_buckets}", node.name);
        }
        Crosser::Hashed { num_buckets: num_buckets as u64, hash_key: node.attr_int_or("hash_key", 0)? as u64 }
    } else {
        Crosser::Strings { separator: Some(b"_X_".to_vec()) }
    };
    let strings_only = node.attr_dtype("internal_type")? == DType::String;
    Ok(Box::new(SparseCross { sparse, dense, crosser, strings_only }))
}

/// TensorFlow's `FingerprintCat64`.
fn fingerprint_cat64(fp1: u64, fp2: u64) -> u64 {
    const MUL: u64 = 0xc6a4_a793_5bd1_e995;
    let shift_mix = |v: u64| v ^ (v >> 47);
    let mut result = fp1 ^ MUL;
    result ^= shift_mix(fp2.wrapping_mul(MUL)).wrapping_mul(MUL);
    result = result.wrapping_mul(MUL);
    result = shift_mix(result).wrapping_mul(MUL);
    shift_mix(result)
}

/// One input's features by batch row: the values and, per row, where its
/// features start and how many there are.
struct Column<'a> {
    values: &'a Tensor,
    /// `(start, count)` per batch row.
    rows: Vec<(usize, usize)>,
}

impl Column<'_> {
    fn text(&self, at: usize) -> Result<Vec<u8>> {
        Ok(match self.values.dtype() {
            DType::String => self.values.strings()?.get(at).unwrap_or_default().to_vec(),
            _ => self.values.as_slice::<i64>()?[at].to_string().into_bytes(),
        })
    }

    fn hash(&self, at: usize) -> Result<u64> {
        Ok(match self.values.dtype() {
            DType::String => farmhash::fingerprint64(self.values.strings()?.get(at).unwrap_or_default()),
            _ => self.values.as_slice::<i64>()?[at] as u64,
        })
    }
}

impl SparseCross {
    fn columns<'a>(&self, ctx: &'a OpContext<'_>) -> Result<(Vec<Column<'a>>, usize)> {
        let n = self.sparse;
        let shape_of = |i: usize| -> Result<Vec<i64>> {
            let shape = ctx.input(2 * n + i)?;
            if shape.rank() != 1 {
                bail!(
                    invalid_argument,
                    "Input shapes should be a vector but received shape {} at position {i}",
                    shape.shape()
                );
            }
            let dims = shape.as_slice::<i64>()?.to_vec();
            if dims.len() != 2 {
                bail!(invalid_argument, "shape should imply a 2D tensor, but got {} at position {i}", shape.shape());
            }
            Ok(dims)
        };
        for i in 0..n {
            let (indices, values) = (ctx.input(i)?, ctx.input(n + i)?);
            if indices.rank() != 2 {
                bail!(
                    invalid_argument,
                    "Input indices should be a matrix but received shape {} at position {i}",
                    indices.shape()
                );
            }
            if indices.dims()[1] != 2 {
                bail!(invalid_argument, "Expected D2 of index to be 2 got {} at position {i}", indices.dims()[1]);
            }
            if self.strings_only && values.dtype() == DType::I64 {
                bail!(invalid_argument, "Input values should be of internal type string but received int64");
            }
            if values.rank() != 1 {
                bail!(
                    invalid_argument,
                    "Input values should be a vector but received shape {} at position {i}",
                    values.shape()
                );
            }
            if values.dims()[0] != indices.dims()[0] {
                bail!(
                    invalid_argument,
                    "Expected size of values to be {} got {} at position {i}",
                    indices.dims()[0],
                    values.dims()[0]
                );
            }
            shape_of(i)?;
        }
        for j in 0..self.dense {
            let dense = ctx.input(3 * n + j)?;
            if self.strings_only && dense.dtype() == DType::I64 {
                bail!(invalid_argument, "Dense inputs should be of internal type string but received int64");
            }
            if dense.rank() != 2 {
                bail!(
                    invalid_argument,
                    "Dense inputs should be a matrix but received shape {} at position {j}",
                    dense.shape()
                );
            }
        }
        let batch = if n > 0 {
            shape_of(0)?[0]
        } else if self.dense > 0 {
            ctx.input(3 * n)?.dims()[0] as i64
        } else {
            0
        };
        for i in 0..n {
            let got = shape_of(i)?[0];
            if got != batch {
                bail!(invalid_argument, "Expected batch size {batch} got {got} at position {i}");
            }
        }
        for j in 0..self.dense {
            let got = ctx.input(3 * n + j)?.dims()[0] as i64;
            if got != batch {
                bail!(invalid_argument, "Expected batch size {batch} got {got} at dense tensor {j}");
            }
        }
        let batch = usize::try_from(batch).map_err(|_| Status::invalid_argument(format!("batch size {batch}")))?;
        let mut columns = Vec::with_capacity(n + self.dense);
        for i in 0..n {
            // Entries of each batch row in order, as TensorFlow reads them.
            let rows_of = ctx.input(i)?.as_slice::<i64>()?;
            let count = rows_of.len() / 2;
            let (mut rows, mut at) = (Vec::with_capacity(batch), 0usize);
            for b in 0..batch {
                let start = at;
                while at < count && rows_of[2 * at] == b as i64 {
                    at += 1;
                }
                rows.push((start, at - start));
            }
            columns.push(Column { values: ctx.input(n + i)?, rows });
        }
        for j in 0..self.dense {
            let dense = ctx.input(3 * n + j)?;
            let width = dense.dims()[1];
            columns.push(Column { values: dense, rows: (0..batch).map(|b| (b * width, width)).collect() });
        }
        Ok((columns, batch))
    }
}

impl OpKernel for SparseCross {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let separator = match &self.crosser {
            Crosser::Strings { separator: None } => {
                let sep = ctx.input(3 * self.sparse + self.dense)?;
                if sep.rank() != 0 {
                    bail!(invalid_argument, "Input separator should be a scalar. Received: {}", sep.shape());
                }
                Some(sep.string_value()?.to_vec())
            }
            Crosser::Strings { separator: Some(s) } => Some(s.clone()),
            Crosser::Hashed { .. } => None,
        };
        let (columns, batch) = self.columns(ctx)?;
        let (mut flat, mut strings, mut hashes, mut widest) = (Vec::new(), Vec::new(), Vec::new(), 0i64);
        for b in 0..batch {
            if columns.is_empty() || columns.iter().any(|c| c.rows[b].1 == 0) {
                continue;
            }
            let counts: Vec<usize> = columns.iter().map(|c| c.rows[b].1).collect();
            let total: usize = counts.iter().product();
            let mut pick = vec![0usize; columns.len()];
            for n in 0..total {
                // The last column varies fastest.
                let mut rest = n;
                for k in (0..counts.len()).rev() {
                    pick[k] = rest % counts[k];
                    rest /= counts[k];
                }
                flat.extend_from_slice(&[b as i64, n as i64]);
                match (&self.crosser, &separator) {
                    (Crosser::Hashed { num_buckets, hash_key }, _) => {
                        let mut h = *hash_key;
                        for (c, &p) in columns.iter().zip(&pick) {
                            h = fingerprint_cat64(h, c.hash(c.rows[b].0 + p)?);
                        }
                        let m = if *num_buckets > 0 { *num_buckets } else { i64::MAX as u64 };
                        hashes.push((h % m) as i64);
                    }
                    (_, Some(sep)) => {
                        let mut joined = Vec::new();
                        for (k, (c, &p)) in columns.iter().zip(&pick).enumerate() {
                            if k > 0 {
                                joined.extend_from_slice(sep);
                            }
                            joined.extend_from_slice(&c.text(c.rows[b].0 + p)?);
                        }
                        strings.push(joined);
                    }
                    (_, None) => bail!(internal, "a string cross without a separator"),
                }
            }
            let n = total as i64;
            widest = widest.max(n);
        }
        let count = flat.len() / 2;
        let values = match self.crosser {
            Crosser::Hashed { .. } => Tensor::from_slice([count].as_slice(), &hashes)?,
            Crosser::Strings { .. } => Tensor::from_strings([count].as_slice(), &strings)?,
        };
        ctx.set_output(0, super::indices_tensor(flat, count, 2)?);
        ctx.set_output(1, values);
        ctx.set_output(2, Tensor::from_slice([2].as_slice(), &[batch as i64, widest])?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::{AttrList, AttrValue, DataType};
    use crate::ops::sparse::testing::i64s;
    use crate::ops::testing::{node, run_all};
    use crate::tensor::{DType, Tensor};

    fn types(list: &[DType]) -> AttrValue {
        AttrValue::List(AttrList::Type(list.iter().map(|&d| DataType::Tensor(d)).collect()))
    }

    /// TensorFlow 2.21: `tf.sparse.cross([a, b, d])` and
    /// `tf.compat.v1.sparse.cross_hashed(.., num_buckets=1000,
    /// hash_key=12345)` with a = [["a","b"],["c"]], b = [[7],[8,9]] (int64),
    /// d = [["x"],["y"]].
    fn inputs() -> Vec<Tensor> {
        vec![
            i64s(&[3, 2], &[0, 0, 0, 1, 1, 0]),
            i64s(&[3, 2], &[0, 0, 1, 0, 1, 1]),
            Tensor::from_strings([3], &["a", "b", "c"]).unwrap(),
            i64s(&[3], &[7, 8, 9]),
            i64s(&[2], &[2, 2]),
            i64s(&[2], &[2, 2]),
            Tensor::from_strings([2, 1], &["x", "y"]).unwrap(),
        ]
    }

    fn cross(op: &str) -> crate::graph::spec::NodeSpec {
        node(op)
            .attr("N", AttrValue::Int(2))
            .attr("sparse_types", types(&[DType::String, DType::I64]))
            .attr("dense_types", types(&[DType::String]))
    }

    #[test]
    fn crosses_join_and_hash_as_tensorflow() {
        let mut v2_inputs = inputs();
        v2_inputs.push(Tensor::string_scalar("_X_"));
        let outs = run_all(&cross("SparseCrossV2"), &v2_inputs).unwrap();
        assert_eq!(outs[0].as_slice::<i64>().unwrap(), &[0, 0, 0, 1, 1, 0, 1, 1]);
        assert_eq!(outs[1].strings().unwrap().to_vec(), [&b"a_X_7_X_x"[..], b"b_X_7_X_x", b"c_X_8_X_y", b"c_X_9_X_y"]);
        assert_eq!(outs[2].as_slice::<i64>().unwrap(), &[2, 2]);
        let hashed = cross("SparseCross")
            .attr("hashed_output", AttrValue::Bool(true))
            .attr("num_buckets", AttrValue::Int(1000))
            .attr("hash_key", AttrValue::Int(12345))
            .attr("out_type", crate::ops::testing::ty(DType::I64))
            .attr("internal_type", crate::ops::testing::ty(DType::I64));
        let outs = run_all(&hashed, &inputs()).unwrap();
        assert_eq!(outs[1].as_slice::<i64>().unwrap(), &[396, 211, 849, 437]);
    }

    #[test]
    fn mismatched_batches_are_refused_naming_the_input() {
        let mut bad = inputs();
        bad[5] = i64s(&[2], &[3, 2]);
        bad.push(Tensor::string_scalar("-"));
        let err = run_all(&cross("SparseCrossV2"), &bad).unwrap_err();
        assert!(err.message.contains("Expected batch size 2 got 3 at position 1"), "{err}");
    }
}
