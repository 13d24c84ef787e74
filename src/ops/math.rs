//! Elementwise math: unary functions, binary arithmetic with broadcasting,
//! comparisons, logical ops, AddN and Select; Einsum in [`einsum`], bitwise ops in [`bitwise`], erf and
//! erfc's scalar code in `erf`, lgamma, digamma, erfinv, ndtri and the scaled
//! Bessel functions' in `special`.
//!
//! Owns: these kernels, their signatures, and the generic unary/binary
//! drivers other modules reuse ([`Unary`], [`build_real_unary`],
//! [`build_float_unary`]; nn.rs builds Relu and friends on them). Loops over
//! broadcast operands live in `broadcast`; scalar semantics (integer
//! division, NaN propagation, rounding) in `numeric`. Must not hold state:
//! every kernel here is a function picked once per node for its dtype.
//!
//! Dtype support follows TensorFlow's CPU kernels: transcendental functions
//! are float-only, arithmetic takes float32/64 and int32/64, and a dtype
//! without a kernel is an error at build time naming the dtype.

use super::broadcast::{
    binary_in_place, binary_into_lhs, binary_into_rhs, binary_map, broadcast_shape, unary_in_place,
};
use super::numeric::{Float, Num, round_half_to_even};
use super::registry::OpDef;
use super::{
    ComputeFn, FnKernel, IntraOpPool, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_count,
    unsupported_dtype,
};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Shape, Tensor};
use smallvec::SmallVec;

/// `Unary` for both float types through the f64 function `$f`, rounded
/// once for float32 (the special functions' kernels).
macro_rules! computed_in_f64 {
    ($(#[$doc:meta])* $op:ident, $f:expr) => {
        $(#[$doc])*
        pub struct $op;
        impl super::Unary<f32> for $op {
            #[inline]
            fn apply(x: f32) -> f32 {
                let f: fn(f64) -> f64 = $f;
                f(f64::from(x)) as f32
            }
        }
        impl super::Unary<f64> for $op {
            #[inline]
            fn apply(x: f64) -> f64 {
                let f: fn(f64) -> f64 = $f;
                f(x)
            }
        }
    };
}

mod bessel;
pub mod bitwise;
pub mod einsum;
mod erf;
mod incomplete;
mod integrals;
mod special;

pub(crate) use special::lgamma;

/// A scalar function's expected values at a table's points, for tests:
/// its name, the function, and one value per point.
#[cfg(test)]
type TableRow<const N: usize> = (&'static str, fn(f64) -> f64, [f64; N]);

/// Checks each row's function at `xs` against its values: equal, both
/// NaN, or within `rel` of the expected magnitude.
#[cfg(test)]
fn assert_table<const N: usize>(xs: &[f64; N], rows: &[TableRow<N>], rel: f64) {
    for (name, f, want) in rows {
        for (&x, &w) in xs.iter().zip(want) {
            let got = f(x);
            assert!(
                got == w || (got.is_nan() && w.is_nan()) || (got - w).abs() <= rel * w.abs(),
                "{name}({x}): got {got:e}, want {w:e}"
            );
        }
    }
}

pub const DEFS: &[OpDef] = &[
    // Unary, any real type.
    OpDef::kernel("Abs", unary_signature, build_real_unary::<Abs>),
    OpDef::kernel("Neg", unary_signature, build_real_unary::<Neg>),
    OpDef::kernel("Square", unary_signature, build_real_unary::<Square>),
    OpDef::kernel("Sign", unary_signature, build_real_unary::<Sign>),
    OpDef::kernel("Round", unary_signature, build_real_unary::<Round>),
    // Unary, float only.
    OpDef::kernel("Exp", unary_signature, build_float_unary::<Exp>),
    OpDef::kernel("Expm1", unary_signature, build_float_unary::<Expm1>),
    OpDef::kernel("Log", unary_signature, build_float_unary::<Log>),
    OpDef::kernel("Log1p", unary_signature, build_float_unary::<Log1p>),
    OpDef::kernel("Sqrt", unary_signature, build_float_unary::<Sqrt>),
    OpDef::kernel("Rsqrt", unary_signature, build_float_unary::<Rsqrt>),
    OpDef::kernel("Reciprocal", unary_signature, build_float_unary::<Reciprocal>),
    OpDef::kernel("Inv", unary_signature, build_float_unary::<Reciprocal>),
    OpDef::kernel("Tanh", unary_signature, build_float_unary::<Tanh>),
    OpDef::kernel("Sigmoid", unary_signature, build_float_unary::<Sigmoid>),
    OpDef::kernel("Sin", unary_signature, build_float_unary::<Sin>),
    OpDef::kernel("Cos", unary_signature, build_float_unary::<Cos>),
    OpDef::kernel("Floor", unary_signature, build_float_unary::<Floor>),
    OpDef::kernel("Ceil", unary_signature, build_float_unary::<Ceil>),
    OpDef::kernel("Erf", unary_signature, build_float_unary::<Erf>),
    OpDef::kernel("Erfc", unary_signature, build_float_unary::<Erfc>),
    OpDef::kernel("Tan", unary_signature, build_float_unary::<Tan>),
    OpDef::kernel("Asin", unary_signature, build_float_unary::<Asin>),
    OpDef::kernel("Acos", unary_signature, build_float_unary::<Acos>),
    OpDef::kernel("Atan", unary_signature, build_float_unary::<Atan>),
    OpDef::kernel("Sinh", unary_signature, build_float_unary::<Sinh>),
    OpDef::kernel("Cosh", unary_signature, build_float_unary::<Cosh>),
    OpDef::kernel("Asinh", unary_signature, build_float_unary::<Asinh>),
    OpDef::kernel("Acosh", unary_signature, build_float_unary::<Acosh>),
    OpDef::kernel("Atanh", unary_signature, build_float_unary::<Atanh>),
    // Special functions (`special`).
    OpDef::kernel("Lgamma", unary_signature, build_float_unary::<special::Lgamma>),
    OpDef::kernel("Digamma", unary_signature, build_float_unary::<special::Digamma>),
    OpDef::kernel("Erfinv", unary_signature, build_float_unary::<special::Erfinv>),
    OpDef::kernel("Ndtri", unary_signature, build_float_unary::<special::Ndtri>),
    OpDef::kernel("BesselI0e", unary_signature, build_float_unary::<special::BesselI0e>),
    OpDef::kernel("BesselI1e", unary_signature, build_float_unary::<special::BesselI1e>),
    OpDef::kernel("BesselI0", unary_signature, build_float_unary::<bessel::BesselI0>),
    OpDef::kernel("BesselI1", unary_signature, build_float_unary::<bessel::BesselI1>),
    OpDef::kernel("BesselJ0", unary_signature, build_float_unary::<bessel::BesselJ0>),
    OpDef::kernel("BesselJ1", unary_signature, build_float_unary::<bessel::BesselJ1>),
    OpDef::kernel("BesselY0", unary_signature, build_float_unary::<bessel::BesselY0>),
    OpDef::kernel("BesselY1", unary_signature, build_float_unary::<bessel::BesselY1>),
    OpDef::kernel("BesselK0", unary_signature, build_float_unary::<bessel::BesselK0>),
    OpDef::kernel("BesselK1", unary_signature, build_float_unary::<bessel::BesselK1>),
    OpDef::kernel("BesselK0e", unary_signature, build_float_unary::<bessel::BesselK0e>),
    OpDef::kernel("BesselK1e", unary_signature, build_float_unary::<bessel::BesselK1e>),
    OpDef::kernel("Expint", unary_signature, build_float_unary::<integrals::Expint>),
    OpDef::kernel("Spence", unary_signature, build_float_unary::<integrals::Spence>),
    OpDef::kernel("Dawsn", unary_signature, build_float_unary::<integrals::Dawsn>),
    // Incomplete gamma and beta integrals, zeta, polygamma (`incomplete`).
    OpDef::kernel("Igamma", binary_signature, build_float_only_binary::<incomplete::Igamma>),
    OpDef::kernel("Igammac", binary_signature, build_float_only_binary::<incomplete::Igammac>),
    OpDef::kernel("IgammaGradA", binary_signature, build_float_only_binary::<incomplete::IgammaGradA>),
    OpDef::kernel("RandomGammaGrad", binary_signature, build_float_only_binary::<incomplete::RandomGammaGrad>),
    OpDef::kernel("Zeta", binary_signature, build_float_only_binary::<incomplete::Zeta>),
    OpDef::kernel("Polygamma", binary_signature, build_float_only_binary::<incomplete::Polygamma>),
    OpDef::kernel("Betainc", incomplete::betainc_signature, incomplete::build_betainc),
    // Half to even, as Round; TensorFlow defines it on floats only.
    OpDef::kernel("Rint", unary_signature, build_float_unary::<Round>),
    // Float predicates.
    OpDef::kernel("IsNan", predicate_signature, build_predicate::<IsNan>),
    OpDef::kernel("IsFinite", predicate_signature, build_predicate::<IsFinite>),
    OpDef::kernel("IsInf", predicate_signature, build_predicate::<IsInf>),
    // Binary arithmetic.
    OpDef::kernel("Add", binary_signature, build_real_binary::<Add>),
    OpDef::kernel("AddV2", binary_signature, build_real_binary::<Add>),
    OpDef::kernel("Sub", binary_signature, build_real_binary::<Sub>),
    OpDef::kernel("Mul", binary_signature, build_real_binary::<Mul>),
    OpDef::kernel("RealDiv", binary_signature, build_float_binary::<Div>),
    OpDef::kernel("Div", binary_signature, build_real_binary::<Div>),
    OpDef::kernel("DivNoNan", binary_signature, build_float_binary::<DivNoNan>),
    OpDef::kernel("MulNoNan", binary_signature, build_float_binary::<MulNoNan>),
    OpDef::kernel("TruncateDiv", binary_signature, build_int_binary::<Div>),
    OpDef::kernel("FloorDiv", binary_signature, build_real_binary::<FloorDiv>),
    OpDef::kernel("FloorMod", binary_signature, build_real_binary::<FloorMod>),
    OpDef::kernel("Mod", binary_signature, build_real_binary::<TruncMod>),
    OpDef::kernel("TruncateMod", binary_signature, build_real_binary::<TruncMod>),
    OpDef::kernel("Maximum", binary_signature, build_real_binary::<Maximum>),
    OpDef::kernel("Minimum", binary_signature, build_real_binary::<Minimum>),
    OpDef::kernel("Pow", binary_signature, build_real_binary::<Pow>),
    OpDef::kernel("SquaredDifference", binary_signature, build_real_binary::<SquaredDifference>),
    // Binary, float only.
    OpDef::kernel("Atan2", binary_signature, build_float_only_binary::<Atan2>),
    OpDef::kernel("Xlogy", binary_signature, build_float_only_binary::<Xlogy>),
    OpDef::kernel("Xlog1py", binary_signature, build_float_only_binary::<Xlog1py>),
    OpDef::kernel("Xdivy", binary_signature, build_float_only_binary::<Xdivy>),
    OpDef::kernel("NextAfter", binary_signature, build_float_only_binary::<NextAfter>),
    // Comparisons.
    OpDef::kernel("Less", compare_signature, build_compare::<Less>),
    OpDef::kernel("LessEqual", compare_signature, build_compare::<LessEqual>),
    OpDef::kernel("Greater", compare_signature, build_compare::<Greater>),
    OpDef::kernel("GreaterEqual", compare_signature, build_compare::<GreaterEqual>),
    OpDef::kernel("Equal", compare_signature, build_equality::<Equal>),
    OpDef::kernel("NotEqual", compare_signature, build_equality::<NotEqual>),
    // Logical.
    OpDef::kernel("LogicalAnd", logical_signature, build_logical::<And>),
    OpDef::kernel("LogicalOr", logical_signature, build_logical::<Or>),
    OpDef::kernel("LogicalNot", logical_not_signature, build_logical_not),
    // N-ary and selection.
    OpDef::kernel("AddN", add_n_signature, build_add_n),
    OpDef::kernel("Select", select_signature, build_select),
    OpDef::kernel("ClipByValue", clip_signature, build_clip),
    OpDef::kernel("SelectV2", select_signature, build_select_v2),
];

/// float32, float64, int32, int64: what TensorFlow calls real number types
/// (among the dtypes this runtime has).
pub const REAL: &[DType] = &[DType::F32, DType::F64, DType::I32, DType::I64];
pub const FLOAT: &[DType] = &[DType::F32, DType::F64];
pub const INT: &[DType] = &[DType::I32, DType::I64];

// ---------------------------------------------------------------------------
// Signatures

/// `[T] -> [T]`.
pub fn unary_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

/// `[T, T] -> [T]`.
pub fn binary_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, t], vec![t]))
}

