//! Serialized `tf.train.Example` protos into tensors (`ParseExample`,
//! `ParseExampleV2`): what `tf.io.parse_example`, Estimator serving input
//! receivers and `tf.Example`-fed SavedModels put in front of a model.
//! Dense features (float32, int64, string; fixed shapes, a default when
//! missing) and sparse features (values of any count, as COO indices,
//! values and a dense shape).
//!
//! Owns: decoding Examples (our own prost structs, `example.proto`'s field
//! numbers) and TensorFlow's rules and messages for mismatched types,
//! counts and missing required features. Must not keep state between
//! steps. Ragged features (`ParseExampleV2`'s `ragged_keys`) are refused
//! by name.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::{AttrList, AttrValue, DataType, NodeSpec, ShapeSpec};
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Tensor};
use prost::Message;
use std::collections::HashMap;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("ParseExample", signature::<1>, build::<1>),
    OpDef::kernel("ParseExampleV2", signature::<2>, build::<2>),
];

/// `example.proto` and `feature.proto`, the fields read (and written by
/// TensorFlow Serving's REST `:classify` and `:regress`, whose JSON
/// examples become these).
pub(crate) mod wire {
    use std::collections::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Example {
        #[prost(message, optional, tag = "1")]
        pub features: Option<Features>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Features {
        #[prost(map = "string, message", tag = "1")]
        pub feature: HashMap<String, Feature>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Feature {
        #[prost(oneof = "Kind", tags = "1, 2, 3")]
        pub kind: Option<Kind>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        #[prost(message, tag = "1")]
        Bytes(BytesList),
        #[prost(message, tag = "2")]
        Float(FloatList),
        #[prost(message, tag = "3")]
        Int64(Int64List),
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BytesList {
        #[prost(bytes = "vec", repeated, tag = "1")]
        pub value: Vec<Vec<u8>>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FloatList {
        #[prost(float, repeated, tag = "1")]
        pub value: Vec<f32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Int64List {
        #[prost(int64, repeated, tag = "1")]
        pub value: Vec<i64>,
    }
}

/// The feature dtypes an Example holds.
fn feature_dtype(node: &NodeSpec, dtype: &DataType) -> Result<DType> {
    match dtype {
        DataType::Tensor(d @ (DType::F32 | DType::I64 | DType::String)) => Ok(*d),
        other => bail!(
            invalid_argument,
            "node '{}' ({}): a feature of type {other} (float32, int64 or string)",
            node.name,
            node.op
        ),
    }
}

/// What the node's attrs say it parses.
struct Layout {
    sparse: Vec<DType>,
    dense: Vec<DType>,
    dense_shapes: Vec<Vec<usize>>,
}

fn layout(node: &NodeSpec, version: u8) -> Result<Layout> {
    let types = |key: &str| -> Result<Vec<DType>> {
        if node.get_attr(key).is_none() {
            return Ok(Vec::new());
        }
        node.attr_type_list(key)?.iter().map(|t| feature_dtype(node, t)).collect()
    };
    let sparse = types("sparse_types")?;
    let dense = types("Tdense")?;
    if version == 2 {
        let ragged = node
            .get_attr("ragged_value_types")
            .map_or(Ok(Vec::new()), |_| node.attr_type_list("ragged_value_types"))?;
        if !ragged.is_empty() {
            bail!(unimplemented, "node '{}' (ParseExampleV2): ragged features are not parsed here", node.name);
        }
    }
    let dense_shapes: Vec<ShapeSpec> = match node.get_attr("dense_shapes") {
        Some(AttrValue::List(AttrList::Shape(shapes))) => shapes.clone(),
        Some(AttrValue::List(list)) if dense.is_empty() && crate::graph::spec::attr_list_is_empty(list) => Vec::new(),
        None if dense.is_empty() => Vec::new(),
        other => bail!(invalid_argument, "node '{}' ({}): dense_shapes is {other:?}", node.name, node.op),
    };
    if dense_shapes.len() != dense.len() {
        bail!(
            invalid_argument,
            "node '{}' ({}): {} dense shapes for {} dense features",
            node.name,
            node.op,
            dense_shapes.len(),
            dense.len()
        );
    }
    let dense_shapes = dense_shapes
        .iter()
        .map(|shape| match &shape.dims {
            Some(dims) if dims.iter().all(|&d| d >= 0) => Ok(dims.iter().map(|&d| d as usize).collect()),
            _ => Err(Status::unimplemented(format!(
                "node '{}' ({}): dense shape {shape} (variable-length dense features are not parsed here)",
                node.name, node.op
            ))),
        })
        .collect::<Result<_>>()?;
    Ok(Layout { sparse, dense, dense_shapes })
}

/// V1: `[serialized, names, sparse_keys × Nsparse, dense_keys × Ndense,
/// dense_defaults × Ndense]`; V2: `[serialized, names, sparse_keys,
/// dense_keys, ragged_keys, dense_defaults × Ndense]`. Both answer
/// `[sparse indices × S, sparse values × S, sparse shapes × S, dense × D]`.
fn signature<const VERSION: u8>(node: &NodeSpec) -> Result<OpSignature> {
    let layout = layout(node, VERSION)?;
    let string = ValueType::Tensor(DType::String);
    let int64 = ValueType::Tensor(DType::I64);
    let mut inputs = vec![string, string];
    if VERSION == 1 {
        inputs.extend(std::iter::repeat_n(string, layout.sparse.len() + layout.dense.len()));
    } else {
        inputs.extend([string, string, string]);
    }
    inputs.extend(layout.dense.iter().map(|&d| ValueType::Tensor(d)));
    let mut outputs = Vec::new();
    outputs.extend(std::iter::repeat_n(int64, layout.sparse.len()));
    outputs.extend(layout.sparse.iter().map(|&d| ValueType::Tensor(d)));
    outputs.extend(std::iter::repeat_n(int64, layout.sparse.len()));
    outputs.extend(layout.dense.iter().map(|&d| ValueType::Tensor(d)));
    Ok(OpSignature::new(inputs, outputs))
}

struct ParseExample {
    version: u8,
    layout: Layout,
    node: String,
}

fn build<const VERSION: u8>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ParseExample { version: VERSION, layout: layout(init.node, VERSION)?, node: init.node.name.clone() }))
}

/// One feature's values, as parsed.
enum Values<'a> {
    Float(&'a [f32]),
    Int64(&'a [i64]),
    Bytes(&'a [Vec<u8>]),
}

impl Values<'_> {
    fn of(feature: &wire::Feature) -> Values<'_> {
        match &feature.kind {
            Some(wire::Kind::Float(l)) => Values::Float(&l.value),
            Some(wire::Kind::Int64(l)) => Values::Int64(&l.value),
            Some(wire::Kind::Bytes(l)) => Values::Bytes(&l.value),
            None => Values::Float(&[]),
        }
    }

    fn len(&self) -> usize {
        match self {
            Values::Float(v) => v.len(),
            Values::Int64(v) => v.len(),
            Values::Bytes(v) => v.len(),
        }
    }

    fn dtype(&self) -> DType {
        match self {
            Values::Float(_) => DType::F32,
            Values::Int64(_) => DType::I64,
            Values::Bytes(_) => DType::String,
        }
    }
}

/// TensorFlow's name for a feature dtype in its parse errors.
fn type_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float",
        DType::I64 => "int64",
        _ => "string",
    }
}

