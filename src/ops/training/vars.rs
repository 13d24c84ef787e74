//! The variables of the update ops (optimizers, scatters): found on every
//! run through a ref (`Value::Ref`) or a resource handle, then locked
//! together for the update.
//!
//! Locking. TensorFlow's `use_locking=true` holds the mutex of every
//! variable an op updates (the var and its slots, taken in address order)
//! for the whole read-modify-write. With `use_locking=false` it takes none:
//! concurrent updates may interleave element by element or be lost
//! ("Hogwild"), and a reader may see a half-written tensor.
//!
//! Here every update holds the write locks of all its variables, taken in
//! address order, for its whole read-modify-write, whatever `use_locking`
//! says. That is TensorFlow's `use_locking=true` guarantee, given for both
//! values: an uncontended lock costs tens of nanoseconds, and holding it is
//! what lets the update write in place (see `VariableGuard`) instead of
//! building a new tensor, so the unlocked form would be slower, not faster.
//! No update is ever torn or lost, and readers see a value from before or
//! after it, never between. The attribute is still parsed and checked.
//!
//! Lock order. Variables are looked up in the `ResourceMgr` before any is
//! locked (the manager takes a variable's lock while holding its own when it
//! clears one); then locked in address order, so two ops sharing variables
//! cannot deadlock. An op given the same variable twice (as var and as a
//! slot) is refused rather than deadlocking on its own lock.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::resource::{Variable, VariableGuard};
use crate::ops::{OpContext, ValueType};
use crate::tensor::DType;
use std::sync::Arc;

/// Where an op's variables come from: a ref edge (`ApplyAdam`, `ScatterAdd`)
/// or a resource handle (`ResourceApplyAdam`, `ResourceScatterAdd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Ref,
    Resource,
}

impl Form {
    /// The form of an op, by TensorFlow's naming.
    pub fn of(op: &str) -> Form {
        if op.starts_with("Resource") { Form::Resource } else { Form::Ref }
    }

    /// The edge type of a variable input of element type `dtype`.
    pub fn var_type(self, dtype: DType) -> ValueType {
        match self {
            Form::Ref => ValueType::Ref(dtype),
            Form::Resource => ValueType::Resource,
        }
    }

    /// The outputs: a ref form passes its variable on (`out`), a resource
    /// form has none.
    pub fn outputs(self, dtype: DType) -> Vec<ValueType> {
        match self {
            Form::Ref => vec![ValueType::Ref(dtype)],
            Form::Resource => vec![],
        }
    }
}

/// Checks `use_locking` is a bool; see the module header for what it means
/// here.
pub fn check_use_locking(node: &NodeSpec, default: bool) -> Result<()> {
    node.attr_bool_or("use_locking", default).map(|_| ())
}

/// The variable behind input `index`, of element type `dtype`.
pub fn variable_input(ctx: &OpContext<'_>, form: Form, index: usize, dtype: DType) -> Result<Arc<Variable>> {
    let var = match form {
        Form::Ref => ctx.input_ref(index)?.clone(),
        Form::Resource => {
            let handle = ctx.input_resource(index)?;
            ctx.resources().lookup(&handle.container, &handle.name).ok_or_else(|| {
                Status::failed_precondition(format!(
                    "Could not find variable {} (container '{}'). It has not been created or initialized, or it has been destroyed.",
                    handle.name, handle.container
                ))
            })?
        }
    };
    if var.dtype() != dtype {
        bail!(
            invalid_argument,
            "Trying to update variable {} with wrong dtype. Expected {} got {dtype}",
            var.name(),
            var.dtype()
        );
    }
    Ok(var)
}

/// The variables behind inputs `0..N`.
pub fn variable_inputs<const N: usize>(ctx: &OpContext<'_>, form: Form, dtype: DType) -> Result<[Arc<Variable>; N]> {
    collect_array(std::array::from_fn(|i| variable_input(ctx, form, i, dtype)))
}

/// Write guards on `vars`, in their order, taken in address order.
pub fn lock_all<const N: usize>(vars: &[Arc<Variable>; N]) -> Result<[VariableGuard<'_>; N]> {
    for (i, a) in vars.iter().enumerate() {
        if let Some(b) = vars[..i].iter().find(|b| Arc::ptr_eq(a, b)) {
            bail!(invalid_argument, "variable '{}' is given twice; an update's variables must be distinct", b.name());
        }
    }
    let mut order: [usize; N] = std::array::from_fn(|i| i);
    order.sort_unstable_by_key(|&i| Arc::as_ptr(&vars[i]) as usize);
    let mut guards: [Option<VariableGuard<'_>>; N] = std::array::from_fn(|_| None);
    for i in order {
        guards[i] = Some(vars[i].lock());
    }
    Ok(guards.map(|g| g.expect("every variable was locked above")))
}

/// `[Ok(a), Ok(b), ..]` as `Ok([a, b, ..])`, or the first error.
pub fn collect_array<X, const N: usize>(items: [Result<X>; N]) -> Result<[X; N]> {
    let mut out: [Option<X>; N] = std::array::from_fn(|_| None);
    for (slot, item) in out.iter_mut().zip(items) {
        *slot = Some(item?);
    }
    Ok(out.map(|x| x.expect("every slot was filled above")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    #[test]
    fn locks_are_taken_in_address_order_and_refuse_aliases() {
        let a = Arc::new(Variable::new("a", DType::F32));
        let b = Arc::new(Variable::new("b", DType::F32));
        a.assign(Tensor::scalar(1.0f32), false).unwrap();
        b.assign(Tensor::scalar(2.0f32), false).unwrap();
        // Both orders lock without deadlocking against each other.
        let pairs = [[a.clone(), b.clone()], [b.clone(), a.clone()]];
        std::thread::scope(|s| {
            for pair in &pairs {
                s.spawn(move || {
                    for _ in 0..2000 {
                        let mut guards = lock_all(pair).unwrap();
                        guards[0].elements_mut::<f32>().unwrap()[0] += 1.0;
                    }
                });
            }
        });
        let total = a.read().unwrap().scalar_value::<f32>().unwrap() + b.read().unwrap().scalar_value::<f32>().unwrap();
        assert_eq!(total, 4003.0);
        let err = lock_all(&[a.clone(), b, a]).err().unwrap();
        assert!(err.message.contains("'a' is given twice"), "{err}");
    }
}
