//! The graph model the whole runtime speaks: nodes with typed attributes,
//! data inputs by (node, port), control inputs, device requests.
//!
//! Owns: [`GraphSpec`], [`NodeSpec`], [`AttrValue`] and friends, plain data
//! that is rkyv-archivable so partitions travel to workers as they are.
//! TensorFlow's protobuf names end at `graph::import`; what remains of
//! TensorFlow here is op and attr names, which are the ops' vocabulary.

use crate::error::{Result, Status};
use crate::tensor::{DType, Shape, Tensor};
use std::collections::BTreeMap;
use std::fmt;

/// A whole graph: what a session is created or extended with, and what a
/// worker registers as one partition.
#[derive(Debug, Clone, Default, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct GraphSpec {
    pub nodes: Vec<NodeSpec>,
}

/// One operation in a graph.
#[derive(Debug, Clone, Default, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct NodeSpec {
    pub name: String,
    pub op: String,
    /// Data inputs, in the op's input order.
    pub inputs: Vec<Endpoint>,
    /// Nodes that must finish before this one starts.
    pub control_inputs: Vec<String>,
    /// Requested device, possibly partial (`/job:worker/task:1`) or empty.
    pub device: String,
    pub attrs: BTreeMap<String, AttrValue>,
}

/// Output `port` of node `node`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Endpoint {
    pub node: String,
    pub port: u32,
}

impl Endpoint {
    pub fn new(node: impl Into<String>, port: u32) -> Endpoint {
        Endpoint { node: node.into(), port }
    }

    /// Parses `name`, `name:port`; a tensor name as users write it.
    pub fn parse(tensor_name: &str) -> Result<Endpoint> {
        if tensor_name.is_empty() || tensor_name.starts_with('^') {
            return Err(Status::invalid_argument(format!("'{tensor_name}' is not a tensor name")));
        }
        match tensor_name.rsplit_once(':') {
            Some((node, port)) if !node.is_empty() => match port.parse::<u32>() {
                Ok(port) => Ok(Endpoint::new(node, port)),
                Err(_) => Err(Status::invalid_argument(format!(
                    "'{tensor_name}' is not a tensor name: bad output index '{port}'"
                ))),
            },
            _ => Ok(Endpoint::new(tensor_name, 0)),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.node, self.port)
    }
}

/// The type an attribute can name: a tensor element type (string
/// included), or one of the kinds the runtime knows of but does not
/// compute with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum DataType {
    Tensor(DType),
    Resource,
    Variant,
    /// A TensorFlow type number this runtime has no support for.
    Unsupported(i32),
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Tensor(d) => write!(f, "{d}"),
            DataType::Resource => f.write_str("resource"),
            DataType::Variant => f.write_str("variant"),
            DataType::Unsupported(n) => write!(f, "unsupported dtype #{n}"),
        }
    }
}

/// A shape as a graph states it: rank may be unknown, dims may be -1.
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ShapeSpec {
    /// `None` when the rank is unknown.
    pub dims: Option<Vec<i64>>,
}

impl ShapeSpec {
    pub fn unknown() -> ShapeSpec {
        ShapeSpec { dims: None }
    }

    pub fn known(dims: &[usize]) -> ShapeSpec {
        ShapeSpec { dims: Some(dims.iter().map(|&d| d as i64).collect()) }
    }

    /// Whether a concrete shape fits this partial one.
    pub fn admits(&self, shape: &Shape) -> bool {
        match &self.dims {
            None => true,
            Some(dims) => {
                dims.len() == shape.rank()
                    && dims.iter().zip(shape.dims()).all(|(&want, &got)| want < 0 || want as usize == got)
            }
        }
    }
}

impl fmt::Display for ShapeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.dims {
            None => f.write_str("<unknown>"),
            Some(dims) => {
                f.write_str("[")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if *d < 0 { f.write_str("?")? } else { write!(f, "{d}")? }
                }
                f.write_str("]")
            }
        }
    }
}

/// A constant tensor stored in a graph (a `Const` node's value): dense,
/// row-major, little-endian bytes; for string, the image
/// `tensor::strings` lays out (checked again by [`TensorValue::to_tensor`]).
#[derive(Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct TensorValue {
    pub dtype: DType,
    pub dims: Vec<u64>,
    pub bytes: Vec<u8>,
}

impl TensorValue {
    pub fn from_tensor(t: &Tensor) -> TensorValue {
        TensorValue {
            dtype: t.dtype(),
            dims: t.dims().iter().map(|&d| d as u64).collect(),
            bytes: t.as_bytes().to_vec(),
        }
    }

    pub fn to_tensor(&self) -> Result<Tensor> {
        let dims: Vec<usize> = self
            .dims
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| Status::invalid_argument("tensor dimension too large")))
            .collect::<Result<_>>()?;
        Tensor::from_bytes(self.dtype, Shape::from_vec(dims), &self.bytes)
    }
}

