//! Array-producing and pass-through ops: Const, Placeholder, Identity, NoOp.
//!
//! Owns: these kernels and their signatures. Shape-manipulating ops
//! (Reshape, Transpose, ConcatV2, Shape, Cast) live in `shape_ops`.

use super::registry::OpDef;
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::Tensor;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Const", const_signature, build_const),
    OpDef::kernel("Placeholder", placeholder_signature, build_placeholder),
    OpDef::kernel("Identity", identity_signature, build_identity),
    OpDef::kernel("StopGradient", identity_signature, build_identity),
    OpDef::kernel("NoOp", no_op_signature, build_no_op),
];

fn const_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![], vec![ValueType::Tensor(node.attr_dtype("dtype")?)]))
}

/// Holds the decoded constant; each step hands out a reference to it.
struct ConstKernel {
    value: Tensor,
}

fn build_const(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let value = init.node.attr_tensor("value")?.to_tensor()?;
    let dtype = init.node.attr_dtype("dtype")?;
    if value.dtype() != dtype {
        return Err(Status::invalid_argument(format!("Const value is {} but attr dtype is {dtype}", value.dtype())));
    }
    Ok(Box::new(ConstKernel { value }))
}

impl OpKernel for ConstKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        ctx.set_output(0, self.value.clone());
        Ok(())
    }
}

fn placeholder_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![], vec![ValueType::Tensor(node.attr_dtype("dtype")?)]))
}

/// Runs only when a placeholder was not fed: always an error.
struct PlaceholderKernel {
    message: String,
}

fn build_placeholder(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("dtype")?;
    let shape = init.node.attr_shape_or_unknown("shape")?;
    Ok(Box::new(PlaceholderKernel {
        message: format!(
            "You must feed a value for placeholder tensor '{}' with dtype {dtype} and shape {shape}",
            init.node.name
        ),
    }))
}

impl OpKernel for PlaceholderKernel {
    fn compute(&self, _ctx: &mut OpContext<'_>) -> Result<()> {
        Err(Status::invalid_argument(self.message.clone()))
    }
}

fn identity_signature(node: &NodeSpec) -> Result<OpSignature> {
    // Resource handles pass through Identity too (TF2 graphs route variable
    // handles through it, and through function-call boundaries).
    let t = super::control_flow::value_type_attr(node, "T")?;
    Ok(OpSignature::new(vec![t], vec![t]))
}

/// Forwards its input; the executor has already read through a ref input.
struct IdentityKernel;

fn build_identity(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(IdentityKernel))
}

impl OpKernel for IdentityKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let value = ctx.take_input_value(0)?;
        ctx.set_output_value(0, value);
        Ok(())
    }
}

fn no_op_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::default())
}

struct NoOpKernel;

fn build_no_op(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(NoOpKernel))
}

impl OpKernel for NoOpKernel {
    fn compute(&self, _ctx: &mut OpContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrValue, ShapeSpec, TensorValue};
    use crate::ops::testing::{node, run1, ty};
    use crate::tensor::DType;

    #[test]
    fn const_hands_out_shared_bytes() {
        let value = Tensor::from_slice::<f32>([20], &[1.5; 20]).unwrap();
        let n = node("Const")
            .attr("value", AttrValue::Tensor(TensorValue::from_tensor(&value)))
            .attr("dtype", ty(DType::F32));
        assert!(run1(&n, &[]).unwrap().bit_eq(&value));
        let bad = n.clone().attr("dtype", ty(DType::I32));
        assert!(run1(&bad, &[]).unwrap_err().message.contains("attr dtype is int32"));
    }

    #[test]
    fn unfed_placeholder_names_itself() {
        let n = NodeSpec::new("x", "Placeholder")
            .attr("dtype", ty(DType::F32))
            .attr("shape", AttrValue::Shape(ShapeSpec { dims: Some(vec![-1, 16]) }));
        let err = run1(&n, &[]).unwrap_err();
        assert_eq!(err.message, "You must feed a value for placeholder tensor 'x' with dtype float32 and shape [?,16]");
    }

    #[test]
    fn identity_forwards_without_copy() {
        let t = Tensor::from_slice::<i64>([100], &[7; 100]).unwrap();
        let out = run1(&node("Identity").attr("T", ty(DType::I64)), std::slice::from_ref(&t)).unwrap();
        assert!(out.shares_bytes_with(&t));
    }
}
