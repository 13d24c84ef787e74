//! Special functions as elementwise ops: `Lgamma`, `Digamma`, `Erfinv`,
//! `Ndtri`, `BesselI0e`, `BesselI1e` (`tf.math.lgamma`, `tf.math.digamma`,
//! `tf.math.erfinv`, `tf.math.ndtri`, `tf.math.bessel_i0e`/`_i1e`), as
//! losses and distributions use them.
//!
//! Owns: the scalar code of these functions. Must not touch tensors: the
//! kernels are [`super::Unary`] impls driven by math.rs.
//!
//! TensorFlow's conventions are kept where they differ from the textbook:
//! `Lgamma` is the C library's `lgamma_r` (Eigen calls it, so float32
//! results match bit for bit); `Digamma` is NaN at every non-positive
//! integer, −0 included, and at −∞; `Erfinv` is `ndtri(x/2 + 1/2)/√2` with
//! `x/2 + 1/2` rounded in the element type, as TensorFlow's kernel is (so
//! float32 inputs below 3e-8 give 0, as there). Everything else is computed
//! in f64 and rounded once, at least as accurate as TensorFlow's float32
//! arithmetic.

use super::Unary;
use super::erf::erfc_f64;
use std::f64::consts::{FRAC_1_SQRT_2, PI, SQRT_2};

unsafe extern "C" {
    // The reentrant forms: plain lgamma writes the global `signgam`.
    fn lgamma_r(x: f64, sign: *mut libc::c_int) -> f64;
    fn lgammaf_r(x: f32, sign: *mut libc::c_int) -> f32;
}

/// ln |Γ(x)|.
pub struct Lgamma;
impl Unary<f32> for Lgamma {
    #[inline]
    fn apply(x: f32) -> f32 {
        let mut sign = 0;
        // SAFETY: a pure libm function writing only through the valid
        // pointer it is given.
        unsafe { lgammaf_r(x, &mut sign) }
    }
}
impl Unary<f64> for Lgamma {
    #[inline]
    fn apply(x: f64) -> f64 {
        let mut sign = 0;
        // SAFETY: as above.
        unsafe { lgamma_r(x, &mut sign) }
    }
}

/// ln |Γ(x)| in f64 (the C library's, as [`Lgamma`]).
pub fn lgamma(x: f64) -> f64 {
    <Lgamma as Unary<f64>>::apply(x)
}

computed_in_f64!(
    /// ψ(x) = d/dx ln Γ(x).
    Digamma,
    digamma
);

/// The inverse of erf on [−1, 1].
pub struct Erfinv;
impl Unary<f32> for Erfinv {
    #[inline]
    fn apply(x: f32) -> f32 {
        (ndtri((0.5 * x + 0.5) as f64) * FRAC_1_SQRT_2) as f32
    }
}
impl Unary<f64> for Erfinv {
    #[inline]
    fn apply(x: f64) -> f64 {
        ndtri(0.5 * x + 0.5) * FRAC_1_SQRT_2
    }
}

computed_in_f64!(
    /// The inverse of the standard normal distribution function on [0, 1].
    Ndtri,
    ndtri
);

computed_in_f64!(
    /// e^−|x| I₀(x), the exponentially scaled modified Bessel function of order 0.
    BesselI0e,
    bessel_i0e
);

computed_in_f64!(
    /// e^−|x| I₁(x), the exponentially scaled modified Bessel function of order 1.
    BesselI1e,
    bessel_i1e
);

/// ψ(x): reflection below 0, the recurrence ψ(x) = ψ(x + 1) − 1/x up to 10,
/// then the asymptotic series ln s − 1/(2s) − Σ B₂ₖ/(2k s²ᵏ).
pub fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return x;
    }
    let mut reflection = 0.0;
    let mut s = x;
    if x <= 0.0 {
        let whole = x.floor();
        if whole == x {
            return f64::NAN; // a pole (−0 included, as TensorFlow has it)
        }
        // ψ(x) = ψ(1 − x) − π / tan(πx), with x moved next to 0 first so
        // tan keeps its precision.
        let mut frac = x - whole;
        if frac > 0.5 {
            frac -= 1.0;
        }
        reflection = if frac == 0.5 { 0.0 } else { PI / (PI * frac).tan() };
        s = 1.0 - x;
    }
    let mut shift = 0.0;
    while s < 10.0 {
        shift += 1.0 / s;
        s += 1.0;
    }
    // B₂ₖ/(2k) for k = 1..7: the series' error past s = 10 is below 1e-17.
    const TERMS: [f64; 7] =
        [1.0 / 12.0, -1.0 / 120.0, 1.0 / 252.0, -1.0 / 240.0, 1.0 / 132.0, -691.0 / 32760.0, 1.0 / 12.0];
    let z = 1.0 / (s * s);
    let series = TERMS.iter().rev().fold(0.0, |acc, &c| acc * z + c) * z;
    let y = s.ln() - 0.5 / s - series - shift;
    y - reflection
}