impl fmt::Debug for TensorValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TensorValue<{}{:?}, {} bytes>", self.dtype, self.dims, self.bytes.len())
    }
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum AttrValue {
    Bytes(Vec<u8>),
    Int(i64),
    Float(f32),
    Bool(bool),
    Type(DataType),
    Shape(ShapeSpec),
    Tensor(TensorValue),
    /// A function name (kept so graphs that carry one still import).
    Func(String),
    List(AttrList),
}

/// A list attribute. TensorFlow lists are homogeneous.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum AttrList {
    Bytes(Vec<Vec<u8>>),
    Int(Vec<i64>),
    Float(Vec<f32>),
    Bool(Vec<bool>),
    Type(Vec<DataType>),
    Shape(Vec<ShapeSpec>),
    Tensor(Vec<TensorValue>),
    Func(Vec<String>),
}

impl NodeSpec {
    pub fn new(name: impl Into<String>, op: impl Into<String>) -> NodeSpec {
        NodeSpec { name: name.into(), op: op.into(), ..NodeSpec::default() }
    }

    /// Builder: adds a data input.
    pub fn input(mut self, node: impl Into<String>, port: u32) -> NodeSpec {
        self.inputs.push(Endpoint::new(node, port));
        self
    }

    /// Builder: adds a control input.
    pub fn control(mut self, node: impl Into<String>) -> NodeSpec {
        self.control_inputs.push(node.into());
        self
    }

    /// Builder: sets an attribute.
    pub fn attr(mut self, key: impl Into<String>, value: AttrValue) -> NodeSpec {
        self.attrs.insert(key.into(), value);
        self
    }

    /// Builder: requests a device.
    pub fn on(mut self, device: impl Into<String>) -> NodeSpec {
        self.device = device.into();
        self
    }

    fn missing(&self, key: &str, what: &str) -> Status {
        Status::invalid_argument(format!("node '{}' ({}): missing attr '{key}' ({what})", self.name, self.op))
    }

    fn wrong(&self, key: &str, what: &str, got: &AttrValue) -> Status {
        Status::invalid_argument(format!(
            "node '{}' ({}): attr '{key}' should be {what}, got {got:?}",
            self.name, self.op
        ))
    }

    pub fn get_attr(&self, key: &str) -> Option<&AttrValue> {
        self.attrs.get(key)
    }

    /// A required type attribute that must be a tensor dtype.
    pub fn attr_dtype(&self, key: &str) -> Result<DType> {
        match self.attrs.get(key) {
            Some(AttrValue::Type(DataType::Tensor(d))) => Ok(*d),
            Some(AttrValue::Type(other)) => Err(Status::unimplemented(format!(
                "node '{}' ({}): attr '{key}' is {other}, which this runtime does not compute with",
                self.name, self.op
            ))),
            Some(v) => Err(self.wrong(key, "a type", v)),
            None => Err(self.missing(key, "a type")),
        }
    }

    /// A required type attribute of any kind.
    pub fn attr_data_type(&self, key: &str) -> Result<DataType> {
        match self.attrs.get(key) {
            Some(AttrValue::Type(t)) => Ok(*t),
            Some(v) => Err(self.wrong(key, "a type", v)),
            None => Err(self.missing(key, "a type")),
        }
    }

    /// An optional type attribute with a default.
    pub fn attr_dtype_or(&self, key: &str, default: DType) -> Result<DType> {
        if self.attrs.contains_key(key) { self.attr_dtype(key) } else { Ok(default) }
    }

    pub fn attr_bool_or(&self, key: &str, default: bool) -> Result<bool> {
        match self.attrs.get(key) {
            Some(AttrValue::Bool(b)) => Ok(*b),
            Some(v) => Err(self.wrong(key, "a bool", v)),
            None => Ok(default),
        }
    }

    pub fn attr_int(&self, key: &str) -> Result<i64> {
        match self.attrs.get(key) {
            Some(AttrValue::Int(i)) => Ok(*i),
            Some(v) => Err(self.wrong(key, "an int", v)),
            None => Err(self.missing(key, "an int")),
        }
    }

    pub fn attr_int_or(&self, key: &str, default: i64) -> Result<i64> {
        if self.attrs.contains_key(key) { self.attr_int(key) } else { Ok(default) }
    }

    pub fn attr_float_or(&self, key: &str, default: f32) -> Result<f32> {
        match self.attrs.get(key) {
            Some(AttrValue::Float(x)) => Ok(*x),
            Some(v) => Err(self.wrong(key, "a float", v)),
            None => Ok(default),
        }
    }

    /// A string attribute (bytes that must be UTF-8), with a default.
    pub fn attr_str_or(&self, key: &str, default: &str) -> Result<String> {
        match self.attrs.get(key) {
            Some(AttrValue::Bytes(b)) => String::from_utf8(b.clone())
                .map_err(|_| self.wrong(key, "a UTF-8 string", &AttrValue::Bytes(b.clone()))),
            Some(v) => Err(self.wrong(key, "a string", v)),
            None => Ok(default.to_string()),
        }
    }

    pub fn attr_shape_or_unknown(&self, key: &str) -> Result<ShapeSpec> {
        match self.attrs.get(key) {
            Some(AttrValue::Shape(s)) => Ok(s.clone()),
            Some(v) => Err(self.wrong(key, "a shape", v)),
            None => Ok(ShapeSpec::unknown()),
        }
    }

