//! Scalar arithmetic the kernels are generic over, with TensorFlow's
//! semantics for each element type.
//!
//! Owns: [`Num`] (what every real element type can do: wrapping integer
//! arithmetic, TF's division and modulo flavours, NaN-propagating min/max),
//! [`Float`] (transcendental functions of f32/f64) and [`CastTo`] (TF's
//! `Cast` between every pair of dtypes). Must not know tensors or shapes:
//! kernels map these over slices.
//!
//! Integer arithmetic wraps, as TensorFlow's (Eigen's) does in practice, so
//! no user value can make a kernel panic, even in debug builds. Checks that
//! TensorFlow reports as errors (integer division by zero, negative integer
//! powers) are done by the kernels on the whole operand before computing.

use crate::tensor::Element;

/// A real element type: f32, f64, i32 or i64.
pub trait Num: Element + PartialOrd {
    const ZERO: Self;
    const ONE: Self;
    /// The identity of Max: −∞ for floats, the minimum for integers.
    const BOTTOM: Self;
    /// The identity of Min: +∞ for floats, the maximum for integers.
    const TOP: Self;
    const IS_FLOAT: bool;

    /// The type sums are accumulated in: f64 for f32 (so a float32 Sum or
    /// Mean is at least as accurate as TensorFlow's tree reduction), the
    /// type itself otherwise (integer sums wrap as TensorFlow's do).
    type Acc: Num;
    fn widen(self) -> Self::Acc;
    fn narrow(acc: Self::Acc) -> Self;

