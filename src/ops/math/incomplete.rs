//! The incomplete gamma and beta integrals and their relatives, as
//! elementwise ops: `Igamma`, `Igammac`, `IgammaGradA`, `RandomGammaGrad`
//! (broadcasting binary ops), `Zeta`, `Polygamma` (the same) and `Betainc`
//! (three operands, each a scalar or of one common shape) — what
//! `tf.math.igamma`/`igammac`/`zeta`/`polygamma`/`betainc` and the
//! gradients of `lgamma`, `digamma`, `igamma` and `tf.random.gamma`
//! compute, and what distributions' CDFs are made of.
//!
//! Owns: the scalar code of these functions and the `Betainc` kernel.
//! Must not touch anything else: the binary kernels are [`Binary`] impls
//! driven by math.rs.
//!
//! Everything is computed in f64 and rounded once (TensorFlow computes
//! float32 in float32, so its float32 results are within its own error of
//! ours: peak 1e-5 to 1e-4 relative by Cephes' tables). Its edge cases are
//! kept, as TensorFlow 2.21 answers them: `igamma(a, 0) = 0` for every `a`,
//! an infinite `a` gives `igamma = 0` and `igammac = 1` (0 at `x = ∞`),
//! `zeta(x, q)` is ∞ at `x = 1` and at every non-positive integer `q`, NaN
//! below `x = 1` and for a negative non-integer `q` with a non-integer
//! `x`; `polygamma` of a non-integer order is NaN; `betainc` is NaN unless
//! `a, b > 0` and `0 <= x <= 1`, with 0 and 1 at the ends. (One
//! departure: `zeta` of a non-integer `q` below −10⁶ is NaN, where
//! TensorFlow sums a term per unit of `q` and seems to hang.) The derivatives
//! in `a` are zero where `xᵃe⁻ˣ/Γ(a)` underflows in the element type, as
//! there (TensorFlow's float32 exp flushes below ln(FLT_MIN); its series
//! branch flushes a few units of log later).

use super::Binary;
use super::special::{digamma, lgamma};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::{ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Element, Tensor};
use std::ops::{Add, Div, Mul, Sub};

/// Relative precision the series and continued fractions stop at.
const EPS: f64 = f64::EPSILON / 2.0;

/// Terms or convergents tried before a sum is taken as it stands
/// (TensorFlow's value loops stop at 2000 as well).
const MAX_TERMS: usize = 2000;

/// A value and its derivative in `a`, carried through a recurrence
/// together (forward-mode differentiation of the series and fractions).
#[derive(Clone, Copy, Debug)]
struct Dual {
    v: f64,
    d: f64,
}

impl Dual {
    const fn constant(v: f64) -> Dual {
        Dual { v, d: 0.0 }
    }

    const fn variable(v: f64) -> Dual {
        Dual { v, d: 1.0 }
    }

    fn scale(self, k: f64) -> Dual {
        Dual { v: self.v * k, d: self.d * k }
    }
}

impl Add for Dual {
    type Output = Dual;
    fn add(self, o: Dual) -> Dual {
        Dual { v: self.v + o.v, d: self.d + o.d }
    }
}

impl Sub for Dual {
    type Output = Dual;
    fn sub(self, o: Dual) -> Dual {
        Dual { v: self.v - o.v, d: self.d - o.d }
    }
}

impl Mul for Dual {
    type Output = Dual;
    fn mul(self, o: Dual) -> Dual {
        Dual { v: self.v * o.v, d: self.d * o.v + self.v * o.d }
    }
}

impl Div for Dual {
    type Output = Dual;
    fn div(self, o: Dual) -> Dual {
        let v = self.v / o.v;
        Dual { v, d: (self.d - v * o.d) / o.v }
    }
}

/// What an incomplete-gamma evaluation returns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Want {
    /// P(a, x), the regularized lower integral.
    Value,
    /// ∂P/∂a.
    DerivativeA,
    /// ∂x/∂a along P(a, x) = const: the reparameterization gradient of a
    /// Gamma(a, 1) sample x.
    SampleDerivative,
}

