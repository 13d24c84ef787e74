//! gRPC's framing over HTTP/2, both ends: a message is a 5-byte prefix
//! (compressed flag, big-endian length) and its protobuf bytes in the
//! stream's DATA frames; the outcome is the `grpc-status` and
//! `grpc-message` trailers (or headers, for an answer with no body).
//!
//! Owns: reading one length-prefixed message with a size limit, encoding
//! one, the status mapping and `grpc-timeout`. Must not know any method.
//! TensorFlow's `error::Code` numbers are gRPC's status numbers, so a
//! [`Code`] crosses as itself and TensorFlow's client raises the same
//! exception class.

use crate::error::{Code, Result, Status};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::time::Duration;

/// The largest message either end accepts (TensorFlow's client allows
/// messages up to 2 GiB; its default server 4 MiB). Bounded so that a
/// peer's announced length cannot make us reserve unbounded memory.
pub const MAX_MESSAGE_BYTES: usize = 1 << 30;

pub const CONTENT_TYPE: &str = "application/grpc";
pub const SERVICE_PREFIX: &str = "/tensorflow.MasterService/";

/// A message with its 5-byte gRPC prefix, ready for one DATA frame.
pub fn encode_message<M: prost::Message>(message: &M) -> Bytes {
    let len = message.encoded_len();
    let mut out = BytesMut::with_capacity(5 + len);
    out.put_u8(0);
    out.put_u32(len as u32);
    // Cannot fail: the buffer has room for `encoded_len` bytes.
    let _ = message.encode(&mut out);
    out.freeze()
}

/// Reads a stream's one gRPC message. A body that arrives in one DATA
/// frame is used in place; only a message split across frames is gathered.
pub async fn read_message(body: &mut h2::RecvStream, what: &str) -> Result<Bytes> {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut total = 0usize;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| h2_status(&e, what))?;
        // The flow-control window reopens as we take data: the peer keeps
        // sending large messages without waiting for us to finish.
        let _ = body.flow_control().release_capacity(chunk.len());
        total += chunk.len();
        if total > MAX_MESSAGE_BYTES + 5 {
            return Err(Status::resource_exhausted(format!("{what}: message larger than {MAX_MESSAGE_BYTES} bytes")));
        }
        chunks.push(chunk);
    }
    let mut whole = match chunks.len() {
        0 => return Err(Status::invalid_argument(format!("{what}: the stream carried no gRPC message"))),
        1 => chunks.pop().unwrap_or_default(),
        _ => {
            let mut gathered = BytesMut::with_capacity(total);
            for chunk in chunks {
                gathered.extend_from_slice(&chunk);
            }
            gathered.freeze()
        }
    };
    if whole.len() < 5 {
        return Err(Status::invalid_argument(format!("{what}: {} bytes cannot hold a gRPC prefix", whole.len())));
    }
    let compressed = whole.get_u8();
    let len = whole.get_u32() as usize;
    if compressed != 0 {
        return Err(Status::unimplemented(format!("{what}: compressed gRPC messages are not supported")));
    }
    if len != whole.len() {
        return Err(Status::invalid_argument(format!(
            "{what}: gRPC prefix announces {len} bytes, the stream carried {} (one message per call)",
            whole.len()
        )));
    }
    Ok(whole)
}

/// Decodes a protobuf message, naming it in the error.
pub fn decode<M: prost::Message + Default>(bytes: Bytes, what: &str) -> Result<M> {
    M::decode(bytes).map_err(|e| Status::invalid_argument(format!("{what}: malformed protobuf: {e}")))
}

pub fn h2_status(err: &h2::Error, what: &str) -> Status {
    let code = if err.is_io() || err.is_go_away() || err.is_reset() { Code::Unavailable } else { Code::Internal };
    Status::new(code, format!("{what}: HTTP/2: {err}"))
}

/// gRPC's status number for a code: the same number (TensorFlow's codes are
/// gRPC's).
pub fn grpc_code(code: Code) -> u32 {
    code as u32
}

pub fn code_of_grpc(number: u32) -> Code {
    u8::try_from(number).map_or(Code::Unknown, Code::from_u8)
}

/// `grpc-message`'s percent-encoding: printable ASCII but `%` as is.
pub fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for &b in message.as_bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub fn percent_decode(text: &[u8]) -> String {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if text[i] == b'%' && i + 2 < text.len() {
            if let (Some(hi), Some(lo)) = (hex(text[i + 1]), hex(text[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(text[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The status a header map carries (trailers, or headers of a bodiless
/// answer); `None` when it has no `grpc-status`.
pub fn status_of(headers: &http::HeaderMap) -> Option<Result<()>> {
    let number = headers.get("grpc-status")?;
    let number = std::str::from_utf8(number.as_bytes()).ok().and_then(|s| s.trim().parse::<u32>().ok());
    let message = headers.get("grpc-message").map(|m| percent_decode(m.as_bytes())).unwrap_or_default();
    Some(match number {
        Some(0) => Ok(()),
        Some(n) => Err(Status::new(code_of_grpc(n), message)),
        None => Err(Status::internal(format!("unreadable grpc-status; message: {message}"))),
    })
}

/// The trailers (or bodiless headers) that report `outcome`.
pub fn status_headers(outcome: &Result<()>, headers: &mut http::HeaderMap) {
    let (number, message) = match outcome {
        Ok(()) => (0, None),
        Err(e) => (grpc_code(e.code), Some(percent_encode(&e.message))),
    };
    headers.insert("grpc-status", http::HeaderValue::from(number));
    if let Some(message) = message {
        if let Ok(value) = http::HeaderValue::from_str(&message) {
            headers.insert("grpc-message", value);
        }
    }
}

/// `grpc-timeout`: up to 8 digits and a unit (H, M, S, m, u, n).
pub fn parse_timeout(value: &[u8]) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let amount: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b"H" => Duration::from_secs(amount * 3600),
        b"M" => Duration::from_secs(amount * 60),
        b"S" => Duration::from_secs(amount),
        b"m" => Duration::from_millis(amount),
        b"u" => Duration::from_micros(amount),
        b"n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// `grpc-timeout` for a duration, in milliseconds (or coarser when it
/// would not fit 8 digits).
pub fn format_timeout(timeout: Duration) -> String {
    let ms = timeout.as_millis().max(1);
    if ms < 100_000_000 { format!("{ms}m") } else { format!("{}S", timeout.as_secs().min(99_999_999)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_and_messages_round_trip() {
        assert_eq!(parse_timeout(b"250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_timeout(b"3S"), Some(Duration::from_secs(3)));
        assert_eq!(parse_timeout(b"1000000000m"), None);
        assert_eq!(parse_timeout(b"m"), None);
        assert_eq!(parse_timeout(b"5x"), None);
        assert_eq!(
            parse_timeout(format_timeout(Duration::from_millis(1500)).as_bytes()),
            Some(Duration::from_millis(1500))
        );
        let text = "node 'a%b' failed: ünïcode\nline";
        assert_eq!(percent_decode(percent_encode(text).as_bytes()), text);
        assert_eq!(percent_decode(b"50%"), "50%");
    }

    #[test]
    fn status_trailers_carry_the_code() {
        let mut headers = http::HeaderMap::new();
        status_headers(&Err(Status::not_found("tensor 'x:0' not found")), &mut headers);
        assert_eq!(headers["grpc-status"], "5");
        let back = status_of(&headers).unwrap().unwrap_err();
        assert_eq!(back.code, Code::NotFound);
        assert_eq!(back.message, "tensor 'x:0' not found");
    }
}
