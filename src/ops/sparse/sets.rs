//! Set operations over the last dimension (`tf.sets`, and what
//! `tf.compat.v1.metrics.precision_at_k`/`recall_at_k` build on):
//! `DenseToDenseSetOperation`, `DenseToSparseSetOperation`,
//! `SparseToSparseSetOperation` (intersection, union, `a-b`, `b-a`) and
//! `SetSize`. Every index but the last names a group; a group's set is the
//! distinct values in it (a dense row, or a sparse tensor's entries that
//! share the prefix). Results are sparse, each group's values ascending
//! (strings byte-wise), shaped `[groups..., largest result]`.
//!
//! Owns: these kernels and TensorFlow's checks (rank at least 2, equal
//! group shapes, sparse indices in order and in bounds unless
//! `validate_indices` is false). Must not hold state. int8, int16 and
//! uint16 sets arrive as int32 (`ops::widen`: every value exact).

use super::{SparseOperand, indices_tensor};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Tensor};
use std::collections::{BTreeMap, BTreeSet};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel(
        "DenseToDenseSetOperation",
        signature::<{ Operands::DENSE_DENSE }>,
        build::<{ Operands::DENSE_DENSE }>,
    ),
    OpDef::kernel(
        "DenseToSparseSetOperation",
        signature::<{ Operands::DENSE_SPARSE }>,
        build::<{ Operands::DENSE_SPARSE }>,
    ),
    OpDef::kernel(
        "SparseToSparseSetOperation",
        signature::<{ Operands::SPARSE_SPARSE }>,
        build::<{ Operands::SPARSE_SPARSE }>,
    ),
    OpDef::kernel("SetSize", size_signature, build_size),
];

/// How the two sets arrive: a const parameter.
struct Operands;

impl Operands {
    const DENSE_DENSE: u8 = 0;
    const DENSE_SPARSE: u8 = 1;
    const SPARSE_SPARSE: u8 = 2;
}

/// The dtypes TensorFlow allows (int8, int16, uint16 widened to int32).
const SET_TYPES: &[DType] = &[DType::I32, DType::I64, DType::U8, DType::String];

fn set_type(node: &NodeSpec) -> Result<DType> {
    let dtype = node.attr_dtype("T")?;
    if !SET_TYPES.contains(&dtype) {
        bail!(
            invalid_argument,
            "node '{}' ({}): T must be int8, int16, int32, int64, uint8, uint16 or string, got {dtype}",
            node.name,
            node.op
        );
    }
    Ok(dtype)
}

/// `[set1, set2] -> [indices, values, shape]`, a sparse set taking three
/// inputs (indices, values, shape).
fn signature<const OPERANDS: u8>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(set_type(node)?);
    let i = ValueType::Tensor(DType::I64);
    let inputs = match OPERANDS {
        Operands::DENSE_DENSE => vec![t, t],
        Operands::DENSE_SPARSE => vec![t, i, t, i],
        _ => vec![i, t, i, i, t, i],
    };
    Ok(OpSignature::new(inputs, vec![i, t, i]))
}

/// `[indices, values, shape] -> [int32 sizes]`.
fn size_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(set_type(node)?);
    let i = ValueType::Tensor(DType::I64);
    Ok(OpSignature::new(vec![i, t, i], vec![ValueType::Tensor(DType::I32)]))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Intersection,
    Union,
    AMinusB,
    BMinusA,
}

struct SetOperation {
    operands: u8,
    op: SetOp,
    validate: bool,
}

fn build<const OPERANDS: u8>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let op = match init.node.attr_str_or("set_operation", "")?.as_str() {
        "intersection" => SetOp::Intersection,
        "union" => SetOp::Union,
        "a-b" => SetOp::AMinusB,
        "b-a" => SetOp::BMinusA,
        other => bail!(invalid_argument, "Invalid set_operation {other}."),
    };
    let validate = init.node.attr_bool_or("validate_indices", true)?;
    Ok(Box::new(SetOperation { operands: OPERANDS, op, validate }))
}

struct SetSize {
    validate: bool,
}

fn build_size(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(SetSize { validate: init.node.attr_bool_or("validate_indices", true)? }))
}

/// A tensor's elements as ordered keys: integers as i64 (order kept),
/// strings as bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

fn keys(values: &Tensor) -> Result<Vec<Key<'_>>> {
    Ok(match values.dtype() {
        DType::I32 => values.as_slice::<i32>()?.iter().map(|&v| Key::Int(i64::from(v))).collect(),
        DType::I64 => values.as_slice::<i64>()?.iter().map(|&v| Key::Int(v)).collect(),
        DType::U8 => values.as_slice::<u8>()?.iter().map(|&v| Key::Int(i64::from(v))).collect(),
        DType::String => values.strings()?.iter().map(Key::Bytes).collect(),
        other => bail!(invalid_argument, "set values of dtype {other} are not supported"),
    })
}