/// Where `xᵃe⁻ˣ/Γ(·)` counts as zero: below this natural log.
#[derive(Clone, Copy)]
struct Flush(f64);

impl Flush {
    /// float32: TensorFlow's exp flushes below the smallest normal.
    const F32: Flush = Flush(-87.336_544_750_553_1);
    /// float64: where exp itself underflows.
    const F64: Flush = Flush(f64::NEG_INFINITY);

    fn exp(self, log: f64) -> f64 {
        if log < self.0 { 0.0 } else { log.exp() }
    }
}

/// Σₖ xᵏ / ((a+1)…(a+k)), and its derivative in `a`: P(a, x) is this
/// times xᵃe⁻ˣ/Γ(a+1). Used where x ≤ max(1, a), so the terms shrink.
fn lower_series(a: f64, x: f64) -> Dual {
    let mut r = Dual::variable(a);
    let mut term = Dual::constant(1.0);
    let mut sum = term;
    for _ in 0..MAX_TERMS {
        r.v += 1.0;
        term = term * (Dual::constant(x) / r);
        sum = sum + term;
        if term.v <= EPS * sum.v && term.d.abs() <= EPS * sum.d.abs() {
            break;
        }
    }
    sum
}

/// Legendre's continued fraction for Q(a, x) / (xᵃe⁻ˣ/Γ(a)), and its
/// derivative in `a`, through its convergents pₖ/qₖ. Used where x > 1
/// and x > a, where it converges quickly.
fn upper_fraction(a: f64, x: f64) -> Dual {
    // Rescale the convergents before they overflow (their ratio is all
    // that matters).
    const BIG: f64 = 1.0 / f64::EPSILON;
    let one = Dual::constant(1.0);
    let mut y = one - Dual::variable(a);
    let mut z = Dual::constant(x) + y + one;
    let mut c = Dual::constant(0.0);
    let (mut p2, mut q2) = (one, Dual::constant(x));
    let (mut p1, mut q1) = (Dual::constant(x + 1.0), z.scale(x));
    let mut ratio = p1 / q1;
    for _ in 0..MAX_TERMS {
        c.v += 1.0;
        y.v += 1.0;
        z.v += 2.0;
        let yc = y * c;
        let p = p1 * z - p2 * yc;
        let q = q1 * z - q2 * yc;
        if q.v != 0.0 {
            let next = p / q;
            let settled =
                (next.v - ratio.v).abs() <= EPS * next.v.abs() && (next.d - ratio.d).abs() <= EPS * next.d.abs();
            ratio = next;
            if settled {
                break;
            }
        }
        (p2, p1, q2, q1) = (p1, p, q1, q);
        if p.v.abs() > BIG {
            let k = 1.0 / BIG;
            (p2, p1, q2, q1) = (p2.scale(k), p1.scale(k), q2.scale(k), q1.scale(k));
        }
    }
    ratio
}

/// P(a, x) or one of its derivatives in `a`, with TensorFlow's domain and
/// edge cases (see the module header).
fn lower_gamma(a: f64, x: f64, want: Want, flush: Flush) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    if x < 0.0 || a <= 0.0 || a.is_nan() || x.is_nan() {
        return f64::NAN;
    }
    if x > 1.0 && x > a {
        let upper = upper_gamma_fraction(a, x, want, flush);
        return if want == Want::Value { 1.0 - upper } else { -upper };
    }
    lower_gamma_series(a, x, want, flush)
}

/// The series branch of [`lower_gamma`].
fn lower_gamma_series(a: f64, x: f64, want: Want, flush: Flush) -> f64 {
    if a.is_infinite() {
        return 0.0;
    }
    let sum = lower_series(a, x);
    let log_front = a * x.ln() - x - lgamma(a + 1.0);
    let front = flush.exp(log_front);
    if front == 0.0 {
        return 0.0;
    }
    let d_log_front = x.ln() - digamma(a + 1.0);
    match want {
        Want::Value => sum.v * front,
        Want::DerivativeA => front * (sum.d + sum.v * d_log_front),
        Want::SampleDerivative => -(sum.d + sum.v * d_log_front) * x / a,
    }
}