    pub fn attr_tensor(&self, key: &str) -> Result<&TensorValue> {
        match self.attrs.get(key) {
            Some(AttrValue::Tensor(t)) => Ok(t),
            Some(v) => Err(self.wrong(key, "a tensor", v)),
            None => Err(self.missing(key, "a tensor")),
        }
    }

    /// A list of types (`Tin`, `Tout`, ...).
    pub fn attr_type_list(&self, key: &str) -> Result<Vec<DataType>> {
        match self.attrs.get(key) {
            Some(AttrValue::List(AttrList::Type(ts))) => Ok(ts.clone()),
            // An empty list carries no element kind on the wire.
            Some(AttrValue::List(l)) if attr_list_is_empty(l) => Ok(Vec::new()),
            Some(v) => Err(self.wrong(key, "a list of types", v)),
            None => Err(self.missing(key, "a list of types")),
        }
    }

    /// A list of strings, such as `_class` colocation constraints.
    pub fn attr_str_list(&self, key: &str) -> Vec<String> {
        match self.attrs.get(key) {
            Some(AttrValue::List(AttrList::Bytes(items))) => {
                items.iter().filter_map(|b| String::from_utf8(b.clone()).ok()).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// Whether an attr list holds nothing (of whatever kind).
pub(crate) fn attr_list_is_empty(list: &AttrList) -> bool {
    match list {
        AttrList::Bytes(v) => v.is_empty(),
        AttrList::Int(v) => v.is_empty(),
        AttrList::Float(v) => v.is_empty(),
        AttrList::Bool(v) => v.is_empty(),
        AttrList::Type(v) => v.is_empty(),
        AttrList::Shape(v) => v.is_empty(),
        AttrList::Tensor(v) => v.is_empty(),
        AttrList::Func(v) => v.is_empty(),
    }
}

impl GraphSpec {
    pub fn node(&self, name: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Serialises with rkyv, for the wire and for caching.
    pub fn to_bytes(&self) -> Result<rkyv::util::AlignedVec> {
        rkyv::to_bytes::<rkyv::rancor::Error>(self).map_err(|e| Status::internal(format!("archiving graph: {e}")))
    }

    /// Checks and deserialises an archive made by [`GraphSpec::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<GraphSpec> {
        rkyv::from_bytes::<GraphSpec, rkyv::rancor::Error>(bytes)
            .map_err(|e| Status::invalid_argument(format!("malformed graph archive: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_parsing() {
        assert_eq!(Endpoint::parse("x").unwrap(), Endpoint::new("x", 0));
        assert_eq!(Endpoint::parse("a/b:3").unwrap(), Endpoint::new("a/b", 3));
        assert!(Endpoint::parse("x:y").is_err());
        assert!(Endpoint::parse("^x").is_err());
        assert!(Endpoint::parse("").is_err());
    }

    #[test]
    fn archive_round_trip() {
        let t = Tensor::from_slice::<f32>([2], &[1.0, 2.0]).unwrap();
        let g = GraphSpec {
            nodes: vec![
                NodeSpec::new("c", "Const")
                    .attr("value", AttrValue::Tensor(TensorValue::from_tensor(&t)))
                    .attr("dtype", AttrValue::Type(DataType::Tensor(DType::F32))),
                NodeSpec::new("i", "Identity").input("c", 0).control("c").on("/device:CPU:0"),
            ],
        };
        let bytes = g.to_bytes().unwrap();
        assert_eq!(GraphSpec::from_bytes(&bytes).unwrap(), g);
        assert!(GraphSpec::from_bytes(&bytes[..bytes.len() / 2]).is_err());
    }

    #[test]
    fn string_constants_archive_as_their_image() {
        let names = Tensor::from_strings([2], &[&b"w"[..], b"\xff"]).unwrap();
        let g = GraphSpec {
            nodes: vec![
                NodeSpec::new("names", "Const")
                    .attr("value", AttrValue::Tensor(TensorValue::from_tensor(&names)))
                    .attr("dtype", AttrValue::Type(DataType::Tensor(DType::String))),
            ],
        };
        let back = GraphSpec::from_bytes(&g.to_bytes().unwrap()).unwrap();
        assert_eq!(back, g);
        assert!(back.nodes[0].attr_tensor("value").unwrap().to_tensor().unwrap().bit_eq(&names));
        let mut broken = TensorValue::from_tensor(&names);
        broken.bytes.pop();
        assert!(broken.to_tensor().is_err(), "a malformed string image is refused");
    }

    #[test]
    fn attr_errors_name_node_and_attr() {
        let n = NodeSpec::new("mm", "MatMul").attr("T", AttrValue::Int(3));
        let err = n.attr_dtype("T").unwrap_err();
        assert!(err.message.contains("'mm'") && err.message.contains("'T'"), "{err}");
        let err = n.attr_dtype("U").unwrap_err();
        assert!(err.message.contains("missing attr 'U'"), "{err}");
    }
}
