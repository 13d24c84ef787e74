//! Dense optimizer updates, in both variable families: `ApplyGradientDescent`,
//! `ApplyMomentum`, `ApplyAdam`, `ApplyAdagrad`, `ApplyAdagradV2`,
//! `ApplyAdaMax`, `ApplyRMSProp`, `ApplyCenteredRMSProp`, `ApplyAdadelta`
//! on ref variables
//! (output: the ref, passed on), their
//! `ResourceApply*` twins on resource variables (no outputs), and
//! `ResourceApplyKerasMomentum` and `ResourceApplyAdamWithAmsgrad`
//! (resource only, as in TensorFlow).
//!
//! Owns: the update rules, each written as TensorFlow's CPU functor
//! computes it (operation order included, so float32 results match), and
//! the validation TensorFlow's kernels do, with their messages (`lr is not a
//! scalar: [2]`, `var and grad do not have the same shape[2,3] [3,2]`).
//! Must not keep variables between runs: they are looked up and locked on
//! every run (`vars`), and updated in place under their locks.
//!
//! A rule is a type implementing [`DenseRule`]: its variables, its other
//! inputs in order, and an elementwise update of a run of elements. The
//! kernel is monomorphised per rule and dtype (float32, float64), and splits
//! a large variable into runs over the device's threads: every element's
//! update is independent, so the split changes no bit of the result.

use super::vars::{Form, check_use_locking, collect_array, lock_all, variable_inputs};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::math::FLOAT;
use crate::ops::numeric::Float;
use crate::ops::registry::OpDef;
use crate::ops::{IntraOpPool, KernelInit, OpContext, OpKernel, OpSignature, Value, ValueType, unsupported_dtype};
use crate::tensor::{DType, Tensor};
use parking_lot::Mutex;

pub const DEFS: &[OpDef] = &[
    dense::<GradientDescent, 1>("ApplyGradientDescent"),
    dense::<GradientDescent, 1>("ResourceApplyGradientDescent"),
    dense::<Momentum, 2>("ApplyMomentum"),
    dense::<Momentum, 2>("ResourceApplyMomentum"),
    dense::<KerasMomentum, 2>("ResourceApplyKerasMomentum"),
    dense::<Adam, 3>("ApplyAdam"),
    dense::<Adam, 3>("ResourceApplyAdam"),
    dense::<AdamWithAmsgrad, 4>("ResourceApplyAdamWithAmsgrad"),
    dense::<AdaMax, 3>("ApplyAdaMax"),
    dense::<AdaMax, 3>("ResourceApplyAdaMax"),
    dense::<Adagrad, 2>("ApplyAdagrad"),
    dense::<Adagrad, 2>("ResourceApplyAdagrad"),
    dense::<AdagradV2, 2>("ApplyAdagradV2"),
    dense::<AdagradV2, 2>("ResourceApplyAdagradV2"),
    dense::<RmsProp, 3>("ApplyRMSProp"),
    dense::<RmsProp, 3>("ResourceApplyRMSProp"),
    dense::<CenteredRmsProp, 4>("ApplyCenteredRMSProp"),
    dense::<CenteredRmsProp, 4>("ResourceApplyCenteredRMSProp"),
    dense::<Adadelta, 3>("ApplyAdadelta"),
    dense::<Adadelta, 3>("ResourceApplyAdadelta"),
];

pub(super) const fn dense<R: DenseRule<V>, const V: usize>(name: &'static str) -> OpDef {
    OpDef::kernel(name, dense_signature::<R, V>, build_dense::<R, V>).stateful()
}

/// An input after the variables.
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    /// A scalar, with TensorFlow's message when it is not one (the kernels
    /// differ: "lr is not a scalar: " in most, "lr is not a scalar : " in
    /// Adam and RMSProp).
    Scalar(&'static str),
    /// The gradient, shaped like the variable; its name in errors.
    Grad(&'static str),
    /// An int64 scalar step count (AdagradDA's `global_step`), handed to
    /// the rule among the scalars as TensorFlow uses it: rounded to
    /// float32, then widened to `T`.
    Step(&'static str),
}

/// The value of an int64 step input as a rule's scalar: through float32
/// when `via_f32` (the dense kernels' `static_cast<float>`), else straight.
pub fn step_input<T: Float>(t: &Tensor, what: &str, via_f32: bool) -> Result<T> {
    if t.rank() != 0 {
        bail!(invalid_argument, "{what}{}", t.shape());
    }
    let step = t.as_slice::<i64>()?[0];
    Ok(if via_f32 { T::from_f64(step as f32 as f64) } else { T::from_f64(step as f64) })
}

/// One of TensorFlow's dense update rules.
pub trait DenseRule<const V: usize>: Sized + Send + Sync + 'static {
    /// The variables' input names, var first.
    const VARS: [&'static str; V];
    /// The inputs after the variables, in order.
    const ARGS: &'static [Arg];

    fn new(node: &NodeSpec) -> Result<Self>;

    /// Checks the scalar inputs' values (in `ARGS` order) before any
    /// element is written: the rules that need a positive learning rate.
    fn check<T: Float>(&self, _s: &[T]) -> Result<()> {
        Ok(())
    }

    /// Updates one run of elements: `vars` in `VARS` order, `s` the scalar
    /// inputs in `ARGS` order.
    fn update<T: Float>(&self, s: &[T], vars: [&mut [T]; V], grad: &[T]);
}

/// The most scalar inputs a rule has (Adam's six).
const MAX_SCALARS: usize = 6;

fn dense_signature<R: DenseRule<V>, const V: usize>(node: &NodeSpec) -> Result<OpSignature> {
    let t = node.attr_dtype("T")?;
    let form = Form::of(&node.op);
    let mut inputs = vec![form.var_type(t); V];
    inputs.extend(R::ARGS.iter().map(|a| match a {
        Arg::Step(_) => ValueType::Tensor(DType::I64),
        Arg::Scalar(_) | Arg::Grad(_) => ValueType::Tensor(t),
    }));
    Ok(OpSignature::new(inputs, form.outputs(t)))
}

type DenseFn<R> = fn(&R, Form, &mut OpContext<'_>) -> Result<()>;

struct DenseKernel<R> {
    rule: R,
    form: Form,
    compute: DenseFn<R>,
}

impl<R: Send + Sync + 'static> OpKernel for DenseKernel<R> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(&self.rule, self.form, ctx)
    }
}

fn build_dense<R: DenseRule<V>, const V: usize>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    check_use_locking(init.node, false)?;
    debug_assert!(R::ARGS.iter().filter(|a| !matches!(a, Arg::Grad(_))).count() <= MAX_SCALARS);
    let dtype = init.node.attr_dtype("T")?;
    let compute: DenseFn<R> = match dtype {
        DType::F32 => run_dense::<R, V, f32>,
        DType::F64 => run_dense::<R, V, f64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(Box::new(DenseKernel { rule: R::new(init.node)?, form: Form::of(&init.node.op), compute }))
}

/// The value of a scalar input, or `what` and its shape.
pub fn scalar_input<T: Float>(t: &Tensor, what: &str) -> Result<T> {
    if t.rank() != 0 {
        bail!(invalid_argument, "{what}{}", t.shape());
    }
    Ok(t.as_slice::<T>()?[0])
}

fn run_dense<R: DenseRule<V>, const V: usize, T: Float>(rule: &R, form: Form, ctx: &mut OpContext<'_>) -> Result<()> {
    let vars = variable_inputs::<V>(ctx, form, T::DTYPE)?;
    {
        let mut guards = lock_all(&vars)?;
        let shapes = collect_array(guards.each_ref().map(|g| g.value().map(|v| v.shape().clone())))?;
        let mut scalars = [T::ZERO; MAX_SCALARS];
        let mut count = 0;
        let mut grad = None;
        for (k, arg) in R::ARGS.iter().enumerate() {
            let input = ctx.input(V + k)?;
            match *arg {
                Arg::Scalar(what) => {
                    scalars[count] = scalar_input::<T>(input, what)?;
                    count += 1;
                }
                Arg::Step(what) => {
                    scalars[count] = step_input::<T>(input, what, true)?;
                    count += 1;
                }
                Arg::Grad(name) => grad = Some((input, name)),
            }
        }
        for (name, shape) in R::VARS.iter().zip(&shapes).skip(1) {
            if *shape != shapes[0] {
                bail!(invalid_argument, "var and {name} do not have the same shape{} {shape}", shapes[0]);
            }
        }
        let (grad, name) = grad.ok_or_else(|| Status::internal("an update rule without a gradient"))?;
        if *grad.shape() != shapes[0] {
            bail!(invalid_argument, "var and {name} do not have the same shape{} {}", shapes[0], grad.shape());
        }
        let grad = grad.as_slice::<T>()?;
        let slices = collect_array(guards.each_mut().map(|g| g.elements_mut::<T>()))?;
        let scalars = &scalars[..count];
        rule.check(scalars)?;
        for_each_run(ctx.intra_op(), slices, grad, |vars, grad| rule.update(scalars, vars, grad));
    }
    if form == Form::Ref {
        let var = vars[0].clone();
        ctx.set_output_value(0, Value::Ref(var));
    }
    Ok(())
}

/// Fewest elements worth a run of their own on another thread: the rules
/// are a few flops per element and bound by memory.
const RUN_MIN_ELEMENTS: usize = 1 << 15;

/// Calls `update` on the whole of `vars` and `grad`, or on aligned runs of
/// them spread over `pool` when they are large.
fn for_each_run<T: Float, const V: usize>(
    pool: Option<&dyn IntraOpPool>,
    vars: [&mut [T]; V],
    grad: &[T],
    update: impl Fn([&mut [T]; V], &[T]) + Sync,
) {
    let threads = pool.map_or(1, |p| p.threads());
    let runs = threads.min(grad.len() / RUN_MIN_ELEMENTS);
    let (Some(pool), true) = (pool, runs >= 2) else {
        update(vars, grad);
        return;
    };
    let per_run = grad.len().div_ceil(runs);
    let mut pieces = vars.map(|s| s.chunks_mut(per_run));
    // Each run is taken exactly once; the mutex only hands it over.
    type Run<'a, T, const V: usize> = Mutex<Option<([&'a mut [T]; V], &'a [T])>>;
    let parts: Vec<Run<'_, T, V>> = grad
        .chunks(per_run)
        .map(|g| {
            let vs = pieces.each_mut().map(|it| it.next().expect("variables are as long as the gradient"));
            Mutex::new(Some((vs, g)))
        })
        .collect();
    pool.run_chunks(parts.len(), &|i| {
        if let Some((vs, g)) = parts[i].lock().take() {
            update(vs, g);
        }
    });
}