/// Φ⁻¹(p): ±√2 · erfc⁻¹ of the smaller tail, so neither tail loses digits.
pub fn ndtri(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    if p < 0.5 { -SQRT_2 * erfc_inv(2.0 * p) } else { SQRT_2 * erfc_inv(2.0 * (1.0 - p)) }
}

/// The x ≥ 0 with erfc(x) = q, for q in (0, 1]: Winitzki's closed form as a
/// start (relative error ~2e-3), then Halley steps on erfc, which converge
/// cubically.
fn erfc_inv(q: f64) -> f64 {
    debug_assert!(q > 0.0 && q <= 1.0);
    if q == 1.0 {
        return 0.0;
    }
    // w = −ln(1 − y²) with y = 1 − q, from q alone: no cancellation.
    let w = -(q * (2.0 - q)).ln();
    const A: f64 = 0.147;
    let t = 2.0 / (PI * A) - 0.5 * w;
    let mut x = ((t * t + w / A).sqrt() - t).sqrt();
    for _ in 0..8 {
        let f = erfc_f64(x) - q;
        // erfc'(x) = −(2/√π) e^(−x²); the Halley step is d / (1 + x d).
        let slope = -std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp();
        if slope == 0.0 {
            break;
        }
        let d = f / slope;
        let step = d / (1.0 + x * d);
        x -= step;
        if step.abs() <= 1e-16 * x.abs() {
            break;
        }
    }
    x
}

/// Past this |x| the asymptotic expansions are used: their smallest term
/// there is about e^(−2x) ≈ 4e-18.
const BESSEL_ASYMPTOTIC_FROM: f64 = 20.0;

/// e^−|x| I₀(x).
pub fn bessel_i0e(x: f64) -> f64 {
    let a = x.abs();
    if a.is_nan() {
        return f64::NAN;
    }
    if a < BESSEL_ASYMPTOTIC_FROM {
        // Σ (x²/4)ᵏ / (k!)², every term positive.
        let q = 0.25 * a * a;
        let (mut term, mut sum, mut k) = (1.0, 1.0, 0.0);
        while term > sum * 1e-17 {
            k += 1.0;
            term *= q / (k * k);
            sum += term;
        }
        sum * (-a).exp()
    } else {
        bessel_asymptotic(0.0, a)
    }
}

/// e^−|x| I₁(x), odd in x.
pub fn bessel_i1e(x: f64) -> f64 {
    let a = x.abs();
    if a.is_nan() {
        return f64::NAN;
    }
    let magnitude = if a < BESSEL_ASYMPTOTIC_FROM {
        // (x/2) Σ (x²/4)ᵏ / (k! (k+1)!).
        let q = 0.25 * a * a;
        let (mut term, mut sum, mut k) = (1.0, 1.0, 0.0);
        while term > sum * 1e-17 {
            k += 1.0;
            term *= q / (k * (k + 1.0));
            sum += term;
        }
        0.5 * a * sum * (-a).exp()
    } else {
        bessel_asymptotic(1.0, a)
    };
    if x.is_sign_negative() { -magnitude } else { magnitude }
}

