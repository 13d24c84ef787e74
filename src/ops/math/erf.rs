//! The error function and its complement, for the `Erf` and `Erfc` kernels
//! (GELU is `0.5 · x · (1 + erf(x / √2))`): Rust's std has neither.
//!
//! Owns: [`erf_f64`], [`erfc_f64`] (within 2 ulps of the correctly rounded
//! value, 96 % of inputs exact) and [`erf_f32`], [`erfc_f32`] (branch-free so
//! a tensor loop vectorises, computed in f64 and rounded once: within 1 ulp).
//! Must not be used where libm's exact bits are expected.
//!
//! The method is W. J. Cody's (Math. Comp. 23, 1969): three ranges of |x|,
//! - below 0.46875, erf by its Taylor series (12 terms reach 1e-18), and
//!   erfc as 1 − erf;
//! - up to 4, erfc(y) = e^(−y²) · N(y) / D(y), Cody's degree-8 rational;
//! - beyond, erfc(y) = e^(−y²) / y · (1/√π − R(1/y²)), a degree-5 rational
//!   for the asymptotic series; erfc underflows past 27.3 (f64).
//!
//! What makes f64 accurate is evaluation, not the approximations (whose
//! error is ~3e-17): `e^(−y²)` is `e^(−h²) · e^(−(y−h)(y+h))` with `h` the
//! top 26 bits of `y`, so `h²` is exact and the second factor is within a
//! few 1e-5 of 1; the rational runs as a compensated Horner scheme in
//! double-double, divided in double-double; and 2/√π · x is an exact
//! (Dekker) product. The f32 versions need none of that: an f32 squared is
//! exact in f64, and plain f64 evaluation errs by ~6e-16, far below an f32
//! ulp.

use crate::ops::fast_math::exp_for_f32;

/// Below this |x|, erf is a Taylor series; above, erfc comes first.
const SERIES_END: f64 = 0.468_75;
/// Where the asymptotic form takes over from the middle rational.
const MIDDLE_END: f64 = 4.0;
/// erfc(y) rounds to 0.0 in f64 from here on (erfc(27.2) = 1e-323).
const F64_UNDERFLOW: f64 = 27.3;
/// erfc(y) rounds to 0.0 in f32 from here on (erfc(10.5) = 7e-50).
const F32_UNDERFLOW: f64 = 10.5;

/// 2/√π as the f64 nearest and the rest.
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;
const TWO_OVER_SQRT_PI_LO: f64 = 1.533_545_961_316_588e-17;
/// 1/√π likewise (halving is exact).
const ONE_OVER_SQRT_PI: f64 = TWO_OVER_SQRT_PI / 2.0;
const ONE_OVER_SQRT_PI_LO: f64 = TWO_OVER_SQRT_PI_LO / 2.0;

/// Taylor coefficients of `(erf(x)/x − 2/√π) / x²` in powers of `x²`,
/// highest first: `(2/√π) (−1)^n / (n! (2n + 1))` for n = 12 down to 1.
const SERIES: [f64; 12] = [
    9.422_759_064_650_411e-11,
    -1.229_055_530_171_792_8e-9,
    1.480_719_281_587_921_8e-8,
    -1.636_584_469_123_492_4e-7,
    1.646_211_436_588_924_8e-6,
    -1.492_565_035_840_625e-5,
    0.000_120_553_329_817_896_64,
    -0.000_854_832_702_345_085_3,
    0.005_223_977_625_442_188,
    -0.026_866_170_645_131_252,
    0.112_837_916_709_551_26,
    -0.376_126_389_031_837_54,
];

/// Cody's rational for `erfc(y) · e^(y²)` on [0.46875, 4]: numerator and
/// denominator coefficients, highest power first.
const MIDDLE_NUM: [f64; 9] = [
    2.1531153547440383e-8,
    0.5641884969886701,
    8.883149794388377,
    66.11919063714163,
    298.6351381974001,
    881.952221241769,
    1712.0476126340707,
    2051.0783778260716,
    1230.3393547979972,
];
const MIDDLE_DEN: [f64; 9] = [
    1.0,
    15.744926110709835,
    117.6939508913125,
    537.1811018620099,
    1621.3895745666903,
    3290.7992357334597,
    4362.619090143247,
    3439.3676741437216,
    1230.3393548037495,
];

/// Cody's rational `R(z)` in `z = 1/y²` for the asymptotic range:
/// `erfc(y) = e^(−y²) / y · (1/√π − z · R(z))`, highest power first.
const TAIL_NUM: [f64; 6] = [
    0.016315387137302097,
    0.30532663496123236,
    0.36034489994980445,
    0.12578172611122926,
    0.016083785148742275,
    0.0006587491615298378,
];
const TAIL_DEN: [f64; 6] =
    [1.0, 2.568520192289822, 1.8729528499234673, 0.5279051029514285, 0.06051834131244132, 0.0023352049762686918];