/// The continued-fraction branch: Q(a, x) or its derivatives in `a` (of
/// Q, so a caller after P negates them).
fn upper_gamma_fraction(a: f64, x: f64, want: Want, flush: Flush) -> f64 {
    if x.is_infinite() {
        return 0.0;
    }
    let ratio = upper_fraction(a, x);
    let log_front = a * x.ln() - x - lgamma(a);
    let front = flush.exp(log_front);
    if front == 0.0 {
        return 0.0;
    }
    let d_log_front = x.ln() - digamma(a);
    match want {
        Want::Value => ratio.v * front,
        Want::DerivativeA => front * (ratio.d + ratio.v * d_log_front),
        Want::SampleDerivative => -(ratio.d + ratio.v * d_log_front) * x,
    }
}

/// Q(a, x) = 1 − P(a, x), computed on whichever side keeps its digits.
fn upper_gamma(a: f64, x: f64, flush: Flush) -> f64 {
    if x < 0.0 || a <= 0.0 || a.is_nan() || x.is_nan() {
        return f64::NAN;
    }
    if x < 1.0 || x < a {
        return 1.0 - lower_gamma_series(a, x, Want::Value, flush);
    }
    upper_gamma_fraction(a, x, Want::Value, flush)
}

/// B₂ⱼ / (2j)! for j = 1..12: the Euler–Maclaurin tail's coefficients.
const BERNOULLI_OVER_FACTORIAL: [f64; 12] = [
    1.0 / 12.0,
    -1.0 / 720.0,
    1.0 / 30_240.0,
    -1.0 / 1_209_600.0,
    1.0 / 47_900_160.0,
    -691.0 / 1_307_674_368_000.0,
    1.0 / 74_724_249_600.0,
    -3617.0 / 10_670_622_842_880_000.0,
    43_867.0 / 5_109_094_217_170_944_000.0,
    -174_611.0 / 802_857_662_698_291_200_000.0,
    854_513.0 / 155_112_100_433_309_859_840_000.0,
    -236_364_091.0 / 1_693_824_136_731_743_669_452_800_000.0,
];

/// The most negative `q` [`zeta`] sums from.
const MOST_NEGATIVE_Q: f64 = 1e6;

/// The Hurwitz zeta function ζ(x, q) = Σₖ (q + k)⁻ˣ: its first terms
/// summed until q + k passes 10, the rest by Euler–Maclaurin.
pub fn zeta(x: f64, q: f64) -> f64 {
    if x.is_nan() || q.is_nan() {
        return f64::NAN;
    }
    if x == 1.0 {
        return f64::INFINITY;
    }
    if x < 1.0 {
        return f64::NAN;
    }
    if q <= 0.0 {
        if q == q.floor() {
            return f64::INFINITY;
        }
        if x != x.floor() {
            return f64::NAN;
        }
    }
    if q == f64::INFINITY {
        return 0.0;
    }
    if q < -MOST_NEGATIVE_Q {
        // The direct sum takes a term per unit of q (TensorFlow's would
        // loop that long): refused rather than hang.
        return f64::NAN;
    }
    if x == f64::INFINITY {
        // Each term is 0, 1 or ∞ as |q + k| is above, at or below 1.
        let mut sum = 0.0;
        let mut base = q;
        while base < 2.0 {
            sum += base.abs().powf(-x);
            base += 1.0;
        }
        return sum;
    }
    let mut sum = 0.0;
    let mut base = q;
    let mut terms = 0;
    while terms < 9 || base < 10.0 {
        let term = base.powf(-x);
        sum += term;
        base += 1.0;
        terms += 1;
        if term.abs() < EPS * sum.abs() {
            return sum;
        }
    }
    let w = base;
    let w_pow = w.powf(-x);
    sum += w_pow * w / (x - 1.0) + 0.5 * w_pow;
    // Tail term j: B₂ⱼ/(2j)! · x(x+1)…(x+2j−2) · w^(−x−2j+1).
    let mut rising = x;
    let mut w_factor = w_pow / w;
    for (j, coefficient) in BERNOULLI_OVER_FACTORIAL.iter().enumerate() {
        let term = coefficient * rising * w_factor;
        sum += term;
        if (term / sum).abs() < EPS {
            break;
        }
        let k = (2 * j + 1) as f64;
        rising *= (x + k) * (x + k + 1.0);
        w_factor /= w * w;
    }
    sum
}

