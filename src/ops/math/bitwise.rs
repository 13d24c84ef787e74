//! Bitwise ops on integers (`tf.bitwise`): `BitwiseAnd`, `BitwiseOr`,
//! `BitwiseXor` and the shifts (broadcasting), `Invert` and
//! `PopulationCount`, for int32, int64, uint8 and uint64.
//!
//! Owns: these kernels. Must not hold state.
//!
//! As TensorFlow's: a shift amount is clamped to `[0, bits - 1]`, so a
//! negative amount shifts by nothing and an amount of the width or more by
//! one less than it; `RightShift` is arithmetic on signed types.

use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::broadcast::binary_map;
use crate::ops::registry::OpDef;
use crate::ops::{ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Element, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("BitwiseAnd", binary_signature, build_binary::<And>),
    OpDef::kernel("BitwiseOr", binary_signature, build_binary::<Or>),
    OpDef::kernel("BitwiseXor", binary_signature, build_binary::<Xor>),
    OpDef::kernel("LeftShift", binary_signature, build_binary::<Left>),
    OpDef::kernel("RightShift", binary_signature, build_binary::<Right>),
    OpDef::kernel("Invert", invert_signature, build_invert),
    OpDef::kernel("PopulationCount", popcount_signature, build_popcount),
];

const INTEGERS: &[DType] = &[DType::I32, DType::I64, DType::U8, DType::U64];

/// An integer element type's bit operations.
pub trait Bits: Element {
    const BITS: u32;
    fn and(self, rhs: Self) -> Self;
    fn or(self, rhs: Self) -> Self;
    fn xor(self, rhs: Self) -> Self;
    fn not(self) -> Self;
    /// The shift amount `self`, clamped to `[0, BITS - 1]`.
    fn amount(self) -> u32;
    fn shl(self, by: u32) -> Self;
    fn shr(self, by: u32) -> Self;
    fn ones(self) -> u8;
}

macro_rules! impl_bits {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            const BITS: u32 = <$t>::BITS;
            fn and(self, rhs: Self) -> Self { self & rhs }
            fn or(self, rhs: Self) -> Self { self | rhs }
            fn xor(self, rhs: Self) -> Self { self ^ rhs }
            fn not(self) -> Self { !self }
            #[allow(unused_comparisons)]
            fn amount(self) -> u32 {
                if self <= 0 { 0 } else if (self as u64) >= u64::from(Self::BITS) { Self::BITS - 1 } else { self as u32 }
            }
            fn shl(self, by: u32) -> Self { self << by }
            fn shr(self, by: u32) -> Self { self >> by }
            fn ones(self) -> u8 { self.count_ones() as u8 }
        }
    )*};
}

impl_bits!(i32, i64, u8, u64);

/// A bitwise binary op.
trait BinaryBits: 'static {
    fn apply<T: Bits>(a: T, b: T) -> T;
}

struct And;
impl BinaryBits for And {
    fn apply<T: Bits>(a: T, b: T) -> T {
        a.and(b)
    }
}

struct Or;
impl BinaryBits for Or {
    fn apply<T: Bits>(a: T, b: T) -> T {
        a.or(b)
    }
}

struct Xor;
impl BinaryBits for Xor {
    fn apply<T: Bits>(a: T, b: T) -> T {
        a.xor(b)
    }
}

struct Left;
impl BinaryBits for Left {
    fn apply<T: Bits>(a: T, b: T) -> T {
        a.shl(b.amount())
    }
}

struct Right;
impl BinaryBits for Right {
    fn apply<T: Bits>(a: T, b: T) -> T {
        a.shr(b.amount())
    }
}

/// `[T, T] -> [T]`.
fn binary_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, t], vec![t]))
}

/// `[T] -> [T]`.
fn invert_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

/// `[T] -> [uint8]`.
fn popcount_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Tensor(node.attr_dtype("T")?)], vec![ValueType::Tensor(DType::U8)]))
}

