//! Control-flow ops of TensorFlow's v1 dataflow form: `Enter`, `Exit`,
//! `Switch`, `Merge`, `NextIteration`, `LoopCond`, `_SwitchN` (and the
//! `Ref*` forms), plus `IdentityN` and `ControlTrigger`, which the
//! lowering of functional control flow (`graph::function`) also emits;
//! and, in [`stack`], the stack ops v1 loop gradients keep forward values on.
//!
//! Owns: their signatures, and the decisions the executor asks of a
//! control-flow node's inputs ([`switch_port`], [`switch_n_port`]). Must
//! not run them: frames, iterations and dead values are the executor's
//! (`executor/control_flow.rs`), which is why they are builtins.

pub mod stack;

use super::registry::{Builtin, Implementation, OpDef};
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_count};
use crate::error::{Result, Status};
use crate::graph::spec::{DataType, NodeSpec};
use crate::tensor::{DType, Tensor};

const fn builtin(name: &'static str, signature: super::registry::SignatureFn, which: Builtin) -> OpDef {
    OpDef { name, signature, implementation: Implementation::Builtin(which), stateful: false }
}

pub const DEFS: &[OpDef] = &[
    builtin("Enter", pass_signature::<false>, Builtin::Enter),
    builtin("RefEnter", pass_signature::<true>, Builtin::Enter),
    builtin("Exit", pass_signature::<false>, Builtin::Exit),
    builtin("RefExit", pass_signature::<true>, Builtin::Exit),
    builtin("NextIteration", pass_signature::<false>, Builtin::NextIteration),
    builtin("RefNextIteration", pass_signature::<true>, Builtin::NextIteration),
    builtin("Switch", switch_signature::<false>, Builtin::Switch),
    builtin("RefSwitch", switch_signature::<true>, Builtin::Switch),
    builtin("_SwitchN", switch_n_signature, Builtin::SwitchN),
    builtin("Merge", merge_signature::<false>, Builtin::Merge),
    builtin("RefMerge", merge_signature::<true>, Builtin::Merge),
    builtin("LoopCond", loop_cond_signature, Builtin::LoopCond),
    OpDef::kernel("IdentityN", identity_n_signature, build_identity_n),
    OpDef::kernel("ControlTrigger", no_io_signature, build_control_trigger),
];

/// The names of the ops only a control-flow executor runs.
pub fn is_control_flow_op(op: &str) -> bool {
    matches!(
        op,
        "Enter"
            | "RefEnter"
            | "Exit"
            | "RefExit"
            | "NextIteration"
            | "RefNextIteration"
            | "Switch"
            | "RefSwitch"
            | "_SwitchN"
            | "Merge"
            | "RefMerge"
            | "LoopCond"
    )
}

/// Whether `op` carries a value to the next iteration (the back edge of a
/// loop, which cycle checks skip).
pub fn is_next_iteration(op: &str) -> bool {
    matches!(op, "NextIteration" | "RefNextIteration")
}

/// The value type an attr `T` names: a tensor dtype, a resource handle or
/// a variant (a TensorList).
pub fn value_type_attr(node: &NodeSpec, key: &str) -> Result<ValueType> {
    match node.attr_data_type(key)? {
        DataType::Tensor(d) => Ok(ValueType::Tensor(d)),
        DataType::Resource => Ok(ValueType::Resource),
        DataType::Variant => Ok(ValueType::Variant),
        other => Err(Status::unimplemented(format!(
            "node '{}' ({}): attr '{key}' is {other}, which this runtime does not compute with",
            node.name, node.op
        ))),
    }
}

fn maybe_ref(t: ValueType, is_ref: bool) -> ValueType {
    match (t, is_ref) {
        (ValueType::Tensor(d), true) => ValueType::Ref(d),
        (t, _) => t,
    }
}

fn pass_signature<const REF: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let t = maybe_ref(value_type_attr(node, "T")?, REF);
    Ok(OpSignature::new(vec![t], vec![t]))
}

fn switch_signature<const REF: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let t = maybe_ref(value_type_attr(node, "T")?, REF);
    Ok(OpSignature::new(vec![t, ValueType::Tensor(DType::Bool)], vec![t, t]))
}

fn switch_n_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = value_type_attr(node, "T")?;
    let n = attr_count(node, "num_outs", 1)?;
    Ok(OpSignature::new(vec![t, ValueType::Tensor(DType::I32)], vec![t; n]))
}

