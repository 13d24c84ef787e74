//! The unscaled and the remaining Bessel functions of `tf.math.special`:
//! `BesselI0`, `BesselI1`, `BesselJ0`, `BesselJ1`, `BesselY0`, `BesselY1`,
//! `BesselK0`, `BesselK1`, `BesselK0e`, `BesselK1e`.
//!
//! Owns: their scalar code. Must not touch tensors: the kernels are
//! [`super::Unary`] impls driven by math.rs.
//!
//! I₀ and I₁ are e^|x| times the scaled forms in `special` (so ±∞ gives
//! NaN, ∞·0, as in TensorFlow); J and Y are the C library's (glibc's
//! `j0`, `j1`, `y0`, `y1`, correctly rounded to within an ulp or two); K
//! comes from its integral e^x K_ν(x) = ∫₀^∞ exp(−x(cosh t − 1)) cosh(νt) dt
//! by the trapezoidal rule, whose error for this entire, doubly
//! exponentially decaying integrand falls as exp(−π²/h), and as
//! exp(−2π²/(x h²)) where x makes its peak narrow: with h = min(1/4,
//! 0.6/√x) below 1e-17 for every x > 0. TensorFlow's edge values are kept: Y and K
//! are −∞ and +∞ at and below 0, J and Y are NaN at ±∞, K is 0 at +∞.

use super::special::{bessel_i0e, bessel_i1e};

unsafe extern "C" {
    fn j0(x: f64) -> f64;
    fn j1(x: f64) -> f64;
    fn y0(x: f64) -> f64;
    fn y1(x: f64) -> f64;
}

computed_in_f64!(
    /// I₀(x).
    BesselI0,
    |x| x.abs().exp() * bessel_i0e(x)
);
computed_in_f64!(
    /// I₁(x).
    BesselI1,
    |x| x.abs().exp() * bessel_i1e(x)
);
computed_in_f64!(
    /// J₀(x).
    BesselJ0,
    // SAFETY: a pure libm function of one double.
    |x| if x.is_finite() { unsafe { j0(x) } } else { f64::NAN }
);
computed_in_f64!(
    /// J₁(x).
    BesselJ1,
    // SAFETY: as above.
    |x| if x.is_finite() { unsafe { j1(x) } } else { f64::NAN }
);
computed_in_f64!(
    /// Y₀(x).
    BesselY0,
    // SAFETY: as above.
    |x| second_kind(x, |x| unsafe { y0(x) })
);
computed_in_f64!(
    /// Y₁(x).
    BesselY1,
    // SAFETY: as above.
    |x| second_kind(x, |x| unsafe { y1(x) })
);
computed_in_f64!(
    /// K₀(x).
    BesselK0,
    |x| modified_second_kind(x, 0.0, false)
);
computed_in_f64!(
    /// K₁(x).
    BesselK1,
    |x| modified_second_kind(x, 1.0, false)
);
computed_in_f64!(
    /// e^x K₀(x).
    BesselK0e,
    |x| modified_second_kind(x, 0.0, true)
);
computed_in_f64!(
    /// e^x K₁(x).
    BesselK1e,
    |x| modified_second_kind(x, 1.0, true)
);

/// Y_ν with TensorFlow's edges: −∞ at and below 0, NaN at +∞.
fn second_kind(x: f64, y: fn(f64) -> f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        f64::NAN
    } else if x <= 0.0 {
        f64::NEG_INFINITY
    } else {
        y(x)
    }
}

/// K_ν(x) (times e^x when `scaled`) for ν = 0 or 1.
fn modified_second_kind(x: f64, nu: f64, scaled: bool) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x <= 0.0 {
        return f64::INFINITY;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    // Near t = 0 the integrand is exp(−x t²/2), a Gaussian of width
    // 1/√x; the rule's error is then exp(−2π²/(x h²)), below 1e-20 at
    // h = 0.6/√x.
    let step = 0.25f64.min(0.6 / x.sqrt());
    // Past this exponent the integrand's terms are below 1e-20 of its
    // value at 0 (1) or of its largest, e^(νt)/2 at small x.
    const CUTOFF: f64 = 46.0;
    let mut sum = 0.5; // t = 0, half weight
    let mut k = 1.0;
    loop {
        let t = k * step;
        let exponent = -x * (t.cosh() - 1.0);
        if exponent + nu * t < -CUTOFF {
            break;
        }
        sum += exponent.exp() * (nu * t).cosh();
        k += 1.0;
    }
    let scaled_value = sum * step;
    if scaled { scaled_value } else { scaled_value * (-x).exp() }
}