/// The compute function of `f` for the node's integer type.
macro_rules! by_integer {
    ($init:expr, $f:ident $(:: <$g:ty>)?) => {{
        let dtype = $init.node.attr_dtype("T")?;
        let compute: ComputeFn = match dtype {
            DType::I32 => $f::<$($g,)? i32>,
            DType::I64 => $f::<$($g,)? i64>,
            DType::U8 => $f::<$($g,)? u8>,
            DType::U64 => $f::<$($g,)? u64>,
            _ => return Err(unsupported_dtype(&$init.node.op, dtype, INTEGERS)),
        };
        Ok(FnKernel::boxed(compute))
    }};
}

fn build_binary<O: BinaryBits>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    by_integer!(init, binary::<O>)
}

fn binary<O: BinaryBits, T: Bits>(ctx: &mut OpContext<'_>) -> Result<()> {
    let out = binary_map::<T, T>(ctx.input(0)?, ctx.input(1)?, O::apply::<T>)?;
    ctx.set_output(0, out);
    Ok(())
}

fn build_invert(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    by_integer!(init, invert)
}

fn invert<T: Bits>(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let out = Tensor::from_map(x.shape().clone(), x.as_slice::<T>()?, T::not)?;
    ctx.set_output(0, out);
    Ok(())
}

fn build_popcount(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    by_integer!(init, popcount)
}

fn popcount<T: Bits>(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let out = Tensor::from_map(x.shape().clone(), x.as_slice::<T>()?, T::ones)?;
    ctx.set_output(0, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::run_all;
    use crate::ops::testing::{node, ty};
    use crate::tensor::{DType, Element, Tensor};

    fn run<T: Element>(op: &str, dtype: DType, inputs: &[Tensor]) -> Vec<T> {
        run_all(&node(op).attr("T", ty(dtype)), inputs).unwrap()[0].as_slice::<T>().unwrap().to_vec()
    }
    fn t<T: Element>(v: &[T]) -> Tensor {
        Tensor::from_slice::<T>([v.len()].as_slice(), v).unwrap()
    }

    #[test]
    fn shifts_clamp_their_amounts_as_tensorflow_does() {
        // TensorFlow 2.21's outputs for the same calls.
        let left = run::<i32>("LeftShift", DType::I32, &[t(&[1, 1, 1, -3, 1]), t(&[3, 31, 32, 1, -1])]);
        assert_eq!(left, [8, i32::MIN, i32::MIN, -6, 1]);
        let right = run::<i32>("RightShift", DType::I32, &[t(&[-16, 16, -1, 16, 16]), t(&[2, 2, 40, -1, 31])]);
        assert_eq!(right, [-4, 4, -1, 16, 0]);
        assert_eq!(run::<u64>("RightShift", DType::U64, &[t(&[1u64 << 63, 16]), t(&[63u64, 70])]), [1, 0]);
        assert_eq!(run::<u8>("LeftShift", DType::U8, &[t(&[200u8, 1]), t(&[1u8, 9])]), [144, 128]);
    }

    #[test]
    fn logic_invert_and_counts_match_tensorflow() {
        assert_eq!(run::<u8>("Invert", DType::U8, &[t(&[0u8, 5, 255])]), [255, 250, 0]);
        assert_eq!(run::<u8>("PopulationCount", DType::I32, &[t(&[-1i32, 7, 0])]), [32, 3, 0]);
        let x = Tensor::from_slice::<i32>([2, 1].as_slice(), &[12, 10]).unwrap();
        assert_eq!(run::<i32>("BitwiseAnd", DType::I32, &[x.clone(), t(&[6, 3])]), [4, 0, 2, 2]);
        assert_eq!(run::<i32>("BitwiseOr", DType::I32, &[x.clone(), t(&[6, 3])]), [14, 15, 14, 11]);
        assert_eq!(run::<i32>("BitwiseXor", DType::I32, &[x, t(&[6, 3])]), [10, 15, 12, 9]);
        let e = crate::ops::testing::run_all(&node("BitwiseAnd").attr("T", ty(DType::F32)), &[]);
        assert!(e.unwrap_err().message.contains("float32"));
    }
}