    fn add(self, rhs: Self) -> Self;
    fn sub(self, rhs: Self) -> Self;
    fn mul(self, rhs: Self) -> Self;
    /// IEEE division for floats; truncating division for integers (the
    /// caller has ruled out a zero divisor).
    fn div(self, rhs: Self) -> Self;
    /// Division rounding toward −∞ (`FloorDiv`).
    fn floor_div(self, rhs: Self) -> Self;
    /// Remainder with the sign of the divisor (`FloorMod`).
    fn floor_mod(self, rhs: Self) -> Self;
    /// Remainder with the sign of the dividend (`Mod`, `TruncateMod`).
    fn trunc_mod(self, rhs: Self) -> Self;
    /// `self` to the power `rhs`; for integers `rhs` is non-negative.
    fn pow(self, rhs: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    /// −1, 0 or 1; NaN stays NaN and −0.0 gives 0.0, as Eigen's sign does.
    fn sign(self) -> Self;
    fn is_nan(self) -> bool;
    /// The larger of two values, NaN if either is NaN (TF's `Maximum` and
    /// `Max` propagate NaN).
    fn max_nan(self, rhs: Self) -> Self;
    fn min_nan(self, rhs: Self) -> Self;
    /// A count as this type (the divisor of Mean).
    fn from_usize(n: usize) -> Self;
}

/// A floating-point element type: f32 or f64.
pub trait Float: Num {
    const NAN: Self;
    const INFINITY: Self;
    const EPSILON: Self;
    fn from_f64(x: f64) -> Self;
    fn exp(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn sqrt(self) -> Self;
    fn tanh(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn tan(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn asinh(self) -> Self;
    fn acosh(self) -> Self;
    fn atanh(self) -> Self;
    /// The angle of the point (`rhs`, `self`): `self` is y.
    fn atan2(self, rhs: Self) -> Self;
    /// The next representable value after `self` toward `toward` (C's
    /// `nextafter`).
    fn next_after(self, toward: Self) -> Self;
    fn is_finite(self) -> bool;
    fn is_infinite(self) -> bool;
}

macro_rules! impl_float {
    ($t:ty, $acc:ty) => {
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const BOTTOM: Self = <$t>::NEG_INFINITY;
            const TOP: Self = <$t>::INFINITY;
            const IS_FLOAT: bool = true;
            type Acc = $acc;
            #[inline(always)]
            fn widen(self) -> $acc {
                self as $acc
            }
            #[inline(always)]
            fn narrow(acc: $acc) -> Self {
                acc as $t
            }
            #[inline(always)]
            fn add(self, rhs: Self) -> Self {
                self + rhs
            }
            #[inline(always)]
            fn sub(self, rhs: Self) -> Self {
                self - rhs
            }
            #[inline(always)]
            fn mul(self, rhs: Self) -> Self {
                self * rhs
            }
            #[inline(always)]
            fn div(self, rhs: Self) -> Self {
                self / rhs
            }
            #[inline(always)]
            fn floor_div(self, rhs: Self) -> Self {
                (self / rhs).floor()
            }
            #[inline(always)]
            fn floor_mod(self, rhs: Self) -> Self {
                // Rust's `%` on floats is C's fmod; TF then moves the result
                // to the divisor's sign.
                let m = self % rhs;
                if m != 0.0 && ((rhs < 0.0) != (m < 0.0)) { m + rhs } else { m }
            }
            #[inline(always)]
            fn trunc_mod(self, rhs: Self) -> Self {
                self % rhs
            }
            #[inline(always)]
            fn pow(self, rhs: Self) -> Self {
                self.powf(rhs)
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn sign(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else if self.is_nan() {
                    self
                } else {
                    0.0
                }
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn max_nan(self, rhs: Self) -> Self {
                if self.is_nan() || rhs.is_nan() {
                    <$t>::NAN
                } else if rhs > self {
                    rhs
                } else {
                    self
                }
            }
            #[inline(always)]
            fn min_nan(self, rhs: Self) -> Self {
                if self.is_nan() || rhs.is_nan() {
                    <$t>::NAN
                } else if rhs < self {
                    rhs
                } else {
                    self
                }
            }
            fn from_usize(n: usize) -> Self {
                n as $t
            }
        }

        impl Float for $t {
            const NAN: Self = <$t>::NAN;
            const INFINITY: Self = <$t>::INFINITY;
            const EPSILON: Self = <$t>::EPSILON;
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            #[inline(always)]
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            #[inline(always)]
            fn asin(self) -> Self {
                <$t>::asin(self)
            }
            #[inline(always)]
            fn acos(self) -> Self {
                <$t>::acos(self)
            }
            #[inline(always)]
            fn atan(self) -> Self {
                <$t>::atan(self)
            }
            #[inline(always)]
            fn sinh(self) -> Self {
                <$t>::sinh(self)
            }
            #[inline(always)]
            fn cosh(self) -> Self {
                <$t>::cosh(self)
            }
            #[inline(always)]
            fn asinh(self) -> Self {
                <$t>::asinh(self)
            }
            #[inline(always)]
            fn acosh(self) -> Self {
                <$t>::acosh(self)
            }
            #[inline(always)]
            fn atanh(self) -> Self {
                <$t>::atanh(self)
            }
            #[inline(always)]
            fn atan2(self, rhs: Self) -> Self {
                <$t>::atan2(self, rhs)
            }
            fn next_after(self, toward: Self) -> Self {
                if self.is_nan() || toward.is_nan() {
                    return <$t>::NAN;
                }
                if self == toward {
                    return toward;
                }
                if self == 0.0 {
                    // The smallest subnormal, on toward's side.
                    return <$t>::from_bits(1).copysign(toward);
                }
                let bits = self.to_bits();
                // Away from zero is one more in the magnitude's bits.
                let away = (toward > self) == (self > 0.0);
                <$t>::from_bits(if away { bits + 1 } else { bits - 1 })
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            #[inline(always)]
            fn is_infinite(self) -> bool {
                <$t>::is_infinite(self)
            }
        }
    };
}

impl_float!(f32, f64);
impl_float!(f64, f64);

macro_rules! impl_int {
    ($t:ty) => {
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const BOTTOM: Self = <$t>::MIN;
            const TOP: Self = <$t>::MAX;
            const IS_FLOAT: bool = false;
            type Acc = $t;
            #[inline(always)]
            fn widen(self) -> $t {
                self
            }
            #[inline(always)]
            fn narrow(acc: $t) -> Self {
                acc
            }
            #[inline(always)]
            fn add(self, rhs: Self) -> Self {
                self.wrapping_add(rhs)
            }
            #[inline(always)]
            fn sub(self, rhs: Self) -> Self {
                self.wrapping_sub(rhs)
            }
            #[inline(always)]
            fn mul(self, rhs: Self) -> Self {
                self.wrapping_mul(rhs)
            }
            #[inline(always)]
            fn div(self, rhs: Self) -> Self {
                // Zero divisors are rejected before the loop; this guard only
                // keeps a missed check from becoming a panic.
                if rhs == 0 { 0 } else { self.wrapping_div(rhs) }
            }
            #[inline(always)]
            fn floor_div(self, rhs: Self) -> Self {
                if rhs == 0 {
                    return 0;
                }
                let q = self.wrapping_div(rhs);
                if self.wrapping_rem(rhs) != 0 && ((self < 0) != (rhs < 0)) { q.wrapping_sub(1) } else { q }
            }
            #[inline(always)]
            fn floor_mod(self, rhs: Self) -> Self {
                if rhs == 0 {
                    return 0;
                }
                let m = self.wrapping_rem(rhs);
                if m != 0 && ((rhs < 0) != (m < 0)) { m.wrapping_add(rhs) } else { m }
            }
            #[inline(always)]
            fn trunc_mod(self, rhs: Self) -> Self {
                if rhs == 0 { 0 } else { self.wrapping_rem(rhs) }
            }
            #[inline(always)]
            fn pow(self, rhs: Self) -> Self {
                // Eigen's integer pow: square-and-multiply, wrapping.
                // Negative exponents are rejected before the loop.
                let mut base = self;
                let mut exp = if rhs < 0 { 0 } else { rhs as u64 };
                let mut acc: $t = 1;
                while exp > 0 {
                    if exp & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    exp >>= 1;
                    base = base.wrapping_mul(base);
                }
                acc
            }
            #[inline(always)]
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline(always)]
            fn abs(self) -> Self {
                self.wrapping_abs()
            }
            #[inline(always)]
            fn sign(self) -> Self {
                self.signum()
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                false
            }
            #[inline(always)]
            fn max_nan(self, rhs: Self) -> Self {
                if rhs > self { rhs } else { self }
            }
            #[inline(always)]
            fn min_nan(self, rhs: Self) -> Self {
                if rhs < self { rhs } else { self }
            }
            fn from_usize(n: usize) -> Self {
                n as $t
            }
        }
    };
}

impl_int!(i32);
impl_int!(i64);

/// TensorFlow's `Round`: half to even, computed as Eigen does
/// (`floor(x + 0.5)`, corrected at exact halves), which differs from
/// `round_ties_even` for odd integers beyond 2^23 in float32, where
/// `x + 0.5` itself rounds up.
pub fn round_half_to_even<T: Float>(x: T) -> T {
    let half = T::from_f64(0.5);
    let round_val = x.add(half).floor();
    let fraction = round_val.sub(x);
    if fraction == half { T::from_f64(2.0).mul(half.mul(x).add(half).floor()) } else { round_val }
}

/// Conversion with TensorFlow's `Cast` semantics.
///
/// Float to integer truncates toward zero; NaN and out-of-range values give
/// the integer minimum, which is what the x86 conversion instructions behind
/// TensorFlow's `static_cast` produce. Anything to bool is `!= 0` (so NaN is
/// true); bool to a number is 0 or 1.
pub trait CastTo<U> {
    fn cast_to(self) -> U;
}

macro_rules! cast_as {
    ($($from:ty => $($to:ty),+);+ $(;)?) => {
        $($(
            impl CastTo<$to> for $from {
                #[inline(always)]
                fn cast_to(self) -> $to {
                    self as $to
                }
            }
        )+)+
    };
}

// Lossless or rounding-to-nearest conversions, and integer narrowing
// (which wraps, as static_cast does).
cast_as! {
    f32 => f32, f64;
    f64 => f32, f64;
    i32 => f32, f64, i32, i64, u8, u64;
    i64 => f32, f64, i32, i64, u8, u64;
    u8 => f32, f64, i32, i64, u8, u64;
    u64 => f32, f64, i32, i64, u8, u64;
}

macro_rules! cast_float_to_int {
    ($from:ty => $to:ty) => {
        impl CastTo<$to> for $from {
            #[inline(always)]
            fn cast_to(self) -> $to {
                // The integer range as floats: [MIN, MAX + 1). MIN is a power
                // of two, so both bounds are exact in either float type.
                const LOW: $from = <$to>::MIN as $from;
                const HIGH: $from = -(<$to>::MIN as $from);
                if (LOW..HIGH).contains(&self) { self as $to } else { <$to>::MIN }
            }
        }
    };
}

cast_float_to_int!(f32 => i32);
cast_float_to_int!(f32 => i64);
cast_float_to_int!(f64 => i32);
cast_float_to_int!(f64 => i64);

/// Float to uint8 as TensorFlow's vectorised x86 cast converts: truncated
/// to int32 (out of range and NaN giving int32's minimum), then saturated
/// to [0, 255]: -1.5 gives 0, 300.0 gives 255, 1e10, ±inf and NaN give 0.
/// (TensorFlow converts the last `len % 32` elements of a tensor one at a
/// time, wrapping instead of saturating; out-of-range values are undefined
/// in C++, and ringflow saturates everywhere.)
macro_rules! cast_float_to_u8 {
    ($from:ty) => {
        impl CastTo<u8> for $from {
            #[inline(always)]
            fn cast_to(self) -> u8 {
                CastTo::<i32>::cast_to(self).clamp(0, 255) as u8
            }
        }
    };
}

/// Float to uint64 as TensorFlow converts (one element at a time): through
/// int64 (out of range and NaN giving its minimum), then wrapped: -1.5
/// gives 2^64 - 1, NaN and ±inf 2^63.
macro_rules! cast_float_to_u64 {
    ($from:ty) => {
        impl CastTo<u64> for $from {
            #[inline(always)]
            fn cast_to(self) -> u64 {
                CastTo::<i64>::cast_to(self) as u64
            }
        }
    };
}

cast_float_to_u8!(f32);
cast_float_to_u8!(f64);
cast_float_to_u64!(f32);
cast_float_to_u64!(f64);

macro_rules! cast_bool {
    ($($t:ty: $zero:expr, $one:expr);+) => {
        $(
            impl CastTo<bool> for $t {
                #[inline(always)]
                fn cast_to(self) -> bool {
                    self != $zero
                }
            }
            impl CastTo<$t> for bool {
                #[inline(always)]
                fn cast_to(self) -> $t {
                    if self { $one } else { $zero }
                }
            }
        )+
    };
}

cast_bool!(f32: 0.0, 1.0; f64: 0.0, 1.0; i32: 0, 1; i64: 0, 1; u8: 0, 1; u64: 0, 1);

impl CastTo<bool> for bool {
    #[inline(always)]
    fn cast_to(self) -> bool {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_casts_wrap_as_tensorflow_s_do() {
        // TensorFlow 2.21: tf.cast of these floats to uint8 (in a tensor of
        // 32 or more, where it saturates) and to uint64.
        let floats = [-1.5f32, -0.5, 0.7, 255.9, 256.0, 300.0, 1e10, f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
        let bytes: Vec<u8> = floats.iter().map(|&f| f.cast_to()).collect();
        assert_eq!(bytes, [0, 0, 0, 255, 255, 255, 0, 0, 0, 0]);
        let wide: Vec<u64> = floats.iter().map(|&f| f.cast_to()).collect();
        assert_eq!(wide, [u64::MAX, 0, 0, 255, 256, 300, 10_000_000_000, 1 << 63, 1 << 63, 1 << 63]);
        assert_eq!([-1i32, 256, 70000].map(CastTo::<u8>::cast_to), [255, 0, 112]);
        assert_eq!(CastTo::<u64>::cast_to(-1i64), u64::MAX);
        assert_eq!(CastTo::<i64>::cast_to(u64::MAX), -1);
        assert_eq!(CastTo::<f32>::cast_to(u64::MAX), 1.8446744e19);
        assert_eq!([0u8, 3].map(CastTo::<bool>::cast_to), [false, true]);
    }

    #[test]
    fn integer_division_flavours_follow_tf() {
        // Python: 7 // -2 == -4, 7 % -2 == -1; C: 7 / -2 == -3, 7 % -2 == 1.
        assert_eq!(7i32.div(-2), -3);
        assert_eq!(7i32.floor_div(-2), -4);
        assert_eq!((-7i32).floor_div(2), -4);
        assert_eq!((-6i32).floor_div(2), -3);
        assert_eq!(7i32.floor_mod(-2), -1);
        assert_eq!((-7i64).floor_mod(2), 1);
        assert_eq!(7i32.trunc_mod(-2), 1);
        assert_eq!((-7i32).trunc_mod(2), -1);
        assert_eq!(i32::MIN.div(-1), i32::MIN, "wraps, never panics");
        assert_eq!(i32::MIN.floor_div(-1), i32::MIN);
        assert_eq!(i32::MIN.floor_mod(-1), 0);
    }

    #[test]
    fn float_division_flavours_follow_tf() {
        assert_eq!(7.0f32.floor_div(-2.0), -4.0);
        assert_eq!(7.5f64.floor_mod(-2.0), -0.5);
        assert_eq!((-7.5f64).floor_mod(2.0), 0.5);
        assert_eq!((-7.5f32).trunc_mod(2.0), -1.5);
        assert!(1.0f32.floor_mod(0.0).is_nan());
    }

    #[test]
    fn integer_pow_wraps_and_squares() {
        assert_eq!(Num::pow(3i32, 4), 81);
        assert_eq!(Num::pow(-2i64, 3), -8);
        assert_eq!(Num::pow(5i32, 0), 1);
        assert_eq!(Num::pow(2i32, 31), i32::MIN);
        assert_eq!(Num::pow(2i32, 32), 0);
    }

    #[test]
    fn sign_and_nan_propagation() {
        assert_eq!((-0.0f32).sign().to_bits(), 0.0f32.to_bits());
        assert!(f32::NAN.sign().is_nan());
        assert_eq!(Num::sign(-3.5f64), -1.0);
        assert_eq!((-3i32).sign(), -1);
        assert!(1.0f32.max_nan(f32::NAN).is_nan());
        assert!(f64::NAN.min_nan(1.0).is_nan());
        assert_eq!(2i32.max_nan(5), 5);
        assert_eq!(Num::abs(i32::MIN), i32::MIN);
    }

    #[test]
    fn rounding_matches_eigen_formula() {
        let cases = [
            (0.5f32, 0.0f32),
            (1.5, 2.0),
            (2.5, 2.0),
            (-0.5, -0.0),
            (-1.5, -2.0),
            (-2.5, -2.0),
            (2.4, 2.0),
            (-2.6, -3.0),
            (0.49999997, 0.0),
            // x + 0.5 rounds to the even 8388610 in float32, and Eigen keeps
            // that.
            (8388609.0, 8388610.0),
        ];
        for (x, want) in cases {
            assert_eq!(round_half_to_even(x), want, "round({x})");
        }
    }

    #[test]
    fn casts_follow_static_cast() {
        assert_eq!(CastTo::<i32>::cast_to(-1.9f32), -1);
        assert_eq!(CastTo::<i32>::cast_to(2.9f64), 2);
        assert_eq!(CastTo::<i32>::cast_to(f32::NAN), i32::MIN);
        assert_eq!(CastTo::<i32>::cast_to(3e9f64), i32::MIN);
        assert_eq!(CastTo::<i32>::cast_to(-2147483648.0f64), i32::MIN);
        assert_eq!(CastTo::<i32>::cast_to(2147483647.0f64), i32::MAX);
        assert_eq!(CastTo::<i64>::cast_to(1e19f32), i64::MIN);
        assert_eq!(CastTo::<i64>::cast_to(-1e10f32), -10_000_000_000);
        assert_eq!(CastTo::<i32>::cast_to(4_294_967_297i64), 1, "narrowing wraps");
        assert!(CastTo::<bool>::cast_to(f32::NAN));
        assert!(!CastTo::<bool>::cast_to(-0.0f64));
        assert!(CastTo::<bool>::cast_to(-3i64));
        assert_eq!(CastTo::<f32>::cast_to(true), 1.0);
        assert_eq!(CastTo::<i64>::cast_to(false), 0);
        assert_eq!(CastTo::<f32>::cast_to(16_777_217i32), 16_777_216.0);
    }
}