fn compare_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, t], vec![ValueType::Tensor(DType::Bool)]))
}

fn predicate_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![ValueType::Tensor(DType::Bool)]))
}

fn logical_signature(_node: &NodeSpec) -> Result<OpSignature> {
    let b = ValueType::Tensor(DType::Bool);
    Ok(OpSignature::new(vec![b, b], vec![b]))
}

fn logical_not_signature(_node: &NodeSpec) -> Result<OpSignature> {
    let b = ValueType::Tensor(DType::Bool);
    Ok(OpSignature::new(vec![b], vec![b]))
}

fn add_n_signature(node: &NodeSpec) -> Result<OpSignature> {
    let n = attr_count(node, "N", 1)?;
    let t = match super::control_flow::value_type_attr(node, "T")? {
        ValueType::Variant => ValueType::Variant,
        _ => ValueType::Tensor(node.attr_dtype("T")?),
    };
    Ok(OpSignature::new(vec![t; n], vec![t]))
}

fn select_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![ValueType::Tensor(DType::Bool), t, t], vec![t]))
}

/// Fails unless `dtype` is in `allowed`, naming the op and dtype.
pub fn require_dtype(op: &str, dtype: DType, allowed: &[DType]) -> Result<()> {
    if allowed.contains(&dtype) { Ok(()) } else { Err(unsupported_dtype(op, dtype, allowed)) }
}

// ---------------------------------------------------------------------------
// Unary

/// A function of one element, kept as a type so the loop monomorphises.
pub trait Unary<T>: 'static {
    fn apply(x: T) -> T;
}

/// Takes input 0, applies `Op` in place when it can, outputs the result.
pub fn compute_unary<T: Element, Op: Unary<T>>(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.take_input(0)?;
    let out = unary_in_place::<T>(x, Op::apply)?;
    ctx.set_output(0, out);
    Ok(())
}

/// The kernel for a unary op defined on every real type.
pub fn build_real_unary<Op>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>>
where
    Op: Unary<f32> + Unary<f64> + Unary<i32> + Unary<i64>,
{
    let dtype = init.node.attr_dtype("T")?;
    if let Some(kernel) = super::signal::complex_arithmetic(init.node, dtype) {
        return Ok(kernel);
    }
    let compute: ComputeFn = match dtype {
        DType::F32 => compute_unary::<f32, Op>,
        DType::F64 => compute_unary::<f64, Op>,
        DType::I32 => compute_unary::<i32, Op>,
        DType::I64 => compute_unary::<i64, Op>,
        _ => {
            return Err(unsupported_dtype(&init.node.op, dtype, REAL));
        }
    };
    Ok(FnKernel::boxed(compute))
}