fn merge_signature<const REF: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let t = maybe_ref(value_type_attr(node, "T")?, REF);
    let n = attr_count(node, "N", 1)?;
    Ok(OpSignature::new(vec![t; n], vec![t, ValueType::Tensor(DType::I32)]))
}

fn loop_cond_signature(_node: &NodeSpec) -> Result<OpSignature> {
    let b = ValueType::Tensor(DType::Bool);
    Ok(OpSignature::new(vec![b], vec![b]))
}

/// Which output of a `Switch` its data goes to: port 1 when `pred` holds.
pub fn switch_port(pred: &Tensor) -> Result<usize> {
    if pred.dtype() != DType::Bool || pred.num_elements() != 1 {
        return Err(Status::invalid_argument(format!(
            "The second input must be a scalar, but it has shape {:?} and dtype {}",
            pred.dims(),
            pred.dtype()
        )));
    }
    Ok(pred.scalar_value::<bool>()? as usize)
}

/// Which output of a `_SwitchN` with `n` outputs its data goes to: an
/// index out of range picks the last (the default branch of a `Case`).
pub fn switch_n_port(index: &Tensor, n: usize) -> Result<usize> {
    if index.dtype() != DType::I32 || index.num_elements() != 1 {
        return Err(Status::invalid_argument(format!(
            "The branch index must be an int32 scalar, got shape {:?} of {}",
            index.dims(),
            index.dtype()
        )));
    }
    let i = index.scalar_value::<i32>()?;
    Ok(if i < 0 || i as usize >= n { n - 1 } else { i as usize })
}

fn identity_n_signature(node: &NodeSpec) -> Result<OpSignature> {
    let types = node
        .attr_type_list("T")?
        .into_iter()
        .map(|t| match t {
            DataType::Tensor(d) => Ok(ValueType::Tensor(d)),
            DataType::Resource => Ok(ValueType::Resource),
            DataType::Variant => Ok(ValueType::Variant),
            other => Err(Status::unimplemented(format!(
                "node '{}' (IdentityN): an input of {other}, which this runtime does not compute with",
                node.name
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(OpSignature::new(types.clone(), types))
}

/// Forwards every input to the output of the same index.
struct IdentityN;

fn build_identity_n(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(IdentityN))
}

impl OpKernel for IdentityN {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        for i in 0..ctx.num_inputs() {
            let value = ctx.take_input_value(i)?;
            ctx.set_output_value(i, value);
        }
        Ok(())
    }
}

fn no_io_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::default())
}

/// Runs once its control inputs have all arrived, dead or alive.
struct ControlTrigger;

fn build_control_trigger(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ControlTrigger))
}

impl OpKernel for ControlTrigger {
    fn compute(&self, _ctx: &mut OpContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::ty;

    #[test]
    fn signatures_follow_t_including_resources() {
        let merge = NodeSpec::new("m", "Merge").attr("T", ty(DType::F32)).attr("N", AttrValue::Int(2));
        let sig = merge_signature::<false>(&merge).unwrap();
        assert_eq!(sig.inputs, vec![ValueType::Tensor(DType::F32); 2]);
        assert_eq!(sig.outputs, vec![ValueType::Tensor(DType::F32), ValueType::Tensor(DType::I32)]);
        let enter = NodeSpec::new("e", "Enter").attr("T", AttrValue::Type(DataType::Resource));
        assert_eq!(pass_signature::<false>(&enter).unwrap().outputs, vec![ValueType::Resource]);
        let list = NodeSpec::new("e", "Enter").attr("T", AttrValue::Type(DataType::Variant));
        assert_eq!(pass_signature::<false>(&list).unwrap().outputs, vec![ValueType::Variant]);
        let other = NodeSpec::new("e", "Enter").attr("T", AttrValue::Type(DataType::Unsupported(19)));
        let err = pass_signature::<false>(&other).unwrap_err();
        assert!(err.message.contains("node 'e' (Enter)") && err.message.contains("#19"), "{err}");
    }

    #[test]
    fn switch_ports() {
        assert_eq!(switch_port(&Tensor::scalar(true)).unwrap(), 1);
        assert_eq!(switch_port(&Tensor::scalar(false)).unwrap(), 0);
        assert!(switch_port(&Tensor::scalar(1.0f32)).is_err());
        assert_eq!(switch_n_port(&Tensor::scalar(1i32), 3).unwrap(), 1);
        assert_eq!(switch_n_port(&Tensor::scalar(7i32), 3).unwrap(), 2);
        assert_eq!(switch_n_port(&Tensor::scalar(-1i32), 3).unwrap(), 2);
    }
}
