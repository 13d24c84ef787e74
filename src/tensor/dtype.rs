//! Element types a tensor can hold, and the Rust types that stand for them.
//!
//! Owns: the [`DType`] table (sizes, names, wire codes) and the [`Element`]
//! trait that ties a Rust scalar to its `DType`. Knows nothing of graphs:
//! TensorFlow's `DataType` numbers are mapped at the import boundary.
//!
//! `String` is the one dtype without a fixed element width and without an
//! [`Element`] type: its bytes are laid out by [`super::strings`], so
//! [`DType::size`] answers `None` for it and [`dispatch_dtype!`](crate::dispatch_dtype) refuses it.
//! `Complex64` has a width (two float32s, real first) but no [`Element`]
//! type either: the kernels that compute with it (`ops::signal`,
//! `ops::math::complex`) read its floats, moves copy its bytes, and
//! [`dispatch_dtype!`](crate::dispatch_dtype) refuses it.
//! The narrow dtypes ([`DType::NARROW`]: float16, bfloat16, int8, int16,
//! uint16, uint32) have [`Element`] types (`half::f16`, `half::bf16`, the
//! small integers) for storage, but kernels never see them:
//! [`dispatch_dtype!`](crate::dispatch_dtype) refuses them, and `ops::widen`
//! hands kernels their [`DType::wide`] form.

use std::fmt;

/// The element types a tensor can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug, Clone, Copy, PartialEq, Eq))]
#[repr(u8)]
pub enum DType {
    F32 = 1,
    F64 = 2,
    I32 = 3,
    I64 = 4,
    Bool = 5,
    /// Byte strings of any length (TensorFlow's `tf.string`).
    String = 6,
    /// Unsigned bytes (`tf.uint8`: decoded images).
    U8 = 7,
    /// `tf.uint64` (stateless random keys and counters, hashes).
    U64 = 8,
    /// `tf.complex64`: float32 real and imaginary parts (spectra).
    Complex64 = 9,
    /// `tf.float16` (IEEE half; mixed-precision models). Stored as is;
    /// kernels compute it as float32 (`ops::widen`).
    F16 = 10,
    /// `tf.bfloat16` (float32's top 16 bits). Computed as float32.
    BF16 = 11,
    /// `tf.int8`. Computed as int32, results wrapped back.
    I8 = 12,
    /// `tf.int16`. Computed as int32, results wrapped back.
    I16 = 13,
    /// `tf.uint16`. Computed as int32, results wrapped back.
    U16 = 14,
    /// `tf.uint32`. Computed as int64, results wrapped back.
    U32 = 15,
}

impl DType {
    /// Every dtype, string included.
    pub const ALL: [DType; 15] = [
        DType::F32,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::Bool,
        DType::String,
        DType::U8,
        DType::U64,
        DType::Complex64,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::U16,
        DType::U32,
    ];

    /// The dtypes kernels do not compute with: stored and moved as they
    /// are, computed in [`wide`](Self::wide) by `ops::widen`.
    pub const NARROW: [DType; 6] = [DType::F16, DType::BF16, DType::I8, DType::I16, DType::U16, DType::U32];

    /// The dtypes with a fixed-width [`Element`] type: what numeric kernels
    /// and [`dispatch_dtype!`](crate::dispatch_dtype) compute with.
    pub const NUMERIC: [DType; 7] =
        [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::U8, DType::U64];

    /// Bytes per element; `None` for string, whose elements vary in length
    /// (a string tensor's byte length comes from its contents, see
    /// [`super::strings`]).
    pub const fn size(self) -> Option<usize> {
        match self {
            DType::F32 | DType::I32 => Some(4),
            DType::F64 | DType::I64 | DType::U64 | DType::Complex64 => Some(8),
            DType::Bool | DType::U8 | DType::I8 => Some(1),
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => Some(2),
            DType::U32 => Some(4),
            DType::String => None,
        }
    }

    /// Whether kernels compute this dtype in a wider one ([`NARROW`](Self::NARROW)).
    pub const fn is_narrow(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::I8 | DType::I16 | DType::U16 | DType::U32)
    }

    /// The dtype a narrow one is computed in: float32 for the 16-bit
    /// floats (every value exact), int32 for the small integers, int64 for
    /// uint32; any other dtype is its own.
    pub const fn wide(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F32,
            DType::I8 | DType::I16 | DType::U16 => DType::I32,
            DType::U32 => DType::I64,
            other => other,
        }
    }

    /// A second dtype that holds every value of a narrow one (float64 or
    /// int64): `ops::widen` tells which of an op's inputs and outputs
    /// follow a type attribute by resolving it both ways.
    pub const fn wider(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F64,
            DType::I8 | DType::I16 | DType::U16 => DType::I64,
            DType::U32 => DType::F64,
            other => other,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::Bool => "bool",
            DType::String => "string",
            DType::U8 => "uint8",
            DType::U64 => "uint64",
            DType::Complex64 => "complex64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// int32 or int64: the signed integers, which is what TensorFlow's
    /// index-type attributes (`Tidx`, `Tindices`, `out_type`) allow.
    pub fn is_integer(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U64 | DType::U16 | DType::U32)
    }

    /// The one-byte code used on the wire.
    pub const fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.code() == code)
    }

    /// The numpy type string of this dtype (little-endian); `None` for
    /// string, whose numpy width (`|S<n>`) depends on the longest element,
    /// and bfloat16, which numpy lacks.
    pub const fn npy_descr(self) -> Option<&'static str> {
        match self {
            DType::F32 => Some("<f4"),
            DType::F64 => Some("<f8"),
            DType::I32 => Some("<i4"),
            DType::I64 => Some("<i8"),
            DType::Bool => Some("|b1"),
            DType::String => None,
            DType::U8 => Some("|u1"),
            DType::U64 => Some("<u8"),
            DType::Complex64 => Some("<c8"),
            DType::F16 => Some("<f2"),
            DType::BF16 => None,
            DType::I8 => Some("|i1"),
            DType::I16 => Some("<i2"),
            DType::U16 => Some("<u2"),
            DType::U32 => Some("<u4"),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for bool {}
    impl Sealed for u8 {}
    impl Sealed for u64 {}
    impl Sealed for i8 {}
    impl Sealed for i16 {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// A Rust scalar type that is the element type of some [`DType`].
///
/// Sealed: every implementor is plain data whose all-zero bit pattern is a
/// valid value, which is what lets tensors be allocated zeroed and viewed as
/// `&[T]`. `bool` additionally requires every byte to be 0 or 1; constructors
/// that take foreign bytes check that.
pub trait Element:
    sealed::Sealed + Copy + Default + PartialEq + PartialOrd + fmt::Debug + Send + Sync + 'static
{
    const DTYPE: DType;
    /// The value as f64 (exact for all but the largest int64s).
    fn to_f64(self) -> f64;
}

impl Element for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    const DTYPE: DType = DType::F32;
}
impl Element for f64 {
    fn to_f64(self) -> f64 {
        self
    }
    const DTYPE: DType = DType::F64;
}
impl Element for i32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    const DTYPE: DType = DType::I32;
}
impl Element for i64 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    const DTYPE: DType = DType::I64;
}
impl Element for bool {
    fn to_f64(self) -> f64 {
        if self { 1.0 } else { 0.0 }
    }
    const DTYPE: DType = DType::Bool;
}