/// e^−x I_ν(x) ≈ (2πx)^−½ Σ (−1)ᵏ aₖ(ν) / xᵏ, aₖ = Π (4ν² − (2j−1)²) / (k! 8ᵏ),
/// summed until its terms stop shrinking, for x ≥ [`BESSEL_ASYMPTOTIC_FROM`].
fn bessel_asymptotic(nu: f64, x: f64) -> f64 {
    if x.is_infinite() {
        return 0.0;
    }
    let mu = 4.0 * nu * nu;
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    for k in 1..64 {
        let odd = (2 * k - 1) as f64;
        let next = -term * (mu - odd * odd) / (k as f64 * 8.0 * x);
        if next.abs() >= term.abs() || next == 0.0 {
            break;
        }
        term = next;
        sum += term;
    }
    sum / (2.0 * PI * x).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, rel: f64) {
        assert!(
            (got - want).abs() <= rel * want.abs().max(1e-300),
            "got {got:e}, want {want:e} (relative tolerance {rel:e})"
        );
    }

    #[test]
    fn lgamma_is_the_c_library_s() {
        close(Lgamma::apply(0.5f64), PI.sqrt().ln(), 1e-15);
        close(Lgamma::apply(-0.5f64), (2.0 * PI.sqrt()).ln(), 1e-15);
        assert_eq!(<Lgamma as Unary<f32>>::apply(1.0), 0.0);
        assert_eq!(<Lgamma as Unary<f32>>::apply(0.0), f32::INFINITY);
        assert_eq!(<Lgamma as Unary<f32>>::apply(-3.0), f32::INFINITY);
        // TensorFlow 2.21: lgamma(1e10) in float32.
        assert_eq!(<Lgamma as Unary<f32>>::apply(1e10), 2.202585e11);
    }

    #[test]
    fn digamma_matches_known_values_and_tensorflow_s_poles() {
        const EULER: f64 = 0.577_215_664_901_532_9;
        close(digamma(1.0), -EULER, 1e-15);
        close(digamma(0.5), -EULER - 2.0 * 2f64.ln(), 1e-15);
        // ψ(n + ½) = −γ − 2 ln 2 + Σₖ₌₁..ₙ 2/(2k − 1)
        let half_sum: f64 = (1..=10).map(|k| 2.0 / (2 * k - 1) as f64).sum();
        close(digamma(10.5), -EULER - 2.0 * 2f64.ln() + half_sum, 1e-14);
        // TensorFlow 2.21's float64 outputs.
        close(digamma(-1.5), 7.03156641e-01, 1e-8);
        close(digamma(-0.1), 9.24507305e+00, 1e-8);
        close(digamma(-100.5), 4.61512460e+00, 1e-8);
        close(digamma(1e-10), -1e10, 1e-9);
        for pole in [0.0, -0.0, -1.0, -7.0, f64::NEG_INFINITY, f64::NAN] {
            assert!(digamma(pole).is_nan(), "digamma({pole}) is NaN");
        }
        assert_eq!(digamma(f64::INFINITY), f64::INFINITY);
        close(<Digamma as Unary<f32>>::apply(-2.5) as f64, 1.1031568, 2e-7); // TensorFlow's float32, to an ulp
    }

    #[test]
    fn ndtri_inverts_the_normal_distribution_in_both_tails() {
        let phi = |x: f64| 0.5 * erfc_f64(-x * FRAC_1_SQRT_2);
        for p in [1e-300, 1e-30, 1e-8, 0.01, 0.3, 0.5, 0.7, 0.975, 1.0 - 1e-12] {
            let x = ndtri(p);
            close(phi(x), p, 1e-12);
        }
        close(ndtri(0.975), 1.959963984540054, 1e-14);
        assert_eq!(ndtri(0.5), 0.0);
        assert_eq!(ndtri(0.0), f64::NEG_INFINITY);
        assert_eq!(ndtri(1.0), f64::INFINITY);
        for bad in [-0.1, 1.1, f64::NAN] {
            assert!(ndtri(bad).is_nan());
        }
        close(<Ndtri as Unary<f32>>::apply(1e-30) as f64, -11.464024, 2e-7); // TensorFlow's float32
    }

    #[test]
    fn erfinv_follows_tensorflow_s_formula() {
        // TensorFlow 2.21's float32 outputs (to an ulp), the underflow at
        // 1e-30 included.
        let f = <Erfinv as Unary<f32>>::apply;
        close(f(0.5) as f64, 0.4769363, 2e-7);
        close(f(-0.999999) as f64, -3.4570746, 2e-7);
        close(f(0.9999999) as f64, 3.743921, 2e-7);
        assert_eq!(f(1e-30), 0.0);
        assert_eq!(f(1.0), f32::INFINITY);
        assert_eq!(f(-1.0), f32::NEG_INFINITY);
        assert!(f(1.5).is_nan() && f(-2.0).is_nan() && f(f32::NAN).is_nan());
        close(<Erfinv as Unary<f64>>::apply(0.3), 0.27246271472675443, 1e-14);
    }

    #[test]
    fn scaled_bessel_functions_match_tensorflow_s() {
        // TensorFlow 2.21's float32 outputs, as printed (6 to 8 digits).
        let i0 = <BesselI0e as Unary<f32>>::apply;
        let i1 = <BesselI1e as Unary<f32>>::apply;
        for (x, want0, want1) in [
            (0.0, 1.0, 0.0),
            (1.0, 0.46575963, 0.20791042),
            (5.0, 0.18354082, 0.1639723),
            (30.0, 0.07314594, 0.07191633),
            (100.0, 0.03994438, 0.03974415),
            (1e5, 0.00126157, 0.00126156),
        ] {
            close(i0(x) as f64, want0, 1e-5);
            close(i0(-x) as f64, want0, 1e-5);
            close(i1(x) as f64, want1, 1e-5);
            close(-i1(-x) as f64, want1, 1e-5);
        }
        assert_eq!(i0(f32::INFINITY), 0.0);
        assert!(i1(f32::NEG_INFINITY) == 0.0 && i1(f32::NEG_INFINITY).is_sign_negative());
        assert!(i0(f32::NAN).is_nan() && i1(f32::NAN).is_nan());
        // Both sides of the switch to the asymptotic series agree.
        for f in [bessel_i0e, bessel_i1e] {
            close(f(BESSEL_ASYMPTOTIC_FROM - 1e-12), f(BESSEL_ASYMPTOTIC_FROM), 1e-13);
        }
    }
}
