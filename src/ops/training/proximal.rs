//! The L1/L2-regularized optimizers of sparse linear and wide-and-deep
//! models, dense and row forms, ref and resource variables:
//! `ApplyProximalGradientDescent`, `ApplyProximalAdagrad`,
//! `ApplyAdagradDA`, `ApplyFtrl` and `ApplyFtrlV2` (tf.compat.v1's
//! `ProximalGradientDescentOptimizer`, `ProximalAdagradOptimizer`,
//! `AdagradDAOptimizer`, `FtrlOptimizer`), their `SparseApply*` row
//! updates and the `Resource*` twins of both.
//!
//! Owns: these rules, each as TensorFlow's CPU functor writes it (operation
//! order included, and the row kernels' own forms where they differ from
//! the dense ones), and FTRL's checks on its hyperparameters. The kernels
//! around them (variable lookup and locking, validation, threading) are
//! `optimizer`'s and `sparse`'s. Must not hold state between runs.

use super::optimizer::{Arg, DenseRule, dense};
use super::sparse::{SparseArg, SparseRule, sparse};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::numeric::Float;
use crate::ops::registry::OpDef;

pub const DEFS: &[OpDef] = &[
    dense::<ProximalGradientDescent, 1>("ApplyProximalGradientDescent"),
    dense::<ProximalGradientDescent, 1>("ResourceApplyProximalGradientDescent"),
    dense::<ProximalAdagrad, 2>("ApplyProximalAdagrad"),
    dense::<ProximalAdagrad, 2>("ResourceApplyProximalAdagrad"),
    dense::<AdagradDa, 3>("ApplyAdagradDA"),
    dense::<AdagradDa, 3>("ResourceApplyAdagradDA"),
    dense::<Ftrl<false>, 3>("ApplyFtrl"),
    dense::<Ftrl<false>, 3>("ResourceApplyFtrl"),
    dense::<Ftrl<true>, 3>("ApplyFtrlV2"),
    dense::<Ftrl<true>, 3>("ResourceApplyFtrlV2"),
    sparse::<SparseProximalGradientDescent, 1>("SparseApplyProximalGradientDescent"),
    sparse::<SparseProximalGradientDescent, 1>("ResourceSparseApplyProximalGradientDescent"),
    sparse::<SparseProximalAdagrad, 2>("SparseApplyProximalAdagrad"),
    sparse::<SparseProximalAdagrad, 2>("ResourceSparseApplyProximalAdagrad"),
    sparse::<SparseAdagradDa, 3>("SparseApplyAdagradDA"),
    sparse::<SparseAdagradDa, 3>("ResourceSparseApplyAdagradDA"),
    sparse::<SparseFtrl<false>, 3>("SparseApplyFtrl"),
    sparse::<SparseFtrl<false>, 3>("ResourceSparseApplyFtrl"),
    sparse::<SparseFtrl<true>, 3>("SparseApplyFtrlV2"),
    sparse::<SparseFtrl<true>, 3>("ResourceSparseApplyFtrlV2"),
];

/// Eigen's `cwiseMax(0)`: `x < 0 ? 0 : x` (a NaN stays).
fn max0<T: Float>(x: T) -> T {
    if x < T::ZERO { T::ZERO } else { x }
}

/// The proximal step shared by both proximal rules: from `prox = var -
/// step`, `sign(prox) * max(|prox| - shrink, 0) / denom` when `l1 > 0`,
/// else `prox / denom`.
fn proximal<T: Float>(prox: T, l1: T, shrink: T, denom: T) -> T {
    if l1 > T::ZERO { prox.sign().mul(max0(prox.abs().sub(shrink))).div(denom) } else { prox.div(denom) }
}

/// `prox = var - grad * lr`, then the proximal step with shrinkage
/// `lr * l1` over `1 + l2 * lr`.
pub struct ProximalGradientDescent;
impl DenseRule<1> for ProximalGradientDescent {
    const VARS: [&'static str; 1] = ["var"];
    const ARGS: &'static [Arg] = &[
        Arg::Scalar("lr is not a scalar: "),
        Arg::Scalar("l1 regularization strength is not a scalar: "),
        Arg::Scalar("l2 regularization strength is not a scalar: "),
        Arg::Grad("delta"),
    ];

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(ProximalGradientDescent)
    }

    fn update<T: Float>(&self, s: &[T], [var]: [&mut [T]; 1], grad: &[T]) {
        let (lr, l1, l2) = (s[0], s[1], s[2]);
        let (shrink, denom) = (lr.mul(l1), T::ONE.add(l2.mul(lr)));
        for (v, &g) in var.iter_mut().zip(grad) {
            *v = proximal(v.sub(g.mul(lr)), l1, shrink, denom);
        }
    }
}

