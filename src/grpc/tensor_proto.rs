//! TensorFlow's TensorProto ↔ [`Tensor`], in every encoding TensorFlow
//! reads: `tensor_content` (raw little-endian bytes; for strings varint
//! lengths then bytes), or the typed value fields (`float_val`,
//! `double_val`, `int_val`, `int64_val`, `bool_val`, `string_val`), where
//! fewer values than elements repeat the last one and none means zeros.
//!
//! Owns: the conversion and its checks (dtype, shape, lengths), each error
//! naming the tensor. Must not know about requests or sessions.

use super::proto::TensorProto;
use crate::error::{Result, Status};
use crate::graph::import::proto::{TensorShapeProto, tensor_shape_proto};
use crate::graph::import::{decode_string_list, tf_number_of};
use crate::tensor::{DType, Element, Shape, Tensor};
use bytes::Bytes;

/// The dtype of TensorFlow's `DataType` number, or an error naming `what`.
fn dtype_of(number: i32, what: &str) -> Result<DType> {
    match number {
        1 => Ok(DType::F32),
        2 => Ok(DType::F64),
        3 => Ok(DType::I32),
        9 => Ok(DType::I64),
        10 => Ok(DType::Bool),
        7 => Ok(DType::String),
        19 => Err(Status::unimplemented(format!("{what}: half (float16) tensors are not supported"))),
        other => Err(Status::unimplemented(format!("{what}: TensorFlow DataType {other} is not supported"))),
    }
}

