//! `RaggedTensorToTensor`: a ragged tensor (flat values and one row
//! partition per ragged dimension) made dense, short rows padded with the
//! default value and long ones cut to the requested shape: what
//! `RaggedTensor.to_tensor` emits (Keras `TextVectorization` with an
//! `output_sequence_length`).
//!
//! Partitions come as `ROW_SPLITS` (one tensor per ragged dimension) or
//! `FIRST_DIM_SIZE` then `VALUE_ROWIDS` per ragged dimension, each checked
//! (splits ascending from 0 to the values below, row ids sorted and in
//! range) before any value is read.
//!
//! Owns: this kernel. Must not know where the ragged tensor came from.

use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[OpDef::kernel("RaggedTensorToTensor", signature, build)];

fn partition_types(node: &NodeSpec) -> Result<Vec<String>> {
    let types = node.attr_str_list("row_partition_types");
    let count = usize::try_from(node.attr_int("num_row_partition_tensors")?).unwrap_or(usize::MAX);
    if types.len() != count || count == 0 {
        return Err(Status::invalid_argument(format!(
            "node '{}' ({}): {} row partition types for {count} partition tensors",
            node.name,
            node.op,
            types.len()
        )));
    }
    let valid = match types[0].as_str() {
        "ROW_SPLITS" => types.iter().all(|t| t == "ROW_SPLITS"),
        "FIRST_DIM_SIZE" => types.len() >= 2 && types[1..].iter().all(|t| t == "VALUE_ROWIDS"),
        _ => false,
    };
    if !valid {
        return Err(Status::unimplemented(format!(
            "node '{}' ({}): row partitions {types:?} (ROW_SPLITS..., or FIRST_DIM_SIZE then VALUE_ROWIDS...)",
            node.name, node.op
        )));
    }
    Ok(types)
}

fn signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = node.attr_dtype("T")?;
    let index = node.attr_dtype("Tindex")?;
    let shape = node.attr_dtype("Tshape")?;
    for (what, dtype) in [("Tindex", index), ("Tshape", shape)] {
        if !matches!(dtype, DType::I32 | DType::I64) {
            return Err(Status::invalid_argument(format!(
                "node '{}' ({}): {what} must be int32 or int64, got {dtype}",
                node.name, node.op
            )));
        }
    }
    let partitions = partition_types(node)?.len();
    let mut inputs = vec![ValueType::Tensor(shape), ValueType::Tensor(t), ValueType::Tensor(t)];
    inputs.extend(std::iter::repeat_n(ValueType::Tensor(index), partitions));
    Ok(OpSignature::new(inputs, vec![ValueType::Tensor(t)]))
}

struct RaggedToTensor {
    /// `FIRST_DIM_SIZE` + row ids, rather than splits.
    row_ids: bool,
}

fn build(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let types = partition_types(init.node)?;
    Ok(Box::new(RaggedToTensor { row_ids: types[0] == "FIRST_DIM_SIZE" }))
}

fn ints(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    match t.dtype() {
        DType::I64 => Ok(t.as_slice::<i64>()?.to_vec()),
        DType::I32 => Ok(t.as_slice::<i32>()?.iter().map(|&v| i64::from(v)).collect()),
        other => Err(Status::invalid_argument(format!("{what} must be int32 or int64, got {other}"))),
    }
}

/// Row ids (sorted, each in `0..nrows`) as row splits.
fn splits_of_row_ids(ids: &[i64], nrows: usize, level: usize) -> Result<Vec<usize>> {
    let mut splits = vec![0usize; nrows + 1];
    let mut last = 0;
    for &id in ids {
        let row = usize::try_from(id).ok().filter(|&r| r < nrows && id >= last).ok_or_else(|| {
            Status::invalid_argument(format!(
                "value_rowids of ragged dimension {level}: {id} is out of order or outside 0..{nrows}"
            ))
        })?;
        last = id;
        splits[row + 1] += 1;
    }
    for i in 0..nrows {
        splits[i + 1] += splits[i];
    }
    Ok(splits)
}