/// `accum += grad^2`, `rate = lr * rsqrt(accum)`, `prox = var - grad *
/// rate`, then the proximal step with shrinkage `rate * l1` over
/// `1 + l2 * rate`.
pub struct ProximalAdagrad;
impl DenseRule<2> for ProximalAdagrad {
    const VARS: [&'static str; 2] = ["var", "accum"];
    const ARGS: &'static [Arg] = &[
        Arg::Scalar("lr is not a positive scalar: "),
        Arg::Scalar("l1 regularization strength is not a non-negative scalar: "),
        Arg::Scalar("l2 regularization strength is not a non-negative scalar: "),
        Arg::Grad("grad"),
    ];

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(ProximalAdagrad)
    }

    fn check<T: Float>(&self, s: &[T]) -> Result<()> {
        check_positive_rate(s[0], s[1], s[2])
    }

    fn update<T: Float>(&self, s: &[T], [var, accum]: [&mut [T]; 2], grad: &[T]) {
        let (lr, l1, l2) = (s[0], s[1], s[2]);
        for ((v, a), &g) in var.iter_mut().zip(accum.iter_mut()).zip(grad) {
            *a = a.add(g.mul(g));
            let rate = lr.mul(T::ONE.div(a.sqrt()));
            *v = proximal(v.sub(g.mul(rate)), l1, rate.mul(l1), T::ONE.add(l2.mul(rate)));
        }
    }
}

/// `g_acc += grad`, `gg_acc += grad^2`, then with `t` the global step (as
/// float32) `var = lr * -1 * sign(g_acc) * max(|g_acc| - t * l1, 0) /
/// (l2 * (t * lr) + sqrt(gg_acc))` when `l1 > 0`, else
/// `var = lr * g_acc * -1 / (l2 * (t * lr) + sqrt(gg_acc))`.
pub struct AdagradDa;
impl DenseRule<3> for AdagradDa {
    const VARS: [&'static str; 3] = ["var", "gradient_accumulator", "gradient_squared_accumulator"];
    const ARGS: &'static [Arg] = &[
        Arg::Grad("grad"),
        Arg::Scalar("lr is not a scalar: "),
        Arg::Scalar("l1 regularization strength is not a scalar: "),
        Arg::Scalar("l2 regularization strength is not a scalar: "),
        Arg::Step("global_step is not a scalar: "),
    ];

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(AdagradDa)
    }

    fn update<T: Float>(&self, s: &[T], [var, acc, sq]: [&mut [T]; 3], grad: &[T]) {
        let (lr, l1, l2, step) = (s[0], s[1], s[2], s[3]);
        let decay = l2.mul(step.mul(lr));
        for (((v, a), q), &g) in var.iter_mut().zip(acc.iter_mut()).zip(sq.iter_mut()).zip(grad) {
            *a = a.add(g);
            *q = q.add(g.mul(g));
            *v = adagrad_da_value(*a, *q, lr, l1, step, decay);
        }
    }
}

/// AdagradDA's new value from the accumulators (`decay = l2 * (t * lr)`).
fn adagrad_da_value<T: Float>(acc: T, sq: T, lr: T, l1: T, step: T, decay: T) -> T {
    let minus_one = T::ZERO.sub(T::ONE);
    let denom = decay.add(sq.sqrt());
    if l1 > T::ZERO {
        lr.mul(minus_one).mul(acc.sign()).mul(max0(acc.abs().sub(step.mul(l1)))).div(denom)
    } else {
        lr.mul(acc).mul(minus_one).div(denom)
    }
}

/// FTRL-proximal; `V2` adds `l2_shrinkage` (`grad + 2 * l2_shrinkage *
/// var` in place of `grad` in the linear term). With `p = -lr_power`
/// (`sqrt` when `p` is 0.5):
/// `new_accum = accum + grad^2`,
/// `linear += grad - (new_accum^p - accum^p) / lr * var`,
/// `var = |linear| > l1 ? (l1 * sign(linear) - linear) /
/// (new_accum^p / lr + 2 * l2) : 0`, `accum = new_accum`; with `multiply_linear_by_lr`
/// the linear term is kept times `lr`:
/// `linear += grad * lr - (new_accum^p - accum^p) * var`,
/// `var = |linear| > l1 * lr ? (l1 * lr * sign(linear) - linear) /
/// (new_accum^p + 2 * l2 * lr) : 0`.
pub struct Ftrl<const V2: bool> {
    multiply_linear_by_lr: bool,
}

/// FTRL's scalars in the order the rule reads them.
struct FtrlScalars<T> {
    lr: T,
    l1: T,
    l2: T,
    l2_shrinkage: T,
    lr_power: T,
}