// ---------------------------------------------------------------------------
// The rules. Each comment gives TensorFlow's functor; the code keeps its
// operation order.

/// `var -= delta * alpha`.
pub struct GradientDescent;
impl DenseRule<1> for GradientDescent {
    const VARS: [&'static str; 1] = ["var"];
    const ARGS: &'static [Arg] = &[Arg::Scalar("alpha is not a scalar: "), Arg::Grad("delta")];

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(GradientDescent)
    }

    fn update<T: Float>(&self, s: &[T], [var]: [&mut [T]; 1], delta: &[T]) {
        let alpha = s[0];
        for (v, &d) in var.iter_mut().zip(delta) {
            *v = v.sub(d.mul(alpha));
        }
    }
}

/// `accum = accum * momentum + grad`, then `var -= lr * accum`, or with
/// Nesterov `var -= grad * lr + accum * momentum * lr`.
pub struct Momentum {
    nesterov: bool,
}
impl DenseRule<2> for Momentum {
    const VARS: [&'static str; 2] = ["var", "accum"];
    const ARGS: &'static [Arg] =
        &[Arg::Scalar("lr is not a scalar: "), Arg::Grad("grad"), Arg::Scalar("momentum is not a scalar: ")];

    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(Momentum { nesterov: node.attr_bool_or("use_nesterov", false)? })
    }

    fn update<T: Float>(&self, s: &[T], [var, accum]: [&mut [T]; 2], grad: &[T]) {
        let (lr, momentum) = (s[0], s[1]);
        let rows = var.iter_mut().zip(accum.iter_mut()).zip(grad);
        if self.nesterov {
            for ((v, a), &g) in rows {
                *a = a.mul(momentum).add(g);
                *v = v.sub(g.mul(lr).add(a.mul(momentum).mul(lr)));
            }
        } else {
            for ((v, a), &g) in rows {
                *a = a.mul(momentum).add(g);
                *v = v.sub(lr.mul(*a));
            }
        }
    }
}

/// Keras' form, with the learning rate inside the accumulator:
/// `accum = accum * momentum - grad * lr`, then `var += accum`, or with
/// Nesterov `var += accum * momentum - grad * lr`.
pub struct KerasMomentum {
    nesterov: bool,
}
impl DenseRule<2> for KerasMomentum {
    const VARS: [&'static str; 2] = ["var", "accum"];
    const ARGS: &'static [Arg] = Momentum::ARGS;

    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(KerasMomentum { nesterov: node.attr_bool_or("use_nesterov", false)? })
    }

    fn update<T: Float>(&self, s: &[T], [var, accum]: [&mut [T]; 2], grad: &[T]) {
        let (lr, momentum) = (s[0], s[1]);
        let rows = var.iter_mut().zip(accum.iter_mut()).zip(grad);
        if self.nesterov {
            for ((v, a), &g) in rows {
                *a = a.mul(momentum).sub(g.mul(lr));
                *v = v.add(a.mul(momentum).sub(g.mul(lr)));
            }
        } else {
            for ((v, a), &g) in rows {
                *a = a.mul(momentum).sub(g.mul(lr));
                *v = v.add(*a);
            }
        }
    }
}