/// The kernel for a unary op defined on floats only.
pub fn build_float_unary<Op>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>>
where
    Op: Unary<f32> + Unary<f64>,
{
    let dtype = init.node.attr_dtype("T")?;
    if let Some(kernel) = super::signal::complex_arithmetic(init.node, dtype) {
        return Ok(kernel);
    }
    let compute: ComputeFn = match dtype {
        DType::F32 => compute_unary::<f32, Op>,
        DType::F64 => compute_unary::<f64, Op>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(FnKernel::boxed(compute))
}

macro_rules! unary_ops {
    ($($(#[$doc:meta])* $name:ident<$bound:ident>: |$x:ident| $body:expr;)+) => {
        $(
            $(#[$doc])*
            pub struct $name;
            impl<T: $bound> Unary<T> for $name {
                #[inline(always)]
                fn apply($x: T) -> T {
                    $body
                }
            }
        )+
    };
}

unary_ops! {
    Abs<Num>: |x| x.abs();
    Neg<Num>: |x| x.neg();
    Square<Num>: |x| x.mul(x);
    Sign<Num>: |x| x.sign();
    Exp<Float>: |x| x.exp();
    Expm1<Float>: |x| x.exp_m1();
    Log<Float>: |x| x.ln();
    Log1p<Float>: |x| x.ln_1p();
    Sqrt<Float>: |x| x.sqrt();
    Rsqrt<Float>: |x| T::ONE.div(x.sqrt());
    Reciprocal<Float>: |x| T::ONE.div(x);
    /// The logistic function. `1 / (1 + e^-x)` is within an ulp or two of
    /// Eigen's for every input, and exactly 0 or 1 where it saturates.
    Sigmoid<Float>: |x| T::ONE.div(T::ONE.add(x.neg().exp()));
    Sin<Float>: |x| x.sin();
    Tan<Float>: |x| x.tan();
    Asin<Float>: |x| x.asin();
    Acos<Float>: |x| x.acos();
    Atan<Float>: |x| x.atan();
    Sinh<Float>: |x| x.sinh();
    Cosh<Float>: |x| x.cosh();
    Asinh<Float>: |x| x.asinh();
    Acosh<Float>: |x| x.acosh();
    Atanh<Float>: |x| x.atanh();
    Cos<Float>: |x| x.cos();
    Floor<Float>: |x| x.floor();
    Ceil<Float>: |x| x.ceil();
}

/// tanh. On f32 a branch-free version that vectorises (within 1 ulp of
/// the correctly rounded value; `fast_math`); f64 keeps libm's.
pub struct Tanh;
impl Unary<f32> for Tanh {
    #[inline(always)]
    fn apply(x: f32) -> f32 {
        super::fast_math::tanh_f32(x)
    }
}
impl Unary<f64> for Tanh {
    #[inline(always)]
    fn apply(x: f64) -> f64 {
        x.tanh()
    }
}

/// The error function: on f32 branch-free so the loop vectorises, both
/// within an ulp or two of the exact value (`erf`).
pub struct Erf;
impl Unary<f32> for Erf {
    #[inline(always)]
    fn apply(x: f32) -> f32 {
        erf::erf_f32(x)
    }
}
impl Unary<f64> for Erf {
    #[inline(always)]
    fn apply(x: f64) -> f64 {
        erf::erf_f64(x)
    }
}

/// 1 − erf(x), accurate where it is tiny (`erf`).
pub struct Erfc;
impl Unary<f32> for Erfc {
    #[inline(always)]
    fn apply(x: f32) -> f32 {
        erf::erfc_f32(x)
    }
}
impl Unary<f64> for Erfc {
    #[inline(always)]
    fn apply(x: f64) -> f64 {
        erf::erfc_f64(x)
    }
}

/// Half to even; the identity on integers.
pub struct Round;
impl Unary<f32> for Round {
    fn apply(x: f32) -> f32 {
        round_half_to_even(x)
    }
}
impl Unary<f64> for Round {
    fn apply(x: f64) -> f64 {
        round_half_to_even(x)
    }
}
impl Unary<i32> for Round {
    fn apply(x: i32) -> i32 {
        x
    }
}
impl Unary<i64> for Round {
    fn apply(x: i64) -> i64 {
        x
    }
}

/// A float predicate.
trait Predicate: 'static {
    fn apply<T: Float>(x: T) -> bool;
}

struct IsNan;
impl Predicate for IsNan {
    fn apply<T: Float>(x: T) -> bool {
        x.is_nan()
    }
}

struct IsFinite;
impl Predicate for IsFinite {
    fn apply<T: Float>(x: T) -> bool {
        x.is_finite()
    }
}

struct IsInf;
impl Predicate for IsInf {
    fn apply<T: Float>(x: T) -> bool {
        x.is_infinite()
    }
}

fn compute_predicate<T: Float, P: Predicate>(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let src = x.as_slice::<T>()?;
    let out = Tensor::from_map(x.shape().clone(), src, P::apply)?;
    ctx.set_output(0, out);
    Ok(())
}

fn build_predicate<P: Predicate>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => compute_predicate::<f32, P>,
        DType::F64 => compute_predicate::<f64, P>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(FnKernel::boxed(compute))
}

// ---------------------------------------------------------------------------
// Binary arithmetic

/// A function of two elements of one type.
pub trait Binary<T>: 'static {
    fn apply(a: T, b: T) -> T;

    /// Whether `check` looks at anything: when not, the right operand is
    /// not even viewed as a slice for it.
    const CHECKS_RHS: bool = false;

    /// Rejects right operands TensorFlow reports as errors (integer
    /// division by zero), before anything is computed.
    fn check(_rhs: &[T]) -> Result<()> {
        Ok(())
    }
}

fn compute_binary<T: Element, Op: Binary<T>>(ctx: &mut OpContext<'_>) -> Result<()> {
    // A lent operand (a graph constant) is read where it lies: taking it
    // would cost a reference count round trip and it cannot be reused.
    let out = match (ctx.input_is_lent(0), ctx.input_is_lent(1)) {
        (false, true) => {
            let a = ctx.take_input(0)?;
            let b = ctx.input(1)?;
            if Op::CHECKS_RHS && a.num_elements() > 0 {
                Op::check(b.as_slice::<T>()?)?;
            }
            binary_into_lhs::<T>(a, b, Op::apply)?
        }
        (true, false) => {
            let b = ctx.take_input(1)?;
            let a = ctx.input(0)?;
            if Op::CHECKS_RHS && a.num_elements() > 0 {
                Op::check(b.as_slice::<T>()?)?;
            }
            binary_into_rhs::<T>(a, b, Op::apply)?
        }
        _ => {
            let a = ctx.take_input(0)?;
            let b = ctx.take_input(1)?;
            // With an empty output nothing is divided, and TF reports nothing.
            if Op::CHECKS_RHS && a.num_elements() > 0 {
                Op::check(b.as_slice::<T>()?)?;
            }
            binary_in_place::<T>(a, b, Op::apply)?
        }
    };
    ctx.set_output(0, out);
    Ok(())
}

/// A binary op defined (by [`Num`]) on every real type.
pub trait RealBinary: Binary<f32> + Binary<f64> + Binary<i32> + Binary<i64> {}
impl<Op: Binary<f32> + Binary<f64> + Binary<i32> + Binary<i64>> RealBinary for Op {}

fn pick_binary<Op: RealBinary>(node: &NodeSpec, allowed: &[DType]) -> Result<Box<dyn OpKernel>> {
    let dtype = node.attr_dtype("T")?;
    if let Some(kernel) = super::signal::complex_arithmetic(node, dtype) {
        return Ok(kernel);
    }
    require_dtype(&node.op, dtype, allowed)?;
    let compute: ComputeFn = match dtype {
        DType::F32 => compute_binary::<f32, Op>,
        DType::F64 => compute_binary::<f64, Op>,
        DType::I32 => compute_binary::<i32, Op>,
        DType::I64 => compute_binary::<i64, Op>,
        _ => {
            return Err(unsupported_dtype(&node.op, dtype, allowed));
        }
    };
    Ok(FnKernel::boxed(compute))
}

fn build_real_binary<Op: RealBinary>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    pick_binary::<Op>(init.node, REAL)
}

fn build_float_binary<Op: RealBinary>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    pick_binary::<Op>(init.node, FLOAT)
}

fn build_int_binary<Op: RealBinary>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    pick_binary::<Op>(init.node, INT)
}

fn check_nonzero_divisor<T: Num>(rhs: &[T]) -> Result<()> {
    if !T::IS_FLOAT && rhs.contains(&T::ZERO) {
        bail!(invalid_argument, "Integer division by zero");
    }
    Ok(())
}

