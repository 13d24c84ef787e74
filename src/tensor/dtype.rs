//! Element types a tensor can hold, and the Rust types that stand for them.
//!
//! Owns: the [`DType`] table (sizes, names, wire codes) and the [`Element`]
//! trait that ties a Rust scalar to its `DType`. Knows nothing of graphs:
//! TensorFlow's `DataType` numbers are mapped at the import boundary.

use std::fmt;

/// The element types the runtime computes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug, Clone, Copy, PartialEq, Eq))]
#[repr(u8)]
pub enum DType {
    F32 = 1,
    F64 = 2,
    I32 = 3,
    I64 = 4,
    Bool = 5,
}

impl DType {
    pub const ALL: [DType; 5] = [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::Bool => "bool",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    pub fn is_integer(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// The one-byte code used on the wire.
    pub const fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.code() == code)
    }

    /// The numpy type string of this dtype (little-endian).
    pub const fn npy_descr(self) -> &'static str {
        match self {
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::I32 => "<i4",
            DType::I64 => "<i8",
            DType::Bool => "|b1",
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

/// Calls `$body` with `$T` bound to the element type of `$dtype`.
#[macro_export]
macro_rules! dispatch_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
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
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_sizes_match_rust_types() {
        for d in DType::ALL {
            assert_eq!(DType::from_code(d.code()), Some(d));
            let size = dispatch_dtype!(d, T => std::mem::size_of::<T>());
            assert_eq!(size, d.size(), "{d}");
        }
        assert_eq!(DType::from_code(0), None);
    }
}