/// Column storage for one output, filled example by example.
enum Column {
    Float(Vec<f32>),
    Int64(Vec<i64>),
    Bytes(Vec<Vec<u8>>),
}

impl Column {
    fn new(dtype: DType) -> Column {
        match dtype {
            DType::F32 => Column::Float(Vec::new()),
            DType::I64 => Column::Int64(Vec::new()),
            _ => Column::Bytes(Vec::new()),
        }
    }

    fn push(&mut self, values: &Values<'_>) {
        match (self, values) {
            (Column::Float(c), Values::Float(v)) => c.extend_from_slice(v),
            (Column::Int64(c), Values::Int64(v)) => c.extend_from_slice(v),
            (Column::Bytes(c), Values::Bytes(v)) => c.extend(v.iter().cloned()),
            // Callers check dtypes first; an empty feature matches any.
            _ => {}
        }
    }

    fn push_default(&mut self, default: &Tensor) -> Result<()> {
        match self {
            Column::Float(c) => c.extend_from_slice(default.as_slice::<f32>()?),
            Column::Int64(c) => c.extend_from_slice(default.as_slice::<i64>()?),
            Column::Bytes(c) => c.extend(default.strings()?.iter().map(<[u8]>::to_vec)),
        }
        Ok(())
    }

    fn into_tensor(self, dims: Vec<usize>) -> Result<Tensor> {
        match self {
            Column::Float(v) => Tensor::from_slice(dims.as_slice(), &v),
            Column::Int64(v) => Tensor::from_slice(dims.as_slice(), &v),
            Column::Bytes(v) => Tensor::from_strings(dims.as_slice(), &v),
        }
    }
}