macro_rules! binary_ops {
    ($($(#[$doc:meta])* $name:ident: |$a:ident, $b:ident| $body:expr $(, check $check:path)?;)+) => {
        $(
            $(#[$doc])*
            pub struct $name;
            impl<T: Num> Binary<T> for $name {
                #[inline(always)]
                fn apply($a: T, $b: T) -> T {
                    $body
                }
                $(
                    const CHECKS_RHS: bool = true;

                    fn check(rhs: &[T]) -> Result<()> {
                        $check(rhs)
                    }
                )?
            }
        )+
    };
}

fn check_pow_exponents<T: Num>(rhs: &[T]) -> Result<()> {
    if !T::IS_FLOAT && rhs.iter().any(|&e| e < T::ZERO) {
        bail!(invalid_argument, "Integers to negative integer powers are not allowed");
    }
    Ok(())
}

binary_ops! {
    Add: |a, b| a.add(b);
    Sub: |a, b| a.sub(b);
    Mul: |a, b| a.mul(b);
    /// Float division, or integer division truncating toward zero (TF's
    /// `Div`/`TruncateDiv` on integers).
    Div: |a, b| a.div(b), check check_nonzero_divisor;
    /// x / y, or 0 where y is 0.
    DivNoNan: |a, b| if b == T::ZERO { T::ZERO } else { a.div(b) };
    /// x * y, or 0 where y is 0 (even where x is NaN or infinite).
    MulNoNan: |a, b| if b == T::ZERO { T::ZERO } else { a.mul(b) };
    FloorDiv: |a, b| a.floor_div(b), check check_nonzero_divisor;
    FloorMod: |a, b| a.floor_mod(b), check check_nonzero_divisor;
    TruncMod: |a, b| a.trunc_mod(b), check check_nonzero_divisor;
    Maximum: |a, b| a.max_nan(b);
    Minimum: |a, b| a.min_nan(b);
    Pow: |a, b| a.pow(b), check check_pow_exponents;
    SquaredDifference: |a, b| { let d = a.sub(b); d.mul(d) };
}

/// A binary op defined on floats only.
macro_rules! float_binary_ops {
    ($($(#[$doc:meta])* $name:ident: |$a:ident, $b:ident| $body:expr;)+) => {
        $(
            $(#[$doc])*
            pub struct $name;
            impl<T: Float> Binary<T> for $name {
                #[inline(always)]
                fn apply($a: T, $b: T) -> T {
                    $body
                }
            }
        )+
    };
}

float_binary_ops! {
    /// atan(y / x) in the quadrant of (x, y); the op's inputs are y, x.
    Atan2: |y, x| y.atan2(x);
    /// x * log(y), and 0 where x is 0 (even where log(y) is not finite).
    Xlogy: |x, y| if x == T::ZERO { T::ZERO } else { x.mul(y.ln()) };
    /// x * log(1 + y), and 0 where x is 0.
    Xlog1py: |x, y| if x == T::ZERO { T::ZERO } else { x.mul(y.ln_1p()) };
    /// x / y, and 0 where x is 0.
    Xdivy: |x, y| if x == T::ZERO { T::ZERO } else { x.div(y) };
    /// The next representable value after x toward y.
    NextAfter: |x, y| x.next_after(y);
}

fn build_float_only_binary<Op: Binary<f32> + Binary<f64>>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => compute_binary::<f32, Op>,
        DType::F64 => compute_binary::<f64, Op>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(FnKernel::boxed(compute))
}

// ---------------------------------------------------------------------------
// Comparisons

/// An element comparison.
pub trait Compare: 'static {
    fn apply<T: PartialOrd>(a: T, b: T) -> bool;
}

macro_rules! compare_ops {
    ($($name:ident: $op:tt;)+) => {
        $(
            pub struct $name;
            impl Compare for $name {
                #[inline(always)]
                fn apply<T: PartialOrd>(a: T, b: T) -> bool {
                    a $op b
                }
            }
        )+
    };
}

compare_ops! {
    Less: <;
    LessEqual: <=;
    Greater: >;
    GreaterEqual: >=;
    Equal: ==;
    NotEqual: !=;
}

fn compute_compare<T: Element, C: Compare>(ctx: &mut OpContext<'_>) -> Result<()> {
    let out = binary_map::<T, bool>(ctx.input(0)?, ctx.input(1)?, C::apply::<T>)?;
    ctx.set_output(0, out);
    Ok(())
}

fn pick_compare<C: Compare>(node: &NodeSpec, allowed: &[DType]) -> Result<ComputeFn> {
    let dtype = node.attr_dtype("T")?;
    require_dtype(&node.op, dtype, allowed)?;
    Ok(crate::dispatch_dtype!(dtype, T => compute_compare::<T, C> as ComputeFn))
}

/// The ordered dtypes: TensorFlow compares its unsigned types too.
const ORDERED: &[DType] = &[DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::U64];

fn build_compare<C: Compare>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(pick_compare::<C>(init.node, ORDERED)?))
}

/// Equal/NotEqual: also defined on bool, and with
/// `incompatible_shape_error = false` they answer a scalar (false for
/// Equal, true for NotEqual) instead of failing on unbroadcastable shapes.
struct EqualityKernel {
    compute: ComputeFn,
    /// The answer for incompatible shapes, when they are not an error.
    incompatible: Option<bool>,
}

fn build_equality<C: Compare>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let compute = if init.node.attr_dtype("T")? == DType::String {
        compute_string_equality::<C> as ComputeFn
    } else {
        pick_compare::<C>(init.node, &DType::ALL)?
    };
    let error = init.node.attr_bool_or("incompatible_shape_error", true)?;
    let incompatible = (!error).then(|| C::apply(0, 1));
    Ok(Box::new(EqualityKernel { compute, incompatible }))
}

/// Equal/NotEqual of strings (byte for byte), broadcast.
fn compute_string_equality<C: Compare>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let shape = crate::ops::broadcast::broadcast_shape(a.dims(), b.dims())?;
    let (sa, sb) = (a.strings()?, b.strings()?);
    let mut out = Vec::with_capacity(shape.num_elements());
    if shape.num_elements() > 0 {
        let plan = crate::ops::broadcast::Plan::new(a.dims(), b.dims(), shape.dims());
        plan.for_each_index(|i, j| out.push(C::apply(sa.get(i), sb.get(j))));
    }
    let out = Tensor::from_slice(shape, &out)?;
    ctx.set_output(0, out);
    Ok(())
}

impl OpKernel for EqualityKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        if let Some(answer) = self.incompatible {
            if broadcast_shape(ctx.input(0)?.dims(), ctx.input(1)?.dims()).is_err() {
                ctx.set_output(0, Tensor::scalar(answer));
                return Ok(());
            }
        }
        (self.compute)(ctx)
    }
}

// ---------------------------------------------------------------------------
// Logical

trait Logical: 'static {
    fn apply(a: bool, b: bool) -> bool;
}

struct And;
impl Logical for And {
    fn apply(a: bool, b: bool) -> bool {
        a && b
    }
}

struct Or;
impl Logical for Or {
    fn apply(a: bool, b: bool) -> bool {
        a || b
    }
}

fn compute_logical<L: Logical>(ctx: &mut OpContext<'_>) -> Result<()> {
    let a = ctx.take_input(0)?;
    let b = ctx.take_input(1)?;
    let out = binary_in_place::<bool>(a, b, L::apply)?;
    ctx.set_output(0, out);
    Ok(())
}

fn build_logical<L: Logical>(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(compute_logical::<L>))
}

fn compute_logical_not(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.take_input(0)?;
    let out = unary_in_place::<bool>(x, |v| !v)?;
    ctx.set_output(0, out);
    Ok(())
}

fn build_logical_not(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(compute_logical_not))
}

// ---------------------------------------------------------------------------
// AddN

/// `AddN` of TensorLists (`variant`s): the gradients of one loop
/// accumulator, summed in input order.
fn compute_add_n_lists(ctx: &mut OpContext<'_>) -> Result<()> {
    let mut acc = ctx.input_list(0)?.clone();
    for i in 1..ctx.num_inputs() {
        acc = std::sync::Arc::new(acc.add(ctx.input_list(i)?)?);
    }
    ctx.set_output_value(0, super::Value::List(acc));
    Ok(())
}

/// `a + b` for two tensors of one dtype and shape (no broadcasting).
pub(crate) fn add_same_shape(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    fn sum<T: Num>(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let (x, y) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
        Tensor::build::<T>(a.dims(), |out| {
            for ((o, &p), &q) in out.iter_mut().zip(x).zip(y) {
                *o = p.add(q);
            }
        })
    }
    debug_assert_eq!(a.shape(), b.shape());
    if a.dtype() != b.dtype() {
        bail!(invalid_argument, "cannot add a {} tensor to a {} tensor", a.dtype(), b.dtype());
    }
    match a.dtype() {
        DType::F32 => sum::<f32>(a, b),
        DType::F64 => sum::<f64>(a, b),
        DType::I32 => sum::<i32>(a, b),
        DType::I64 => sum::<i64>(a, b),
        other => Err(unsupported_dtype("AddN", other, REAL)),
    }
}

fn compute_add_n<T: Num>(ctx: &mut OpContext<'_>) -> Result<()> {
    let n = ctx.num_inputs();
    let mut acc = ctx.take_input(0)?;
    for i in 1..n {
        let x = ctx.input(i)?;
        if x.shape() != acc.shape() {
            bail!(
                invalid_argument,
                "Inputs to AddN must have the same shape: input 0 has shape {}, input {i} has shape {}",
                acc.shape(),
                x.shape()
            );
        }
    }
    if n == 1 {
        ctx.set_output(0, acc);
        return Ok(());
    }
    // Accumulate in input order into input 0's buffer when nobody else holds
    // it, else into a copy.
    if acc.try_slice_mut::<T>().is_none() {
        acc = acc.deep_copy();
    }
    {
        let pool = ctx.intra_op();
        let rest = (1..n).map(|i| ctx.input(i)?.as_slice::<T>()).collect::<Result<Vec<_>>>()?;
        let Some(out) = acc.try_slice_mut::<T>() else {
            bail!(internal, "AddN: a fresh copy is not writable");
        };
        add_n_into(pool, out, &rest);
    }
    ctx.set_output(0, acc);
    Ok(())
}

/// Elements summed per block: every input's block is added while the
/// output's block stays in L1.
const ADD_N_BLOCK: usize = 4096;
/// Fewest additions worth a chunk of their own on another thread.
const ADD_N_CHUNK_MIN_ADDS: usize = 1 << 17;

/// `out[j] += rest[0][j] + rest[1][j] + ...`, in input order for every
/// element (so the result does not depend on blocking or threads), block by
/// block, the blocks spread over `pool` when there are enough additions.
fn add_n_into<T: Num>(pool: Option<&dyn IntraOpPool>, out: &mut [T], rest: &[&[T]]) {
    let sum_block = |offset: usize, block: &mut [T]| {
        let len = block.len();
        for x in rest {
            for (o, &v) in block.iter_mut().zip(&x[offset..offset + len]) {
                *o = o.add(v);
            }
        }
    };
    let threads = pool.map_or(1, |p| p.threads());
    let adds = out.len().saturating_mul(rest.len());
    let chunks = (threads * 2).min(adds / ADD_N_CHUNK_MIN_ADDS).min(out.len().div_ceil(ADD_N_BLOCK));
    let (Some(pool), true) = (pool, threads >= 2 && chunks >= 2) else {
        for (b, block) in out.chunks_mut(ADD_N_BLOCK).enumerate() {
            sum_block(b * ADD_N_BLOCK, block);
        }
        return;
    };
    let per_chunk = out.len().div_ceil(chunks).next_multiple_of(ADD_N_BLOCK);
    let parts: Vec<parking_lot::Mutex<&mut [T]>> = out.chunks_mut(per_chunk).map(parking_lot::Mutex::new).collect();
    pool.run_chunks(parts.len(), &|i| {
        let mut part = parts[i].lock();
        for (b, block) in part.chunks_mut(ADD_N_BLOCK).enumerate() {
            sum_block(i * per_chunk + b * ADD_N_BLOCK, block);
        }
    });
}