fn values_tensor(dtype: DType, keys: &[Key<'_>]) -> Result<Tensor> {
    let dims = [keys.len()];
    let int = |k: &Key<'_>| if let Key::Int(v) = k { *v } else { 0 };
    match dtype {
        DType::I32 => Tensor::from_slice(dims.as_slice(), &keys.iter().map(|k| int(k) as i32).collect::<Vec<_>>()),
        DType::I64 => Tensor::from_slice(dims.as_slice(), &keys.iter().map(int).collect::<Vec<_>>()),
        DType::U8 => Tensor::from_slice(dims.as_slice(), &keys.iter().map(|k| int(k) as u8).collect::<Vec<_>>()),
        _ => {
            let bytes: Vec<&[u8]> = keys.iter().map(|k| if let Key::Bytes(b) = k { *b } else { &[][..] }).collect();
            Tensor::from_strings(dims.as_slice(), &bytes)
        }
    }
}

/// One operand's sets by group (the index less its last coordinate), and
/// the shape of the groups.
struct Sets<'a> {
    groups: BTreeMap<Vec<i64>, BTreeSet<Key<'a>>>,
    group_shape: Vec<i64>,
}

fn rank_check(shape: &[i64]) -> Result<()> {
    if shape.len() < 2 {
        let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
        bail!(invalid_argument, "Shape [{}] has rank {} < 2", dims.join(","), shape.len());
    }
    Ok(())
}

fn dense_sets(t: &Tensor) -> Result<Sets<'_>> {
    let shape: Vec<i64> = t.dims().iter().map(|&d| d as i64).collect();
    rank_check(&shape)?;
    let row = t.dims()[t.rank() - 1];
    let group_shape = shape[..shape.len() - 1].to_vec();
    let elements = keys(t)?;
    let mut groups = BTreeMap::new();
    if row > 0 {
        for (g, chunk) in elements.chunks(row).enumerate() {
            groups.insert(unravel(g, &group_shape), chunk.iter().cloned().collect());
        }
    }
    Ok(Sets { groups, group_shape })
}

/// Row-major coordinates of flat position `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[i64]) -> Vec<i64> {
    let mut at = vec![0i64; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1) as usize;
        at[d] = (flat % n) as i64;
        flat /= n;
    }
    at
}

fn sparse_sets<'a>(
    indices: &'a Tensor,
    values: &'a Tensor,
    shape: &Tensor,
    prefix: &str,
    validate: bool,
) -> Result<Sets<'a>> {
    let operand = SparseOperand::read(indices, values, shape, prefix)?;
    rank_check(&operand.shape)?;
    if validate {
        operand.check_bounds(prefix)?;
        for i in 1..operand.indices.count {
            if operand.indices.row(i) <= operand.indices.row(i - 1) {
                bail!(
                    invalid_argument,
                    "{prefix}indices[{i}] = {} is out of order. Many sparse ops require sorted indices.",
                    operand.indices.describe(i)
                );
            }
        }
    }
    let elements = keys(values)?;
    let rank = operand.shape.len();
    let mut groups: BTreeMap<Vec<i64>, BTreeSet<Key<'a>>> = BTreeMap::new();
    for (i, key) in elements.into_iter().enumerate() {
        groups.entry(operand.indices.row(i)[..rank - 1].to_vec()).or_default().insert(key);
    }
    Ok(Sets { groups, group_shape: operand.shape[..rank - 1].to_vec() })
}

fn check_group_shapes(a: &[i64], b: &[i64]) -> Result<()> {
    if a != b {
        let show = |s: &[i64]| s.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        bail!(invalid_argument, "Mismatched shapes [{}] vs [{}]", show(a), show(b));
    }
    Ok(())
}

