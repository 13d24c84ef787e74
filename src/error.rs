//! The runtime's one error type at layer boundaries: a [`Status`] with a
//! TensorFlow-like [`Code`] and a message that names the culprit.
//!
//! Owns: the code table (declared once, here, with its wire numbers) and the
//! constructors. Layers with richer failure modes (the frame codec, the
//! GraphDef importer) define their own `thiserror` enums and convert into a
//! `Status` where they hand an error to another layer.

use std::fmt;

/// Canonical error codes. The numbers are TensorFlow's `error::Code` values
/// and are what crosses the wire, so they must never be renumbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Code {
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

impl Code {
    pub const ALL: [Code; 16] = [
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    pub fn from_u8(value: u8) -> Code {
        Code::ALL.iter().copied().find(|c| *c as u8 == value).unwrap_or(Code::Unknown)
    }

    pub fn name(self) -> &'static str {
        match self {
            Code::Cancelled => "Cancelled",
            Code::Unknown => "Unknown",
            Code::InvalidArgument => "InvalidArgument",
            Code::DeadlineExceeded => "DeadlineExceeded",
            Code::NotFound => "NotFound",
            Code::AlreadyExists => "AlreadyExists",
            Code::PermissionDenied => "PermissionDenied",
            Code::ResourceExhausted => "ResourceExhausted",
            Code::FailedPrecondition => "FailedPrecondition",
            Code::Aborted => "Aborted",
            Code::OutOfRange => "OutOfRange",
            Code::Unimplemented => "Unimplemented",
            Code::Internal => "Internal",
            Code::Unavailable => "Unavailable",
            Code::DataLoss => "DataLoss",
            Code::Unauthenticated => "Unauthenticated",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error with a code and a message naming what failed (node, op, tensor,
/// task, file). One pointer wide, so a `Result<()>` is too and the `Ok`
/// path of every kernel and RPC moves no more than its value; reads of
/// `code` and `message` go through [`StatusBody`].
#[derive(Clone, PartialEq, Eq)]
pub struct Status(Box<StatusBody>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusBody {
    pub code: Code,
    pub message: String,
}

impl std::ops::Deref for Status {
    type Target = StatusBody;

    fn deref(&self) -> &StatusBody {
        &self.0
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Status").field("code", &self.code).field("message", &self.message).finish()
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Status {}

pub type Result<T, E = Status> = std::result::Result<T, E>;

macro_rules! status_constructors {
    ($($fn_name:ident => $code:ident),* $(,)?) => {
        impl Status {
            $(
                pub fn $fn_name(message: impl Into<String>) -> Status {
                    Status::new(Code::$code, message)
                }
            )*
        }
    };
}

status_constructors! {
    cancelled => Cancelled,
    unknown => Unknown,
    invalid_argument => InvalidArgument,
    deadline_exceeded => DeadlineExceeded,
    not_found => NotFound,
    already_exists => AlreadyExists,
    permission_denied => PermissionDenied,
    resource_exhausted => ResourceExhausted,
    failed_precondition => FailedPrecondition,
    aborted => Aborted,
    out_of_range => OutOfRange,
    unimplemented => Unimplemented,
    internal => Internal,
    unavailable => Unavailable,
    data_loss => DataLoss,
    unauthenticated => Unauthenticated,
}

impl Status {
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status(Box::new(StatusBody { code, message: message.into() }))
    }

    pub fn into_message(self) -> String {
        self.0.message
    }

    /// Prefixes the message with where the error happened, keeping the code:
    /// `node 'mul' (Mul): Incompatible shapes ...`.
    pub fn context(mut self, prefix: impl fmt::Display) -> Status {
        self.0.message = format!("{prefix}: {}", self.message);
        self
    }
}

impl From<std::io::Error> for Status {
    fn from(err: std::io::Error) -> Status {
        use std::io::ErrorKind;
        let code = match err.kind() {
            ErrorKind::NotFound => Code::NotFound,
            ErrorKind::PermissionDenied => Code::PermissionDenied,
            ErrorKind::TimedOut => Code::DeadlineExceeded,
            ErrorKind::ConnectionRefused
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
            | ErrorKind::NotConnected
            | ErrorKind::UnexpectedEof => Code::Unavailable,
            ErrorKind::InvalidInput | ErrorKind::InvalidData => Code::InvalidArgument,
            _ => Code::Unknown,
        };
        Status::new(code, err.to_string())
    }
}

/// `bail!(invalid_argument, "...", args)` returns early with a `Status`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($fmt:tt)+) => {
        return Err($crate::error::Status::$kind(format!($($fmt)+)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_numbers_round_trip() {
        for code in Code::ALL {
            assert_eq!(Code::from_u8(code as u8), code);
        }
        assert_eq!(Code::from_u8(0), Code::Unknown);
        assert_eq!(Code::from_u8(200), Code::Unknown);
    }

    #[test]
    fn context_keeps_code_and_prefixes_message() {
        let s = Status::invalid_argument("Incompatible shapes").context("node 'mul' (Mul)");
        assert_eq!(s.code, Code::InvalidArgument);
        assert_eq!(s.to_string(), "InvalidArgument: node 'mul' (Mul): Incompatible shapes");
    }
}