/// With `alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power)`:
/// `m += (grad - m) * (1 - beta1)`, `v += (grad^2 - v) * (1 - beta2)`, then
/// `var -= (m * alpha) / (sqrt(v) + epsilon)`, or with Nesterov
/// `var -= ((grad * (1 - beta1) + beta1 * m) * alpha) / (sqrt(v) + epsilon)`.
pub struct Adam {
    nesterov: bool,
}
impl DenseRule<3> for Adam {
    const VARS: [&'static str; 3] = ["var", "m", "v"];
    const ARGS: &'static [Arg] = &[
        Arg::Scalar("beta1_power is not a scalar: "),
        Arg::Scalar("beta2_power is not a scalar: "),
        Arg::Scalar("lr is not a scalar : "),
        Arg::Scalar("beta1 is not a scalar: "),
        Arg::Scalar("beta2 is not a scalar: "),
        Arg::Scalar("epsilon is not a scalar: "),
        Arg::Grad("grad"),
    ];

    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(Adam { nesterov: node.attr_bool_or("use_nesterov", false)? })
    }

    fn update<T: Float>(&self, s: &[T], [var, m, v]: [&mut [T]; 3], grad: &[T]) {
        let (beta1_power, beta2_power, lr, beta1, beta2, epsilon) = (s[0], s[1], s[2], s[3], s[4], s[5]);
        let alpha = lr.mul(T::ONE.sub(beta2_power).sqrt()).div(T::ONE.sub(beta1_power));
        let (one_minus_beta1, one_minus_beta2) = (T::ONE.sub(beta1), T::ONE.sub(beta2));
        let rows = var.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(grad);
        if self.nesterov {
            for (((x, m), v), &g) in rows {
                *m = m.add(g.sub(*m).mul(one_minus_beta1));
                *v = v.add(g.mul(g).sub(*v).mul(one_minus_beta2));
                let step = g.mul(one_minus_beta1).add(beta1.mul(*m)).mul(alpha);
                *x = x.sub(step.div(v.sqrt().add(epsilon)));
            }
        } else {
            for (((x, m), v), &g) in rows {
                *m = m.add(g.sub(*m).mul(one_minus_beta1));
                *v = v.add(g.mul(g).sub(*v).mul(one_minus_beta2));
                *x = x.sub(m.mul(alpha).div(v.sqrt().add(epsilon)));
            }
        }
    }
}

/// Adam keeping the largest second moment seen (`amsgrad=True`): as
/// Adam, then `vhat = max(vhat, v)`, `var -= (m * alpha) / (sqrt(vhat) +
/// epsilon)`.
pub struct AdamWithAmsgrad;
impl DenseRule<4> for AdamWithAmsgrad {
    const VARS: [&'static str; 4] = ["var", "m", "v", "vhat"];
    const ARGS: &'static [Arg] = Adam::ARGS;

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(AdamWithAmsgrad)
    }

    fn update<T: Float>(&self, s: &[T], [var, m, v, vhat]: [&mut [T]; 4], grad: &[T]) {
        let (beta1_power, beta2_power, lr, beta1, beta2, epsilon) = (s[0], s[1], s[2], s[3], s[4], s[5]);
        let alpha = lr.mul(T::ONE.sub(beta2_power).sqrt()).div(T::ONE.sub(beta1_power));
        let (one_minus_beta1, one_minus_beta2) = (T::ONE.sub(beta1), T::ONE.sub(beta2));
        let rows = var.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(vhat.iter_mut()).zip(grad);
        for ((((x, m), v), h), &g) in rows {
            *m = m.add(g.sub(*m).mul(one_minus_beta1));
            *v = v.add(g.mul(g).sub(*v).mul(one_minus_beta2));
            // Eigen's cwiseMax: `h < v ? v : h`.
            if *h < *v {
                *h = *v;
            }
            *x = x.sub(m.mul(alpha).div(h.sqrt().add(epsilon)));
        }
    }
}

/// Adam's infinity-norm variant: `m += (grad - m) * (1 - beta1)`,
/// `v = max(beta2 * v, |grad|)`, `var -= lr / (1 - beta1_power) * (m / (v +
/// epsilon))`.
pub struct AdaMax;
impl DenseRule<3> for AdaMax {
    const VARS: [&'static str; 3] = ["var", "m", "v"];
    const ARGS: &'static [Arg] = &[
        Arg::Scalar("beta1_power is not a scalar: "),
        Arg::Scalar("lr is not a scalar : "),
        Arg::Scalar("beta1 is not a scalar: "),
        Arg::Scalar("beta2 is not a scalar: "),
        Arg::Scalar("epsilon is not a scalar: "),
        Arg::Grad("grad"),
    ];

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(AdaMax)
    }

    fn update<T: Float>(&self, s: &[T], [var, m, v]: [&mut [T]; 3], grad: &[T]) {
        let (beta1_power, lr, beta1, beta2, epsilon) = (s[0], s[1], s[2], s[3], s[4]);
        let one_minus_beta1 = T::ONE.sub(beta1);
        let rate = lr.div(T::ONE.sub(beta1_power));
        for (((x, m), v), &g) in var.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(grad) {
            *m = m.add(g.sub(*m).mul(one_minus_beta1));
            let (decayed, size) = (beta2.mul(*v), g.abs());
            *v = if decayed < size { size } else { decayed };
            *x = x.sub(rate.mul(m.div(v.add(epsilon))));
        }
    }
}

/// `accum += grad^2` (unless `update_slots` is false), then
/// `var -= grad * lr * rsqrt(accum)`.
pub struct Adagrad {
    update_slots: bool,
}
impl DenseRule<2> for Adagrad {
    const VARS: [&'static str; 2] = ["var", "accum"];
    const ARGS: &'static [Arg] = &[Arg::Scalar("lr is not a scalar: "), Arg::Grad("grad")];

    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(Adagrad { update_slots: node.attr_bool_or("update_slots", true)? })
    }

    fn update<T: Float>(&self, s: &[T], [var, accum]: [&mut [T]; 2], grad: &[T]) {
        let lr = s[0];
        for ((v, a), &g) in var.iter_mut().zip(accum.iter_mut()).zip(grad) {
            if self.update_slots {
                *a = a.add(g.mul(g));
            }
            *v = v.sub(g.mul(lr).mul(T::ONE.div(a.sqrt())));
        }
    }
}

/// Adagrad with an epsilon: `accum += grad^2` (unless `update_slots` is
/// false), then `var -= grad * lr / (sqrt(accum) + epsilon)`.
pub struct AdagradV2 {
    update_slots: bool,
}
impl DenseRule<2> for AdagradV2 {
    const VARS: [&'static str; 2] = ["var", "accum"];
    const ARGS: &'static [Arg] =
        &[Arg::Scalar("lr is not a scalar: "), Arg::Scalar("epsilon is not a scalar: "), Arg::Grad("grad")];

    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(AdagradV2 { update_slots: node.attr_bool_or("update_slots", true)? })
    }

    fn update<T: Float>(&self, s: &[T], [var, accum]: [&mut [T]; 2], grad: &[T]) {
        let (lr, epsilon) = (s[0], s[1]);
        for ((v, a), &g) in var.iter_mut().zip(accum.iter_mut()).zip(grad) {
            if self.update_slots {
                *a = a.add(g.mul(g));
            }
            *v = v.sub(g.mul(lr).div(a.sqrt().add(epsilon)));
        }
    }
}

