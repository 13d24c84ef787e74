//! TensorFlow's TensorProto values → [`Tensor`], for every place that
//! decodes one: a GraphDef's constants (`import`) and the gRPC service's
//! feeds and fetches (`grpc::tensor_proto`), whose prost structs differ only
//! in how they hold `tensor_content`.
//!
//! Every encoding TensorFlow reads is accepted: `tensor_content` (raw
//! little-endian bytes; for strings varint lengths then bytes), or the
//! typed value fields (`float_val`, `double_val`, `int_val` (uint8 too),
//! `int64_val`, `bool_val`, `string_val`, `uint64_val`, `scomplex_val`;
//! `half_val` holds float16 and bfloat16 as their bits, `int_val` the small
//! integers, `uint32_val` uint32), where fewer values than elements repeat
//! the last one and none means zeros.
//!
//! Owns: the conversion and its checks (dtype, shape, lengths), each error
//! naming the tensor. Must not know which message carried it.

use super::import::decode_string_list;
use super::import::proto::TensorShapeProto;
use crate::error::{Result, Status};
use crate::tensor::{DType, Element, Shape, Tensor};

/// The value-bearing fields of a TensorProto, borrowed from whichever
/// struct decoded it.
pub(crate) struct TensorProtoFields<'a> {
    pub dtype: i32,
    pub shape: Option<&'a TensorShapeProto>,
    pub content: &'a [u8],
    pub float_val: &'a [f32],
    pub double_val: &'a [f64],
    pub int_val: &'a [i32],
    pub int64_val: &'a [i64],
    pub bool_val: &'a [bool],
    pub string_val: &'a [Vec<u8>],
    pub uint64_val: &'a [u64],
    pub scomplex_val: &'a [f32],
    pub half_val: &'a [i32],
    pub uint32_val: &'a [u32],
}

/// The [`TensorProtoFields`] of a prost struct with TensorFlow's field
/// names (GraphDef's and the gRPC service's TensorProto).
macro_rules! tensor_proto_fields {
    ($proto:expr) => {
        $crate::graph::tf_tensor::TensorProtoFields {
            dtype: $proto.dtype,
            shape: $proto.tensor_shape.as_ref(),
            content: &$proto.tensor_content,
            float_val: &$proto.float_val,
            double_val: &$proto.double_val,
            int_val: &$proto.int_val,
            int64_val: &$proto.int64_val,
            bool_val: &$proto.bool_val,
            string_val: &$proto.string_val,
            uint64_val: &$proto.uint64_val,
            scomplex_val: &$proto.scomplex_val,
            half_val: &$proto.half_val,
            uint32_val: &$proto.uint32_val,
        }
    };
}
pub(crate) use tensor_proto_fields;

