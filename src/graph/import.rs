//! TensorFlow GraphDef import: binary `.pb` → [`GraphSpec`].
//!
//! Owns: the protobuf message structs we decode (our own prost structs, with
//! TensorFlow's field numbers) and their translation into our model. This is
//! the only place TensorFlow's protobuf names appear. Must not validate op
//! semantics; that is `graph::validate`'s job once the graph is ours.

use super::function;
use super::spec::{AttrList, AttrValue, DataType, Endpoint, GraphSpec, NodeSpec, ShapeSpec, TensorValue};
use crate::error::{Result, Status};
use crate::tensor::{DType, Tensor};
use prost::Message;
use std::collections::HashMap;
use std::path::Path;

/// The protobuf messages, field numbers as in TensorFlow's `graph.proto`,
/// `node_def.proto`, `attr_value.proto`, `tensor.proto`,
/// `tensor_shape.proto` and `versions.proto`.
pub mod proto {
    use std::collections::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GraphDef {
        #[prost(message, repeated, tag = "1")]
        pub node: Vec<NodeDef>,
        #[prost(message, optional, tag = "4")]
        pub versions: Option<VersionDef>,
        #[prost(message, optional, tag = "2")]
        pub library: Option<FunctionDefLibrary>,
    }

    /// `function.proto`: the functions a graph's nodes may call.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FunctionDefLibrary {
        #[prost(message, repeated, tag = "1")]
        pub function: Vec<FunctionDef>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FunctionDef {
        #[prost(message, optional, tag = "1")]
        pub signature: Option<OpDef>,
        #[prost(message, repeated, tag = "3")]
        pub node_def: Vec<NodeDef>,
        #[prost(map = "string, string", tag = "4")]
        pub ret: HashMap<String, String>,
        #[prost(map = "string, string", tag = "6")]
        pub control_ret: HashMap<String, String>,
    }