impl<const V2: bool> Ftrl<V2> {
    fn scalars<T: Float>(s: &[T]) -> FtrlScalars<T> {
        if V2 {
            FtrlScalars { lr: s[0], l1: s[1], l2: s[2], l2_shrinkage: s[3], lr_power: s[4] }
        } else {
            FtrlScalars { lr: s[0], l1: s[1], l2: s[2], l2_shrinkage: T::ZERO, lr_power: s[3] }
        }
    }

    /// TensorFlow's row kernels' checks, with their messages (the shape
    /// was checked already, so it is always `[]` here).
    fn check_scalars<T: Float>(&self, s: &[T]) -> Result<()> {
        let f = Self::scalars(s);
        let lr_ok = f.lr > T::ZERO || (self.multiply_linear_by_lr && f.lr >= T::ZERO);
        if !lr_ok {
            bail!(invalid_argument, "lr is not a positive scalar (or zero if multiply_linear_by_lr is set): []");
        }
        if f.l1 < T::ZERO {
            bail!(invalid_argument, "l1 regularization strength is not a non-negative scalar: []");
        }
        if f.l2 < T::ZERO {
            bail!(invalid_argument, "l2 regularization strength is not a non-negative scalar: []");
        }
        if V2 && f.l2_shrinkage < T::ZERO {
            bail!(invalid_argument, "l2 shrinkage regularization strength is not a non-negative scalar: []");
        }
        if f.lr_power > T::ZERO {
            bail!(invalid_argument, "lr_power is not a non-positive scalar: []");
        }
        Ok(())
    }

    /// One element: updates `var`, `accum` and `linear` from `grad`.
    fn step<T: Float>(&self, f: &FtrlScalars<T>, var: &mut T, accum: &mut T, linear: &mut T, grad: T) {
        let two = T::ONE.add(T::ONE);
        let shrunk = if V2 { grad.add(two.mul(f.l2_shrinkage).mul(*var)) } else { grad };
        let new_accum = accum.add(grad.mul(grad));
        let half = f.lr_power == T::from_f64(-0.5);
        let power = |x: T| if half { x.sqrt() } else { x.pow(T::ZERO.sub(f.lr_power)) };
        let (new_pow, old_pow) = (power(new_accum), power(*accum));
        if self.multiply_linear_by_lr {
            *linear = linear.add(shrunk.mul(f.lr).sub(new_pow.sub(old_pow).mul(*var)));
            let l1_lr = f.l1.mul(f.lr);
            let x = l1_lr.mul(linear.sign()).sub(*linear);
            let y = new_pow.add(two.mul(f.l2).mul(f.lr));
            *var = if linear.abs() > l1_lr { x.div(y) } else { T::ZERO };
        } else {
            *linear = linear.add(shrunk.sub(new_pow.sub(old_pow).div(f.lr).mul(*var)));
            let x = f.l1.mul(linear.sign()).sub(*linear);
            let y = new_pow.div(f.lr).add(two.mul(f.l2));
            *var = if linear.abs() > f.l1 { x.div(y) } else { T::ZERO };
        }
        *accum = accum.add(grad.mul(grad));
    }
}

const FTRL_ARGS: &[Arg] = &[
    Arg::Grad("grad"),
    Arg::Scalar("lr is not a scalar: "),
    Arg::Scalar("l1 is not a scalar: "),
    Arg::Scalar("l2 is not a scalar: "),
    Arg::Scalar("lr_power is not a scalar: "),
];

const FTRL_V2_ARGS: &[Arg] = &[
    Arg::Grad("grad"),
    Arg::Scalar("lr is not a scalar: "),
    Arg::Scalar("l1 is not a scalar: "),
    Arg::Scalar("l2 is not a scalar: "),
    Arg::Scalar("l2_shrinkage is not a scalar: "),
    Arg::Scalar("lr_power is not a scalar: "),
];

impl<const V2: bool> DenseRule<3> for Ftrl<V2> {
    const VARS: [&'static str; 3] = ["var", "accum", "linear"];
    const ARGS: &'static [Arg] = if V2 { FTRL_V2_ARGS } else { FTRL_ARGS };

    /// TensorFlow's dense FTRL kernels take any hyperparameters (its row
    /// kernels check them), and so does this.
    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(Ftrl { multiply_linear_by_lr: node.attr_bool_or("multiply_linear_by_lr", false)? })
    }

    fn update<T: Float>(&self, s: &[T], [var, accum, linear]: [&mut [T]; 3], grad: &[T]) {
        let f = Self::scalars(s);
        for (((v, a), l), &g) in var.iter_mut().zip(accum.iter_mut()).zip(linear.iter_mut()).zip(grad) {
            self.step(&f, v, a, l, g);
        }
    }
}

// ---------------------------------------------------------------------------
// Row forms. TensorFlow's row kernels have a path for rows of one element
// that computes in another order, some of it in float64; each is kept.