/// `ms += (grad^2 - ms) * (1 - rho)`,
/// `mom = mom * momentum + (grad * lr) / sqrt(ms + epsilon)`, `var -= mom`.
pub struct RmsProp;
impl DenseRule<3> for RmsProp {
    const VARS: [&'static str; 3] = ["var", "ms", "mom"];
    const ARGS: &'static [Arg] = &[
        Arg::Scalar("lr is not a scalar : "),
        Arg::Scalar("rho is not a scalar: "),
        Arg::Scalar("momentum is not a scalar: "),
        Arg::Scalar("epsilon is not a scalar: "),
        Arg::Grad("grad"),
    ];

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(RmsProp)
    }

    fn update<T: Float>(&self, s: &[T], [var, ms, mom]: [&mut [T]; 3], grad: &[T]) {
        let (lr, rho, momentum, epsilon) = (s[0], s[1], s[2], s[3]);
        let one_minus_rho = T::ONE.sub(rho);
        for (((v, ms), mom), &g) in var.iter_mut().zip(ms.iter_mut()).zip(mom.iter_mut()).zip(grad) {
            *ms = ms.add(g.mul(g).sub(*ms).mul(one_minus_rho));
            *mom = mom.mul(momentum).add(g.mul(lr).div(ms.add(epsilon).sqrt()));
            *v = v.sub(*mom);
        }
    }
}

/// `accum = accum * rho + grad^2 * (1 - rho)`,
/// `update = sqrt(accum_update + epsilon) * rsqrt(accum + epsilon) * grad`,
/// `var -= update * lr`,
/// `accum_update = accum_update * rho + update^2 * (1 - rho)`.
pub struct Adadelta;
impl DenseRule<3> for Adadelta {
    const VARS: [&'static str; 3] = ["var", "accum", "accum_update"];
    const ARGS: &'static [Arg] = &[
        Arg::Scalar("lr is not a scalar: "),
        Arg::Scalar("rho is not a scalar: "),
        Arg::Scalar("epsilon is not a scalar: "),
        Arg::Grad("grad"),
    ];

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(Adadelta)
    }

    fn update<T: Float>(&self, s: &[T], [var, accum, accum_update]: [&mut [T]; 3], grad: &[T]) {
        let (lr, rho, epsilon) = (s[0], s[1], s[2]);
        let one_minus_rho = T::ONE.sub(rho);
        for (((v, a), u), &g) in var.iter_mut().zip(accum.iter_mut()).zip(accum_update.iter_mut()).zip(grad) {
            *a = a.mul(rho).add(g.mul(g).mul(one_minus_rho));
            let update = u.add(epsilon).sqrt().mul(T::ONE.div(a.add(epsilon).sqrt())).mul(g);
            *v = v.sub(update.mul(lr));
            *u = u.mul(rho).add(update.mul(update).mul(one_minus_rho));
        }
    }
}

/// `ms += (grad^2 - ms) * (1 - rho)`, `mg += (grad - mg) * (1 - rho)`,
/// `mom = mom * momentum + (grad * lr) / sqrt(ms - mg^2 + epsilon)`,
/// `var -= mom`.
pub struct CenteredRmsProp;
impl DenseRule<4> for CenteredRmsProp {
    const VARS: [&'static str; 4] = ["var", "mg", "ms", "mom"];
    const ARGS: &'static [Arg] = RmsProp::ARGS;

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(CenteredRmsProp)
    }