fn shape_of(proto: Option<&TensorShapeProto>, what: &str) -> Result<Shape> {
    let Some(proto) = proto else {
        return Ok(Shape::scalar());
    };
    if proto.unknown_rank {
        return Err(Status::invalid_argument(format!("{what}: a tensor value needs a known shape")));
    }
    let mut dims = Vec::with_capacity(proto.dim.len());
    for dim in &proto.dim {
        let size = usize::try_from(dim.size)
            .map_err(|_| Status::invalid_argument(format!("{what}: dimension {} is not a size", dim.size)))?;
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

/// Decodes a TensorProto; `what` names it in errors (a feed's name).
pub fn tensor_from_proto(proto: &TensorProto, what: &str) -> Result<Tensor> {
    let dtype = dtype_of(proto.dtype, what)?;
    let shape = shape_of(proto.tensor_shape.as_ref(), what)?;
    let content = &proto.tensor_content;
    if dtype == DType::String {
        let count = shape.num_elements();
        if !content.is_empty() {
            let values = decode_string_list(content, count).map_err(|e| e.context(what))?;
            return Tensor::from_strings(shape, &values);
        }
        let values = &proto.string_val;
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
        return Tensor::from_bytes(dtype, shape, content).map_err(|e| e.context(what));
    }
    match dtype {
        DType::F32 => from_values(shape, &proto.float_val, "float_val", what),
        DType::F64 => from_values(shape, &proto.double_val, "double_val", what),
        DType::I32 => from_values(shape, &proto.int_val, "int_val", what),
        DType::I64 => from_values(shape, &proto.int64_val, "int64_val", what),
        DType::Bool => from_values(shape, &proto.bool_val, "bool_val", what),
        DType::String => unreachable!("string tensors returned above"),
    }
}

/// Lends a tensor's bytes to a `Bytes` without copying them: the encoder
/// writes them once, straight into the outgoing message.
struct TensorBytes(Tensor);

impl AsRef<[u8]> for TensorBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Encodes a tensor as TensorFlow's servers answer: `tensor_content` for
/// fixed-width dtypes, `string_val` for strings.
pub fn tensor_to_proto(tensor: &Tensor) -> Result<TensorProto> {
    let dtype = tensor.dtype();
    let dim =
        tensor.dims().iter().map(|&size| tensor_shape_proto::Dim { size: size as i64, name: String::new() }).collect();
    let mut proto = TensorProto {
        dtype: tf_number_of(dtype),
        tensor_shape: Some(TensorShapeProto { dim, unknown_rank: false }),
        ..TensorProto::default()
    };
    if dtype == DType::String {
        proto.string_val = tensor.strings()?.iter().map(<[u8]>::to_vec).collect();
    } else if tensor.byte_len() > 0 {
        proto.tensor_content = Bytes::from_owner(TensorBytes(tensor.clone()));
    }
    Ok(proto)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaped(dims: &[i64]) -> Option<TensorShapeProto> {
        Some(TensorShapeProto {
            dim: dims.iter().map(|&size| tensor_shape_proto::Dim { size, name: String::new() }).collect(),
            unknown_rank: false,
        })
    }

    #[test]
    fn typed_values_broadcast_the_last_one_and_none_means_zeros() {
        let proto = TensorProto { dtype: 1, tensor_shape: shaped(&[2, 2]), float_val: vec![7.5], ..Default::default() };
        assert_eq!(tensor_from_proto(&proto, "x").unwrap().as_slice::<f32>().unwrap(), &[7.5; 4]);
        let proto = TensorProto { dtype: 9, tensor_shape: shaped(&[3]), int64_val: vec![1, 2], ..Default::default() };
        assert_eq!(tensor_from_proto(&proto, "x").unwrap().as_slice::<i64>().unwrap(), &[1, 2, 2]);
        let proto = TensorProto { dtype: 3, tensor_shape: shaped(&[2]), ..Default::default() };
        assert_eq!(tensor_from_proto(&proto, "x").unwrap().as_slice::<i32>().unwrap(), &[0, 0]);
        let proto = TensorProto { dtype: 10, bool_val: vec![true], ..Default::default() };
        assert!(tensor_from_proto(&proto, "x").unwrap().scalar_value::<bool>().unwrap());
        let proto = TensorProto { dtype: 2, tensor_shape: shaped(&[1]), double_val: vec![0.25], ..Default::default() };
        assert_eq!(tensor_from_proto(&proto, "x").unwrap().as_slice::<f64>().unwrap(), &[0.25]);
    }

    #[test]
    fn content_and_strings_round_trip() {
        let t = Tensor::from_slice([2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let proto = tensor_to_proto(&t).unwrap();
        assert_eq!(proto.tensor_content.len(), 24);
        assert!(tensor_from_proto(&proto, "t").unwrap().bit_eq(&t));
        let s = Tensor::from_strings([2], &[&b"ab"[..], b""]).unwrap();
        let proto = tensor_to_proto(&s).unwrap();
        assert_eq!(proto.string_val, vec![b"ab".to_vec(), Vec::new()]);
        assert!(tensor_from_proto(&proto, "s").unwrap().bit_eq(&s));
        // TensorFlow's string tensor_content: varint lengths, then bytes.
        let proto = TensorProto {
            dtype: 7,
            tensor_shape: shaped(&[2]),
            tensor_content: Bytes::from_static(b"\x02\x01abc"),
            ..Default::default()
        };
        assert!(
            tensor_from_proto(&proto, "s").unwrap().bit_eq(&Tensor::from_strings([2], &[&b"ab"[..], b"c"]).unwrap())
        );
    }

    #[test]
    fn bad_tensors_name_the_culprit() {
        let proto = TensorProto {
            dtype: 1,
            tensor_shape: shaped(&[3]),
            tensor_content: Bytes::from_static(&[0; 8]),
            ..Default::default()
        };
        let e = tensor_from_proto(&proto, "feed 'x:0'").unwrap_err();
        assert_eq!(e.code, crate::error::Code::InvalidArgument);
        assert!(e.message.contains("feed 'x:0'"), "{e}");
        let proto =
            TensorProto { dtype: 1, tensor_shape: shaped(&[1]), float_val: vec![1.0, 2.0], ..Default::default() };
        assert!(tensor_from_proto(&proto, "y").unwrap_err().message.contains("float_val"));
        let e = tensor_from_proto(&TensorProto { dtype: 19, ..Default::default() }, "h").unwrap_err();
        assert_eq!(e.code, crate::error::Code::Unimplemented);
        assert!(
            tensor_from_proto(&TensorProto { dtype: 1, tensor_shape: shaped(&[-1]), ..Default::default() }, "z")
                .is_err()
        );
    }
}