/// `num / (1 + l2 * lr)` with the denominator formed in float64, as the
/// one-element rows of TensorFlow's proximal kernels do.
fn over_f64_denominator<T: Float>(num: T, l2_lr: T) -> T {
    T::from_f64(num.to_f64() / (1.0 + l2_lr.to_f64()))
}

/// The one-element proximal step: `sgn(prox) * max(|prox| - shrink, 0)`
/// (or `prox` when `l1` is not positive) over `1 + l2_lr` in float64.
fn proximal_f64<T: Float>(prox: T, l1: T, shrink: T, l2_lr: T) -> T {
    let num = if l1 > T::ZERO { prox.sign().mul(max0(prox.abs().sub(shrink))) } else { prox };
    over_f64_denominator(num, l2_lr)
}

pub struct SparseProximalGradientDescent;
impl SparseRule<1> for SparseProximalGradientDescent {
    const VARS: [&'static str; 1] = ["var"];
    const ARGS: &'static [SparseArg] = &[
        SparseArg::Scalar("lr is not a scalar: "),
        SparseArg::Scalar("l1 regularization strength is not a scalar: "),
        SparseArg::Scalar("l2 regularization strength is not a scalar: "),
        SparseArg::Grad,
        SparseArg::Indices,
    ];
    const NEEDS_INNER: bool = true;

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(SparseProximalGradientDescent)
    }

    fn update_row<T: Float>(&self, s: &[T], [var]: [&mut [T]; 1], grad: &[T]) {
        if grad.len() > 1 {
            return ProximalGradientDescent.update(s, [var], grad);
        }
        let (lr, l1, l2) = (s[0], s[1], s[2]);
        for (v, &g) in var.iter_mut().zip(grad) {
            *v = proximal_f64(v.sub(lr.mul(g)), l1, lr.mul(l1), l2.mul(lr));
        }
    }
}

/// TensorFlow's checks on the proximal Adagrad kernels' hyperparameters.
fn check_positive_rate<T: Float>(lr: T, l1: T, l2: T) -> Result<()> {
    use std::cmp::Ordering::{Equal, Greater};
    // A NaN fails every check, as in TensorFlow.
    if lr.partial_cmp(&T::ZERO) != Some(Greater) {
        bail!(invalid_argument, "lr is not a positive scalar: []");
    }
    if !matches!(l1.partial_cmp(&T::ZERO), Some(Greater | Equal)) {
        bail!(invalid_argument, "l1 regularization strength is not a non-negative scalar: []");
    }
    if !matches!(l2.partial_cmp(&T::ZERO), Some(Greater | Equal)) {
        bail!(invalid_argument, "l2 regularization strength is not a non-negative scalar: []");
    }
    Ok(())
}

pub struct SparseProximalAdagrad;
impl SparseRule<2> for SparseProximalAdagrad {
    const VARS: [&'static str; 2] = ["var", "accum"];
    const ARGS: &'static [SparseArg] = &[
        SparseArg::Scalar("lr is not a positive scalar: "),
        SparseArg::Scalar("l1 regularization strength is not a non-negative scalar: "),
        SparseArg::Scalar("l2 regularization strength is not a non-negative scalar: "),
        SparseArg::Grad,
        SparseArg::Indices,
    ];
    const NEEDS_INNER: bool = true;

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(SparseProximalAdagrad)
    }

    fn check<T: Float>(&self, s: &[T]) -> Result<()> {
        check_positive_rate(s[0], s[1], s[2])
    }

    fn update_row<T: Float>(&self, s: &[T], [var, accum]: [&mut [T]; 2], grad: &[T]) {
        if grad.len() > 1 {
            return ProximalAdagrad.update(s, [var, accum], grad);
        }
        let (lr, l1, l2) = (s[0], s[1], s[2]);
        for ((v, a), &g) in var.iter_mut().zip(accum.iter_mut()).zip(grad) {
            *a = a.add(g.mul(g));
            let rate = lr.div(a.sqrt());
            *v = proximal_f64(v.sub(rate.mul(g)), l1, rate.mul(l1), l2.mul(rate));
        }
    }
}