#[inline(always)]
fn horner(coefficients: &[f64], x: f64) -> f64 {
    coefficients.iter().fold(0.0, |acc, &c| acc * x + c)
}

// ---------------------------------------------------------------------------
// Double-double pieces (no fused multiply-add: the baseline x86-64 target
// has none in hardware, and libm's is slow).

/// `a` split into two halves of 26 bits (Veltkamp); `a` must be far from
/// overflow.
#[inline(always)]
fn split(a: f64) -> (f64, f64) {
    let t = 134_217_729.0 * a;
    let hi = t - (t - a);
    (hi, a - hi)
}

/// `a · b` as the rounded product and its exact error (Dekker).
#[inline(always)]
fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let p = a * b;
    let ((ah, al), (bh, bl)) = (split(a), split(b));
    (p, ((ah * bh - p) + ah * bl + al * bh) + al * bl)
}

/// `a + b` as the rounded sum and its exact error (Knuth).
#[inline(always)]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// A polynomial at `x` in double-double: Horner's scheme with the rounding
/// error of each step carried alongside (Graillat's compensated Horner).
fn compensated_horner(coefficients: &[f64], x: f64) -> (f64, f64) {
    let mut sum = coefficients[0];
    let mut error = 0.0;
    for &c in &coefficients[1..] {
        let (p, p_err) = two_prod(sum, x);
        let (s, s_err) = two_sum(p, c);
        sum = s;
        error = error * x + (p_err + s_err);
    }
    (sum, error)
}

/// `(nh + nl) / (dh + dl)` in double-double.
fn dd_div((nh, nl): (f64, f64), (dh, dl): (f64, f64)) -> (f64, f64) {
    let q = nh / dh;
    let (p, p_err) = two_prod(q, dh);
    // `nh − p` is exact: p is within an ulp or two of nh.
    (q, (((nh - p) - p_err) + nl - q * dl) / dh)
}

/// `y` with its low 27 mantissa bits cleared: its square is exact.
#[inline(always)]
fn top_26_bits(y: f64) -> f64 {
    f64::from_bits(y.to_bits() & !((1u64 << 27) - 1))
}

// ---------------------------------------------------------------------------
// f64

/// erf on |x| <= SERIES_END, x != 0: `x · 2/√π + x · (lo + x² · P(x²))`.
fn erf_series(x: f64) -> f64 {
    let z = x * x;
    let tail = z * horner(&SERIES, z);
    let (p, p_err) = two_prod(x, TWO_OVER_SQRT_PI);
    p + (p_err + x * (TWO_OVER_SQRT_PI_LO + tail))
}

/// erfc(y) for SERIES_END < y (finite).
fn erfc_above_series(y: f64) -> f64 {
    if y >= F64_UNDERFLOW {
        return 0.0;
    }
    // erfc(y) · e^(y²) as q + q_lo.
    let (q, q_lo) = if y <= MIDDLE_END {
        dd_div(compensated_horner(&MIDDLE_NUM, y), compensated_horner(&MIDDLE_DEN, y))
    } else {
        let z = 1.0 / (y * y);
        let w = z * horner(&TAIL_NUM, z) / horner(&TAIL_DEN, z);
        let (s, s_err) = two_sum(ONE_OVER_SQRT_PI, -w);
        let q = s / y;
        let (p, p_err) = two_prod(q, y);
        (q, (((s - p) - p_err) + (s_err + ONE_OVER_SQRT_PI_LO)) / y)
    };
    let h = top_26_bits(y);
    let scale = (-(h * h)).exp();
    let (v, v_err) = two_prod(scale, q);
    // e^(−(y−h)(y+h)) = 1 + expm1(…), the latter a few 1e-5 at most.
    v + (v_err + scale * q_lo + v * (-((y - h) * (y + h))).exp_m1())
}

/// The error function, within 2 ulps (NaN stays NaN, erf(±0) = ±0).
pub fn erf_f64(x: f64) -> f64 {
    let y = x.abs();
    if x.is_nan() || x == 0.0 {
        x
    } else if y <= SERIES_END {
        erf_series(x)
    } else {
        // erfc(y) < 0.52 here, so 1 − erfc(y) loses nothing.
        (1.0 - erfc_above_series(y)).copysign(x)
    }
}

