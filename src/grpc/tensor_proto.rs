//! The gRPC service's TensorProto ↔ [`Tensor`]: decoding goes through
//! `graph::tf_tensor` (shared with GraphDef constants); encoding writes
//! what TensorFlow's servers answer.
//!
//! Owns: this prost struct's side of the conversion. Must not know about
//! requests or sessions.

use super::proto::TensorProto;
use crate::error::Result;
use crate::graph::import::proto::{TensorShapeProto, tensor_shape_proto};
use crate::graph::import::tf_number_of;
use crate::graph::tf_tensor::{tensor_of_fields, tensor_proto_fields};
use crate::tensor::{DType, Tensor};
use bytes::Bytes;

/// Decodes a TensorProto; `what` names it in errors (a feed's name).
pub fn tensor_from_proto(proto: &TensorProto, what: &str) -> Result<Tensor> {
    tensor_of_fields(&tensor_proto_fields!(proto), what)
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
        // uint8 rides in int_val (DT_UINT8 = 4), uint64 in uint64_val (DT_UINT64 = 23).
        let proto = TensorProto { dtype: 4, tensor_shape: shaped(&[3]), int_val: vec![7, 255], ..Default::default() };
        assert_eq!(tensor_from_proto(&proto, "x").unwrap().as_slice::<u8>().unwrap(), &[7, 255, 255]);
        let proto =
            TensorProto { dtype: 23, tensor_shape: shaped(&[1]), uint64_val: vec![u64::MAX], ..Default::default() };
        assert_eq!(tensor_from_proto(&proto, "x").unwrap().as_slice::<u64>().unwrap(), &[u64::MAX]);
        let bytes = Tensor::from_slice([2], &[3u8, 250]).unwrap();
        let proto = tensor_to_proto(&bytes).unwrap();
        assert_eq!(proto.dtype, 4);
        assert!(tensor_from_proto(&proto, "b").unwrap().bit_eq(&bytes));
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
        let e = tensor_from_proto(&TensorProto { dtype: 18, ..Default::default() }, "h").unwrap_err();
        assert_eq!(e.code, crate::error::Code::Unimplemented);
        assert!(
            tensor_from_proto(&TensorProto { dtype: 1, tensor_shape: shaped(&[-1]), ..Default::default() }, "z")
                .is_err()
        );
    }
}
