//! Reading and writing the diagonals of the innermost matrices:
//! `MatrixDiagPart`/`V2`/`V3` (`tf.linalg.diag_part`, `tf.linalg.trace`)
//! and `MatrixSetDiag`/`V2`/`V3` (`tf.linalg.set_diag`), one diagonal or a
//! band of them (`k`), aligned as `align` says. Building a matrix from
//! diagonals (`MatrixDiag*`) lives in `layout`.
//!
//! Owns: these kernels and the band geometry they share. They move
//! fixed-width elements as bytes, so one path serves every dtype. Must not
//! hold state beyond parsed attributes.

use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("MatrixDiagPart", diag_part_signature::<1>, build_diag),
    OpDef::kernel("MatrixDiagPartV2", diag_part_signature::<3>, build_diag),
    OpDef::kernel("MatrixDiagPartV3", diag_part_signature::<3>, build_diag),
    OpDef::kernel("MatrixSetDiag", set_diag_signature::<2>, build_diag),
    OpDef::kernel("MatrixSetDiagV2", set_diag_signature::<3>, build_diag),
    OpDef::kernel("MatrixSetDiagV3", set_diag_signature::<3>, build_diag),
];

/// `[T] -> [T]` (v1) or `[T, int32 k, T padding_value] -> [T]`.
fn diag_part_signature<const N: usize>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let inputs = if N == 1 { vec![t] } else { vec![t, ValueType::Tensor(DType::I32), t] };
    Ok(OpSignature::new(inputs, vec![t]))
}

/// `[T, T diagonal] -> [T]` (v1) or `[T, T diagonal, int32 k] -> [T]`.
fn set_diag_signature<const N: usize>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let mut inputs = vec![t, t];
    if N == 3 {
        inputs.push(ValueType::Tensor(DType::I32));
    }
    Ok(OpSignature::new(inputs, vec![t]))
}

struct Diag {
    set: bool,
    /// Whether `k` and `padding_value` are inputs (V2, V3).
    banded: bool,
    /// Where a diagonal shorter than the longest sits: on the left (its
    /// padding after it) for superdiagonals, for subdiagonals.
    left_super: bool,
    left_sub: bool,
}

fn build_diag(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let set = node.op.starts_with("MatrixSetDiag");
    let banded = node.op.ends_with("V2") || node.op.ends_with("V3");
    // V2 predates `align` and packs every diagonal to the left.
    let default_align = if node.op.ends_with("V3") { "RIGHT_LEFT" } else { "LEFT_LEFT" };
    let align = node.attr_str_or("align", default_align)?;
    let (left_super, left_sub) = match align.as_str() {
        "LEFT_LEFT" => (true, true),
        "LEFT_RIGHT" => (true, false),
        "RIGHT_LEFT" => (false, true),
        "RIGHT_RIGHT" => (false, false),
        other => bail!(
            invalid_argument,
            "node '{}' ({}): align must be LEFT_LEFT, LEFT_RIGHT, RIGHT_LEFT or RIGHT_RIGHT, got {other}",
            node.name,
            node.op
        ),
    };
    Ok(Box::new(Diag { set, banded, left_super, left_sub }))
}

/// The diagonals `k0..=k1` of an `m × n` matrix.
struct Band {
    m: usize,
    n: usize,
    k0: i64,
    k1: i64,
    /// The longest diagonal's length: each diagonal's row in a packed
    /// band has this many elements.
    max_len: usize,
}

impl Band {
    fn new(m: usize, n: usize, k: &[i64]) -> Result<Band> {
        let (k0, k1) = match *k {
            [k] => (k, k),
            [k0, k1] => (k0, k1),
            _ => bail!(invalid_argument, "diag_index must have only one or two elements, received {}", k.len()),
        };
        let (mi, ni) = (m as i64, n as i64);
        for (what, d) in [("lower", k0), ("upper", k1)] {
            if !((-mi < d && d < ni) || d == 0) {
                bail!(invalid_argument, "the {what} diagonal index {d} is not in (-{m}, {n})");
            }
        }
        if k0 > k1 {
            bail!(
                invalid_argument,
                "lower diagonal index must not be greater than upper diagonal index, got {k0} > {k1}"
            );
        }
        let max_len = (mi + k1.min(0)).min(ni - k0.max(0)).max(0) as usize;
        Ok(Band { m, n, k0, k1, max_len })
    }

    fn count(&self) -> usize {
        (self.k1 - self.k0 + 1) as usize
    }

    /// For each diagonal, top (`k1`) first: its elements' (row, column)
    /// in the matrix and their place in its packed row.
    fn for_each(&self, left_super: bool, left_sub: bool, mut f: impl FnMut(usize, usize, usize, usize)) {
        for (band_row, d) in (self.k0..=self.k1).rev().enumerate() {
            let len = (self.m as i64 + d.min(0)).min(self.n as i64 - d.max(0)).max(0) as usize;
            let left = (d >= 0 && left_super) || (d <= 0 && left_sub);
            let offset = if left { 0 } else { self.max_len - len };
            let (row0, col0) = ((-d).max(0) as usize, d.max(0) as usize);
            for i in 0..len {
                f(band_row, offset + i, row0 + i, col0 + i);
            }
        }
    }
}