/// Splits that start at 0, never fall, and end at `values` (the number
/// of items one level down).
fn check_splits(raw: &[i64], values: usize, level: usize) -> Result<Vec<usize>> {
    let bad = |why: &str| Status::invalid_argument(format!("row_splits of ragged dimension {level}: {why}"));
    if raw.first() != Some(&0) {
        return Err(bad("must start at 0"));
    }
    let splits: Vec<usize> =
        raw.iter().map(|&s| usize::try_from(s).map_err(|_| bad("negative"))).collect::<Result<_>>()?;
    if splits.windows(2).any(|w| w[1] < w[0]) {
        return Err(bad("must not decrease"));
    }
    if splits.last() != Some(&values) {
        return Err(bad(&format!("end at {}, but {values} items lie below", splits[splits.len() - 1])));
    }
    Ok(splits)
}

/// Where each output element comes from: `Some(i)`, value element `i`;
/// `None`, the default.
struct Layout {
    dims: Vec<usize>,
    picks: Vec<Option<usize>>,
}

fn layout(splits: &[Vec<usize>], inner: &[usize], wanted: &[Option<usize>]) -> Layout {
    let ragged = splits.len();
    let mut dims = Vec::with_capacity(ragged + 1 + inner.len());
    dims.push(wanted[0].unwrap_or(splits[0].len() - 1));
    for (level, s) in splits.iter().enumerate() {
        let natural = s.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        dims.push(wanted[level + 1].unwrap_or(natural));
    }
    dims.extend_from_slice(inner);
    let inner_size: usize = inner.iter().product();
    let total: usize = dims.iter().product();
    let mut strides = vec![inner_size; ragged + 1];
    for level in (0..ragged).rev() {
        strides[level] = strides[level + 1] * dims[level + 1];
    }
    let mut picks = vec![None; total];
    // Depth-first over (level, item of that level, output offset).
    let mut stack: Vec<(usize, usize, usize)> =
        (0..dims[0].min(splits[0].len() - 1)).rev().map(|row| (0, row, row * strides[0])).collect();
    while let Some((level, item, offset)) = stack.pop() {
        let (start, end) = (splits[level][item], splits[level][item + 1]);
        let kept = (end - start).min(dims[level + 1]);
        for j in (0..kept).rev() {
            let child = start + j;
            let at = offset + j * strides[level + 1];
            if level + 1 == ragged {
                for k in 0..inner_size {
                    picks[at + k] = Some(child * inner_size + k);
                }
            } else {
                stack.push((level + 1, child, at));
            }
        }
    }
    Layout { dims, picks }
}

fn gather<T: crate::tensor::Element>(
    values: &Tensor,
    default: &Tensor,
    layout: &Layout,
    inner_size: usize,
) -> Result<Tensor> {
    let (values, default) = (values.as_slice::<T>()?, default.as_slice::<T>()?);
    let pick = |(at, p): (usize, &Option<usize>)| match p {
        Some(i) => values[*i],
        None => default[if default.len() == 1 { 0 } else { at % inner_size }],
    };
    let out: Vec<T> = layout.picks.iter().enumerate().map(pick).collect();
    Tensor::from_slice(layout.dims.as_slice(), &out)
}