    /// `op_def.proto`, the parts a function's signature uses.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OpDef {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, repeated, tag = "2")]
        pub input_arg: Vec<ArgDef>,
        #[prost(message, repeated, tag = "3")]
        pub output_arg: Vec<ArgDef>,
        #[prost(string, repeated, tag = "20")]
        pub control_output: Vec<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ArgDef {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(int32, tag = "3")]
        pub r#type: i32,
        #[prost(string, tag = "4")]
        pub type_attr: String,
        #[prost(string, tag = "5")]
        pub number_attr: String,
        #[prost(string, tag = "6")]
        pub type_list_attr: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct VersionDef {
        #[prost(int32, tag = "1")]
        pub producer: i32,
        #[prost(int32, tag = "2")]
        pub min_consumer: i32,
        #[prost(int32, repeated, tag = "3")]
        pub bad_consumers: Vec<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NodeDef {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub op: String,
        #[prost(string, repeated, tag = "3")]
        pub input: Vec<String>,
        #[prost(string, tag = "4")]
        pub device: String,
        #[prost(map = "string, message", tag = "5")]
        pub attr: HashMap<String, AttrValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AttrValue {
        #[prost(oneof = "attr_value::Value", tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10")]
        pub value: Option<attr_value::Value>,
    }

    pub mod attr_value {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Value {
            #[prost(message, tag = "1")]
            List(super::ListValue),
            #[prost(bytes, tag = "2")]
            S(Vec<u8>),
            #[prost(int64, tag = "3")]
            I(i64),
            #[prost(float, tag = "4")]
            F(f32),
            #[prost(bool, tag = "5")]
            B(bool),
            #[prost(int32, tag = "6")]
            Type(i32),
            #[prost(message, tag = "7")]
            Shape(super::TensorShapeProto),
            #[prost(message, tag = "8")]
            Tensor(super::TensorProto),
            #[prost(string, tag = "9")]
            Placeholder(String),
            #[prost(message, tag = "10")]
            Func(super::NameAttrList),
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ListValue {
        #[prost(bytes, repeated, tag = "2")]
        pub s: Vec<Vec<u8>>,
        #[prost(int64, repeated, tag = "3")]
        pub i: Vec<i64>,
        #[prost(float, repeated, tag = "4")]
        pub f: Vec<f32>,
        #[prost(bool, repeated, tag = "5")]
        pub b: Vec<bool>,
        #[prost(int32, repeated, tag = "6")]
        pub r#type: Vec<i32>,
        #[prost(message, repeated, tag = "7")]
        pub shape: Vec<TensorShapeProto>,
        #[prost(message, repeated, tag = "8")]
        pub tensor: Vec<TensorProto>,
        #[prost(message, repeated, tag = "9")]
        pub func: Vec<NameAttrList>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NameAttrList {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(map = "string, message", tag = "2")]
        pub attr: HashMap<String, AttrValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorShapeProto {
        #[prost(message, repeated, tag = "2")]
        pub dim: Vec<tensor_shape_proto::Dim>,
        #[prost(bool, tag = "3")]
        pub unknown_rank: bool,
    }

    pub mod tensor_shape_proto {
        #[derive(Clone, PartialEq, prost::Message)]
        pub struct Dim {
            #[prost(int64, tag = "1")]
            pub size: i64,
            #[prost(string, tag = "2")]
            pub name: String,
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorProto {
        #[prost(int32, tag = "1")]
        pub dtype: i32,
        #[prost(message, optional, tag = "2")]
        pub tensor_shape: Option<TensorShapeProto>,
        #[prost(int32, tag = "3")]
        pub version_number: i32,
        #[prost(bytes = "vec", tag = "4")]
        pub tensor_content: Vec<u8>,
        #[prost(float, repeated, tag = "5")]
        pub float_val: Vec<f32>,
        #[prost(double, repeated, tag = "6")]
        pub double_val: Vec<f64>,
        #[prost(int32, repeated, tag = "7")]
        pub int_val: Vec<i32>,
        #[prost(bytes, repeated, tag = "8")]
        pub string_val: Vec<Vec<u8>>,
        #[prost(float, repeated, tag = "9")]
        pub scomplex_val: Vec<f32>,
        #[prost(int64, repeated, tag = "10")]
        pub int64_val: Vec<i64>,
        #[prost(bool, repeated, tag = "11")]
        pub bool_val: Vec<bool>,
        #[prost(int32, repeated, tag = "13")]
        pub half_val: Vec<i32>,
        #[prost(uint32, repeated, tag = "16")]
        pub uint32_val: Vec<u32>,
        #[prost(uint64, repeated, tag = "17")]
        pub uint64_val: Vec<u64>,
    }
}

/// TensorFlow's `DataType` numbers (refs are +100).
pub(crate) fn data_type_of(tf: i32) -> DataType {
    match tf {
        1 => DataType::Tensor(DType::F32),
        2 => DataType::Tensor(DType::F64),
        3 => DataType::Tensor(DType::I32),
        9 => DataType::Tensor(DType::I64),
        10 => DataType::Tensor(DType::Bool),
        7 => DataType::Tensor(DType::String),
        4 => DataType::Tensor(DType::U8),
        23 => DataType::Tensor(DType::U64),
        8 => DataType::Tensor(DType::Complex64),
        19 => DataType::Tensor(DType::F16),
        14 => DataType::Tensor(DType::BF16),
        6 => DataType::Tensor(DType::I8),
        5 => DataType::Tensor(DType::I16),
        17 => DataType::Tensor(DType::U16),
        22 => DataType::Tensor(DType::U32),
        20 => DataType::Resource,
        21 => DataType::Variant,
        other => DataType::Unsupported(other),
    }
}

/// The TensorFlow `DataType` number of a dtype.
pub fn tf_number_of(dtype: DType) -> i32 {
    match dtype {
        DType::F32 => 1,
        DType::F64 => 2,
        DType::I32 => 3,
        DType::I64 => 9,
        DType::Bool => 10,
        DType::String => 7,
        DType::U8 => 4,
        DType::U64 => 23,
        DType::Complex64 => 8,
        DType::F16 => 19,
        DType::BF16 => 14,
        DType::I8 => 6,
        DType::I16 => 5,
        DType::U16 => 17,
        DType::U32 => 22,
    }
}

fn shape_of(proto: &proto::TensorShapeProto) -> ShapeSpec {
    if proto.unknown_rank {
        ShapeSpec::unknown()
    } else {
        ShapeSpec { dims: Some(proto.dim.iter().map(|d| d.size).collect()) }
    }
}

/// A GraphDef constant's value (every compact form TensorFlow writes; see
/// `tf_tensor`).
fn tensor_of(proto: &proto::TensorProto) -> Result<TensorValue> {
    let fields = super::tf_tensor::tensor_proto_fields!(proto);
    super::tf_tensor::tensor_of_fields(&fields, "constant tensor").map(|t| TensorValue::from_tensor(&t))
}

/// TensorFlow's string list encoding: `count` varint32 lengths, then the
/// strings' bytes, which must use up `content` exactly.
pub(crate) fn decode_string_list(content: &[u8], count: usize) -> Result<Vec<&[u8]>> {
    let bad = |what: &str| Status::invalid_argument(format!("string tensor_content of {count} elements: {what}"));
    let mut at = 0usize;
    let mut lengths = Vec::with_capacity(count.min(content.len()));
    for _ in 0..count {
        let mut len = 0u64;
        let mut shift = 0;
        loop {
            let byte = *content.get(at).ok_or_else(|| bad("lengths run past the content"))?;
            at += 1;
            if shift > 28 {
                return Err(bad("a length is not a varint32"));
            }
            len |= u64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        lengths.push(usize::try_from(len).map_err(|_| bad("a length is too large"))?);
    }
    let mut values = Vec::with_capacity(count);
    for len in lengths {
        let value = at.checked_add(len).and_then(|end| content.get(at..end)).ok_or_else(|| bad("bytes run short"))?;
        values.push(value);
        at += len;
    }
    if at != content.len() {
        return Err(bad(&format!("{} bytes left over", content.len() - at)));
    }
    Ok(values)
}

fn attr_of(value: &proto::AttrValue) -> Result<AttrValue> {
    use proto::attr_value::Value;
    Ok(match &value.value {
        None => AttrValue::List(AttrList::Int(vec![])),
        Some(Value::S(s)) => AttrValue::Bytes(s.clone()),
        Some(Value::I(i)) => AttrValue::Int(*i),
        Some(Value::F(f)) => AttrValue::Float(*f),
        Some(Value::B(b)) => AttrValue::Bool(*b),
        Some(Value::Type(t)) => AttrValue::Type(data_type_of(*t)),
        Some(Value::Shape(s)) => AttrValue::Shape(shape_of(s)),
        Some(Value::Tensor(t)) => AttrValue::Tensor(tensor_of(t)?),
        Some(Value::Placeholder(p)) => AttrValue::Func(format!("${p}")),
        Some(Value::Func(f)) => AttrValue::Func(f.name.clone()),
        Some(Value::List(l)) => AttrValue::List(if !l.s.is_empty() {
            AttrList::Bytes(l.s.clone())
        } else if !l.i.is_empty() {
            AttrList::Int(l.i.clone())
        } else if !l.f.is_empty() {
            AttrList::Float(l.f.clone())
        } else if !l.b.is_empty() {
            AttrList::Bool(l.b.clone())
        } else if !l.r#type.is_empty() {
            AttrList::Type(l.r#type.iter().map(|&t| data_type_of(t)).collect())
        } else if !l.shape.is_empty() {
            AttrList::Shape(l.shape.iter().map(shape_of).collect())
        } else if !l.tensor.is_empty() {
            AttrList::Tensor(l.tensor.iter().map(tensor_of).collect::<Result<_>>()?)
        } else if !l.func.is_empty() {
            AttrList::Func(l.func.iter().map(|f| f.name.clone()).collect())
        } else {
            AttrList::Int(vec![])
        }),
    })
}

fn node_of(def: &proto::NodeDef) -> Result<NodeSpec> {
    let here = |e: Status| e.context(format_args!("node '{}' ({})", def.name, def.op));
    if def.name.is_empty() {
        return Err(Status::invalid_argument(format!("a node of op '{}' has no name", def.op)));
    }
    let mut node = NodeSpec::new(def.name.clone(), def.op.clone());
    node.device = def.device.clone();
    for input in &def.input {
        if let Some(control) = input.strip_prefix('^') {
            if control.is_empty() {
                return Err(here(Status::invalid_argument("empty control input '^'")));
            }
            node.control_inputs.push(control.to_string());
        } else {
            if !node.control_inputs.is_empty() {
                return Err(here(Status::invalid_argument(format!("data input '{input}' follows a control input"))));
            }
            node.inputs.push(Endpoint::parse(input).map_err(here)?);
        }
    }
    // Sorted for determinism: the proto map has no order.
    let mut keys: Vec<&String> = def.attr.keys().collect();
    keys.sort();
    for key in keys {
        let value = attr_of(&def.attr[key]).map_err(|e| here(e.context(format_args!("attr '{key}'"))))?;
        node.attrs.insert(key.clone(), value);
    }
    // Writers that strip default attrs (SavedModels) leave these out.
    for (key, default) in super::op_defs::default_attrs(&def.op) {
        node.attrs.entry((*key).to_string()).or_insert_with(|| default.to_attr());
    }
    Ok(node)
}

/// Decodes a binary GraphDef; calls of its function library are inlined
/// and functional control flow lowered (`graph::function`).
pub fn graph_from_pb_bytes(bytes: &[u8]) -> Result<GraphSpec> {
    let def =
        proto::GraphDef::decode(bytes).map_err(|e| Status::invalid_argument(format!("not a binary GraphDef: {e}")))?;
    graph_from_proto(&def)
}

/// A decoded GraphDef into our model, library expanded.
pub fn graph_from_proto(def: &proto::GraphDef) -> Result<GraphSpec> {
    let nodes = def.node.iter().map(node_of).collect::<Result<Vec<_>>>()?;
    let library = library_of(def.library.as_ref())?;
    Ok(GraphSpec { nodes: function::expand(nodes, &library)? })
}

fn arg_of(arg: &proto::ArgDef) -> Result<(String, Option<DataType>)> {
    if !arg.number_attr.is_empty() || !arg.type_list_attr.is_empty() {
        return Err(Status::unimplemented(format!(
            "arg '{}' is a list of tensors, which functions here cannot take",
            arg.name
        )));
    }
    Ok((arg.name.clone(), if arg.type_attr.is_empty() { Some(data_type_of(arg.r#type)) } else { None }))
}

fn library_of(library: Option<&proto::FunctionDefLibrary>) -> Result<function::Library> {
    let mut out = function::Library::new();
    for f in library.map(|l| l.function.as_slice()).unwrap_or_default() {
        let Some(sig) = &f.signature else {
            return Err(Status::invalid_argument("a library function has no signature"));
        };
        let here = |e: Status| e.context(format_args!("function '{}'", sig.name));
        let nodes = f
            .node_def
            .iter()
            .map(|n| {
                let mut bare = n.clone();
                bare.input.clear();
                Ok(function::FunctionNode { spec: node_of(&bare)?, inputs: n.input.clone() })
            })
            .collect::<Result<Vec<_>>>()
            .map_err(here)?;
        // Sorted: the proto map has no order.
        let mut control_ret: Vec<String> = f.control_ret.values().cloned().collect();
        control_ret.sort();
        let function = function::Function {
            name: sig.name.clone(),
            inputs: sig.input_arg.iter().map(arg_of).collect::<Result<_>>().map_err(here)?,
            outputs: sig.output_arg.iter().map(arg_of).collect::<Result<_>>().map_err(here)?,
            nodes,
            ret: f.ret.clone(),
            control_ret,
        };
        out.insert(sig.name.clone(), function);
    }
    Ok(out)
}

/// Reads a binary GraphDef file; errors name the file.
pub fn load_graph(path: impl AsRef<Path>) -> Result<GraphSpec> {
    let path = path.as_ref();
    let bytes =
        std::fs::read(path).map_err(|e| Status::not_found(format!("cannot read graph {}: {e}", path.display())))?;
    graph_from_pb_bytes(&bytes).map_err(|e| e.context(path.display()))
}

fn attr_to_proto(value: &AttrValue) -> proto::AttrValue {
    use proto::attr_value::Value;
    let shape = |s: &ShapeSpec| proto::TensorShapeProto {
        dim: s
            .dims
            .iter()
            .flatten()
            .map(|&size| proto::tensor_shape_proto::Dim { size, name: String::new() })
            .collect(),
        unknown_rank: s.dims.is_none(),
    };
    let tensor = |t: &TensorValue| {
        let mut out = proto::TensorProto {
            dtype: tf_number_of(t.dtype),
            tensor_shape: Some(shape(&ShapeSpec { dims: Some(t.dims.iter().map(|&d| d as i64).collect()) })),
            ..Default::default()
        };
        // TensorFlow writes string constants as `string_val`. A malformed
        // image goes out as raw content, for the importer to refuse.
        match t.to_tensor().as_ref().map(Tensor::strings) {
            Ok(Ok(strings)) => out.string_val = strings.iter().map(<[u8]>::to_vec).collect(),
            _ => out.tensor_content = t.bytes.clone(),
        }
        out
    };
    let ty = |t: &DataType| match t {
        DataType::Tensor(d) => tf_number_of(*d),
        DataType::Resource => 20,
        DataType::Variant => 21,
        DataType::Unsupported(n) => *n,
    };
    let value = match value {
        AttrValue::Bytes(s) => Value::S(s.clone()),
        AttrValue::Int(i) => Value::I(*i),
        AttrValue::Float(f) => Value::F(*f),
        AttrValue::Bool(b) => Value::B(*b),
        AttrValue::Type(t) => Value::Type(ty(t)),
        AttrValue::Shape(s) => Value::Shape(shape(s)),
        AttrValue::Tensor(t) => Value::Tensor(tensor(t)),
        AttrValue::Func(f) => Value::Func(proto::NameAttrList { name: f.clone(), attr: HashMap::new() }),
        AttrValue::List(l) => {
            let mut list = proto::ListValue::default();
            match l {
                AttrList::Bytes(v) => list.s = v.clone(),
                AttrList::Int(v) => list.i = v.clone(),
                AttrList::Float(v) => list.f = v.clone(),
                AttrList::Bool(v) => list.b = v.clone(),
                AttrList::Type(v) => list.r#type = v.iter().map(ty).collect(),
                AttrList::Shape(v) => list.shape = v.iter().map(shape).collect(),
                AttrList::Tensor(v) => list.tensor = v.iter().map(tensor).collect(),
                AttrList::Func(v) => {
                    list.func =
                        v.iter().map(|name| proto::NameAttrList { name: name.clone(), attr: HashMap::new() }).collect()
                }
            }
            Value::List(list)
        }
    };
    proto::AttrValue { value: Some(value) }
}

/// Encodes a graph as a binary GraphDef (for tools and tests that build
/// graphs in code and want to hand them to `ringflow run`).
pub fn graph_to_pb_bytes(graph: &GraphSpec) -> Vec<u8> {
    graph_to_proto(graph).encode_to_vec()
}

/// A graph as a GraphDef message (functions already inlined at import).
pub fn graph_to_proto(graph: &GraphSpec) -> proto::GraphDef {
    proto::GraphDef {
        node: graph
            .nodes
            .iter()
            .map(|n| proto::NodeDef {
                name: n.name.clone(),
                op: n.op.clone(),
                input: n
                    .inputs
                    .iter()
                    .map(|e| if e.port == 0 { e.node.clone() } else { e.to_string() })
                    .chain(n.control_inputs.iter().map(|c| format!("^{c}")))
                    .collect(),
                device: n.device.clone(),
                attr: n.attrs.iter().map(|(k, v)| (k.clone(), attr_to_proto(v))).collect(),
            })
            .collect(),
        versions: Some(proto::VersionDef { producer: 2474, min_consumer: 0, bad_consumers: Vec::new() }),
        library: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float_const(name: &str, values: Vec<f32>, dims: Vec<i64>) -> proto::NodeDef {
        let mut attr = HashMap::new();
        attr.insert(
            "value".to_string(),
            proto::AttrValue {
                value: Some(proto::attr_value::Value::Tensor(proto::TensorProto {
                    dtype: 1,
                    tensor_shape: Some(proto::TensorShapeProto {
                        dim: dims
                            .into_iter()
                            .map(|size| proto::tensor_shape_proto::Dim { size, name: String::new() })
                            .collect(),
                        unknown_rank: false,
                    }),
                    float_val: values,
                    ..Default::default()
                })),
            },
        );
        attr.insert("dtype".to_string(), proto::AttrValue { value: Some(proto::attr_value::Value::Type(1)) });
        proto::NodeDef { name: name.to_string(), op: "Const".to_string(), attr, ..Default::default() }
    }

    #[test]
    fn compact_float_val_is_expanded() {
        let def =
            proto::GraphDef { node: vec![float_const("c", vec![1.0, 2.0], vec![2, 2])], versions: None, library: None };
        let g = graph_from_pb_bytes(&def.encode_to_vec()).unwrap();
        let t = g.nodes[0].attr_tensor("value").unwrap().to_tensor().unwrap();
        assert_eq!(t.as_slice::<f32>().unwrap(), &[1.0, 2.0, 2.0, 2.0]);
    }

    #[test]
    fn inputs_split_into_data_and_control() {
        let mut n = proto::NodeDef {
            name: "n".into(),
            op: "AddV2".into(),
            input: vec!["a".into(), "b:1".into(), "^c".into()],
            ..Default::default()
        };
        let g = graph_from_pb_bytes(
            &proto::GraphDef { node: vec![n.clone()], versions: None, library: None }.encode_to_vec(),
        )
        .unwrap();
        assert_eq!(g.nodes[0].inputs, vec![Endpoint::new("a", 0), Endpoint::new("b", 1)]);
        assert_eq!(g.nodes[0].control_inputs, vec!["c".to_string()]);
        n.input = vec!["^c".into(), "a".into()];
        let err =
            graph_from_pb_bytes(&proto::GraphDef { node: vec![n], versions: None, library: None }.encode_to_vec())
                .unwrap_err();
        assert!(err.message.contains("node 'n'") && err.message.contains("follows a control input"), "{err}");
    }

    #[test]
    fn bad_bytes_and_bad_content_are_errors() {
        assert!(graph_from_pb_bytes(b"\xff\xff\xff").is_err());
        let mut c = float_const("c", vec![], vec![2]);
        if let Some(proto::attr_value::Value::Tensor(t)) = &mut c.attr.get_mut("value").unwrap().value {
            t.tensor_content = vec![0; 7];
        }
        let err =
            graph_from_pb_bytes(&proto::GraphDef { node: vec![c], versions: None, library: None }.encode_to_vec())
                .unwrap_err();
        assert!(err.message.contains("node 'c'") && err.message.contains("tensor_content has 7 bytes"), "{err}");
    }

    fn string_const(name: &str, values: Vec<&[u8]>, content: Vec<u8>, dims: Vec<i64>) -> proto::NodeDef {
        let tensor = proto::TensorProto {
            dtype: 7,
            tensor_shape: Some(proto::TensorShapeProto {
                dim: dims
                    .into_iter()
                    .map(|size| proto::tensor_shape_proto::Dim { size, name: String::new() })
                    .collect(),
                unknown_rank: false,
            }),
            string_val: values.into_iter().map(<[u8]>::to_vec).collect(),
            tensor_content: content,
            ..Default::default()
        };
        let mut attr = HashMap::new();
        attr.insert("value".to_string(), proto::AttrValue { value: Some(proto::attr_value::Value::Tensor(tensor)) });
        attr.insert("dtype".to_string(), proto::AttrValue { value: Some(proto::attr_value::Value::Type(7)) });
        proto::NodeDef { name: name.to_string(), op: "Const".to_string(), attr, ..Default::default() }
    }

    fn import_one(node: proto::NodeDef) -> Result<GraphSpec> {
        graph_from_pb_bytes(&proto::GraphDef { node: vec![node], versions: None, library: None }.encode_to_vec())
    }

    fn strings_of(g: &GraphSpec) -> (Vec<usize>, Vec<Vec<u8>>) {
        let t = g.nodes[0].attr_tensor("value").unwrap().to_tensor().unwrap();
        (t.dims().to_vec(), t.strings().unwrap().iter().map(<[u8]>::to_vec).collect())
    }

    #[test]
    fn string_constants_import_from_string_val() {
        // A Saver's file name: a scalar.
        let g = import_one(string_const("filename", vec![b"model.ckpt"], vec![], vec![])).unwrap();
        assert_eq!(g.nodes[0].attr_dtype("dtype").unwrap(), DType::String);
        assert_eq!(strings_of(&g), (vec![], vec![b"model.ckpt".to_vec()]));
        // SaveV2's tensor names: a vector, with empty and non-UTF-8 elements.
        let g = import_one(string_const("names", vec![b"w", b"", b"\xff\x00b"], vec![], vec![3])).unwrap();
        assert_eq!(strings_of(&g), (vec![3], vec![b"w".to_vec(), vec![], b"\xff\x00b".to_vec()]));
        // Fewer values than elements repeat the last; none means empty strings.
        let g = import_one(string_const("c", vec![b"a", b"z"], vec![], vec![2, 2])).unwrap();
        assert_eq!(strings_of(&g).1, vec![b"a".to_vec(), b"z".to_vec(), b"z".to_vec(), b"z".to_vec()]);
        let g = import_one(string_const("c", vec![], vec![], vec![2])).unwrap();
        assert_eq!(strings_of(&g).1, vec![Vec::<u8>::new(), vec![]]);
        let g = import_one(string_const("c", vec![], vec![], vec![0, 3])).unwrap();
        assert_eq!(strings_of(&g), (vec![0, 3], vec![]));
        let err = import_one(string_const("c", vec![b"a", b"b", b"c"], vec![], vec![2])).unwrap_err();
        assert!(err.message.contains("node 'c'") && err.message.contains("string_val has 3 values for 2"), "{err}");
    }

    #[test]
    fn string_tensor_content_is_varint_lengths_then_bytes() {
        // Lengths 1, 0, 200 (varint 0xc8 0x01), then the bytes.
        let long = vec![b'q'; 200];
        let mut content = vec![1, 0, 0xc8, 0x01, b'a'];
        content.extend_from_slice(&long);
        let g = import_one(string_const("c", vec![], content.clone(), vec![3])).unwrap();
        assert_eq!(strings_of(&g).1, vec![b"a".to_vec(), vec![], long]);
        let short = content[..content.len() - 1].to_vec();
        let err = import_one(string_const("c", vec![], short, vec![3])).unwrap_err();
        assert!(err.message.contains("bytes run short"), "{err}");
        let mut extra = content.clone();
        extra.push(b'!');
        let err = import_one(string_const("c", vec![], extra, vec![3])).unwrap_err();
        assert!(err.message.contains("1 bytes left over"), "{err}");
        let err = import_one(string_const("c", vec![], vec![0x80, 0x80], vec![1])).unwrap_err();
        assert!(err.message.contains("lengths run past"), "{err}");
        let err = import_one(string_const("c", vec![], vec![0xff; 6], vec![1])).unwrap_err();
        assert!(err.message.contains("not a varint32"), "{err}");
    }

    #[test]
    fn string_constants_export_as_string_val_and_import_back() {
        let g = import_one(string_const("names", vec![b"w", b"", b"\xff"], vec![], vec![3])).unwrap();
        let bytes = graph_to_pb_bytes(&g);
        let def = proto::GraphDef::decode(&bytes[..]).unwrap();
        let Some(proto::attr_value::Value::Tensor(t)) = &def.node[0].attr["value"].value else {
            panic!("value is not a tensor: {:?}", def.node[0].attr["value"]);
        };
        assert_eq!((t.dtype, t.string_val.len(), t.tensor_content.len()), (7, 3, 0));
        assert_eq!(graph_from_pb_bytes(&bytes).unwrap(), g);
    }

    #[test]
    fn export_then_import_is_identity() {
        let def = proto::GraphDef { node: vec![float_const("c", vec![3.0], vec![])], versions: None, library: None };
        let g = graph_from_pb_bytes(&def.encode_to_vec()).unwrap();
        let again = graph_from_pb_bytes(&graph_to_pb_bytes(&g)).unwrap();
        assert_eq!(g, again);
    }
}