/// The row form divides through by the step: with `t` the global step,
/// `var = (-1 * sign(g_acc)) * max(|g_acc| / t - l1, 0) / (l2 +
/// sqrt(gg_acc) / (t * lr))` (or `-1 * (g_acc / t) / (...)` without l1);
/// one-element rows compute the dense form in float64.
pub struct SparseAdagradDa;
impl SparseRule<3> for SparseAdagradDa {
    const VARS: [&'static str; 3] = ["var", "accum", "accum"];
    const ARGS: &'static [SparseArg] = &[
        SparseArg::Grad,
        SparseArg::Indices,
        SparseArg::Scalar("lr is not a scalar: "),
        SparseArg::Scalar("l1 regularization strength is not a scalar: "),
        SparseArg::Scalar("l2 regularization strength is not a scalar: "),
        SparseArg::Step("global_step is not a scalar: "),
    ];
    const NEEDS_INNER: bool = true;

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(SparseAdagradDa)
    }

    fn update_row<T: Float>(&self, s: &[T], [var, acc, sq]: [&mut [T]; 3], grad: &[T]) {
        let (lr, l1, l2, step) = (s[0], s[1], s[2], s[3]);
        let minus_one = T::ZERO.sub(T::ONE);
        let rows = var.iter_mut().zip(acc.iter_mut()).zip(sq.iter_mut()).zip(grad);
        if grad.len() > 1 {
            let step_lr = step.mul(lr);
            for (((v, a), q), &g) in rows {
                *a = a.add(g);
                *q = q.add(g.mul(g));
                let denom = l2.add(q.sqrt().div(step_lr));
                *v = if l1 > T::ZERO {
                    minus_one.mul(a.sign()).mul(max0(a.abs().div(step).sub(l1))).div(denom)
                } else {
                    minus_one.mul(a.div(step)).div(denom)
                };
            }
            return;
        }
        let (lr, l1, step) = (lr.to_f64(), l1.to_f64(), step.to_f64());
        let (step_l1, step_l2_lr) = (step * l1, step * l2.to_f64() * lr);
        for (((v, a), q), &g) in rows {
            let g = g.to_f64();
            *a = T::from_f64(a.to_f64() + g);
            *q = T::from_f64(q.to_f64() + g * g);
            let denom = step_l2_lr + q.sqrt().to_f64();
            *v = if l1 > 0.0 {
                let shrunk = max0(a.abs().to_f64() - step_l1);
                T::from_f64(a.neg().sign().to_f64() * lr * shrunk / denom)
            } else {
                T::from_f64(a.neg().to_f64() * lr / denom)
            };
        }
    }
}

/// FTRL's row form: as the dense rule, but the linear term's sum is
/// grouped `linear + (grad - sigma * var)` on long rows and `(linear +
/// grad) - sigma * var` on one-element rows (which also always take
/// `pow`, never `sqrt`, for the change in the accumulator's power), and
/// the new value is `(clamp(linear, -l1, l1) - linear) / y`.
pub struct SparseFtrl<const V2: bool> {
    dense: Ftrl<V2>,
}

const SPARSE_FTRL_ARGS: &[SparseArg] = &[
    SparseArg::Grad,
    SparseArg::Indices,
    SparseArg::Scalar("lr is not a scalar: "),
    SparseArg::Scalar("l1 is not a scalar: "),
    SparseArg::Scalar("l2 is not a scalar: "),
    SparseArg::Scalar("lr_power is not a scalar: "),
];

const SPARSE_FTRL_V2_ARGS: &[SparseArg] = &[
    SparseArg::Grad,
    SparseArg::Indices,
    SparseArg::Scalar("lr is not a scalar: "),
    SparseArg::Scalar("l1 is not a scalar: "),
    SparseArg::Scalar("l2 is not a scalar: "),
    SparseArg::Scalar("l2_shrinkage is not a scalar: "),
    SparseArg::Scalar("lr_power is not a scalar: "),
];

impl<const V2: bool> SparseRule<3> for SparseFtrl<V2> {
    const VARS: [&'static str; 3] = ["var", "accum", "linear"];
    const ARGS: &'static [SparseArg] = if V2 { SPARSE_FTRL_V2_ARGS } else { SPARSE_FTRL_ARGS };
    const NEEDS_INNER: bool = true;

    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(SparseFtrl { dense: Ftrl::new(node)? })
    }

    fn check<T: Float>(&self, s: &[T]) -> Result<()> {
        self.dense.check_scalars(s)
    }