/// The complementary error function 1 − erf(x), within 2 ulps, also where
/// it is tiny (down to underflow past x = 27.3).
pub fn erfc_f64(x: f64) -> f64 {
    let y = x.abs();
    if x.is_nan() {
        x
    } else if y <= SERIES_END {
        if x == 0.0 { 1.0 } else { 1.0 - erf_series(x) }
    } else if x > 0.0 {
        erfc_above_series(y)
    } else {
        2.0 - erfc_above_series(y)
    }
}

// ---------------------------------------------------------------------------
// f32

/// erfc(y) for SERIES_END <= y <= F32_UNDERFLOW, in plain f64: the middle
/// or the asymptotic rational, both computed and one kept, so the loop has
/// no branch.
#[inline(always)]
fn erfc_for_f32(y: f64) -> f64 {
    let middle = horner(&MIDDLE_NUM, y) / horner(&MIDDLE_DEN, y);
    let z = 1.0 / (y * y);
    let tail = (ONE_OVER_SQRT_PI - z * horner(&TAIL_NUM, z) / horner(&TAIL_DEN, z)) / y;
    let q = if y <= MIDDLE_END { middle } else { tail };
    // y is an f32 widened: y² is exact, so e^(−y²) needs no splitting.
    exp_for_f32(-(y * y)) * q
}

/// |x| limited to [SERIES_END, F32_UNDERFLOW], NaN kept.
#[inline(always)]
fn clamp_for_f32(y: f64) -> f64 {
    let y = if y < SERIES_END { SERIES_END } else { y };
    if y > F32_UNDERFLOW { F32_UNDERFLOW } else { y }
}

/// erf(x) / x − 2/√π times x, plus 2/√π · x: the series in plain f64.
#[inline(always)]
fn erf_series_for_f32(x: f64) -> f64 {
    let z = x * x;
    x * (TWO_OVER_SQRT_PI + z * horner(&SERIES, z))
}

/// erf of an f32, within 1 ulp of the correctly rounded value; saturates to
/// ±1 past |x| = 3.92, keeps ±0 and NaN.
#[inline(always)]
pub fn erf_f32(x: f32) -> f32 {
    let x = f64::from(x);
    let y = x.abs();
    let series = erf_series_for_f32(x);
    let above = 1.0 - erfc_for_f32(clamp_for_f32(y));
    let above = if x < 0.0 { -above } else { above };
    (if y <= SERIES_END { series } else { above }) as f32
}