impl OpKernel for ParseExample {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (n_sparse, n_dense) = (self.layout.sparse.len(), self.layout.dense.len());
        let serialized = ctx.input(0)?;
        let scalar = serialized.shape().rank() == 0;
        if serialized.shape().rank() > 1 {
            bail!(
                invalid_argument,
                "node '{}': serialized must be a scalar or a vector, got {}",
                self.node,
                serialized.shape()
            );
        }
        let names: Vec<String> =
            ctx.input(1)?.strings()?.iter().map(|n| String::from_utf8_lossy(n).into_owned()).collect();
        let keys_of = |ctx: &OpContext<'_>, first: usize, count: usize, v2_input: usize| -> Result<Vec<String>> {
            let texts: Vec<Vec<u8>> = if self.version == 1 {
                (first..first + count).map(|i| Ok(ctx.input(i)?.string_value()?.to_vec())).collect::<Result<_>>()?
            } else {
                ctx.input(v2_input)?.strings()?.iter().map(<[u8]>::to_vec).collect()
            };
            if texts.len() != count {
                bail!(invalid_argument, "node '{}': {} keys for {count} features", self.node, texts.len());
            }
            Ok(texts.into_iter().map(|k| String::from_utf8_lossy(&k).into_owned()).collect())
        };
        let sparse_keys = keys_of(ctx, 2, n_sparse, 2)?;
        let dense_keys = keys_of(ctx, 2 + n_sparse, n_dense, 3)?;
        let defaults_at = if self.version == 1 { 2 + n_sparse + n_dense } else { 5 };

        let examples: Vec<wire::Example> = serialized
            .strings()?
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                wire::Example::decode(bytes).map_err(|e| {
                    Status::invalid_argument(format!(
                        "node '{}': could not parse example input {i} (name '{}'): {e}",
                        self.node,
                        names.get(i).map_or("", String::as_str)
                    ))
                })
            })
            .collect::<Result<_>>()?;
        let empty: HashMap<String, wire::Feature> = HashMap::new();
        fn features_of<'a>(
            e: &'a wire::Example,
            empty: &'a HashMap<String, wire::Feature>,
        ) -> &'a HashMap<String, wire::Feature> {
            e.features.as_ref().map_or(empty, |f| &f.feature)
        }
        let features = |e| features_of(e, &empty);
        let where_ = |i: usize, key: &str| {
            format!("Name: {}, Key: {key}, Index: {i}", names.get(i).map_or("<unknown>", String::as_str))
        };
        let mismatch = |i: usize, key: &str, got: DType, want: DType| {
            Status::invalid_argument(format!(
                "node '{}': {}. Data types don't match. Data type: {} but expected type: {}",
                self.node,
                where_(i, key),
                type_name(got),
                type_name(want)
            ))
        };

        // Sparse: every value of every example, with its (example, position).
        for (j, (key, &dtype)) in sparse_keys.iter().zip(&self.layout.sparse).enumerate() {
            let mut column = Column::new(dtype);
            let mut indices = Vec::new();
            let mut widest = 0usize;
            for (i, example) in examples.iter().enumerate() {
                let Some(feature) = features(example).get(key) else { continue };
                let values = Values::of(feature);
                if values.len() > 0 && values.dtype() != dtype {
                    return Err(mismatch(i, key, values.dtype(), dtype));
                }
                for position in 0..values.len() {
                    if !scalar {
                        indices.push(i as i64);
                    }
                    indices.push(position as i64);
                }
                widest = widest.max(values.len());
                column.push(&values);
            }
            let rank = if scalar { 1 } else { 2 };
            let count = indices.len() / rank;
            let shape: Vec<i64> = if scalar { vec![widest as i64] } else { vec![examples.len() as i64, widest as i64] };
            ctx.set_output(j, Tensor::from_slice([count, rank], &indices)?);
            ctx.set_output(n_sparse + j, column.into_tensor(vec![count])?);
            ctx.set_output(2 * n_sparse + j, Tensor::from_slice([rank], &shape)?);
        }

        // Dense: each example's values, or the default, in the fixed shape.
        for (j, (key, &dtype)) in dense_keys.iter().zip(&self.layout.dense).enumerate() {
            let dims = &self.layout.dense_shapes[j];
            let size: usize = dims.iter().product();
            let default = ctx.input(defaults_at + j)?;
            if default.num_elements() != 0 && default.num_elements() != size {
                bail!(
                    invalid_argument,
                    "node '{}': the default of dense feature '{key}' has {} values, its shape {dims:?} needs {size}",
                    self.node,
                    default.num_elements()
                );
            }
            let mut column = Column::new(dtype);
            for (i, example) in examples.iter().enumerate() {
                match features(example).get(key).map(Values::of) {
                    Some(values) if values.len() > 0 => {
                        if values.dtype() != dtype {
                            return Err(mismatch(i, key, values.dtype(), dtype));
                        }
                        if values.len() != size {
                            bail!(
                                invalid_argument,
                                "node '{}': {}. Number of {} values != expected. Values size: {} but output shape: {dims:?}",
                                self.node,
                                where_(i, key),
                                type_name(dtype),
                                values.len()
                            );
                        }
                        column.push(&values);
                    }
                    _ if default.num_elements() == size && size > 0 => column.push_default(default)?,
                    _ if size == 0 => {}
                    _ => bail!(
                        invalid_argument,
                        "node '{}': Name: {}, Feature: {key} (data type: {}) is required but could not be found.",
                        self.node,
                        names.get(i).map_or("<unknown>", String::as_str),
                        type_name(dtype)
                    ),
                }
            }
            let mut out_dims = if scalar { Vec::new() } else { vec![examples.len()] };
            out_dims.extend_from_slice(dims);
            ctx.set_output(3 * n_sparse + j, column.into_tensor(out_dims)?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::run1;

    fn example(key: &str, kind: wire::Kind) -> Vec<u8> {
        let feature = wire::Feature { kind: Some(kind) };
        let features = wire::Features { feature: [(key.to_string(), feature)].into_iter().collect() };
        wire::Example { features: Some(features) }.encode_to_vec()
    }

    /// A V2 node parsing one dense float feature `x` of shape [2].
    fn dense_x() -> NodeSpec {
        NodeSpec::new("parse", "ParseExampleV2")
            .attr("Tdense", AttrValue::List(AttrList::Type(vec![DataType::Tensor(DType::F32)])))
            .attr("dense_shapes", AttrValue::List(AttrList::Shape(vec![ShapeSpec::known(&[2])])))
            .attr("sparse_types", AttrValue::List(AttrList::Type(vec![])))
            .attr("num_sparse", AttrValue::Int(0))
    }

    fn parse(serialized: &[Vec<u8>], default: &[f32]) -> Result<Tensor> {
        let strings = |v: &[&[u8]]| Tensor::from_strings([v.len()], v).unwrap();
        run1(
            &dense_x(),
            &[
                Tensor::from_strings([serialized.len()], serialized).unwrap(),
                strings(&[]),
                strings(&[]),
                strings(&[b"x"]),
                strings(&[]),
                Tensor::from_slice([default.len()], default).unwrap(),
            ],
        )
    }

    #[test]
    fn wrong_examples_are_refused_with_tensorflows_messages() {
        let ints = example("x", wire::Kind::Int64(wire::Int64List { value: vec![1, 2] }));
        let err = parse(&[ints], &[]).unwrap_err().to_string();
        assert!(
            err.contains("Key: x, Index: 0. Data types don't match. Data type: int64 but expected type: float"),
            "{err}"
        );
        let three = example("x", wire::Kind::Float(wire::FloatList { value: vec![1.0, 2.0, 3.0] }));
        let err = parse(&[three], &[]).unwrap_err().to_string();
        assert!(err.contains("Values size: 3 but output shape: [2]"), "{err}");
        let other = example("y", wire::Kind::Float(wire::FloatList { value: vec![1.0] }));
        let err = parse(std::slice::from_ref(&other), &[]).unwrap_err().to_string();
        assert!(err.contains("Feature: x (data type: float) is required but could not be found"), "{err}");
        assert_eq!(parse(&[other], &[4.0, 5.0]).unwrap().as_slice::<f32>().unwrap(), [4.0, 5.0]);
        let err = parse(&[b"\xff\xff\xff".to_vec()], &[]).unwrap_err().to_string();
        assert!(err.contains("could not parse example input 0"), "{err}");
    }

    #[test]
    fn ragged_features_are_refused_by_name() {
        let node =
            dense_x().attr("ragged_value_types", AttrValue::List(AttrList::Type(vec![DataType::Tensor(DType::I64)])));
        let err = signature::<2>(&node).err().unwrap().to_string();
        assert!(err.contains("'parse'") && err.contains("ragged"), "{err}");
    }
}