fn build_add_n(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if super::control_flow::value_type_attr(init.node, "T")? == ValueType::Variant {
        return Ok(FnKernel::boxed(compute_add_n_lists));
    }
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => compute_add_n::<f32>,
        DType::F64 => compute_add_n::<f64>,
        DType::I32 => compute_add_n::<i32>,
        DType::I64 => compute_add_n::<i64>,
        _ => {
            return Err(unsupported_dtype(&init.node.op, dtype, REAL));
        }
    };
    Ok(FnKernel::boxed(compute))
}

// ---------------------------------------------------------------------------
// Select

/// `Select`'s two operands agree in shape, as TensorFlow requires.
fn same_operand_shapes(then: &Tensor, other: &Tensor) -> Result<()> {
    if then.shape() != other.shape() {
        bail!(
            invalid_argument,
            "'then' and 'else' must have the same size.  but received: {} vs. {}",
            then.shape(),
            other.shape()
        );
    }
    Ok(())
}

/// `Select` (v1): the condition is a scalar (pick a whole operand), a
/// vector over the first dimension (pick rows), or the operands' shape.
fn compute_select<T: Element>(ctx: &mut OpContext<'_>) -> Result<()> {
    let cond = ctx.input(0)?;
    let (then, other) = (ctx.input(1)?, ctx.input(2)?);
    same_operand_shapes(then, other)?;
    let c = cond.as_slice::<bool>()?;
    if cond.shape().is_scalar() {
        // Forward the chosen operand: no copy.
        let pick = if c[0] { then.clone() } else { other.clone() };
        ctx.set_output(0, pick);
        return Ok(());
    }
    let (t, e) = (then.as_slice::<T>()?, other.as_slice::<T>()?);
    let out = if cond.rank() == 1 && then.rank() > 1 {
        if c.len() != then.dims()[0] {
            bail!(
                invalid_argument,
                "Number of batches of 'then' must match size of 'cond', but saw: {} vs. {}",
                then.dims()[0],
                c.len()
            );
        }
        let row = then.num_elements() / c.len().max(1);
        Tensor::build::<T>(then.shape().clone(), |out| {
            for (r, &pick) in c.iter().enumerate() {
                let src = if pick { t } else { e };
                out[r * row..(r + 1) * row].copy_from_slice(&src[r * row..(r + 1) * row]);
            }
        })?
    } else {
        if cond.shape() != then.shape() {
            bail!(
                invalid_argument,
                "'condition' and 'then' must have the same size.  but received: {} vs. {}",
                cond.shape(),
                then.shape()
            );
        }
        Tensor::build::<T>(then.shape().clone(), |out| {
            for (i, o) in out.iter_mut().enumerate() {
                *o = if c[i] { t[i] } else { e[i] };
            }
        })?
    };
    ctx.set_output(0, out);
    Ok(())
}

/// `[T, T, T] -> [T]`.
fn clip_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, t, t], vec![t]))
}

fn build_clip(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => compute_clip::<f32>,
        DType::F64 => compute_clip::<f64>,
        DType::I32 => compute_clip::<i32>,
        DType::I64 => compute_clip::<i64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, REAL)),
    };
    Ok(FnKernel::boxed(compute))
}