/// ψ⁽ⁿ⁾(x), the n-th derivative of digamma: digamma itself for n = 0,
/// else (−1)ⁿ⁺¹ n! ζ(n + 1, x); NaN for a non-integer n.
pub fn polygamma(n: f64, x: f64) -> f64 {
    if n.is_nan() || n.floor() != n {
        return f64::NAN;
    }
    if n == 0.0 {
        return digamma(x);
    }
    let order = n + 1.0;
    // n! exactly while it is finite (171! overflows).
    let factorial =
        if n > 0.0 && n <= 170.0 { (2..=n as u32).fold(1.0, |f, k| f * f64::from(k)) } else { lgamma(order).exp() };
    let sign = if order.is_finite() && order % 2.0 != 0.0 { -1.0 } else { 1.0 };
    sign * factorial * zeta(order, x)
}

/// The continued fraction of I_x(a, b) (modified Lentz), for
/// x < (a + 1)/(a + b + 2), where it converges in O(√max(a, b)) steps.
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));
    let mut h = d;
    for m in 1..=100_000 {
        let m = f64::from(m);
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        h *= d * c;
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() <= 2.0 * f64::EPSILON {
            break;
        }
    }
    h
}

/// I_x(a, b), the regularized incomplete beta integral.
pub fn betainc(a: f64, b: f64, x: f64) -> f64 {
    if a.is_nan() || b.is_nan() || x.is_nan() || a <= 0.0 || b <= 0.0 {
        return f64::NAN;
    }
    if x <= 0.0 || x >= 1.0 {
        return match x {
            0.0 => 0.0,
            1.0 => 1.0,
            _ => f64::NAN,
        };
    }
    if a.is_infinite() || b.is_infinite() {
        return f64::NAN;
    }
    // xᵃ(1−x)ᵇ / (a B(a, b)) times the fraction, on the side of the mean
    // where the fraction converges; the other side by symmetry.
    let front =
        |a: f64, b: f64, x: f64| (a * x.ln() + b * (-x).ln_1p() + lgamma(a + b) - lgamma(a) - lgamma(b)).exp() / a;
    if x < (a + 1.0) / (a + b + 2.0) {
        front(a, b, x) * beta_fraction(a, b, x)
    } else {
        let y = 1.0 - x;
        1.0 - front(b, a, y) * beta_fraction(b, a, y)
    }
}

// ---------------------------------------------------------------------------
// Kernels

/// A binary op through an f64 function of (left, right), rounded once for
/// float32; `$flush` picks the float32 form where it matters.
macro_rules! binary_in_f64 {
    ($(#[$doc:meta])* $op:ident: |$l:ident, $r:ident, $flush:ident| $body:expr) => {
        $(#[$doc])*
        pub struct $op;
        impl Binary<f32> for $op {
            #[inline]
            fn apply(l: f32, r: f32) -> f32 {
                let ($l, $r, $flush) = (f64::from(l), f64::from(r), Flush::F32);
                let _ = $flush;
                ($body) as f32
            }
        }
        impl Binary<f64> for $op {
            #[inline]
            fn apply(l: f64, r: f64) -> f64 {
                let ($l, $r, $flush) = (l, r, Flush::F64);
                let _ = $flush;
                $body
            }
        }
    };
}

binary_in_f64! {
    /// `Igamma(a, x)`: P(a, x).
    Igamma: |a, x, flush| lower_gamma(a, x, Want::Value, flush)
}
binary_in_f64! {
    /// `Igammac(a, x)`: Q(a, x).
    Igammac: |a, x, flush| upper_gamma(a, x, flush)
}
binary_in_f64! {
    /// `IgammaGradA(a, x)`: ∂P(a, x)/∂a (the gradient of `Igamma` in `a`).
    IgammaGradA: |a, x, flush| lower_gamma(a, x, Want::DerivativeA, flush)
}
binary_in_f64! {
    /// `RandomGammaGrad(alpha, sample)`: ∂sample/∂alpha of a Gamma(alpha,
    /// 1) sample (the gradient of `tf.random.gamma`).
    RandomGammaGrad: |alpha, sample, flush| lower_gamma(alpha, sample, Want::SampleDerivative, flush)
}
binary_in_f64! {
    /// `Zeta(x, q)`: the Hurwitz zeta function.
    Zeta: |x, q, flush| zeta(x, q)
}
binary_in_f64! {
    /// `Polygamma(a, x)`: ψ⁽ᵃ⁾(x).
    Polygamma: |n, x, flush| polygamma(n, x)
}

/// `[T, T, T] -> [T]`.
pub fn betainc_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, t, t], vec![t]))
}