/// Decodes `fields`; `what` names the tensor in errors (a feed's name, a
/// constant).
pub(crate) fn tensor_of_fields(fields: &TensorProtoFields<'_>, what: &str) -> Result<Tensor> {
    let dtype = dtype_of(fields.dtype, what)?;
    let shape = shape_of(fields.shape, what)?;
    let content = fields.content;
    if dtype == DType::String {
        let count = shape.num_elements();
        if !content.is_empty() {
            let values = decode_string_list(content, count).map_err(|e| e.context(what))?;
            return Tensor::from_strings(shape, &values);
        }
        let values = fields.string_val;
        if values.len() > count {
            return Err(Status::invalid_argument(format!(
                "{what}: string_val has {} values for {count} elements",
                values.len()
            )));
        }
        let fill: &[u8] = values.last().map_or(&[], Vec::as_slice);
        let all: Vec<&[u8]> =
            values.iter().map(Vec::as_slice).chain(std::iter::repeat_n(fill, count - values.len())).collect();
        return Tensor::from_strings(shape, &all);
    }
    if !content.is_empty() {
        let needed = dtype.size().and_then(|width| width.checked_mul(shape.num_elements()));
        if needed != Some(content.len()) {
            return Err(Status::invalid_argument(format!(
                "{what}: tensor_content has {} bytes, shape {shape} of {dtype} needs {}",
                content.len(),
                needed.unwrap_or(0)
            )));
        }
        return Tensor::from_bytes(dtype, shape, content).map_err(|e| e.context(what));
    }
    match dtype {
        DType::F32 => from_values(shape, fields.float_val, "float_val", what),
        DType::F64 => from_values(shape, fields.double_val, "double_val", what),
        DType::I32 => from_values(shape, fields.int_val, "int_val", what),
        DType::I64 => from_values(shape, fields.int64_val, "int64_val", what),
        DType::Bool => from_values(shape, fields.bool_val, "bool_val", what),
        // uint8 values travel in int_val, as TensorFlow writes them.
        DType::U8 => {
            let values: Vec<u8> = fields.int_val.iter().map(|&v| v as u8).collect();
            from_values(shape, &values, "int_val", what)
        }
        DType::U64 => from_values(shape, fields.uint64_val, "uint64_val", what),
        // complex64 values travel as (real, imaginary) pairs in scomplex_val.
        DType::Complex64 => {
            let pairs = fields.scomplex_val;
            let count = shape.num_elements();
            if pairs.len() % 2 != 0 || pairs.len() / 2 > count {
                return Err(Status::invalid_argument(format!(
                    "{what}: scomplex_val has {} floats for the {count} complex elements of shape {shape}",
                    pairs.len()
                )));
            }
            let last = if pairs.is_empty() { [0.0, 0.0] } else { [pairs[pairs.len() - 2], pairs[pairs.len() - 1]] };
            let mut bytes = Vec::with_capacity(count * 8);
            for i in 0..count {
                let (re, im) = if 2 * i < pairs.len() { (pairs[2 * i], pairs[2 * i + 1]) } else { (last[0], last[1]) };
                bytes.extend_from_slice(&re.to_le_bytes());
                bytes.extend_from_slice(&im.to_le_bytes());
            }
            Tensor::from_bytes(DType::Complex64, shape, &bytes)
        }
        // float16 and bfloat16 travel as their 16 bits in half_val.
        DType::F16 => {
            let values: Vec<half::f16> = fields.half_val.iter().map(|&v| half::f16::from_bits(v as u16)).collect();
            from_values(shape, &values, "half_val", what)
        }
        DType::BF16 => {
            let values: Vec<half::bf16> = fields.half_val.iter().map(|&v| half::bf16::from_bits(v as u16)).collect();
            from_values(shape, &values, "half_val", what)
        }
        DType::I8 => {
            let values: Vec<i8> = fields.int_val.iter().map(|&v| v as i8).collect();
            from_values(shape, &values, "int_val", what)
        }
        DType::I16 => {
            let values: Vec<i16> = fields.int_val.iter().map(|&v| v as i16).collect();
            from_values(shape, &values, "int_val", what)
        }
        DType::U16 => {
            let values: Vec<u16> = fields.int_val.iter().map(|&v| v as u16).collect();
            from_values(shape, &values, "int_val", what)
        }
        DType::U32 => from_values(shape, fields.uint32_val, "uint32_val", what),
        DType::String => unreachable!("string tensors returned above"),
    }
}

/// The dtype of TensorFlow's `DataType` number, or an error naming `what`.
fn dtype_of(number: i32, what: &str) -> Result<DType> {
    match number {
        1 => Ok(DType::F32),
        2 => Ok(DType::F64),
        3 => Ok(DType::I32),
        9 => Ok(DType::I64),
        10 => Ok(DType::Bool),
        7 => Ok(DType::String),
        4 => Ok(DType::U8),
        23 => Ok(DType::U64),
        8 => Ok(DType::Complex64),
        19 => Ok(DType::F16),
        14 => Ok(DType::BF16),
        6 => Ok(DType::I8),
        5 => Ok(DType::I16),
        17 => Ok(DType::U16),
        22 => Ok(DType::U32),
        other => Err(Status::unimplemented(format!("{what}: TensorFlow DataType {other} is not supported"))),
    }
}

/// A missing shape is a scalar's; a tensor value's shape must be known.
fn shape_of(proto: Option<&TensorShapeProto>, what: &str) -> Result<Shape> {
    let Some(proto) = proto else {
        return Ok(Shape::scalar());
    };
    if proto.unknown_rank {
        return Err(Status::invalid_argument(format!("{what}: a tensor value needs a known shape")));
    }
    let mut dims = Vec::with_capacity(proto.dim.len());
    for dim in &proto.dim {
        let size = usize::try_from(dim.size).map_err(|_| {
            Status::invalid_argument(format!("{what}: dimension {} is not a size (a partial shape)", dim.size))
        })?;
        dims.push(size);
    }
    let shape = Shape::from_vec(dims);
    shape.checked_num_elements().ok_or_else(|| Status::invalid_argument(format!("{what}: shape {shape} overflows")))?;
    Ok(shape)
}

/// `values` filling `shape`: one value per element, or fewer, the last one
/// repeated (TensorFlow's compact form; a scalar broadcast is one value),
/// or none for zeros.
fn from_values<T: Element + Default>(shape: Shape, values: &[T], field: &str, what: &str) -> Result<Tensor> {
    let count = shape.num_elements();
    if values.len() == count {
        return Tensor::from_slice(shape, values);
    }
    if values.len() > count {
        return Err(Status::invalid_argument(format!(
            "{what}: {field} has {} values for the {count} elements of shape {shape}",
            values.len()
        )));
    }
    let fill = values.last().copied().unwrap_or_default();
    Tensor::build::<T>(shape, |out| {
        out[..values.len()].copy_from_slice(values);
        out[values.len()..].fill(fill);
    })
}