/// `ClipByValue`: TensorFlow's `min(t, max)` then `max(·, min)`, with
/// plain comparisons (a NaN element stays NaN; with min > max every
/// element becomes min). The bounds are scalars or shaped as `t`.
fn compute_clip<T: Num>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (t, lo, hi) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    for (bound, name) in [(lo, "clip_value_min"), (hi, "clip_value_max")] {
        if !(bound.shape().is_scalar() || bound.shape() == t.shape()) {
            bail!(
                invalid_argument,
                "{name} must be either a scalar or have the same shape as t: t {}, {name} {}",
                t.shape(),
                bound.shape()
            );
        }
    }
    let (x, lo, hi) = (t.as_slice::<T>()?, lo.as_slice::<T>()?, hi.as_slice::<T>()?);
    let at = |v: &[T], i: usize| if v.len() == 1 { v[0] } else { v[i] };
    let out = Tensor::build::<T>(t.shape().clone(), |out| {
        for (i, (o, &v)) in out.iter_mut().zip(x).enumerate() {
            let (l, h) = (at(lo, i), at(hi, i));
            let upper = if h < v { h } else { v };
            *o = if upper < l { l } else { upper };
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

fn build_select(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    if dtype == DType::String {
        return Ok(FnKernel::boxed(compute_select_strings));
    }
    Ok(FnKernel::boxed(crate::dispatch_dtype!(dtype, T => compute_select::<T> as ComputeFn)))
}

/// `Select` on strings (a Saver picks its temp-file suffix with one): the
/// same rules as for numbers, elements copied by value.
fn compute_select_strings(ctx: &mut OpContext<'_>) -> Result<()> {
    let cond = ctx.input(0)?;
    let (then, other) = (ctx.input(1)?, ctx.input(2)?);
    same_operand_shapes(then, other)?;
    let c = cond.as_slice::<bool>()?;
    if cond.shape().is_scalar() {
        let pick = if c[0] { then.clone() } else { other.clone() };
        ctx.set_output(0, pick);
        return Ok(());
    }
    let by_rows = cond.rank() == 1 && then.rank() > 1 && then.dims()[0] == c.len();
    if !by_rows && cond.shape() != then.shape() {
        bail!(
            invalid_argument,
            "'condition' and 'then' must have the same size.  but received: {} vs. {}",
            cond.shape(),
            then.shape()
        );
    }
    let row = then.num_elements() / c.len().max(1);
    let (t, e) = (then.strings()?, other.strings()?);
    let picked: Vec<&[u8]> = (0..then.num_elements())
        .map(|i| if c[i / row.max(1)] { t.get(i) } else { e.get(i) }.unwrap_or_default())
        .collect();
    let out = Tensor::from_strings(then.shape().clone(), &picked)?;
    ctx.set_output(0, out);
    Ok(())
}

/// Per-output-dimension strides of an operand broadcast to `out` (0 where
/// it is broadcast).
fn broadcast_strides(dims: &[usize], out: &[usize]) -> SmallVec<[usize; 6]> {
    let mut strides: SmallVec<[usize; 6]> = SmallVec::from_elem(0, out.len());
    let offset = out.len() - dims.len();
    let mut acc = 1;
    for i in (0..dims.len()).rev() {
        if dims[i] != 1 {
            strides[offset + i] = acc;
        }
        acc *= dims[i];
    }
    strides
}

/// `SelectV2`: condition, then and else all broadcast against each other.
fn compute_select_v2<T: Element>(ctx: &mut OpContext<'_>) -> Result<()> {
    let cond = ctx.input(0)?;
    let (then, other) = (ctx.input(1)?, ctx.input(2)?);
    let te = broadcast_shape(then.dims(), other.dims())?;
    let out_shape: Shape = broadcast_shape(cond.dims(), te.dims()).map_err(|_| {
        Status::invalid_argument(format!(
            "condition {}, then {} and else {} must be broadcastable",
            cond.shape(),
            then.shape(),
            other.shape()
        ))
    })?;
    let (c, t, e) = (cond.as_slice::<bool>()?, then.as_slice::<T>()?, other.as_slice::<T>()?);
    let out_dims = out_shape.dims().to_vec();
    let strides = [
        broadcast_strides(cond.dims(), &out_dims),
        broadcast_strides(then.dims(), &out_dims),
        broadcast_strides(other.dims(), &out_dims),
    ];
    let out = Tensor::build::<T>(out_shape, |out| {
        let rank = out_dims.len();
        let mut index: SmallVec<[usize; 6]> = SmallVec::from_elem(0, rank);
        let mut off = [0usize; 3];
        for o in out.iter_mut() {
            *o = if c[off[0]] { t[off[1]] } else { e[off[2]] };
            let mut d = rank;
            while d > 0 {
                d -= 1;
                index[d] += 1;
                for k in 0..3 {
                    off[k] += strides[k][d];
                }
                if index[d] < out_dims[d] {
                    break;
                }
                for k in 0..3 {
                    off[k] -= strides[k][d] * out_dims[d];
                }
                index[d] = 0;
            }
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

fn build_select_v2(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[1, 2]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_select_v2);
    }
    let dtype = init.node.attr_dtype("T")?;
    Ok(FnKernel::boxed(crate::dispatch_dtype!(dtype, T => compute_select_v2::<T> as ComputeFn)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(shape, v).unwrap()
    }
    fn i32s(shape: &[usize], v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>(shape, v).unwrap()
    }
    fn op(name: &str, t: DType) -> NodeSpec {
        node(name).attr("T", ty(t))
    }

    fn close(got: &Tensor, want: &[f32]) {
        let g = got.as_slice::<f32>().unwrap();
        assert_eq!(g.len(), want.len(), "{got:?}");
        for (i, (&a, &b)) in g.iter().zip(want).enumerate() {
            let ok = (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-6 + 1e-5 * b.abs();
            assert!(ok, "element {i}: got {a}, want {b}");
        }
    }

    #[test]
    fn select_picks_strings_by_element_by_row_and_whole() {
        let sel = node("Select").attr("T", ty(DType::String));
        let strs = |shape: &[usize], v: &[&str]| Tensor::from_strings(shape, v).unwrap();
        let cond = Tensor::from_slice::<bool>([2], &[true, false]).unwrap();
        let out = run1(&sel, &[cond.clone(), strs(&[2], &["a", "b"]), strs(&[2], &["x", "y"])]).unwrap();
        assert_eq!(out.strings().unwrap().to_vec(), [&b"a"[..], b"y"]);
        let rows = run1(&sel, &[cond, strs(&[2, 2], &["a", "b", "c", "d"]), strs(&[2, 2], &["w", "x", "y", "z"])]);
        assert_eq!(rows.unwrap().strings().unwrap().to_vec(), [&b"a"[..], b"b", b"y", b"z"]);
        let whole = run1(&sel, &[Tensor::scalar(false), strs(&[], &["_temp"]), strs(&[], &[".part"])]).unwrap();
        assert_eq!(whole.string_value().unwrap(), b".part");
        let err = run1(&sel, &[Tensor::scalar(true), strs(&[1], &["a"]), strs(&[2], &["a", "b"])]).unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
    }
    #[test]
    // numpy's float32 results, which happen to round to named constants.
    #[allow(clippy::approx_constant)]
    fn float_unaries_match_numpy() {
        let x = f32s(&[4], &[0.5, 1.0, 2.0, 4.0]);
        // Values from numpy (float32).
        let cases: &[(&str, [f32; 4])] = &[
            ("Exp", [1.6487212, 2.7182817, 7.389056, 54.59815]),
            ("Log", [-0.6931472, 0.0, 0.6931472, 1.3862944]),
            ("Log1p", [0.4054651, 0.6931472, 1.0986123, 1.609438]),
            ("Sqrt", [0.70710677, 1.0, 1.4142135, 2.0]),
            ("Rsqrt", [1.4142135, 1.0, 0.70710677, 0.5]),
            ("Reciprocal", [2.0, 1.0, 0.5, 0.25]),
            ("Tanh", [0.46211717, 0.7615942, 0.9640276, 0.9993292]),
            ("Sigmoid", [0.62245935, 0.7310586, 0.880797, 0.98201376]),
            ("Sin", [0.47942555, 0.84147096, 0.9092974, -0.7568025]),
            ("Cos", [0.87758255, 0.5403023, -0.41614684, -0.6536436]),
            ("Square", [0.25, 1.0, 4.0, 16.0]),
        ];
        for (name, want) in cases {
            let got = run1(&op(name, DType::F32), std::slice::from_ref(&x)).unwrap();
            assert_eq!(got.dtype(), DType::F32);
            close(&got, want);
        }
    }

    #[test]
    // numpy's float32 results, some of which round to named constants.
    #[allow(clippy::approx_constant)]
    fn trigonometric_and_hyperbolic_unaries_match_numpy() {
        let x = f32s(&[4], &[0.5, 1.0, 2.0, 4.0]);
        let unit = f32s(&[4], &[0.1, 0.5, 0.9, -0.3]);
        // numpy float32; Acosh of x + 1 (its domain starts at 1).
        let cases: &[(&str, &Tensor, [f32; 4])] = &[
            ("Tan", &x, [0.5463025, 1.5574077, -2.18504, 1.1578212]),
            ("Atan", &x, [0.4636476, 0.7853982, 1.1071488, 1.3258177]),
            ("Sinh", &x, [0.5210953, 1.1752012, 3.6268604, 27.289917]),
            ("Cosh", &x, [1.127626, 1.5430807, 3.7621956, 27.308235]),
            ("Asinh", &x, [0.4812118, 0.8813736, 1.4436355, 2.0947125]),
            ("Asin", &unit, [0.10016742, 0.5235988, 1.1197696, -0.30469266]),
            ("Acos", &unit, [1.470629, 1.0471976, 0.45102686, 1.875489]),
            ("Atanh", &unit, [0.10033535, 0.54930615, 1.4722193, -0.30951962]),
        ];
        for (name, input, want) in cases {
            let got = run1(&op(name, DType::F32), &[(*input).clone()]).unwrap();
            close(&got, want);
        }
        let acosh = run1(&op("Acosh", DType::F32), &[f32s(&[4], &[1.5, 2.0, 3.0, 5.0])]).unwrap();
        close(&acosh, &[0.9624236, 1.316958, 1.7627472, 2.2924316]);
        let rint = run1(&op("Rint", DType::F32), &[f32s(&[5], &[0.5, 1.5, 2.5, -0.5, -1.7])]).unwrap();
        assert_eq!(rint.as_slice::<f32>().unwrap(), &[0.0, 2.0, 2.0, -0.0, -2.0], "half to even");
        assert!(run1(&op("Tan", DType::I32), &[i32s(&[1], &[1])]).unwrap_err().message.contains("int32"));
    }

    #[test]
    fn atan2_and_the_x_ops_follow_tensorflow() {
        let ys = f32s(&[4], &[1.0, -1.0, 1.0, -1.0]);
        let xs = f32s(&[4], &[1.0, 1.0, -1.0, -1.0]);
        let quadrants = run1(&op("Atan2", DType::F32), &[ys, xs]).unwrap();
        let (quarter, three_quarters) = (std::f32::consts::FRAC_PI_4, 3.0 * std::f32::consts::FRAC_PI_4);
        close(&quadrants, &[quarter, -quarter, three_quarters, -three_quarters]);
        // Where x is 0 the result is 0, whatever log(y) or 1/y would be.
        let x = f32s(&[4], &[0.0, 0.0, 2.0, -1.0]);
        let y = f32s(&[4], &[0.0, -1.0, 3.0, 0.5]);
        let xlogy = run1(&op("Xlogy", DType::F32), &[x.clone(), y.clone()]).unwrap();
        close(&xlogy, &[0.0, 0.0, 2.0 * 3.0f32.ln(), std::f32::consts::LN_2]);
        let xdivy = run1(&op("Xdivy", DType::F32), &[x.clone(), y.clone()]).unwrap();
        close(&xdivy, &[0.0, 0.0, 2.0 / 3.0, -2.0]);
        let xlog1py = run1(&op("Xlog1py", DType::F32), &[x, y]).unwrap();
        close(&xlog1py, &[0.0, 0.0, 2.0 * 4.0f32.ln(), -(1.5f32.ln())]);
        let err = run1(&op("Xlogy", DType::I64), &[Tensor::scalar(1i64), Tensor::scalar(1i64)]).unwrap_err();
        assert!(err.message.contains("int64"), "{err}");
    }

    #[test]
    fn erf_and_erfc_match_tensorflow() {
        // tf.math.erf / tf.math.erfc in TensorFlow 2.21. Its float32 erf is
        // Eigen's own approximation (erf(3) is 1.6 ulps above the exact
        // value); ours are within an ulp of exact, so compare within 2.
        let x = f32s(&[9], &[-3., -1., -0.5, 0., 0.1, 0.5, 1., 3., 4.]);
        let erf = run1(&op("Erf", DType::F32), std::slice::from_ref(&x)).unwrap();
        let want = [-0.999978, -0.84270084, -0.5204999, 0.0, 0.112462915, 0.5204999, 0.84270084, 0.999978, 1.0];
        for (&got, want) in erf.as_slice::<f32>().unwrap().iter().zip(want) {
            assert!((got - want).abs() <= 2.0 * f32::EPSILON * want.abs().max(0.5), "erf: {got} vs {want}");
        }
        let x = f32s(&[9], &[-3., -1., -0.5, 0., 0.1, 0.5, 1., 3., 9.]);
        let erfc = run1(&op("Erfc", DType::F32), std::slice::from_ref(&x)).unwrap();
        let want = [1.999978, 1.8427007, 1.5205, 1.0, 0.88753706, 0.4795001, 0.15729922, 2.2090497e-5, 4.1370317e-37];
        for (&got, want) in erfc.as_slice::<f32>().unwrap().iter().zip(want) {
            assert!((got - want).abs() <= 2.0 * f32::EPSILON * want.abs(), "erfc: {got} vs {want}");
        }
        // float64: the correctly rounded values (mpmath), each within an ulp
        // of TensorFlow's (-0.9999779095030015, -0.5204998778130466,
        // 0.1124629160182849, 0.8427007929497148).
        let x = Tensor::from_slice::<f64>([4], &[-3., -0.5, 0.1, 1.]).unwrap();
        let erf = run1(&op("Erf", DType::F64), &[x]).unwrap();
        assert_eq!(
            erf.as_slice::<f64>().unwrap(),
            &[-0.9999779095030014, -0.5204998778130465, 0.1124629160182849, 0.8427007929497149]
        );
        assert!(run1(&op("Erfc", DType::I32), &[i32s(&[1], &[1])]).unwrap_err().message.contains("int32"));
    }

    /// GELU as TensorFlow 2.21 freezes `tf.nn.gelu(x, approximate=False)`:
    /// `0.5 · x · erfc(−x / √2)` out of Mul, Neg and Erfc.
    #[test]
    fn gelu_from_its_kernels_matches_tensorflow() {
        let x = f32s(&[7], &[-3., -1., -0.5, 0., 0.5, 1., 3.]);
        let k = |name: &str, inputs: &[Tensor]| run1(&op(name, DType::F32), inputs).unwrap();
        let half_x = k("Mul", &[Tensor::scalar(0.5f32), x.clone()]);
        let scaled = k("Mul", &[k("Neg", &[x]), Tensor::scalar(std::f32::consts::FRAC_1_SQRT_2)]);
        let gelu = k("Mul", &[half_x, k("Erfc", &[scaled])]);
        close(&gelu, &[-0.0040496956, -0.15865526, -0.15426877, 0.0, 0.34573123, 0.8413447, 2.9959502]);
    }

    #[test]
    fn rounding_and_signs() {
        let x = f32s(&[7], &[-2.5, -1.5, -0.4, 0.0, 0.5, 1.5, 2.7]);
        let got = run1(&op("Round", DType::F32), std::slice::from_ref(&x)).unwrap();
        close(&got, &[-2., -2., -0., 0., 0., 2., 3.]);
        let got = run1(&op("Floor", DType::F32), std::slice::from_ref(&x)).unwrap();
        close(&got, &[-3., -2., -1., 0., 0., 1., 2.]);
        let got = run1(&op("Ceil", DType::F32), std::slice::from_ref(&x)).unwrap();
        close(&got, &[-2., -1., -0., 0., 1., 2., 3.]);
        let got = run1(&op("Sign", DType::F32), &[x]).unwrap();
        close(&got, &[-1., -1., -1., 0., 1., 1., 1.]);
        let xi = i32s(&[3], &[-7, 0, 9]);
        let got = run1(&op("Abs", DType::I32), std::slice::from_ref(&xi)).unwrap();
        assert_eq!(got.as_slice::<i32>().unwrap(), &[7, 0, 9]);
        let got = run1(&op("Neg", DType::I32), std::slice::from_ref(&xi)).unwrap();
        assert_eq!(got.as_slice::<i32>().unwrap(), &[7, 0, -9]);
        let got = run1(&op("Round", DType::I32), &[xi]).unwrap();
        assert_eq!(got.as_slice::<i32>().unwrap(), &[-7, 0, 9]);
    }

    #[test]
    fn float_only_ops_reject_ints_at_build_time() {
        for name in ["Sqrt", "Exp", "Log", "Tanh", "Sigmoid", "Floor", "RealDiv", "IsNan"] {
            let err = run1(&op(name, DType::I32), &[i32s(&[1], &[4]), i32s(&[1], &[4])]).unwrap_err();
            assert_eq!(err.code, Code::InvalidArgument, "{name}");
            assert!(err.message.contains("int32"), "{name}: {err}");
            assert!(err.message.contains(name), "{name}: {err}");
        }
        let err = run1(&op("Add", DType::Bool), &[]).unwrap_err();
        assert!(err.message.contains("bool"), "{err}");
    }

    #[test]
    fn predicates() {
        let x = f32s(&[4], &[1.0, f32::NAN, f32::INFINITY, -f32::INFINITY]);
        let nan = run1(&op("IsNan", DType::F32), std::slice::from_ref(&x)).unwrap();
        assert_eq!(nan.as_slice::<bool>().unwrap(), &[false, true, false, false]);
        let fin = run1(&op("IsFinite", DType::F32), std::slice::from_ref(&x)).unwrap();
        assert_eq!(fin.as_slice::<bool>().unwrap(), &[true, false, false, false]);
        let inf = run1(&op("IsInf", DType::F32), &[x]).unwrap();
        assert_eq!(inf.as_slice::<bool>().unwrap(), &[false, false, true, true]);
    }

    #[test]
    fn arithmetic_with_broadcasting() {
        let a = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = f32s(&[3], &[10., 20., 30.]);
        let sum = run1(&op("AddV2", DType::F32), &[a.clone(), b.clone()]).unwrap();
        assert_eq!(sum.dims(), &[2, 3]);
        close(&sum, &[11., 22., 33., 14., 25., 36.]);
        let diff = run1(&op("Sub", DType::F32), &[b.clone(), a.clone()]).unwrap();
        close(&diff, &[9., 18., 27., 6., 15., 24.]);
        let q = run1(&op("RealDiv", DType::F32), &[a.clone(), b.clone()]).unwrap();
        close(&q, &[0.1, 0.1, 0.1, 0.4, 0.25, 0.2]);
        let sq = run1(&op("SquaredDifference", DType::F32), &[a.clone(), b]).unwrap();
        close(&sq, &[81., 324., 729., 36., 225., 576.]);
        let p = run1(&op("Pow", DType::F32), &[a, Tensor::scalar(2.0f32)]).unwrap();
        close(&p, &[1., 4., 9., 16., 25., 36.]);
        let err = run1(&op("Mul", DType::F32), &[f32s(&[2, 3], &[0.; 6]), f32s(&[4], &[0.; 4])]).unwrap_err();
        assert_eq!(err.message, "Incompatible shapes: [2,3] vs. [4]");
    }

    #[test]
    fn integer_division_follows_tf() {
        let a = i32s(&[4], &[7, -7, 7, -7]);
        let b = i32s(&[4], &[2, 2, -2, -2]);
        let div = run1(&op("Div", DType::I32), &[a.clone(), b.clone()]).unwrap();
        assert_eq!(div.as_slice::<i32>().unwrap(), &[3, -3, -3, 3]);
        let fdiv = run1(&op("FloorDiv", DType::I32), &[a.clone(), b.clone()]).unwrap();
        assert_eq!(fdiv.as_slice::<i32>().unwrap(), &[3, -4, -4, 3]);
        let fmod = run1(&op("FloorMod", DType::I32), &[a.clone(), b.clone()]).unwrap();
        assert_eq!(fmod.as_slice::<i32>().unwrap(), &[1, 1, -1, -1]);
        let tmod = run1(&op("Mod", DType::I32), &[a.clone(), b.clone()]).unwrap();
        assert_eq!(tmod.as_slice::<i32>().unwrap(), &[1, -1, 1, -1]);
        for name in ["Div", "FloorDiv", "FloorMod", "Mod", "TruncateDiv"] {
            let err = run1(&op(name, DType::I32), &[a.clone(), i32s(&[4], &[1, 0, 1, 1])]).unwrap_err();
            assert_eq!(err.code, Code::InvalidArgument);
            assert_eq!(err.message, "Integer division by zero", "{name}");
        }
        // Float division by zero is IEEE, not an error.
        let q = run1(&op("Div", DType::F32), &[f32s(&[2], &[1., -1.]), Tensor::scalar(0.0f32)]).unwrap();
        assert_eq!(q.as_slice::<f32>().unwrap(), &[f32::INFINITY, f32::NEG_INFINITY]);
        let q = run1(&op("DivNoNan", DType::F32), &[f32s(&[2], &[1., 6.]), f32s(&[2], &[0., 3.])]).unwrap();
        assert_eq!(q.as_slice::<f32>().unwrap(), &[0., 2.]);
        let p = run1(&op("Pow", DType::I32), &[i32s(&[2], &[3, -2]), i32s(&[2], &[3, 5])]).unwrap();
        assert_eq!(p.as_slice::<i32>().unwrap(), &[27, -32]);
        let err = run1(&op("Pow", DType::I64), &[Tensor::scalar(2i64), Tensor::scalar(-1i64)]).unwrap_err();
        assert!(err.message.contains("negative integer powers"), "{err}");
    }

    #[test]
    fn maximum_minimum_propagate_nan() {
        let a = f32s(&[3], &[1., f32::NAN, 5.]);
        let b = f32s(&[3], &[2., 0., f32::NAN]);
        let mx = run1(&op("Maximum", DType::F32), &[a.clone(), b.clone()]).unwrap();
        close(&mx, &[2., f32::NAN, f32::NAN]);
        let mn = run1(&op("Minimum", DType::F32), &[a, b]).unwrap();
        close(&mn, &[1., f32::NAN, f32::NAN]);
    }

    #[test]
    fn comparisons_and_logic() {
        let a = f32s(&[2, 2], &[1., 2., 3., 4.]);
        let b = f32s(&[2], &[2., 2.]);
        let check = |name: &str, want: &[bool]| {
            let out = run1(&op(name, DType::F32), &[a.clone(), b.clone()]).unwrap();
            assert_eq!(out.dtype(), DType::Bool);
            assert_eq!(out.dims(), &[2, 2]);
            assert_eq!(out.as_slice::<bool>().unwrap(), want, "{name}");
        };
        check("Less", &[true, false, false, false]);
        check("LessEqual", &[true, true, false, false]);
        check("Greater", &[false, false, true, true]);
        check("GreaterEqual", &[false, true, true, true]);
        check("Equal", &[false, true, false, false]);
        check("NotEqual", &[true, false, true, true]);
        let nan = f32s(&[1], &[f32::NAN]);
        let eq = run1(&op("Equal", DType::F32), &[nan.clone(), nan.clone()]).unwrap();
        assert_eq!(eq.as_slice::<bool>().unwrap(), &[false]);
        let bools = Tensor::from_slice::<bool>([4], &[true, true, false, false]).unwrap();
        let other = Tensor::from_slice::<bool>([4], &[true, false, true, false]).unwrap();
        let and = run1(&node("LogicalAnd"), &[bools.clone(), other.clone()]).unwrap();
        assert_eq!(and.as_slice::<bool>().unwrap(), &[true, false, false, false]);
        let or = run1(&node("LogicalOr"), &[bools.clone(), other.clone()]).unwrap();
        assert_eq!(or.as_slice::<bool>().unwrap(), &[true, true, true, false]);
        let not = run1(&node("LogicalNot"), std::slice::from_ref(&bools)).unwrap();
        assert_eq!(not.as_slice::<bool>().unwrap(), &[false, false, true, true]);
        let eq = run1(&op("Equal", DType::Bool), &[bools, other]).unwrap();
        assert_eq!(eq.as_slice::<bool>().unwrap(), &[true, false, false, true]);
        // Incompatible shapes: an error by default, a scalar answer if asked.
        let (x, y) = (f32s(&[2], &[1., 2.]), f32s(&[3], &[1., 2., 3.]));
        assert!(run1(&op("Equal", DType::F32), &[x.clone(), y.clone()]).is_err());
        let lenient = |name: &str| op(name, DType::F32).attr("incompatible_shape_error", AttrValue::Bool(false));
        let eq = run1(&lenient("Equal"), &[x.clone(), y.clone()]).unwrap();
        assert!(eq.shape().is_scalar() && !eq.scalar_value::<bool>().unwrap());
        let ne = run1(&lenient("NotEqual"), &[x, y]).unwrap();
        assert!(ne.scalar_value::<bool>().unwrap());
        // Strings compare byte for byte, broadcast (a token against "").
        let words = Tensor::from_strings([2, 2], &["a", "", "b", "a"]).unwrap();
        let eq = run1(&op("Equal", DType::String), &[words.clone(), Tensor::string_scalar("a")]).unwrap();
        assert_eq!(eq.as_slice::<bool>().unwrap(), &[true, false, false, true]);
        let row = Tensor::from_strings([2], &["a", ""]).unwrap();
        let ne = run1(&op("NotEqual", DType::String), &[words, row]).unwrap();
        assert_eq!(ne.as_slice::<bool>().unwrap(), &[false, false, true, true]);
    }

    #[test]
    fn add_n_sums_in_place_and_checks_shapes() {
        let n = op("AddN", DType::F32).attr("N", AttrValue::Int(3));
        let a = f32s(&[20], &[1.; 20]);
        let ptr = a.data_ptr();
        let out = run1(&n, &[a, f32s(&[20], &[2.; 20]), f32s(&[20], &[3.; 20])]);
        // run1 keeps its own clones of the inputs, so input 0 is shared there
        // and the result is a copy; the sum is what matters.
        let out = out.unwrap();
        assert_ne!(out.data_ptr(), ptr);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[6.; 20]);
        let n2 = op("AddN", DType::I64).attr("N", AttrValue::Int(2));
        let err = run1(&n2, &[Tensor::from_slice::<i64>([2], &[1, 2]).unwrap(), Tensor::scalar(1i64)]).unwrap_err();
        assert!(err.message.contains("input 1 has shape []"), "{err}");
        let sig = (crate::ops::lookup("AddN").unwrap().signature)(&n).unwrap();
        assert_eq!(sig.inputs.len(), 3);
        assert!((crate::ops::lookup("AddN").unwrap().signature)(&op("AddN", DType::F32)).is_err(), "N is required");
    }

    #[test]
    fn add_n_blocks_across_a_pool_sum_in_input_order() {
        let pool = crate::executor::ThreadPool::new(crate::executor::PoolOptions { threads: 4, ..Default::default() })
            .unwrap();
        // Long enough to be split, not a multiple of the block; values whose
        // sums round differently in another order.
        let len = 3 * ADD_N_BLOCK * 9 + 123;
        let inputs: Vec<Vec<f32>> = (0..6)
            .map(|s| (0..len).map(|i| ((i * 31 + s * 17) % 97) as f32 * 0.013 + s as f32 * 1e3).collect())
            .collect();
        let mut want = inputs[0].clone();
        for x in &inputs[1..] {
            for (o, v) in want.iter_mut().zip(x) {
                *o += v;
            }
        }
        let rest: Vec<&[f32]> = inputs[1..].iter().map(Vec::as_slice).collect();
        let mut got = inputs[0].clone();
        add_n_into(Some(&pool as &dyn IntraOpPool), &mut got, &rest);
        assert_eq!(got, want);
        let mut alone = inputs[0].clone();
        add_n_into(None, &mut alone, &rest);
        assert_eq!(alone, want);
    }

    #[test]
    fn select_forms() {
        let t = f32s(&[2, 2], &[1., 2., 3., 4.]);
        let e = f32s(&[2, 2], &[-1., -2., -3., -4.]);
        let sel = op("Select", DType::F32);
        let out = run1(&sel, &[Tensor::scalar(false), t.clone(), e.clone()]).unwrap();
        assert!(out.shares_bytes_with(&e));
        let rows = Tensor::from_slice::<bool>([2], &[false, true]).unwrap();
        let out = run1(&sel, &[rows, t.clone(), e.clone()]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[-1., -2., 3., 4.]);
        let each = Tensor::from_slice::<bool>([2, 2], &[true, false, false, true]).unwrap();
        let out = run1(&sel, &[each, t.clone(), e.clone()]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1., -2., -3., 4.]);
        let bad = Tensor::from_slice::<bool>([3], &[true, false, true]).unwrap();
        assert!(run1(&sel, &[bad, t.clone(), e.clone()]).is_err());
        // SelectV2 broadcasts all three.
        let cond = Tensor::from_slice::<bool>([2, 1], &[true, false]).unwrap();
        let out =
            run1(&op("SelectV2", DType::F32), &[cond, f32s(&[1, 3], &[1., 2., 3.]), Tensor::scalar(0.0f32)]).unwrap();
        assert_eq!(out.dims(), &[2, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 2., 3., 0., 0., 0.]);
    }

    #[test]
    fn clip_by_value_takes_scalar_or_elementwise_bounds() {
        let x = Tensor::from_slice::<f32>([5], &[-2.0, 0.5, 3.0, f32::NAN, 1.0]).unwrap();
        let clip = crate::ops::testing::node("ClipByValue").attr("T", crate::ops::testing::ty(DType::F32));
        let run = |lo: Tensor, hi: Tensor| crate::ops::testing::run1(&clip, &[x.clone(), lo, hi]);
        let out = run(Tensor::scalar(0f32), Tensor::scalar(1f32)).unwrap();
        let v = out.as_slice::<f32>().unwrap();
        assert_eq!(&v[..3], &[0.0, 0.5, 1.0]);
        assert!(v[3].is_nan());
        let lo = Tensor::from_slice::<f32>([5], &[-3.0, 1.0, 0.0, 0.0, 2.0]).unwrap();
        let out = run(lo, Tensor::scalar(1.5f32)).unwrap();
        // The last bound pair is min 2 > max 1.5: min wins, as in TensorFlow.
        assert_eq!(out.as_slice::<f32>().unwrap()[..3], [-2.0, 1.0, 1.5]);
        assert_eq!(out.as_slice::<f32>().unwrap()[4], 2.0);
        let err = run(Tensor::from_slice::<f32>([2], &[0.0, 1.0]).unwrap(), Tensor::scalar(1f32)).unwrap_err();
        assert!(err.message.contains("clip_value_min must be either a scalar"), "{}", err.message);
    }
}