/// erfc of an f32, within 1 ulp of the correctly rounded value, subnormal
/// results included; 0 past x = 10.06, 2 below −3.9, NaN kept.
#[inline(always)]
pub fn erfc_f32(x: f32) -> f32 {
    let x = f64::from(x);
    let y = x.abs();
    let series = 1.0 - erf_series_for_f32(x);
    let above = erfc_for_f32(clamp_for_f32(y));
    let above = if x < 0.0 { 2.0 - above } else { above };
    (if y <= SERIES_END { series } else { above }) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in representable f64 values (0 for equal, NaN == NaN).
    fn ulps(a: f64, b: f64) -> u64 {
        if a == b || (a.is_nan() && b.is_nan()) {
            return 0;
        }
        let ordered = |v: f64| {
            let i = v.to_bits() as i64;
            if i < 0 { i64::MIN - i } else { i }
        };
        ordered(a).abs_diff(ordered(b))
    }

    fn ulps32(a: f32, b: f32) -> u64 {
        if a == b || (a.is_nan() && b.is_nan()) {
            return 0;
        }
        let ordered = |v: f32| {
            let i = i64::from(v.to_bits() as i32);
            if i < 0 { i64::from(i32::MIN) - i } else { i }
        };
        ordered(a).abs_diff(ordered(b))
    }

    /// (x, erf(x), erfc(x)), each the f64 nearest the exact value: mpmath
    /// at 200 bits.
    const REFERENCE: &[(f64, f64, f64)] = &include!("erf_reference.in");

    #[test]
    fn f64_is_within_two_ulps_of_the_exact_values() {
        let (mut worst_erf, mut worst_erfc) = ((0, 0.0), (0, 0.0));
        let mut exact = 0;
        for &(x, erf, erfc) in REFERENCE {
            let (de, dc) = (ulps(erf_f64(x), erf), ulps(erfc_f64(x), erfc));
            exact += usize::from(de == 0) + usize::from(dc == 0);
            if de > worst_erf.0 {
                worst_erf = (de, x);
            }
            if dc > worst_erfc.0 {
                worst_erfc = (dc, x);
            }
        }
        assert!(worst_erf.0 <= 2, "erf({}) is {} ulps off", worst_erf.1, worst_erf.0);
        assert!(worst_erfc.0 <= 2, "erfc({}) is {} ulps off", worst_erfc.1, worst_erfc.0);
        // Most results are the correctly rounded ones.
        assert!(exact * 10 >= REFERENCE.len() * 2 * 9, "{exact} of {} exact", REFERENCE.len() * 2);
    }

    #[test]
    fn special_values() {
        {
            let (erf, erfc) = (erf_f64, erfc_f64);
            assert_eq!(erf(0.0).to_bits(), 0.0f64.to_bits());
            assert_eq!(erf(-0.0).to_bits(), (-0.0f64).to_bits());
            assert_eq!(erf(f64::INFINITY), 1.0);
            assert_eq!(erf(f64::NEG_INFINITY), -1.0);
            assert!(erf(f64::NAN).is_nan());
            assert_eq!(erfc(0.0), 1.0);
            assert_eq!(erfc(-0.0), 1.0);
            assert_eq!(erfc(f64::INFINITY), 0.0);
            assert_eq!(erfc(f64::NEG_INFINITY), 2.0);
            assert!(erfc(f64::NAN).is_nan());
            assert_eq!(erf(6.0), 1.0);
            assert_eq!(erf(-30.0), -1.0);
            assert_eq!(erfc(27.3), 0.0);
            assert_eq!(erfc(f64::MAX), 0.0);
            assert_eq!(erfc(-f64::MAX), 2.0);
            // Tiny arguments: erf(x) = 2x/√π to the last bit.
            assert_eq!(erf(1e-300), 1.128_379_167_095_512_6e-300);
            assert_eq!(erf(f64::from_bits(1)), f64::from_bits(1));
        }
        {
            let (erf, erfc) = (erf_f32, erfc_f32);
            assert_eq!(erf(0.0).to_bits(), 0.0f32.to_bits());
            assert_eq!(erf(-0.0).to_bits(), (-0.0f32).to_bits());
            assert_eq!(erf(f32::INFINITY), 1.0);
            assert_eq!(erf(f32::NEG_INFINITY), -1.0);
            assert!(erf(f32::NAN).is_nan());
            assert_eq!(erfc(0.0), 1.0);
            assert_eq!(erfc(f32::INFINITY), 0.0);
            assert_eq!(erfc(f32::NEG_INFINITY), 2.0);
            assert!(erfc(f32::NAN).is_nan());
            assert_eq!(erf(3.95), 1.0);
            assert_eq!(erfc(10.1), 0.0);
            assert_eq!(erfc(f32::MAX), 0.0);
        }
    }

    #[test]
    fn f64_is_odd_and_complementary_along_a_sweep() {
        let mut x = -30.0;
        let mut previous = -1.0;
        while x < 30.0 {
            let (e, c) = (erf_f64(x), erfc_f64(x));
            assert_eq!(erf_f64(-x), -e, "odd at {x}");
            assert!(e >= previous, "erf decreases at {x}");
            previous = e;
            assert!(ulps(e + c, 1.0) <= 4 || (e + c - 1.0).abs() <= 2e-16, "erf + erfc at {x}");
            x += 0.003_7;
        }
    }

    #[test]
    fn f32_is_within_one_ulp_of_the_rounded_f64_result_across_f32() {
        // Every 4099th bit pattern: ~1M inputs over all signs and exponents.
        let (mut worst_erf, mut worst_erfc) = ((0, 0.0f32), (0, 0.0f32));
        for bits in (0..=u32::MAX).step_by(4099) {
            let x = f32::from_bits(bits);
            let d = ulps32(erf_f32(x), erf_f64(f64::from(x)) as f32);
            if d > worst_erf.0 {
                worst_erf = (d, x);
            }
            let d = ulps32(erfc_f32(x), erfc_f64(f64::from(x)) as f32);
            if d > worst_erfc.0 {
                worst_erfc = (d, x);
            }
        }
        assert!(worst_erf.0 <= 1, "erf({}) is {} ulps off", worst_erf.1, worst_erf.0);
        assert!(worst_erfc.0 <= 1, "erfc({}) is {} ulps off", worst_erfc.1, worst_erfc.0);
        // Both sides of each switch.
        for x in [0.468_75f32, 0.468_76, 3.999_9, 4.0, 4.000_1, 10.05, -0.468_75, -4.0] {
            assert!(ulps32(erf_f32(x), erf_f64(f64::from(x)) as f32) <= 1, "erf {x}");
            assert!(ulps32(erfc_f32(x), erfc_f64(f64::from(x)) as f32) <= 1, "erfc {x}");
        }
    }
}