impl OpKernel for RaggedToTensor {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let values = ctx.input(1)?;
        let default = ctx.input(2)?;
        let partitions: Vec<Vec<i64>> =
            (3..ctx.num_inputs()).map(|i| ints(ctx.input(i)?, "a row partition tensor")).collect::<Result<_>>()?;
        if values.rank() == 0 {
            return Err(Status::invalid_argument("values must have rank >= 1"));
        }
        let inner = &values.dims()[1..];
        let inner_size: usize = inner.iter().product();
        if default.num_elements() != 1 && default.dims() != inner {
            return Err(Status::invalid_argument(format!(
                "default_value of shape {} fits neither a scalar nor the values' inner shape {:?}",
                default.shape(),
                inner
            )));
        }
        // Splits per ragged dimension, innermost checked against the values.
        let mut splits: Vec<Vec<usize>> = Vec::new();
        if self.row_ids {
            let first = partitions[0].first().copied().filter(|_| partitions[0].len() == 1);
            let mut nrows = first.and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "first_dim_size must be one non-negative int, got {:?}",
                    partitions[0]
                ))
            })?;
            for (level, ids) in partitions[1..].iter().enumerate() {
                splits.push(splits_of_row_ids(ids, nrows, level)?);
                nrows = ids.len();
            }
            if nrows != values.dims()[0] {
                return Err(Status::invalid_argument(format!(
                    "the innermost value_rowids hold {nrows} ids for {} values",
                    values.dims()[0]
                )));
            }
        } else {
            for (level, raw) in partitions.iter().enumerate().rev() {
                let below = splits.first().map_or(values.dims()[0], |s: &Vec<usize>| s.len() - 1);
                splits.insert(0, check_splits(raw, below, level)?);
            }
        }
        let ragged = splits.len();
        let shape = ctx.input(0)?;
        let rank = ragged + 1 + inner.len();
        // A scalar or empty shape: unknown rank, every dimension natural.
        let wanted: Vec<Option<usize>> = if shape.rank() == 0 || shape.num_elements() == 0 {
            vec![None; rank]
        } else {
            let dims = ints(shape, "shape")?;
            if dims.len() != rank {
                return Err(Status::invalid_argument(format!(
                    "shape {dims:?} has rank {}, the ragged tensor rank {rank}",
                    dims.len()
                )));
            }
            dims.iter().map(|&d| usize::try_from(d).ok()).collect()
        };
        for (i, (want, &have)) in wanted[ragged + 1..].iter().zip(inner).enumerate() {
            if let Some(want) = want
                && *want != have
            {
                return Err(Status::invalid_argument(format!(
                    "shape asks for inner dimension {} of size {want}, the values have {have}",
                    ragged + 1 + i
                )));
            }
        }
        let layout = layout(&splits, inner, &wanted);
        let out = match values.dtype() {
            DType::F32 => gather::<f32>(values, default, &layout, inner_size)?,
            DType::F64 => gather::<f64>(values, default, &layout, inner_size)?,
            DType::I32 => gather::<i32>(values, default, &layout, inner_size)?,
            DType::I64 => gather::<i64>(values, default, &layout, inner_size)?,
            DType::Bool => gather::<bool>(values, default, &layout, inner_size)?,
            DType::U8 => gather::<u8>(values, default, &layout, inner_size)?,
            DType::String => {
                let (values, default) = (values.strings()?, default.strings()?);
                let out: Vec<&[u8]> = layout
                    .picks
                    .iter()
                    .enumerate()
                    .map(|(at, p)| match p {
                        Some(i) => values.get(*i).unwrap_or_default(),
                        None => default.get(if default.len() == 1 { 0 } else { at % inner_size }).unwrap_or_default(),
                    })
                    .collect();
                Tensor::from_strings(layout.dims.as_slice(), &out)?
            }
            other => return Err(Status::unimplemented(format!("RaggedTensorToTensor of {other}"))),
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrList, AttrValue};
    use crate::ops::testing::ty;
    use crate::ops::{ResourceMgr, Value};

    fn node(types: &[&str], t: DType) -> NodeSpec {
        NodeSpec::new("r", "RaggedTensorToTensor")
            .attr("T", ty(t))
            .attr("Tindex", ty(DType::I64))
            .attr("Tshape", ty(DType::I64))
            .attr("num_row_partition_tensors", AttrValue::Int(types.len() as i64))
            .attr(
                "row_partition_types",
                AttrValue::List(AttrList::Bytes(types.iter().map(|t| t.as_bytes().to_vec()).collect())),
            )
    }

    fn i64s(v: &[i64]) -> Tensor {
        Tensor::from_slice([v.len()], v).unwrap()
    }

    fn run(node: &NodeSpec, inputs: Vec<Tensor>) -> Result<Tensor> {
        let out = crate::ops::run_kernel_once(
            node,
            inputs.into_iter().map(Value::Tensor).collect(),
            &ResourceMgr::default(),
        )?;
        Ok(out[0].as_tensor().unwrap().clone())
    }

    #[test]
    fn row_ids_pad_and_cut_to_the_shape_as_text_vectorization_does() {
        // [[2, 3, 5], [], [4, 8, 1, 9]] with output_sequence_length 3.
        let n = node(&["FIRST_DIM_SIZE", "VALUE_ROWIDS"], DType::I64);
        let values = i64s(&[2, 3, 5, 4, 8, 1, 9]);
        let ids = i64s(&[0, 0, 0, 2, 2, 2, 2]);
        let out =
            run(&n, vec![i64s(&[-1, 3]), values.clone(), Tensor::scalar(0i64), Tensor::scalar(3i64), ids.clone()])
                .unwrap();
        assert_eq!(out.dims(), &[3, 3]);
        assert_eq!(out.as_slice::<i64>().unwrap(), &[2, 3, 5, 0, 0, 0, 4, 8, 1]);
        // Natural shape (a scalar -1): as wide as the longest row.
        let out =
            run(&n, vec![Tensor::scalar(-1i64), values, Tensor::scalar(-7i64), Tensor::scalar(3i64), ids]).unwrap();
        assert_eq!(out.dims(), &[3, 4]);
        assert_eq!(out.as_slice::<i64>().unwrap()[4..8], [-7, -7, -7, -7]);
    }

    #[test]
    fn nested_splits_with_inner_dimensions_and_strings() {
        // [[[a], [b, c]], [[d]]] with rows of 2 floats each.
        let n = node(&["ROW_SPLITS", "ROW_SPLITS"], DType::F32);
        let values = Tensor::from_slice([4, 2], &[1f32, 2., 3., 4., 5., 6., 7., 8.]).unwrap();
        let out =
            run(&n, vec![Tensor::scalar(-1i64), values, Tensor::scalar(0f32), i64s(&[0, 2, 3]), i64s(&[0, 1, 3, 4])])
                .unwrap();
        assert_eq!(out.dims(), &[2, 2, 2, 2]);
        #[rustfmt::skip]
        assert_eq!(out.as_slice::<f32>().unwrap(), &[
            1., 2., 0., 0.,   3., 4., 5., 6.,
            7., 8., 0., 0.,   0., 0., 0., 0.,
        ]);
        let n = node(&["ROW_SPLITS"], DType::String);
        let values = Tensor::from_strings([3], &["x", "y", "z"]).unwrap();
        let out = run(&n, vec![i64s(&[3, 2]), values, Tensor::string_scalar("-"), i64s(&[0, 1, 3])]).unwrap();
        let got: Vec<&[u8]> = out.strings().unwrap().iter().collect();
        assert_eq!(got, [&b"x"[..], b"-", b"y", b"z", b"-", b"-"]);
    }

    #[test]
    fn bad_partitions_are_refused_before_any_value_is_read() {
        let n = node(&["ROW_SPLITS"], DType::I64);
        let run_splits = |splits: &[i64]| {
            run(&n, vec![Tensor::scalar(-1i64), i64s(&[1, 2, 3]), Tensor::scalar(0i64), i64s(splits)])
                .unwrap_err()
                .to_string()
        };
        assert!(run_splits(&[1, 3]).contains("start at 0"));
        assert!(run_splits(&[0, 2, 1, 3]).contains("decrease"));
        assert!(run_splits(&[0, 2, 9]).contains("3 items"));
        let ids = node(&["FIRST_DIM_SIZE", "VALUE_ROWIDS"], DType::I64);
        let err = run(
            &ids,
            vec![Tensor::scalar(-1i64), i64s(&[1, 2]), Tensor::scalar(0i64), Tensor::scalar(2i64), i64s(&[1, 0])],
        )
        .unwrap_err();
        assert!(err.message.contains("out of order"), "{err}");
        let err = run(
            &ids,
            vec![Tensor::scalar(-1i64), i64s(&[1, 2]), Tensor::scalar(0i64), Tensor::scalar(1i64), i64s(&[0, 5])],
        )
        .unwrap_err();
        assert!(err.message.contains("outside"), "{err}");
        let bad_types = node(&["VALUE_ROWIDS"], DType::I64);
        let sig = (crate::ops::lookup("RaggedTensorToTensor").unwrap().signature)(&bad_types).unwrap_err();
        assert!(sig.message.contains("node 'r'"), "{sig}");
    }
}