pub fn build_betainc(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => compute_betainc::<f32>,
        DType::F64 => compute_betainc::<f64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, super::FLOAT)),
    };
    Ok(FnKernel::boxed(compute))
}

/// An element type `Betainc` computes through f64.
trait ThroughF64: Element + Copy {
    fn widen(self) -> f64;
    fn narrow(v: f64) -> Self;
}

impl ThroughF64 for f32 {
    fn widen(self) -> f64 {
        f64::from(self)
    }
    fn narrow(v: f64) -> f32 {
        v as f32
    }
}

impl ThroughF64 for f64 {
    fn widen(self) -> f64 {
        self
    }
    fn narrow(v: f64) -> f64 {
        v
    }
}

/// `Betainc(a, b, x)`: each operand a scalar or of the one shape the
/// others that are not scalars have (TensorFlow does not broadcast here).
fn compute_betainc<T: ThroughF64>(ctx: &mut OpContext<'_>) -> Result<()> {
    let operands = [(ctx.input(0)?, "a"), (ctx.input(1)?, "b"), (ctx.input(2)?, "x")];
    for (i, j) in [(0, 1), (0, 2), (1, 2)] {
        let ((l, l_name), (r, r_name)) = (operands[i], operands[j]);
        if !l.shape().is_scalar() && !r.shape().is_scalar() && l.shape() != r.shape() {
            bail!(
                invalid_argument,
                "Shapes of {l_name} and {r_name} are inconsistent: {} vs. {}",
                l.shape(),
                r.shape()
            );
        }
    }
    let shape =
        operands.iter().map(|(t, _)| t.shape()).find(|s| !s.is_scalar()).unwrap_or(operands[0].0.shape()).clone();
    let (a, b, x) = (operands[0].0.as_slice::<T>()?, operands[1].0.as_slice::<T>()?, operands[2].0.as_slice::<T>()?);
    let at = |v: &[T], i: usize| if v.len() == 1 { v[0] } else { v[i] }.widen();
    let out = Tensor::build::<T>(shape, |out| {
        for (i, o) in out.iter_mut().enumerate() {
            *o = T::narrow(betainc(at(a, i), at(b, i), at(x, i)));
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, rel: f64) {
        assert!(
            (got - want).abs() <= rel * want.abs().max(1e-300) || (got.is_nan() && want.is_nan()) || got == want,
            "got {got:e}, want {want:e} (relative tolerance {rel:e})"
        );
    }

    fn igamma(a: f64, x: f64) -> f64 {
        Igamma::apply(a, x)
    }

    fn igammac(a: f64, x: f64) -> f64 {
        Igammac::apply(a, x)
    }

    fn f32_of<Op: Binary<f32>>(l: f32, r: f32) -> f32 {
        Op::apply(l, r)
    }

    #[test]
    fn incomplete_gamma_matches_tensorflow_s_float64_values() {
        // TensorFlow 2.21's float64 outputs.
        for (a, x, p, q) in [
            (1e-3, 1e-3, 0.9936876467088608, 0.006312353291139217),
            (50.0, 49.0, 0.4621043936009459, 0.5378956063990541),
            (100.0, 130.0, 0.9972495916326937, 0.0027504083673063613),
            (2.0, 1e-30, 5.000000000000024e-61, 1.0),
        ] {
            close(igamma(a, x), p, 1e-12);
            close(igammac(a, x), q, 1e-12);
        }
        // P(1, x) = 1 − e⁻ˣ.
        for x in [0.1, 1.0, 3.0, 30.0] {
            close(igamma(1.0, x), -(-x).exp_m1(), 1e-14);
        }
    }

    #[test]
    fn incomplete_gamma_edges_are_tensorflow_s() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        // (a, x, igamma, igammac), TensorFlow 2.21 in float32 and float64 alike.
        for (a, x, p, q) in [
            (inf, 1.0, 0.0, 1.0),
            (inf, inf, 0.0, 0.0),
            (inf, 0.0, 0.0, 1.0),
            (1.0, inf, 1.0, 0.0),
            (1.0, nan, nan, nan),
            (0.0, 0.0, 0.0, nan),
            (-1.0, 0.0, 0.0, nan),
            (nan, 1.0, nan, nan),
            (1.0, -1.0, nan, nan),
            (0.5, 0.0, 0.0, 1.0),
            (5.0, 1e3, 1.0, 0.0),
        ] {
            for (got, want) in [(igamma(a, x), p), (igammac(a, x), q)] {
                assert!(got == want || (got.is_nan() && want.is_nan()), "({a}, {x}): got {got}, want {want}");
            }
            let (p32, q32) = (f32_of::<Igamma>(a as f32, x as f32), f32_of::<Igammac>(a as f32, x as f32));
            assert!(f64::from(p32) == p || (p32.is_nan() && p.is_nan()), "float32 igamma({a}, {x}) = {p32}");
            assert!(f64::from(q32) == q || (q32.is_nan() && q.is_nan()), "float32 igammac({a}, {x}) = {q32}");
        }
    }

    #[test]
    fn derivatives_in_a_match_tensorflow_s() {
        // TensorFlow 2.21's float64 IgammaGradA and RandomGammaGrad.
        for (a, x, grad_a, sample_grad) in [
            (1e-3, 1e-3, -6.293203824900426, 6.339511118616953),
            (50.0, 49.0, -0.056510237991276815, 0.9932388452214483),
            (100.0, 130.0, -0.0008101300285622401, 1.1388044458372264),
            // TensorFlow's ∂P/∂a here is -1.78893e-305, 1.7e-4 off the
            // true -1.789227299215881e-305 (mpmath at 60 digits).
            (0.5, 700.0, -1.789227299215881e-305, 8.509946003498419),
            (5.0, 10.0, -0.02710521422071772, 1.4328769773445114),
            (50.0, 750.0, -6.867931987964552e-248, 2.9093125148442978),
        ] {
            close(IgammaGradA::apply(a, x), grad_a, 1e-9);
            close(RandomGammaGrad::apply(a, x), sample_grad, 1e-9);
        }
        // Where the density underflows, both are zero (as there).
        assert_eq!(RandomGammaGrad::apply(0.5f64, 750.0), 0.0);
        assert_eq!(f32_of::<RandomGammaGrad>(0.5, 100.0), 0.0);
        close(f64::from(f32_of::<RandomGammaGrad>(0.5, 80.0)), 6.3187971115112305, 1e-6);
        close(f64::from(f32_of::<RandomGammaGrad>(1.0, 91.75)), RandomGammaGrad::apply(1.0, 91.75), 1e-6);
        assert_eq!(f32_of::<RandomGammaGrad>(1.0, 92.0), 0.0);
        // d/da P(a, x) against a central difference.
        for (a, x) in [(0.7, 0.4), (3.0, 5.0), (20.0, 15.0)] {
            let h = 1e-6;
            let numeric = (igamma(a + h, x) - igamma(a - h, x)) / (2.0 * h);
            close(IgammaGradA::apply(a, x), numeric, 1e-6);
        }
    }

    #[test]
    fn zeta_matches_tensorflow_s() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        // TensorFlow 2.21's float64 outputs.
        for (x, q, want) in [
            (1.0, 1.0, inf),
            (0.5, 1.0, nan),
            (2.0, -1.0, inf),
            (2.0, -1.5, 9.379246644989124),
            (3.0, -1.5, 0.11810202582086413),
            (2.5, -1.5, nan),
            (inf, 2.0, 0.0),
            (inf, 0.5, inf),
            (2.0, inf, 0.0),
            (nan, 1.0, nan),
            (2.0, nan, nan),
            (2.0, 0.0, inf),
            (2.0, 1e-3, 1000001.6425331959),
            (1.0001, 1.0, 10000.57722294754),
            (30.0, 1.0, 1.0000000009313275),
            (4.0, 0.25, 256.4636906681982),
        ] {
            close(zeta(x, q), want, 1e-13);
        }
        close(zeta(2.0, 1.0), std::f64::consts::PI.powi(2) / 6.0, 1e-15);
        assert!(zeta(2.0, -1e15 - 0.5).is_nan(), "a far negative q is refused, not summed");
    }

    #[test]
    fn polygamma_matches_tensorflow_s() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        for (n, x, want) in [
            (0.0, 0.5, -1.9635100260214227),
            (1.0, 0.5, 4.93480220054468),
            (2.0, 0.5, -16.828796644234316),
            (1.5, 0.5, nan),
            (-1.0, 0.5, nan),
            (3.0, -2.5, 194.74787621918756),
            (1.0, 0.0, inf),
            (1.0, -1.0, inf),
            (0.0, 0.0, nan),
            (nan, 1.0, nan),
            (1.0, nan, nan),
            (inf, 1.0, inf),
            (1.0, inf, 0.0),
            (0.0, inf, inf),
            (4.0, 10.0, -0.0007299311682352869),
            (1.0, 1e-3, 1000001.6425331959),
        ] {
            close(polygamma(n, x), want, 1e-13);
        }
    }

    #[test]
    fn betainc_matches_tensorflow_s() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        for (a, b, x, want) in [
            (0.0, 1.0, 0.5, nan),
            (1.0, 0.0, 0.5, nan),
            (1.0, 1.0, 1.5, nan),
            (2.0, 3.0, 0.0, 0.0),
            (2.0, 3.0, 1.0, 1.0),
            (nan, 1.0, 0.5, nan),
            (1.0, 1.0, nan, nan),
            (inf, 1.0, 0.5, nan),
            (1.0, inf, 0.5, nan),
            (0.5, 0.5, 0.5, 0.5),
            (0.1, 10.0, 0.01, 0.8244896709066971),
            (300.0, 200.0, 0.6, 0.49757138368010567),
            (1e-3, 1e-3, 0.3, 0.49957696213967645),
            (5.0, 2.0, 0.999, 0.999985039955024),
            (2.0, 5.0, 1e-6, 1.499996000004498e-11),
            (20.0, 0.5, 0.99, 0.5286300645149851),
        ] {
            close(betainc(a, b, x), want, 1e-11);
        }
        // I_x(a, 1) = xᵃ; I_x(1, b) = 1 − (1 − x)ᵇ.
        close(betainc(3.5, 1.0, 0.3), 0.3f64.powf(3.5), 1e-13);
        close(betainc(1.0, 4.0, 0.2), 1.0 - 0.8f64.powi(4), 1e-13);
    }

    #[test]
    fn betainc_takes_scalars_or_one_shape_and_names_the_mismatch() {
        use crate::ops::testing::{node, run1, ty};
        let op = node("Betainc").attr("T", ty(DType::F32));
        let f32s = |shape: &[usize], v: &[f32]| Tensor::from_slice::<f32>(shape, v).unwrap();
        let out = run1(&op, &[f32s(&[2], &[2.0, 0.5]), Tensor::scalar(3.0f32), Tensor::scalar(0.25f32)]).unwrap();
        let got = out.as_slice::<f32>().unwrap();
        close(f64::from(got[0]), betainc(2.0, 3.0, 0.25), 1e-6);
        close(f64::from(got[1]), betainc(0.5, 3.0, 0.25), 1e-6);
        let err =
            run1(&op, &[Tensor::scalar(1.0f32), f32s(&[2], &[1.0, 2.0]), f32s(&[3], &[0.1, 0.2, 0.3])]).unwrap_err();
        assert!(err.message.contains("Shapes of b and x are inconsistent: [2] vs. [3]"), "{}", err.message);
    }
}