impl OpKernel for Diag {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        let dims = x.dims();
        let rank = dims.len();
        if rank < 2 {
            bail!(invalid_argument, "input must be at least 2-dim, received shape: {}", x.shape());
        }
        let size = super::element_size(x, "MatrixDiagPart/MatrixSetDiag")?;
        let (m, n) = (dims[rank - 2], dims[rank - 1]);
        let k_input = if self.set { 2 } else { 1 };
        let k = if self.banded { index_values(ctx.input(k_input)?, "k")?.to_vec() } else { vec![0] };
        let band = Band::new(m, n, &k)?;
        let batch_dims = &dims[..rank - 2];
        let packed_dims: Vec<usize> = if band.count() == 1 {
            batch_dims.iter().copied().chain([band.max_len]).collect()
        } else {
            batch_dims.iter().copied().chain([band.count(), band.max_len]).collect()
        };
        let matrix = m * n;
        let packed = band.count() * band.max_len;
        let matrices: usize = batch_dims.iter().product();
        let src = x.as_bytes();
        let (out, out_shape) = if self.set {
            let diagonal = ctx.input(1)?;
            if diagonal.dims() != packed_dims.as_slice() {
                bail!(
                    invalid_argument,
                    "diagonal must have shape {} for k = {:?} of a {} input, got {}",
                    Shape::new(&packed_dims),
                    k,
                    x.shape(),
                    diagonal.shape()
                );
            }
            let diag = diagonal.as_bytes();
            let mut out = src.to_vec();
            for b in 0..matrices {
                band.for_each(self.left_super, self.left_sub, |band_row, at, row, col| {
                    let from = (b * packed + band_row * band.max_len + at) * size;
                    let to = (b * matrix + row * n + col) * size;
                    out[to..to + size].copy_from_slice(&diag[from..from + size]);
                });
            }
            (out, x.shape().clone())
        } else {
            let padding = if self.banded { ctx.input(2)? } else { x };
            let pad: Vec<u8> = if self.banded {
                if padding.num_elements() != 1 {
                    bail!(invalid_argument, "padding_value must be a scalar, got shape {}", padding.shape());
                }
                padding.as_bytes().to_vec()
            } else {
                vec![0u8; size]
            };
            let mut out = Vec::with_capacity(matrices * packed * size);
            for _ in 0..matrices * packed {
                out.extend_from_slice(&pad);
            }
            for b in 0..matrices {
                band.for_each(self.left_super, self.left_sub, |band_row, at, row, col| {
                    let to = (b * packed + band_row * band.max_len + at) * size;
                    let from = (b * matrix + row * n + col) * size;
                    out[to..to + size].copy_from_slice(&src[from..from + size]);
                });
            }
            (out, Shape::from_vec(packed_dims))
        };
        let t = Tensor::from_bytes(x.dtype(), out_shape, &out)?;
        ctx.set_output(0, t);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn matrix() -> Tensor {
        Tensor::from_slice::<i32>([3, 4], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]).unwrap()
    }

    fn part(op: &str, x: &Tensor, k: &[i32], pad: i32, align: Option<&str>) -> Result<Tensor> {
        let mut n = node(op).attr("T", ty(DType::I32));
        if let Some(a) = align {
            n = n.attr("align", AttrValue::Bytes(a.as_bytes().to_vec()));
        }
        let k = Tensor::from_slice::<i32>([k.len()], k).unwrap();
        run1(&n, &[x.clone(), k, Tensor::scalar(pad)])
    }

    #[test]
    fn diag_part_reads_one_diagonal_or_a_band() {
        let main = run1(&node("MatrixDiagPart").attr("T", ty(DType::I32)), &[matrix()]).unwrap();
        assert_eq!(main.as_slice::<i32>().unwrap(), &[1, 6, 11]);
        let sub = part("MatrixDiagPartV3", &matrix(), &[-1], 0, None).unwrap();
        assert_eq!(sub.as_slice::<i32>().unwrap(), &[5, 10]);
        // tf.linalg.diag_part(x, k=(-1, 1), padding_value=9): superdiagonal
        // right-aligned, subdiagonal left-aligned (RIGHT_LEFT).
        let band = part("MatrixDiagPartV3", &matrix(), &[-1, 1], 9, None).unwrap();
        assert_eq!(band.dims(), &[3, 3]);
        assert_eq!(band.as_slice::<i32>().unwrap(), &[2, 7, 12, 1, 6, 11, 5, 10, 9]);
        let left = part("MatrixDiagPartV3", &matrix(), &[-1, 1], 9, Some("LEFT_RIGHT")).unwrap();
        assert_eq!(left.as_slice::<i32>().unwrap(), &[2, 7, 12, 1, 6, 11, 9, 5, 10]);
    }

    #[test]
    fn set_diag_writes_back_what_diag_part_reads() {
        let set = node("MatrixSetDiagV3").attr("T", ty(DType::I32));
        let diag = Tensor::from_slice::<i32>([2, 3], &[-1, -2, -3, -4, -5, 0]).unwrap();
        let k = Tensor::from_slice::<i32>([2], &[-1, 0]).unwrap();
        let out = run1(&set, &[matrix(), diag, k]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[-1, 2, 3, 4, -4, -2, 7, 8, 9, -5, -3, 12]);
        let v1 = node("MatrixSetDiag").attr("T", ty(DType::I32));
        let wrong = Tensor::from_slice::<i32>([2], &[1, 2]).unwrap();
        assert!(run1(&v1, &[matrix(), wrong]).unwrap_err().message.contains("diagonal must have shape [3]"));
    }

    #[test]
    fn diagonals_outside_the_matrix_are_errors() {
        assert!(part("MatrixDiagPartV3", &matrix(), &[4], 0, None).is_err());
        assert!(part("MatrixDiagPartV3", &matrix(), &[1, -1], 0, None).unwrap_err().message.contains("greater"));
        let v = Tensor::from_slice::<i32>([3], &[1, 2, 3]).unwrap();
        assert!(part("MatrixDiagPartV3", &v, &[0], 0, None).unwrap_err().message.contains("2-dim"));
    }
}