    fn update_row<T: Float>(&self, s: &[T], [var, accum, linear]: [&mut [T]; 3], grad: &[T]) {
        let f = Ftrl::<V2>::scalars(s);
        let by_lr = self.dense.multiply_linear_by_lr;
        let two = T::ONE.add(T::ONE);
        let half = f.lr_power == T::from_f64(-0.5);
        let one_element = grad.len() == 1;
        let power = |x: T| if half && !one_element { x.sqrt() } else { x.pow(T::ZERO.sub(f.lr_power)) };
        let quadratic_power = |x: T| if half { x.sqrt() } else { x.pow(T::ZERO.sub(f.lr_power)) };
        let bound = if by_lr { f.l1.mul(f.lr) } else { f.l1 };
        for (((v, a), l), &g) in var.iter_mut().zip(accum.iter_mut()).zip(linear.iter_mut()).zip(grad) {
            let shrunk = if V2 { g.add(two.mul(f.l2_shrinkage).mul(*v)) } else { g };
            let new_accum = a.add(g.mul(g));
            let sigma = power(new_accum).sub(power(*a));
            let gain = if by_lr { shrunk.mul(f.lr) } else { shrunk };
            let pull = if by_lr { sigma.mul(*v) } else { sigma.div(f.lr).mul(*v) };
            *l = if one_element { l.add(gain).sub(pull) } else { l.add(gain.sub(pull)) };
            let quadratic = if by_lr {
                quadratic_power(new_accum).add(two.mul(f.l2).mul(f.lr))
            } else {
                quadratic_power(new_accum).div(f.lr).add(two.mul(f.l2))
            };
            let clamped = if *l > bound {
                bound
            } else if *l < T::ZERO.sub(bound) {
                T::ZERO.sub(bound)
            } else {
                *l
            };
            *v = clamped.sub(*l).div(quadratic);
            *a = new_accum;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::{AttrValue, NodeSpec};
    use crate::ops::testing::ty;
    use crate::ops::training::optimizer::tests::{all_close, f, op, three_runs};
    use crate::tensor::{DType, Tensor};

    fn row_op(name: &str) -> NodeSpec {
        op(name, DType::F32).attr("Tindices", ty(DType::I32))
    }

    fn step(n: i64) -> Tensor {
        Tensor::scalar(n)
    }

    /// Rows [1, 0] of a [2, 3] table (long rows), then [4, 1, 4] of a
    /// vector (one-element rows, a repeat).
    fn row_cases() -> [(&'static [usize], usize, Tensor); 2] {
        [
            (&[2, 3], 2, Tensor::from_slice::<i32>([2], &[1, 0]).unwrap()),
            (&[6], 3, Tensor::from_slice::<i32>([3], &[4, 1, 4]).unwrap()),
        ]
    }

    // TensorFlow 2.21's kernels, three runs from VAR0 (the optimizer tests'
    // inputs); long rows first, then one-element rows.

    #[test]
    fn proximal_gradient_descent_matches_tf() {
        let run = |l1: f32| {
            three_runs(&op("ApplyProximalGradientDescent", DType::F32), &[2, 3], &[], None, |g| {
                vec![f(0.1), f(l1), f(0.2), g]
            })
        };
        all_close(&run(0.05), PROXIMAL_GD, 0.0);
        all_close(&run(0.0), PROXIMAL_GD_NO_L1, 0.0);
        for (k, (shape, rows, idx)) in row_cases().into_iter().enumerate() {
            let node = row_op("ResourceSparseApplyProximalGradientDescent");
            let got = three_runs(&node, shape, &[], Some(rows), |g| vec![f(0.1), f(0.05), f(0.2), g, idx.clone()]);
            all_close(&got, &SPARSE_PROXIMAL_GD[k..k + 1], 0.0);
        }
    }

    #[test]
    fn proximal_adagrad_matches_tf() {
        let got = three_runs(&op("ResourceApplyProximalAdagrad", DType::F32), &[2, 3], &[("accum", 0.1)], None, |g| {
            vec![f(0.3), f(0.05), f(0.2), g]
        });
        all_close(&got, PROXIMAL_ADAGRAD, 0.0);
        for (k, (shape, rows, idx)) in row_cases().into_iter().enumerate() {
            let node = row_op("SparseApplyProximalAdagrad");
            let got = three_runs(&node, shape, &[("accum", 0.1)], Some(rows), |g| {
                vec![f(0.3), f(0.05), f(0.2), g, idx.clone()]
            });
            all_close(&got, &SPARSE_PROXIMAL_ADAGRAD[2 * k..2 * k + 2], 0.0);
        }
    }

    #[test]
    fn adagrad_da_matches_tf() {
        let slots = [("gradient_accumulator", 0.0), ("gradient_squared_accumulator", 0.1)];
        let got = three_runs(&op("ApplyAdagradDA", DType::F32), &[2, 3], &slots, None, |g| {
            vec![g, f(0.3), f(0.05), f(0.2), step(3)]
        });
        all_close(&got, ADAGRAD_DA, 0.0);
        for (k, (shape, rows, idx)) in row_cases().into_iter().enumerate() {
            let node = row_op("ResourceSparseApplyAdagradDA");
            let got = three_runs(&node, shape, &slots, Some(rows), |g| {
                vec![g, idx.clone(), f(0.3), f(0.05), f(0.2), step(3)]
            });
            all_close(&got, &SPARSE_ADAGRAD_DA[3 * k..3 * k + 3], 0.0);
        }
    }

    #[test]
    fn ftrl_matches_tf() {
        let slots = [("accum", 0.1), ("linear", 0.0)];
        let got = three_runs(&op("ResourceApplyFtrlV2", DType::F32), &[2, 3], &slots, None, |g| {
            vec![g, f(0.1), f(0.01), f(0.02), f(0.03), f(-0.7)]
        });
        all_close(&got, FTRL_V2_POW, 0.0);
        for (k, (shape, rows, idx)) in row_cases().into_iter().enumerate() {
            let node = row_op("ResourceSparseApplyFtrlV2");
            let got = three_runs(&node, shape, &slots, Some(rows), |g| {
                vec![g, idx.clone(), f(0.1), f(0.01), f(0.02), f(0.03), f(-0.5)]
            });
            all_close(&got, &SPARSE_FTRL_V2[3 * k..3 * k + 3], 0.0);
            let node = row_op("SparseApplyFtrl").attr("multiply_linear_by_lr", AttrValue::Bool(true));
            let got = three_runs(&node, shape, &slots, Some(rows), |g| {
                vec![g, idx.clone(), f(0.1), f(0.01), f(0.02), f(-0.5)]
            });
            all_close(&got, &SPARSE_FTRL_BY_LR[3 * k..3 * k + 3], 0.0);
        }
    }

    #[test]
    fn bad_hyperparameters_are_refused_with_tensorflows_messages() {
        let slots = [("accum", 0.1), ("linear", 0.0)];
        let mgr = crate::ops::ResourceMgr::default();
        let tests = crate::ops::training::optimizer::tests::variable;
        tests(&mgr, "var", Tensor::from_slice::<f32>([2], &[1.0, 2.0]).unwrap());
        for (name, _) in slots {
            tests(&mgr, name, Tensor::from_slice::<f32>([2], &[0.1, 0.1]).unwrap());
        }
        let grad = Tensor::from_slice::<f32>([2], &[0.5, 0.5]).unwrap();
        let rows = Tensor::from_slice::<i32>([2], &[0, 1]).unwrap();
        let ftrl = |lr: f32, l1: f32, lr_power: f32| {
            crate::ops::training::optimizer::tests::step(
                &mgr,
                &row_op("ResourceSparseApplyFtrl"),
                &["var", "accum", "linear"],
                &[grad.clone(), rows.clone(), f(lr), f(l1), f(0.0), f(lr_power)],
            )
            .unwrap_err()
            .message
            .clone()
        };
        assert!(ftrl(0.0, 0.0, -0.5).starts_with("lr is not a positive scalar"), "{}", ftrl(0.0, 0.0, -0.5));
        assert!(ftrl(0.1, -1.0, -0.5).starts_with("l1 regularization strength is not a non-negative scalar"));
        assert!(ftrl(0.1, 0.0, 0.5).starts_with("lr_power is not a non-positive scalar"));
        let err = crate::ops::training::optimizer::tests::step(
            &mgr,
            &row_op("SparseApplyProximalAdagrad"),
            &["var", "accum"],
            &[f(-0.1), f(0.0), f(0.0), grad.clone(), Tensor::from_slice::<i32>([2], &[0, 1]).unwrap()],
        )
        .unwrap_err();
        assert_eq!(err.message, "lr is not a positive scalar: []");
        let err = crate::ops::training::optimizer::tests::step(
            &mgr,
            &op("ApplyProximalAdagrad", DType::F32),
            &["var", "accum"],
            &[f(0.1), f(-1.0), f(0.0), grad.clone()],
        )
        .unwrap_err();
        assert_eq!(err.message, "l1 regularization strength is not a non-negative scalar: []");
        // The values were left as they were.
        assert_eq!(crate::ops::training::optimizer::tests::values(&mgr, "var"), [1.0, 2.0]);
        // The dense FTRL kernel, as TensorFlow's, takes what it is given.
        crate::ops::training::optimizer::tests::step(
            &mgr,
            &op("ResourceApplyFtrl", DType::F32),
            &["var", "accum", "linear"],
            &[grad.clone(), f(-0.1), f(0.0), f(0.0), f(-0.5)],
        )
        .unwrap();
    }

    #[rustfmt::skip]
    const PROXIMAL_GD: &[&[f64]] = &[
            &[0.3815746307373047, -1.2569016218185425, 2.0332088470458984, 2.6003363132476807, -0.6027603149414062, 1.3559685945510864],
        ];
    #[rustfmt::skip]
    const PROXIMAL_GD_NO_L1: &[&[f64]] = &[
            &[0.39599403738975525, -1.271321177482605, 2.04762864112854, 2.6147561073303223, -0.6171796321868896, 1.370388150215149],
        ];
    #[rustfmt::skip]
    const PROXIMAL_ADAGRAD: &[&[f64]] = &[
            &[0.13096758723258972, -1.103372573852539, 1.7206608057022095, 2.1646218299865723, -0.38282331824302673, 1.1154378652572632],
            &[3.0, 1.0124999284744263, 4.190100193023682, 6.512499809265137, 1.6500000953674316, 1.058899998664856],
        ];
    #[rustfmt::skip]
    const ADAGRAD_DA: &[&[f64]] = &[
            &[-0.10198474675416946, -0.20232152938842773, 0.20745645463466644, -0.21962255239486694, 0.15363360941410065, -0.06947725266218185],
            &[0.800000011920929, 0.949999988079071, -1.690000057220459, 2.1500000953674316, -0.9000000357627869, 0.429999977350235],
            &[3.0, 1.0124999284744263, 4.190100193023682, 6.512499809265137, 1.6500000953674316, 1.058899998664856],
        ];
    #[rustfmt::skip]
    const FTRL_V2_POW: &[&[f64]] = &[
            &[-0.06822483986616135, -0.3075515627861023, 0.6491169929504395, 1.396605372428894, -0.3886399269104004, 0.9472810626029968],
            &[3.0, 1.0124999284744263, 4.190100193023682, 6.512499809265137, 1.6500000953674316, 1.058899998664856],
            &[1.4847954511642456, 3.124678134918213, -17.732168197631836, -51.909698486328125, 5.54360294342041, -9.907899856567383],
        ];
    #[rustfmt::skip]
    const SPARSE_PROXIMAL_GD: &[&[f64]] = &[
            &[0.2445308119058609, -1.0739214420318604, 1.8271297216415405, 2.737380027770996, -0.7857404947280884, 1.5620478391647339],
            &[0.5, -1.2569016218185425, 2.0, 3.0, -0.5482223033905029, 1.5],
        ];
    #[rustfmt::skip]
    const SPARSE_PROXIMAL_ADAGRAD: &[&[f64]] = &[
            &[0.2083069533109665, -0.7805494070053101, 1.5243216753005981, 2.1001927852630615, -0.7445603609085083, 1.305833101272583],
            &[6.512499809265137, 1.6500000953674316, 1.058899998664856, 3.0, 1.0124999284744263, 4.190100193023682],
            &[0.5, -1.103372573852539, 2.0, 3.0, -0.5951558947563171, 1.5],
            &[0.10000000149011612, 1.0124999284744263, 0.10000000149011612, 0.10000000149011612, 7.090099811553955, 0.10000000149011612],
        ];
    #[rustfmt::skip]
    const SPARSE_ADAGRAD_DA: &[&[f64]] = &[
            &[-0.21962255239486694, 0.15363360941410065, -0.06947726011276245, -0.10198475420475006, -0.20232151448726654, 0.20745645463466644],
            &[2.1500000953674316, -0.9000000357627869, 0.429999977350235, 0.800000011920929, 0.949999988079071, -1.690000057220459],
            &[6.512499809265137, 1.6500000953674316, 1.058899998664856, 3.0, 1.0124999284744263, 4.190100193023682],
            &[0.5, -0.20232154428958893, 2.0, 3.0, 0.07809411734342575, 1.5],
            &[0.0, 0.949999988079071, 0.0, 0.0, -0.89000004529953, 0.0],
            &[0.10000000149011612, 1.0124999284744263, 0.10000000149011612, 0.10000000149011612, 7.090099811553955, 0.10000000149011612],
        ];
    #[rustfmt::skip]
    const SPARSE_FTRL_V2: &[&[f64]] = &[
            &[0.14741256833076477, -0.5086894035339355, 1.013621211051941, 0.00034595036413520575, -0.19039712846279144, 0.4119996130466461],
            &[6.512499809265137, 1.6500000953674316, 1.058899998664856, 3.0, 1.0124999284744263, 4.190100193023682],
            &[-3.777806282043457, 6.564581394195557, -10.480997085571289, -0.016005873680114746, 1.9334498643875122, -8.460002899169922],
            &[0.5, -0.2577580213546753, 2.0, 3.0, -0.09963703900575638, 1.5],
            &[0.10000000149011612, 1.0124999284744263, 0.10000000149011612, 0.10000000149011612, 7.090099811553955, 0.10000000149011612],
            &[0.0, 2.613950252532959, 0.0, 0.0, 2.6670448780059814, 0.0],
        ];
    #[rustfmt::skip]
    const SPARSE_FTRL_BY_LR: &[&[f64]] = &[
            &[0.15683095157146454, -0.529883623123169, 1.0442473888397217, 0.05387098342180252, -0.20352937281131744, 0.43459728360176086],
            &[6.512499809265137, 1.6500000953674316, 1.058899998664856, 3.0, 1.0124999284744263, 4.190100193023682],
            &[-0.40185362100601196, 0.6837673187255859, -1.0797374248504639, -0.09452275931835175, 0.20661158859729767, -0.8923474550247192],
            &[0.5, -0.28013333678245544, 2.0, 3.0, -0.1151236817240715, 1.5],
            &[0.10000000149011612, 1.0124999284744263, 0.10000000149011612, 0.10000000149011612, 7.090099811553955, 0.10000000149011612],
            &[0.0, 0.2839992344379425, 0.0, 0.0, 0.3080030679702759, 0.0],
        ];
}