impl Element for u8 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    const DTYPE: DType = DType::U8;
}
impl Element for u64 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    const DTYPE: DType = DType::U64;
}

macro_rules! narrow_elements {
    ($($t:ty => $dtype:ident, $to_f64:expr;)*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            fn to_f64(self) -> f64 {
                let to_f64: fn($t) -> f64 = $to_f64;
                to_f64(self)
            }
        }
    )*};
}

narrow_elements! {
    i8 => I8, f64::from;
    i16 => I16, f64::from;
    u16 => U16, f64::from;
    u32 => U32, f64::from;
    half::f16 => F16, half::f16::to_f64;
    half::bf16 => BF16, half::bf16::to_f64;
}

/// The error [`dispatch_dtype!`](crate::dispatch_dtype) returns for a
/// narrow tensor (`ops::widen` widens them before any kernel runs).
pub fn narrow_not_computed(dtype: DType) -> crate::error::Status {
    crate::error::Status::internal(format!(
        "a {dtype} tensor reached a kernel that computes in {}: narrow dtypes are widened before kernels run",
        dtype.wide()
    ))
}

/// The error [`dispatch_dtype!`](crate::dispatch_dtype) returns for a string tensor.
pub fn string_not_computed() -> crate::error::Status {
    crate::error::Status::invalid_argument(
        "string tensors are not supported here: this kernel computes with numbers and bools only",
    )
}

/// The error [`dispatch_dtype!`](crate::dispatch_dtype) returns for a complex tensor.
pub fn complex_not_computed() -> crate::error::Status {
    crate::error::Status::invalid_argument(
        "complex64 tensors are not supported here: the FFT ops, Real, Imag, Complex, ComplexAbs, Conj, \
         Angle, Cast, StridedSlice, Pad, PadV2 and complex Exp, Neg, Square, Add, Sub, Mul and RealDiv compute \
         with them",
    )
}

/// Calls `$body` with `$T` bound to the element type of `$dtype`.
///
/// String has no element type: for [`DType::String`] the macro returns
/// `Err(`[`string_not_computed`]`())` from the enclosing function (or
/// closure), which must therefore return a `Result` whose error comes from
/// [`Status`](crate::error::Status). Kernels that name their supported
/// dtypes refuse strings earlier, with `unsupported_dtype`.
#[macro_export]
macro_rules! dispatch_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::tensor::DType::String => return Err($crate::tensor::dtype::string_not_computed().into()),
            $crate::tensor::DType::Complex64 => return Err($crate::tensor::dtype::complex_not_computed().into()),
            narrow @ ($crate::tensor::DType::F16
            | $crate::tensor::DType::BF16
            | $crate::tensor::DType::I8
            | $crate::tensor::DType::I16
            | $crate::tensor::DType::U16
            | $crate::tensor::DType::U32) => return Err($crate::tensor::dtype::narrow_not_computed(narrow).into()),
            $crate::tensor::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::tensor::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::tensor::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::tensor::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::tensor::DType::Bool => {
                type $T = bool;
                $body
            }
            $crate::tensor::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::tensor::DType::U64 => {
                type $T = u64;
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_sizes_match_rust_types() -> crate::error::Result<()> {
        for d in DType::ALL {
            assert_eq!(DType::from_code(d.code()), Some(d));
        }
        for d in DType::NUMERIC {
            let size = dispatch_dtype!(d, T => std::mem::size_of::<T>());
            assert_eq!(Some(size), d.size(), "{d}");
            assert!(d.npy_descr().is_some(), "{d}");
        }
        assert_eq!(DType::from_code(0), None);
        assert_eq!(DType::String.size(), None);
        Ok(())
    }

    #[test]
    fn dispatch_refuses_strings_with_an_error() {
        fn width(d: DType) -> crate::error::Result<usize> {
            Ok(dispatch_dtype!(d, T => std::mem::size_of::<T>()))
        }
        assert_eq!(width(DType::I64).unwrap(), 8);
        let err = width(DType::String).unwrap_err();
        assert!(err.message.contains("string tensors are not supported"), "{err}");
    }
}