impl OpKernel for SetOperation {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (a, b, dtype) = match self.operands {
            Operands::DENSE_DENSE => {
                let (x, y) = (ctx.input(0)?, ctx.input(1)?);
                (dense_sets(x)?, dense_sets(y)?, x.dtype())
            }
            Operands::DENSE_SPARSE => {
                let x = ctx.input(0)?;
                (
                    dense_sets(x)?,
                    sparse_sets(ctx.input(1)?, ctx.input(2)?, ctx.input(3)?, "set2_", self.validate)?,
                    x.dtype(),
                )
            }
            _ => (
                sparse_sets(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, "set1_", self.validate)?,
                sparse_sets(ctx.input(3)?, ctx.input(4)?, ctx.input(5)?, "set2_", self.validate)?,
                ctx.input(1)?.dtype(),
            ),
        };
        check_group_shapes(&a.group_shape, &b.group_shape)?;
        let empty = BTreeSet::new();
        let all_groups: BTreeSet<&Vec<i64>> = a.groups.keys().chain(b.groups.keys()).collect();
        let (mut flat, mut values, mut widest) = (Vec::new(), Vec::new(), 0usize);
        for group in all_groups {
            let (x, y) = (a.groups.get(group).unwrap_or(&empty), b.groups.get(group).unwrap_or(&empty));
            let result: Vec<&Key<'_>> = match self.op {
                SetOp::Intersection => x.intersection(y).collect(),
                SetOp::Union => x.union(y).collect(),
                SetOp::AMinusB => x.difference(y).collect(),
                SetOp::BMinusA => y.difference(x).collect(),
            };
            widest = widest.max(result.len());
            for (j, key) in result.into_iter().enumerate() {
                flat.extend_from_slice(group);
                flat.push(j as i64);
                values.push(key.clone());
            }
        }
        let rank = a.group_shape.len() + 1;
        let mut shape = a.group_shape.clone();
        shape.push(widest as i64);
        let count = values.len();
        let values = values_tensor(dtype, &values)?;
        let (indices, shape) = (indices_tensor(flat, count, rank)?, Tensor::from_slice([rank].as_slice(), &shape)?);
        ctx.set_output(0, indices);
        ctx.set_output(1, values);
        ctx.set_output(2, shape);
        Ok(())
    }
}

