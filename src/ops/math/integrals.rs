//! Integrals of elementary functions from `tf.math.special`: `Expint`
//! (the exponential integral Ei), `Spence` (Spence's function, the
//! dilogarithm at 1 − x) and `Dawsn` (Dawson's integral).
//!
//! Owns: their scalar code. Must not touch tensors: the kernels are
//! [`super::Unary`] impls driven by math.rs.
//!
//! Each is computed in f64 where its expansions keep their digits: Ei by
//! its power series below 40 (positive terms) and its asymptotic series
//! above; the dilogarithm by its power series within |y| ≤ ½ after the
//! reflection and inversion identities bring y there; Dawson's integral by
//! its Taylor series below 0.2 and Rybicki's sampling formula above, whose
//! error at step 0.2 is e^(−(π/0.4)²) ≈ 1e-27. TensorFlow's edges are
//! kept: Ei is NaN below 0 and at ±∞ and −∞ at 0; Spence is NaN below 0
//! and at +∞; Dawson's integral is odd and 0 at ±∞.

use std::f64::consts::PI;

/// Euler's constant γ.
const EULER: f64 = 0.577_215_664_901_532_9;

computed_in_f64!(
    /// Ei(x) = −∫₋ₓ^∞ e⁻ᵗ/t dt.
    Expint,
    exponential_integral
);
computed_in_f64!(
    /// ∫₁ˣ ln t / (1 − t) dt = Li₂(1 − x).
    Spence,
    spence
);
computed_in_f64!(
    /// e^(−x²) ∫₀ˣ e^(t²) dt.
    Dawsn,
    dawson
);

pub fn exponential_integral(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 || x.is_infinite() {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x < 40.0 {
        // γ + ln x + Σ xᵏ / (k · k!)
        let (mut term, mut sum, mut k) = (1.0, 0.0, 0.0);
        loop {
            k += 1.0;
            term *= x / k;
            let add = term / k;
            sum += add;
            if add < f64::EPSILON * sum {
                break;
            }
        }
        return EULER + x.ln() + sum;
    }
    // eˣ/x Σ k!/xᵏ, summed while its terms shrink (at x = 40 the smallest
    // is about e⁻⁴⁰).
    let (mut term, mut sum) = (1.0, 1.0);
    for k in 1..200 {
        let next = term * k as f64 / x;
        if next >= term || next < f64::EPSILON * sum {
            break;
        }
        term = next;
        sum += term;
    }
    x.exp() / x * sum
}

/// Li₂(y) = Σ yᵏ/k² for y ≤ 1, through the identities that bring its
/// argument within |y| ≤ ½.
fn dilogarithm(y: f64) -> f64 {
    let series = |y: f64| {
        let (mut power, mut sum, mut k) = (1.0, 0.0, 0.0);
        loop {
            k += 1.0;
            power *= y;
            let add = power / (k * k);
            sum += add;
            if add.abs() < f64::EPSILON * sum.abs() || power == 0.0 {
                break;
            }
        }
        sum
    };
    if y == 1.0 {
        PI * PI / 6.0
    } else if y > 0.5 {
        // Euler's reflection.
        PI * PI / 6.0 - y.ln() * (-y).ln_1p() - series(1.0 - y)
    } else if y >= -0.5 {
        series(y)
    } else if y >= -1.0 {
        // Landen: y/(y − 1) lies in [⅓, ½].
        -series(y / (y - 1.0)) - 0.5 * (-y).ln_1p().powi(2)
    } else {
        // Inversion, then 1/y lies in (−1, 0).
        -PI * PI / 6.0 - 0.5 * (-y).ln().powi(2) - dilogarithm(1.0 / y)
    }
}

pub fn spence(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 || x.is_infinite() {
        return f64::NAN;
    }
    dilogarithm(1.0 - x)
}

pub fn dawson(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x.is_infinite() {
        return 0.0;
    }
    let a = x.abs();
    let magnitude = if a < 0.2 {
        // Σ (−2)ᵏ x^(2k+1) / (2k+1)!!
        let (mut term, mut sum, mut k) = (a, a, 0.0);
        loop {
            k += 1.0;
            term *= -2.0 * a * a / (2.0 * k + 1.0);
            sum += term;
            if term.abs() <= f64::EPSILON * sum {
                break;
            }
        }
        sum
    } else {
        // Rybicki: F(x) ≈ π^(−½) Σ_{n odd} e^(−(x − nh)²)/n, the sum taken
        // around the even n₀ nearest x/h.
        const H: f64 = 0.2;
        const TERMS: i64 = 40; // |x − nh| up to 8: e^(−64)
        let n0 = 2 * (0.5 * a / H).round() as i64;
        let offset = a - n0 as f64 * H;
        let mut sum = 0.0;
        for i in 0..TERMS {
            let n = 2 * i + 1;
            let right = (-(offset - n as f64 * H).powi(2)).exp() / (n0 + n) as f64;
            let left = (-(offset + n as f64 * H).powi(2)).exp() / (n0 - n) as f64;
            sum += right + left;
        }
        sum / PI.sqrt()
    };
    if x < 0.0 { -magnitude } else { magnitude }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrals_match_tensorflow_s_float64_values() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        let xs = [-2.0, 0.0, 1e-8, 0.5, 1.0, 2.0, 5.0, 9.5, 30.0, 800.0, inf, -inf, nan];
        // TensorFlow 2.21's float64 outputs at `xs`.
        #[rustfmt::skip]
        let rows: [super::super::TableRow<13>; 3] = [
            ("Ei", exponential_integral, [nan, -inf, -17.843465069050833, 0.45421990486317354, 1.895117816355937, 4.954234356001891, 40.18527535580318, 1605.0284066323388, 368973209407.2742, inf, nan, nan, nan]),
            ("spence", spence, [nan, 1.6449340668482264, 1.6449338726414182, 0.5822405264650135, 0.0, -0.8224670334241142, -2.3699397969983655, -3.820519021167801, -7.280084707384272, -23.977339659475312, nan, nan, nan]),
            ("dawson", dawson, [-0.30134038892379195, 0.0, 1e-08, 0.4244363835020223, 0.5380795069127684, 0.30134038892379195, 0.10213407442427684, 0.05292815270562564, 0.016675941401059175, 0.0006250004882823945, 0.0, 0.0, nan]),
        ];
        super::super::assert_table(&xs, &rows, 1e-13);
        // The identities' seams: Li₂ is continuous across ±½ and −1.
        for y in [0.5, -0.5, -1.0] {
            let (below, above) = (dilogarithm(y - 1e-12), dilogarithm(y + 1e-12));
            assert!((below - above).abs() < 1e-10, "Li2 at {y}: {below} vs {above}");
        }
        assert!((dawson(0.2 - 1e-12) - dawson(0.2 + 1e-12)).abs() < 1e-11);
    }
}