    fn update<T: Float>(&self, s: &[T], [var, mg, ms, mom]: [&mut [T]; 4], grad: &[T]) {
        let (lr, rho, momentum, epsilon) = (s[0], s[1], s[2], s[3]);
        let one_minus_rho = T::ONE.sub(rho);
        let rows = var.iter_mut().zip(mg.iter_mut()).zip(ms.iter_mut()).zip(mom.iter_mut()).zip(grad);
        for ((((v, mg), ms), mom), &g) in rows {
            *ms = ms.add(g.mul(g).sub(*ms).mul(one_minus_rho));
            *mg = mg.add(g.sub(*mg).mul(one_minus_rho));
            let denom = ms.sub(mg.mul(*mg)).add(epsilon);
            *mom = mom.mul(momentum).add(g.mul(lr).div(denom.sqrt()));
            *v = v.sub(*mom);
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::error::Code;
    use crate::graph::spec::AttrValue;
    use crate::ops::resource::{ResourceHandle, ResourceMgr, Variable};
    use crate::ops::testing::ty;
    use crate::ops::{ResourceMgr as Mgr, run_kernel_once};
    use std::sync::Arc;

    pub fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(shape, v).unwrap()
    }

    /// Creates (or overwrites) variable `name` in `mgr`.
    pub fn variable(mgr: &ResourceMgr, name: &str, value: Tensor) -> Arc<Variable> {
        let var = mgr.lookup_or_create("", name, value.dtype()).unwrap();
        var.assign(value, false).unwrap();
        var
    }

    pub fn values(mgr: &ResourceMgr, name: &str) -> Vec<f64> {
        mgr.lookup("", name).unwrap().read().unwrap().to_f64_vec()
    }

    /// The value of a variable input in `form`.
    pub fn var_input(mgr: &ResourceMgr, form: Form, name: &str, dtype: DType) -> Value {
        match form {
            Form::Ref => Value::Ref(mgr.lookup("", name).expect("variable created")),
            Form::Resource => {
                Value::Resource(Arc::new(ResourceHandle { container: String::new(), name: name.into(), dtype }))
            }
        }
    }

    /// Runs `node` on variables `vars` (by name) and tensor arguments.
    pub fn step(mgr: &ResourceMgr, node: &NodeSpec, vars: &[&str], args: &[Tensor]) -> Result<Vec<Value>> {
        let form = Form::of(&node.op);
        let dtype = node.attr_dtype("T").or_else(|_| node.attr_dtype("dtype")).unwrap();
        let mut inputs: Vec<Value> = vars.iter().map(|name| var_input(mgr, form, name, dtype)).collect();
        inputs.extend(args.iter().cloned().map(Value::Tensor));
        run_kernel_once(node, inputs, mgr)
    }

    /// Within `tol` (relative) of TensorFlow's numbers.
    pub fn close(got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() <= tol * (1.0 + b.abs()), "element {i}: got {a}, want {b}\n got {got:?}");
        }
    }

    /// The float32 rules compute TensorFlow's functors in TensorFlow's
    /// operation order, so they match its numbers bit for bit.
    const F32_TOL: f64 = 0.0;

    pub fn op(name: &str, t: DType) -> NodeSpec {
        NodeSpec::new(name.to_lowercase(), name).attr("T", ty(t))
    }

    fn scalar(v: f64, t: DType) -> Tensor {
        match t {
            DType::F64 => Tensor::scalar(v),
            _ => Tensor::scalar(v as f32),
        }
    }

    pub const VAR0: [f32; 6] = [0.5, -1.25, 2.0, 3.0, -0.75, 1.5];
    pub const GRADS: [[f32; 6]; 3] =
        [[0.1, -0.2, 0.3, -0.4, 0.5, -0.6], [1.5, 0.25, -2.0, 0.05, -0.3, 0.7], [-0.8, 0.9, 0.01, 2.5, -1.1, 0.33]];

    fn grad(k: usize, t: DType) -> Tensor {
        let g = f32s(&[2, 3], &GRADS[k]);
        if t == DType::F64 { Tensor::from_map([2, 3], g.as_slice::<f32>().unwrap(), |v| v as f64).unwrap() } else { g }
    }

    /// A fresh manager with `var` at VAR0 and the slots at `slot_init`.
    fn setup(t: DType, slots: &[(&str, f32)]) -> ResourceMgr {
        let mgr = Mgr::default();
        let as_t = |v: &[f32]| {
            let x = f32s(&[2, 3], v);
            if t == DType::F64 {
                Tensor::from_map([2, 3], x.as_slice::<f32>().unwrap(), |v| v as f64).unwrap()
            } else {
                x
            }
        };
        variable(&mgr, "var", as_t(&VAR0));
        for &(name, init) in slots {
            variable(&mgr, name, as_t(&[init; 6]));
        }
        mgr
    }

    // Expected values below: TensorFlow 2.21's ResourceApply* kernels on
    // CPU, var = VAR0, gradients GRADS in turn.

    /// Three runs of `node` from var = VAR0 (its first elements, shaped
    /// `shape`) and slots at their initial values, with gradient k of
    /// GRADS on run k (its first `rows` rows for a row update); `args`
    /// builds the inputs after the variables from the gradient. Returns
    /// var's and each slot's values, as TensorFlow's tests print them.
    pub fn three_runs(
        node: &NodeSpec,
        shape: &[usize],
        slots: &[(&str, f32)],
        rows: Option<usize>,
        args: impl Fn(Tensor) -> Vec<Tensor>,
    ) -> Vec<Vec<f64>> {
        let mgr = Mgr::default();
        let n: usize = shape.iter().product();
        variable(&mgr, "var", f32s(shape, &VAR0[..n]));
        for &(name, init) in slots {
            variable(&mgr, name, f32s(shape, &vec![init; n]));
        }
        let names: Vec<&str> = std::iter::once("var").chain(slots.iter().map(|s| s.0)).collect();
        for grads in &GRADS {
            let grad = match rows {
                None => f32s(shape, &grads[..n]),
                Some(r) => {
                    let mut dims = shape.to_vec();
                    dims[0] = r;
                    f32s(&dims, &grads[..r * (n / shape[0])])
                }
            };
            step(&mgr, node, &names, &args(grad)).unwrap();
        }
        names.iter().map(|name| values(&mgr, name)).collect()
    }

    /// Every array of `got` within `tol` (relative) of `want`'s.
    pub fn all_close(got: &[Vec<f64>], want: &[&[f64]], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            close(g, w, tol);
        }
    }

    pub fn f(v: f32) -> Tensor {
        Tensor::scalar(v)
    }

    #[test]
    fn adadelta_and_centered_rmsprop_match_tf() {
        let got = three_runs(
            &op("ResourceApplyAdadelta", DType::F32),
            &[2, 3],
            &[("accum", 0.1), ("update", 0.2)],
            None,
            |g| vec![f(1.0), f(0.95), f(1e-6), g],
        );
        all_close(&got, ADADELTA, F32_TOL);
        let slots = [("mg", 0.05), ("ms", 0.5), ("mom", 0.0)];
        let got = three_runs(&op("ApplyCenteredRMSProp", DType::F32), &[2, 3], &slots, None, |g| {
            vec![f(0.1), f(0.9), f(0.5), f(1e-6), g]
        });
        all_close(&got, CENTERED_RMSPROP, F32_TOL);
    }

    #[test]
    fn adamax_and_amsgrad_match_tf() {
        let adam_args = |g| vec![f(0.9), f(0.999), f(0.01), f(0.9), f(0.999), f(1e-7), g];
        let slots = [("m", 0.0), ("v", 0.1), ("vhat", 0.5)];
        let got = three_runs(&op("ResourceApplyAdamWithAmsgrad", DType::F32), &[2, 3], &slots, None, adam_args);
        all_close(&got, AMSGRAD, F32_TOL);
        let got = three_runs(&op("ApplyAdaMax", DType::F32), &[2, 3], &slots[..2], None, |g| {
            vec![f(0.9), f(0.01), f(0.9), f(0.999), f(1e-7), g]
        });
        all_close(&got, ADAMAX, F32_TOL);
    }

    #[rustfmt::skip]
    const ADAMAX: &[&[f64]] = &[
        &[0.47518911957740784, -1.253499984741211, 2.00639271736145, 3.008873701095581, -0.754230260848999, 1.5009360313415527],
        &[0.06310001015663147, 0.09630002081394196, -0.15470002591609955, 0.22210003435611725, -0.09650002419948578, 0.047400012612342834],
        &[1.4984999895095825, 0.8999999761581421, 1.9980000257492065, 2.5, 1.100000023841858, 0.6992999911308289],
    ];
    #[rustfmt::skip]
    const AMSGRAD: &[&[f64]] = &[
        &[0.49896201491355896, -1.2503726482391357, 2.0013315677642822, 2.999324083328247, -0.749859094619751, 1.499984860420227],
        &[0.06310001015663147, 0.09630002081394196, -0.15470002591609955, 0.22210003435611725, -0.09650002419948578, 0.047400012612342834],
        &[0.10259799659252167, 0.10061264783143997, 0.1037861779332161, 0.10611239820718765, 0.10124969482421875, 0.10065797716379166],
        &[0.5, 0.5, 0.5, 0.5, 0.5, 0.5],
    ];

    // TensorFlow 2.21's ResourceApply* kernels, three runs from VAR0.
    #[rustfmt::skip]
    const ADADELTA: &[&[f64]] = &[
            &[-0.19528377056121826, -2.4057438373565674, 3.208070993423462, 1.749167799949646, 0.25022244453430176, 0.9319986701011658],
            &[0.2250637710094452, 0.1310112476348877, 0.2798038125038147, 0.40557631850242615, 0.1617937684059143, 0.13070251047611237],
            &[0.3137330114841461, 0.24022328853607178, 0.30804958939552307, 0.336393266916275, 0.28013497591018677, 0.2498885691165924],
        ];
    #[rustfmt::skip]
    const CENTERED_RMSPROP: &[&[f64]] = &[
            &[0.28264617919921875, -1.3925853967666626, 2.257197141647339, 2.832538604736328, -0.6558349132537842, 1.4499422311782837],
            &[0.0995500236749649, 0.1327500194311142, -0.1182500422000885, 0.2585500478744507, -0.060050033032894135, 0.08385001122951508],
            &[0.6318100094795227, 0.4543650150299072, 0.7318000793457031, 1.0026850700378418, 0.5138500332832336, 0.4486500024795532],
            &[-0.00015880167484283447, 0.14821946620941162, -0.0997970923781395, 0.24763832986354828, -0.15846648812294006, 0.07848663628101349],
        ];

    #[test]
    fn gradient_descent_both_forms_and_dtypes() {
        let want32 = [
            0.49000000953674316,
            -1.2300000190734863,
            1.9700000286102295,
            3.0399999618530273,
            -0.800000011920929,
            1.559999942779541,
        ];
        let want64 =
            [0.4899999998509884, -1.2299999997019768, 1.969999998807907, 3.0400000005960464, -0.8, 1.5600000023841858];
        for (t, want, tol) in [(DType::F32, want32, 0.0), (DType::F64, want64, 1e-15)] {
            for name in ["ApplyGradientDescent", "ResourceApplyGradientDescent"] {
                let mgr = setup(t, &[]);
                let out = step(&mgr, &op(name, t), &["var"], &[scalar(0.1, t), grad(0, t)]).unwrap();
                close(&values(&mgr, "var"), &want, tol);
                match (Form::of(name), out.as_slice()) {
                    (Form::Ref, [Value::Ref(v)]) => assert_eq!(v.name(), "var", "the ref is passed on"),
                    (Form::Resource, []) => {}
                    (_, other) => panic!("{name} gave {other:?}"),
                }
            }
        }
    }

    #[test]
    fn momentum_matches_tf() {
        #[rustfmt::skip]
        let plain = [
            [0.49000000953674316, -1.2300000190734863, 1.9700000286102295, 3.0399999618530273, -0.800000011920929, 1.559999942779541],
            [0.3310000002384186, -1.2369999885559082, 2.1430001258850098, 3.07099986076355, -0.8149999976158142, 1.5439999103546143],
            [0.2678999900817871, -1.333299994468689, 2.2977001667022705, 2.8488998413085938, -0.718500018119812, 1.4965999126434326],
        ];
        #[rustfmt::skip]
        let nesterov = [
            [0.48100000619888306, -1.2120000123977661, 1.9429999589920044, 3.0759999752044678, -0.8450000286102295, 1.6139999628067017],
            [0.18790000677108765, -1.243299961090088, 2.2986998558044434, 3.098900079727173, -0.8285000324249268, 1.529599905014038],
            [0.21111002564430237, -1.419969916343689, 2.436929941177368, 2.649010181427002, -0.6316500306129456, 1.4539399147033691],
        ];
        #[rustfmt::skip]
        let accum = [
            [0.10000000149011612, -0.20000000298023224, 0.30000001192092896, -0.4000000059604645, 0.5, -0.6000000238418579],
            [1.590000033378601, 0.07000000774860382, -1.7300000190734863, -0.3099999725818634, 0.1499999761581421, 0.15999996662139893],
            [0.6309999823570251, 0.9629999995231628, -1.5469999313354492, 2.2209999561309814, -0.9650000333786011, 0.4739999771118164],
        ];
        for (name, nest, want) in [("ApplyMomentum", false, plain), ("ResourceApplyMomentum", true, nesterov)] {
            let mgr = setup(DType::F32, &[("accum", 0.0)]);
            let node = op(name, DType::F32).attr("use_nesterov", AttrValue::Bool(nest));
            for k in 0..3 {
                let args = [scalar(0.1, DType::F32), grad(k, DType::F32), scalar(0.9, DType::F32)];
                step(&mgr, &node, &["var", "accum"], &args).unwrap();
                close(&values(&mgr, "var"), &want[k], F32_TOL);
                close(&values(&mgr, "accum"), &accum[k], F32_TOL);
            }
        }
    }

    #[test]
    fn keras_momentum_matches_tf() {
        #[rustfmt::skip]
        let var = [
            [[0.49000000953674316, -1.2300000190734863, 1.9700000286102295, 3.0399999618530273, -0.800000011920929, 1.559999942779541],
             [0.3310000002384186, -1.2369999885559082, 2.1430001258850098, 3.07099986076355, -0.8149999976158142, 1.5439999103546143]],
            [[0.48100000619888306, -1.2120000123977661, 1.9429999589920044, 3.0759999752044678, -0.8450000286102295, 1.6139999628067017],
             [0.18790000677108765, -1.243299961090088, 2.2986998558044434, 3.098900079727173, -0.8285000324249268, 1.529599905014038]],
        ];
        #[rustfmt::skip]
        let accum = [
            [-0.010000000707805157, 0.020000001415610313, -0.030000001192092896, 0.04000000283122063, -0.05000000074505806, 0.06000000238418579],
            [-0.15900000929832458, -0.006999999284744263, 0.1730000078678131, 0.03100000135600567, -0.01499999687075615, -0.01599999889731407],
        ];
        for (i, nest) in [false, true].into_iter().enumerate() {
            let mgr = setup(DType::F32, &[("accum", 0.0)]);
            let node = op("ResourceApplyKerasMomentum", DType::F32).attr("use_nesterov", AttrValue::Bool(nest));
            for k in 0..2 {
                let args = [scalar(0.1, DType::F32), grad(k, DType::F32), scalar(0.9, DType::F32)];
                step(&mgr, &node, &["var", "accum"], &args).unwrap();
                close(&values(&mgr, "var"), &var[i][k], F32_TOL);
                close(&values(&mgr, "accum"), &accum[k], F32_TOL);
            }
        }
    }

    fn adam_step(mgr: &ResourceMgr, node: &NodeSpec, k: usize, t: DType) {
        let power = |b: f64| scalar(b.powi(k as i32 + 1), t);
        let args =
            [power(0.9), power(0.999), scalar(0.01, t), scalar(0.9, t), scalar(0.999, t), scalar(1e-7, t), grad(k, t)];
        step(mgr, node, &["var", "m", "v"], &args).unwrap();
    }

    #[test]
    fn adam_three_steps_match_tf() {
        #[rustfmt::skip]
        let plain = [
            [0.49000030755996704, -1.2400001287460327, 1.9900001287460327, 3.009999990463257, -0.7599999308586121, 1.5099999904632568],
            [0.482129842042923, -1.2416274547576904, 1.9963657855987549, 3.0157253742218018, -0.7619149088859558, 1.5087083578109741],
            [0.47976186871528625, -1.2480679750442505, 2.0012547969818115, 3.010122299194336, -0.7569624781608582, 1.505614161491394],
        ];
        #[rustfmt::skip]
        let nesterov = [
            [0.4810006022453308, -1.231000304222107, 1.9810001850128174, 3.0189998149871826, -0.7689998745918274, 1.5189999341964722],
            [0.4664922058582306, -1.238276720046997, 1.9940885305404663, 3.0232291221618652, -0.7668933868408203, 1.5121862888336182],
            [0.4673632085323334, -1.2500922679901123, 1.9984570741653442, 3.0118796825408936, -0.7567909359931946, 1.5072474479675293],
        ];
        #[rustfmt::skip]
        let m = [
            [0.010000002570450306, -0.020000005140900612, 0.030000008642673492, -0.040000010281801224, 0.050000011920928955, -0.060000017285346985],
            [0.15900003910064697, 0.007000003010034561, -0.1730000376701355, -0.031000006943941116, 0.015000000596046448, 0.01600000262260437],
            [0.06310001015663147, 0.09630002081394196, -0.15470002591609955, 0.22210003435611725, -0.09650002419948578, 0.047400012612342834],
        ];
        #[rustfmt::skip]
        let v = [
            [9.999871508625802e-06, 3.9999486034503207e-05, 8.999884448712692e-05, 0.00015999794413801283, 0.00024999678134918213, 0.00035999537794850767],
            [0.002259960863739252, 0.00010245868179481477, 0.004089857451617718, 0.00016233792121056467, 0.0003397456312086433, 0.0008496290538460016],
            [0.00289769284427166, 0.0009123457712121308, 0.004085867665708065, 0.00641209539026022, 0.0015493903774768114, 0.0009576780721545219],
        ];
        for (name, nest, want) in [("ApplyAdam", false, plain), ("ResourceApplyAdam", true, nesterov)] {
            let mgr = setup(DType::F32, &[("m", 0.0), ("v", 0.0)]);
            let node = op(name, DType::F32).attr("use_nesterov", AttrValue::Bool(nest));
            for k in 0..3 {
                adam_step(&mgr, &node, k, DType::F32);
                close(&values(&mgr, "var"), &want[k], F32_TOL);
                close(&values(&mgr, "m"), &m[k], F32_TOL);
                close(&values(&mgr, "v"), &v[k], F32_TOL);
            }
        }
        // float64.
        let mgr = setup(DType::F64, &[("m", 0.0), ("v", 0.0)]);
        for k in 0..3 {
            adam_step(&mgr, &op("ResourceApplyAdam", DType::F64), k, DType::F64);
        }
        let want = [
            0.47976197877334176,
            -1.2480679183572214,
            2.0012547213037095,
            3.0101222376028676,
            -0.7569624900903218,
            1.5056141412187067,
        ];
        close(&values(&mgr, "var"), &want, 1e-14);
        let want = [
            0.0028977300293709166,
            0.000912357498274367,
            0.004085920097133793,
            0.006412177664833277,
            0.0015494103095974943,
            0.0009576903805350225,
        ];
        close(&values(&mgr, "v"), &want, 1e-14);
    }

    #[test]
    fn adagrad_matches_tf() {
        #[rustfmt::skip]
        let var = [
            [0.4698488712310791, -1.1965477466583252, 1.9311752319335938, 3.078446388244629, -0.8345154523849487, 1.5884652137756348],
            [0.3722071647644043, -1.252103328704834, 2.028881549835205, 3.0686874389648438, -0.7892887592315674, 1.5166467428207397],
            [0.41839519143104553, -1.3415460586547852, 2.028393030166626, 2.9707236289978027, -0.703653872013092, 1.4845776557922363],
        ];
        #[rustfmt::skip]
        let accum = [
            [0.10999999940395355, 0.14000000059604645, 0.1899999976158142, 0.2600000202655792, 0.3499999940395355, 0.46000000834465027],
            [2.359999895095825, 0.20250000059604645, 4.190000057220459, 0.26250001788139343, 0.4399999976158142, 0.949999988079071],
            [3.0, 1.0124999284744263, 4.190100193023682, 6.512499809265137, 1.6500000953674316, 1.058899998664856],
        ];
        let mgr = setup(DType::F32, &[("accum", 0.1)]);
        for k in 0..3 {
            step(
                &mgr,
                &op("ApplyAdagrad", DType::F32),
                &["var", "accum"],
                &[scalar(0.1, DType::F32), grad(k, DType::F32)],
            )
            .unwrap();
            close(&values(&mgr, "var"), &var[k], F32_TOL);
            close(&values(&mgr, "accum"), &accum[k], F32_TOL);
        }
        // update_slots = false leaves accum alone.
        let mgr = setup(DType::F32, &[("accum", 0.1)]);
        let frozen = op("ResourceApplyAdagrad", DType::F32).attr("update_slots", AttrValue::Bool(false));
        step(&mgr, &frozen, &["var", "accum"], &[scalar(0.1, DType::F32), grad(0, DType::F32)]).unwrap();
        let want = [
            0.4683772325515747,
            -1.1867544651031494,
            1.9051316976547241,
            3.126491069793701,
            -0.9081138968467712,
            1.6897366046905518,
        ];
        close(&values(&mgr, "var"), &want, F32_TOL);
        close(&values(&mgr, "accum"), &[0.10000000149011612; 6], 0.0);
        // AdagradV2, with epsilon.
        let mgr = setup(DType::F32, &[("accum", 0.1)]);
        let v2 = op("ResourceApplyAdagradV2", DType::F32);
        for k in 0..2 {
            let args = [scalar(0.1, DType::F32), scalar(1e-7, DType::F32), grad(k, DType::F32)];
            step(&mgr, &v2, &["var", "accum"], &args).unwrap();
        }
        let want = [
            0.3722071945667267,
            -1.252103328704834,
            2.028881549835205,
            3.0686874389648438,
            -0.7892886996269226,
            1.5166467428207397,
        ];
        close(&values(&mgr, "var"), &want, F32_TOL);
    }

    #[test]
    fn rmsprop_three_steps_match_tf() {
        #[rustfmt::skip]
        let var = [
            [0.49894648790359497, -1.247896432876587, 1.9968534708023071, 3.0041794776916504, -0.7551987767219543, 1.5062017440795898],
            [0.48368194699287415, -1.2496057748794556, 2.013401508331299, 3.005718469619751, -0.7545278072357178, 1.5018885135650635],
            [0.4840644896030426, -1.2604061365127563, 2.0215799808502197, 2.985107183456421, -0.742455244064331, 1.4960722923278809],
        ];
        #[rustfmt::skip]
        let ms = [
            [0.9009999632835388, 0.9039999842643738, 0.9089999794960022, 0.9160000085830688, 0.9249999523162842, 0.9359999895095825],
            [1.0358999967575073, 0.819849967956543, 1.2181000709533691, 0.82464998960495, 0.841499924659729, 0.8913999795913696],
            [0.9963099956512451, 0.8188649415969849, 1.0963000059127808, 1.367185115814209, 0.8783499598503113, 0.8131499886512756],
        ];
        #[rustfmt::skip]
        let mom = [
            [0.0010535074397921562, -0.0021035156678408384, 0.003146583680063486, -0.0041793836280703545, 0.005198752041906118, -0.0062017361633479595],
            [0.015264542773365974, 0.0017092827474698424, -0.016547972336411476, -0.0015390930930152535, -0.000670973677188158, 0.004313287325203419],
            [-0.0003825295716524124, 0.01080036349594593, -0.00817847903817892, 0.020611369982361794, -0.012072533369064331, 0.005816201213747263],
        ];
        for name in ["ApplyRMSProp", "ResourceApplyRMSProp"] {
            let mgr = setup(DType::F32, &[("ms", 1.0), ("mom", 0.0)]);
            for k in 0..3 {
                let t = DType::F32;
                let args = [scalar(0.01, t), scalar(0.9, t), scalar(0.5, t), scalar(1e-7, t), grad(k, t)];
                step(&mgr, &op(name, t), &["var", "ms", "mom"], &args).unwrap();
                close(&values(&mgr, "var"), &var[k], F32_TOL);
                close(&values(&mgr, "ms"), &ms[k], F32_TOL);
                close(&values(&mgr, "mom"), &mom[k], F32_TOL);
            }
        }
    }

    #[test]
    fn validation_matches_tf_messages() {
        let t = DType::F32;
        let mgr = setup(t, &[("accum", 0.0), ("m", 0.0), ("v", 0.0)]);
        let two = f32s(&[2], &[0.1, 0.2]);
        let run = |name: &str, vars: &[&str], args: &[Tensor]| step(&mgr, &op(name, t), vars, args).unwrap_err();
        let err = run("ApplyGradientDescent", &["var"], &[f32s(&[1], &[0.1]), grad(0, t)]);
        assert_eq!((err.code, err.message.as_str()), (Code::InvalidArgument, "alpha is not a scalar: [1]"));
        let err = run("ResourceApplyGradientDescent", &["var"], &[scalar(0.1, t), f32s(&[3, 2], &[0.0; 6])]);
        assert_eq!(err.message, "var and delta do not have the same shape[2,3] [3,2]");
        let err = run("ApplyMomentum", &["var", "accum"], &[two.clone(), grad(0, t), scalar(0.9, t)]);
        assert_eq!(err.message, "lr is not a scalar: [2]");
        let err = run("ApplyMomentum", &["var", "accum"], &[scalar(0.1, t), grad(0, t), two.clone()]);
        assert_eq!(err.message, "momentum is not a scalar: [2]");
        let err = run("ApplyMomentum", &["var", "accum"], &[scalar(0.1, t), f32s(&[3, 2], &[0.0; 6]), scalar(0.9, t)]);
        assert_eq!(err.message, "var and grad do not have the same shape[2,3] [3,2]");
        let adam = |lr: Tensor| {
            let s = |v: f64| scalar(v, t);
            [s(0.9), s(0.999), lr, s(0.9), s(0.999), s(1e-7), grad(0, t)]
        };
        let err = run("ResourceApplyAdam", &["var", "m", "v"], &adam(two.clone()));
        assert_eq!(err.message, "lr is not a scalar : [2]");
        let err = run(
            "ApplyRMSProp",
            &["var", "m", "v"],
            &[two, scalar(0.9, t), scalar(0.0, t), scalar(1e-7, t), grad(0, t)],
        );
        assert_eq!(err.message, "lr is not a scalar : [2]");
        // Slots must match var.
        variable(&mgr, "narrow", f32s(&[3, 2], &[0.0; 6]));
        let err = run("ApplyMomentum", &["var", "narrow"], &[scalar(0.1, t), grad(0, t), scalar(0.9, t)]);
        assert_eq!(err.message, "var and accum do not have the same shape[2,3] [3,2]");
        let err = run("ApplyAdam", &["var", "m", "narrow"], &adam(scalar(0.01, t)));
        assert_eq!(err.message, "var and v do not have the same shape[2,3] [3,2]");
        // Uninitialized ref variable, missing resource variable, wrong
        // dtype, the same variable twice.
        mgr.lookup_or_create("", "fresh", t).unwrap();
        let err = run("ApplyGradientDescent", &["fresh"], &[scalar(0.1, t), grad(0, t)]);
        assert_eq!(err.code, Code::FailedPrecondition);
        assert!(err.message.starts_with("Attempting to use uninitialized value fresh"), "{err}");
        let err = run("ResourceApplyGradientDescent", &["nowhere"], &[scalar(0.1, t), grad(0, t)]);
        assert_eq!(err.code, Code::FailedPrecondition);
        assert!(err.message.contains("Could not find variable nowhere"), "{err}");
        let wide = op("ResourceApplyGradientDescent", DType::F64);
        let err = step(&mgr, &wide, &["var"], &[scalar(0.1, DType::F64), grad(0, DType::F64)]).unwrap_err();
        assert_eq!(err.message, "Trying to update variable var with wrong dtype. Expected float32 got float64");
        let err = run("ApplyMomentum", &["var", "var"], &[scalar(0.1, t), grad(0, t), scalar(0.9, t)]);
        assert!(err.message.contains("'var' is given twice"), "{err}");
        // Nothing above changed var.
        close(&values(&mgr, "var"), &VAR0.map(f64::from), 0.0);
        // Integer optimizers do not exist.
        let err = step(&mgr, &op("ApplyGradientDescent", DType::I32), &["var"], &[]).unwrap_err();
        assert!(err.message.contains("does not support dtype int32"), "{err}");
    }

    #[test]
    fn a_reader_keeps_its_value_while_the_update_copies() {
        let mgr = setup(DType::F32, &[]);
        let before = mgr.lookup("", "var").unwrap().read().unwrap();
        step(
            &mgr,
            &op("ResourceApplyGradientDescent", DType::F32),
            &["var"],
            &[scalar(0.1, DType::F32), grad(0, DType::F32)],
        )
        .unwrap();
        close(&before.to_f64_vec(), &VAR0.map(f64::from), 0.0);
        assert_ne!(values(&mgr, "var"), before.to_f64_vec());
    }

    /// Many workers applying one variable's updates: with its lock held for
    /// the read-modify-write no update is lost, and a reader never sees a
    /// half-applied one.
    #[test]
    fn concurrent_locked_updates_sum_exactly() {
        const WORKERS: usize = 8;
        const STEPS: usize = 250;
        const LEN: usize = 1024;
        let mgr = Mgr::default();
        variable(&mgr, "w", Tensor::zeros(DType::F32, [LEN]).unwrap());
        let node = op("ResourceApplyGradientDescent", DType::F32).attr("use_locking", AttrValue::Bool(true));
        // var -= 1 * -1: every step adds exactly one to every element.
        let delta = f32s(&[LEN], &[-1.0; LEN]);
        std::thread::scope(|s| {
            for _ in 0..WORKERS {
                s.spawn(|| {
                    for _ in 0..STEPS {
                        step(&mgr, &node, &["w"], &[scalar(1.0, DType::F32), delta.clone()]).unwrap();
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..STEPS {
                    let seen = mgr.lookup("", "w").unwrap().read().unwrap();
                    let seen = seen.as_slice::<f32>().unwrap();
                    assert!(seen.iter().all(|&x| x == seen[0]), "a torn value: {} and {}", seen[0], seen[LEN - 1]);
                }
            });
        });
        assert!(values(&mgr, "w").iter().all(|&x| x == (WORKERS * STEPS) as f64));
    }

    #[test]
    fn large_updates_split_over_the_pool_give_the_same_bits() {
        let len = 5 * RUN_MIN_ELEMENTS + 17;
        let fill =
            |seed: usize| -> Vec<f32> { (0..len).map(|i| ((i * 37 + seed * 11) % 101) as f32 / 7.3 - 6.1).collect() };
        let init = |mgr: &ResourceMgr| {
            variable(mgr, "var", f32s(&[len], &fill(1)));
            variable(mgr, "m", f32s(&[len], &fill(2)));
            variable(mgr, "v", Tensor::from_map([len], &fill(3), |x: f32| x.abs()).unwrap());
        };
        let args = |t: DType| {
            let s = |v: f64| scalar(v, t);
            vec![s(0.9), s(0.999), s(0.01), s(0.9), s(0.999), s(1e-7), f32s(&[len], &fill(4))]
        };
        let node = op("ResourceApplyAdam", DType::F32);
        let serial = Mgr::default();
        init(&serial);
        step(&serial, &node, &["var", "m", "v"], &args(DType::F32)).unwrap();
        let pooled = Mgr::default();
        init(&pooled);
        let pool = crate::executor::ThreadPool::new(crate::executor::PoolOptions { threads: 4, ..Default::default() })
            .unwrap();
        let def = crate::ops::lookup(&node.op).unwrap();
        let sig = (def.signature)(&node).unwrap();
        let crate::ops::Implementation::Kernel(build) = def.implementation else { panic!("a kernel") };
        let kernel = build(&KernelInit { node: &node, signature: &sig }).unwrap();
        let mut inputs: Vec<Option<Value>> = ["var", "m", "v"]
            .iter()
            .map(|n| Some(var_input(&pooled, Form::Resource, n, DType::F32)))
            .chain(args(DType::F32).into_iter().map(|t| Some(Value::Tensor(t))))
            .collect();
        let mut outputs: Vec<Option<Value>> = vec![];
        kernel.compute(&mut OpContext::new(&mut inputs, &mut outputs, &pooled).with_intra_op(&pool)).unwrap();
        for name in ["var", "m", "v"] {
            let (a, b) =
                (serial.lookup("", name).unwrap().read().unwrap(), pooled.lookup("", name).unwrap().read().unwrap());
            assert!(a.bit_eq(&b), "{name} differs");
        }
    }
}