impl OpKernel for SetSize {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let sets = sparse_sets(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, "set_", self.validate)?;
        let dims: Vec<usize> = sets.group_shape.iter().map(|&d| d.max(0) as usize).collect();
        let mut sizes = vec![0i32; dims.iter().product()];
        for (group, set) in &sets.groups {
            let mut flat = 0usize;
            for (&c, &n) in group.iter().zip(&dims) {
                if c < 0 || c as usize >= n {
                    bail!(invalid_argument, "set_indices: group {group:?} is outside the shape {dims:?}");
                }
                flat = flat * n + c as usize;
            }
            sizes[flat] = set.len() as i32;
        }
        ctx.set_output(0, Tensor::from_slice(dims.as_slice(), &sizes)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::AttrValue;
    use crate::ops::sparse::testing::i64s;
    use crate::ops::testing::{node, run_all, run1, ty};
    use crate::tensor::{DType, Tensor};

    fn i32s(dims: &[usize], v: &[i32]) -> Tensor {
        Tensor::from_slice(dims, v).unwrap()
    }

    fn op(name: &str, set_operation: &str) -> crate::graph::spec::NodeSpec {
        node(name).attr("T", ty(DType::I32)).attr("set_operation", AttrValue::Bytes(set_operation.as_bytes().to_vec()))
    }

    fn parts(outs: &[Tensor]) -> (Vec<i64>, Vec<f64>, Vec<i64>) {
        (outs[0].as_slice::<i64>().unwrap().to_vec(), outs[1].to_f64_vec(), outs[2].as_slice::<i64>().unwrap().to_vec())
    }

    /// TensorFlow 2.21's results for the same sets.
    #[test]
    fn dense_and_sparse_sets_combine_as_tensorflow() {
        let a = i32s(&[2, 4], &[1, 2, 2, 5, 3, 3, 1, 0]);
        let b = i32s(&[2, 3], &[2, 5, 7, 0, 9, 9]);
        let run = |o: &str| parts(&run_all(&op("DenseToDenseSetOperation", o), &[a.clone(), b.clone()]).unwrap());
        assert_eq!(run("intersection"), (vec![0, 0, 0, 1, 1, 0], vec![2.0, 5.0, 0.0], vec![2, 2]));
        assert_eq!(
            run("union"),
            (vec![0, 0, 0, 1, 0, 2, 0, 3, 1, 0, 1, 1, 1, 2, 1, 3], vec![1., 2., 5., 7., 0., 1., 3., 9.], vec![2, 4])
        );
        assert_eq!(run("a-b"), (vec![0, 0, 1, 0, 1, 1], vec![1.0, 1.0, 3.0], vec![2, 2]));
        assert_eq!(run("b-a"), (vec![0, 0, 1, 0], vec![7.0, 9.0], vec![2, 1]));
        // The sparse [[2,0,5],[0,9,0]] without its zeros.
        let (bi, bv, bs) = (i64s(&[3, 2], &[0, 0, 0, 2, 1, 1]), i32s(&[3], &[2, 5, 9]), i64s(&[2], &[2, 3]));
        let d2s = |o: &str| {
            parts(
                &run_all(&op("DenseToSparseSetOperation", o), &[a.clone(), bi.clone(), bv.clone(), bs.clone()])
                    .unwrap(),
            )
        };
        assert_eq!(d2s("intersection"), (vec![0, 0, 0, 1], vec![2.0, 5.0], vec![2, 2]));
        assert_eq!(d2s("a-b"), (vec![0, 0, 1, 0, 1, 1, 1, 2], vec![1.0, 0.0, 1.0, 3.0], vec![2, 3]));
        // [[1,0,2,2],[0,0,0,0]] sparse, union with the one above.
        let (ai, av, as_) = (i64s(&[3, 2], &[0, 0, 0, 2, 0, 3]), i32s(&[3], &[1, 2, 2]), i64s(&[2], &[2, 4]));
        let s2s =
            run_all(&op("SparseToSparseSetOperation", "union"), &[ai.clone(), av.clone(), as_.clone(), bi, bv, bs])
                .unwrap();
        assert_eq!(parts(&s2s), (vec![0, 0, 0, 1, 0, 2, 1, 0], vec![1.0, 2.0, 5.0, 9.0], vec![2, 3]));
        let size = node("SetSize").attr("T", ty(DType::I32));
        assert_eq!(run1(&size, &[ai, av, as_]).unwrap().as_slice::<i32>().unwrap(), &[2, 0]);
        // Strings sort byte-wise; an empty result is shaped [groups, 0].
        let s = Tensor::from_strings([1, 2, 2], &["x", "a", "b", "b"]).unwrap();
        let t = Tensor::from_strings([1, 2, 1], &["a", "c"]).unwrap();
        let strings = node("DenseToDenseSetOperation")
            .attr("T", ty(DType::String))
            .attr("set_operation", AttrValue::Bytes(b"union".to_vec()));
        let outs = run_all(&strings, &[s, t]).unwrap();
        assert_eq!(outs[1].strings().unwrap().to_vec(), [&b"a"[..], b"x", b"b", b"c"]);
        assert_eq!(outs[2].as_slice::<i64>().unwrap(), &[1, 2, 2]);
        let none =
            run_all(&op("DenseToDenseSetOperation", "intersection"), &[i32s(&[1, 1], &[1]), i32s(&[1, 1], &[2])]);
        assert_eq!(parts(&none.unwrap()), (vec![], vec![], vec![1, 0]));
        // int8 sets run widened and come back int8.
        let small = node("DenseToDenseSetOperation")
            .attr("T", ty(DType::I8))
            .attr("set_operation", AttrValue::Bytes(b"union".to_vec()));
        let x = Tensor::from_slice([1, 2], &[-5i8, 7]).unwrap();
        let outs = run_all(&small, &[x.clone(), x]).unwrap();
        assert_eq!(outs[1].as_slice::<i8>().unwrap(), &[-5, 7]);
    }

    #[test]
    fn bad_sets_fail_as_in_tensorflow() {
        let union = op("DenseToDenseSetOperation", "union");
        let err = run_all(&union, &[i32s(&[2], &[1, 2]), i32s(&[1], &[2])]).unwrap_err();
        assert!(err.message.contains("Shape [2] has rank 1 < 2"), "{err}");
        let a = i32s(&[2, 4], &[1, 2, 2, 5, 3, 3, 1, 0]);
        let err = run_all(&union, &[a.clone(), i32s(&[3, 1], &[1, 2, 3])]).unwrap_err();
        assert!(err.message.contains("Mismatched shapes [2] vs [3]"), "{err}");
        let err = crate::ops::testing::build(&op("DenseToDenseSetOperation", "xor")).err().unwrap();
        assert!(err.message.contains("Invalid set_operation xor."), "{err}");
        let size = node("SetSize").attr("T", ty(DType::I32));
        let (i, v, s) = (i64s(&[2, 2], &[1, 0, 0, 1]), i32s(&[2], &[4, 3]), i64s(&[2], &[2, 2]));
        let err = run1(&size, &[i.clone(), v.clone(), s.clone()]).unwrap_err();
        assert!(err.message.contains("indices[1] = [0,1] is out of order"), "{err}");
        let lenient = size.attr("validate_indices", AttrValue::Bool(false));
        assert_eq!(run1(&lenient, &[i, v, s]).unwrap().as_slice::<i32>().unwrap(), &[1, 1]);
        let float = node("SetSize").attr("T", ty(DType::F32));
        assert!(crate::ops::testing::build(&float).err().unwrap().message.contains("T must be int8"));
    }
}