#[cfg(test)]
mod tests {
    use super::super::Unary;
    use super::*;

    fn f64_of<Op: Unary<f64>>(x: f64) -> f64 {
        Op::apply(x)
    }

    fn close(got: f64, want: f64, rel: f64) {
        assert!(
            got == want || (got.is_nan() && want.is_nan()) || (got - want).abs() <= rel * want.abs(),
            "got {got:e}, want {want:e}"
        );
    }

    #[test]
    fn bessel_functions_match_tensorflow_s_float64_values() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        let xs = [-2.0, 0.0, 1e-8, 0.5, 1.0, 5.0, 9.5, 30.0, 800.0, inf, -inf, nan];
        // TensorFlow 2.21's float64 outputs at `xs`.
        #[rustfmt::skip]
        let rows: [super::super::TableRow<12>; 10] = [
            ("BesselI0", f64_of::<BesselI0>, [2.279585302336067, 1.0, 0.9999999999999999, 1.0634833707413238, 1.2660658777520082, 27.23987182360444, 1753.480990527323, 781672297823.9774, inf, nan, nan, nan]),
            ("BesselI1", f64_of::<BesselI1>, [-1.5906368546373295, 0.0, 4.999999999999999e-09, 0.2578943053908962, 0.565159103992485, 24.335642142450535, 1658.4530777821342, 768532038938.9568, inf, nan, nan, nan]),
            ("BesselJ0", f64_of::<BesselJ0>, [0.22389077914123562, 1.0, 1.0, 0.938469807240813, 0.7651976865579665, -0.1775967713143383, -0.19392874768742224, -0.08636798358104031, 0.008897445883815304, nan, nan, nan]),
            ("BesselJ1", f64_of::<BesselJ1>, [-0.5767248077568734, 0.0, 5.000000000000001e-09, 0.24226845767487387, 0.44005058574493355, -0.3275791375914653, 0.16126443075752983, -0.11875106261662303, 0.02677513872232301, nan, nan, nan]),
            ("BesselY0", f64_of::<BesselY0>, [-inf, -inf, -11.800773877179532, -0.4445187335067066, 0.08825696421567697, -0.30851762524903303, 0.17121062620272404, -0.11729573168666396, 0.02676957259239893, nan, -inf, nan]),
            ("BesselY1", f64_of::<BesselY1>, [-inf, -inf, -63661977.236758195, -1.4714723926702433, -0.7812128213002888, 0.14786314339122691, 0.20317989938720774, 0.08442557066174712, -0.008880716645260096, nan, -inf, nan]),
            ("BesselK0", f64_of::<BesselK0>, [inf, inf, 18.536612259610774, 0.9244190712276663, 0.42102443824070823, 0.003691098334042595, 3.005788495793434e-05, 2.132477496463056e-14, 0.0, 0.0, inf, nan]),
            ("BesselK1", f64_of::<BesselK1>, [inf, inf, 99999999.99999991, 1.6564411200033013, 0.6019072301972348, 0.004044613445452164, 3.160203411042675e-05, 2.1677320018915495e-14, 0.0, 0.0, inf, nan]),
            ("BesselK0e", f64_of::<BesselK0e>, [inf, inf, 18.536612444976896, 1.5241093857739103, 1.1444630798068947, 0.5478075643135191, 0.4015651321154054, 0.2278866656162537, 0.044304427486646016, 0.0, inf, nan]),
            ("BesselK1e", f64_of::<BesselK1e>, [inf, inf, 100000000.99999991, 2.7310097082117863, 1.6361534862632587, 0.6002738587883125, 0.4221945429769579, 0.2316541293777118, 0.0443321091114121, 0.0, inf, nan]),
        ];
        super::super::assert_table(&xs, &rows, 1e-13);
        close(f64::from(<BesselK0 as Unary<f32>>::apply(0.5)), 0.924419105052948, 1e-7);
    }
}
