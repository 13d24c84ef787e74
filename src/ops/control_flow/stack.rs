//! The stack ops control flow v1's gradients use to hand a loop's forward
//! values to the loop that computes their gradient: `StackV2` makes a
//! stack, the forward loop pushes each iteration's value (`StackPushV2`),
//! the gradient loop pops them in reverse (`StackPopV2`), `StackCloseV2`
//! ends it.
//!
//! Owns: [`Stack`] and those four kernels. A stack lives for one step: the
//! handle `StackV2` outputs carries the stack itself (as
//! [`Value::Stack`]), so each run of `StackV2` starts an empty one and it
//! goes when the step's last holder drops it; nothing is kept in the
//! device's resource manager. Must not know about frames: the graph's own
//! edges order pushes before pops.

use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, Value, ValueType};
use crate::tensor::{DType, Tensor};
use parking_lot::Mutex;
use std::sync::Arc;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("StackV2", stack_signature, build_stack).stateful(),
    OpDef::kernel("StackPushV2", push_signature, build_push).stateful(),
    OpDef::kernel("StackPopV2", pop_signature, build_pop).stateful(),
    OpDef::kernel("StackCloseV2", close_signature, build_close).stateful(),
];

/// A last-in first-out stack of tensors of one dtype.
pub struct Stack {
    name: String,
    elem_type: DType,
    /// `None`: no bound (`max_size` < 0).
    max_size: Option<usize>,
    state: Mutex<StackState>,
}

#[derive(Default)]
struct StackState {
    items: Vec<Tensor>,
    closed: bool,
}

impl Stack {
    pub fn new(name: impl Into<String>, elem_type: DType, max_size: Option<usize>) -> Stack {
        Stack { name: name.into(), elem_type, max_size, state: Mutex::new(StackState::default()) }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn len(&self) -> usize {
        self.state.lock().items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn closed(&self) -> Status {
        Status::invalid_argument(format!("Stack[{}] has already been closed.", self.name))
    }

    pub fn push(&self, item: Tensor) -> Result<()> {
        if item.dtype() != self.elem_type {
            return Err(Status::invalid_argument(format!(
                "Stack[{}] holds elements of {} but was pushed {}",
                self.name,
                self.elem_type,
                item.dtype()
            )));
        }
        let mut state = self.state.lock();
        if state.closed {
            return Err(self.closed());
        }
        if let Some(max) = self.max_size {
            if state.items.len() >= max {
                return Err(Status::invalid_argument(format!("Stack[{}] overflowed its max_size ({max})", self.name)));
            }
        }
        state.items.push(item);
        Ok(())
    }

    pub fn pop(&self) -> Result<Tensor> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(self.closed());
        }
        state.items.pop().ok_or_else(|| Status::out_of_range(format!("Stack[{}] is empty.", self.name)))
    }

    pub fn close(&self) {
        let mut state = self.state.lock();
        state.closed = true;
        state.items.clear();
    }
}

fn stack_signature(node: &NodeSpec) -> Result<OpSignature> {
    node.attr_dtype("elem_type")?;
    Ok(OpSignature::new(vec![ValueType::Tensor(DType::I32)], vec![ValueType::Resource]))
}

fn push_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![ValueType::Resource, t], vec![t]))
}

fn pop_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Resource], vec![ValueType::Tensor(node.attr_dtype("elem_type")?)]))
}

fn close_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Resource], vec![]))
}

fn input_stack<'c>(ctx: &'c OpContext<'_>) -> Result<&'c Arc<Stack>> {
    ctx.input_stack(0)
}

/// `StackV2(max_size)`: a fresh, empty stack each run.
struct MakeStack {
    name: String,
    elem_type: DType,
}

fn build_stack(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let stack_name = init.node.attr_str_or("stack_name", "")?;
    let name = if stack_name.is_empty() { init.node.name.clone() } else { stack_name };
    Ok(Box::new(MakeStack { name, elem_type: init.node.attr_dtype("elem_type")? }))
}

impl OpKernel for MakeStack {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let max_size = ctx.input(0)?;
        if max_size.dtype() != DType::I32 || max_size.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "max_size must be an int32 scalar, got {} of shape {}",
                max_size.dtype(),
                max_size.shape()
            )));
        }
        let max_size = usize::try_from(max_size.scalar_value::<i32>()?).ok();
        ctx.set_output_value(0, Value::Stack(Arc::new(Stack::new(self.name.clone(), self.elem_type, max_size))));
        Ok(())
    }
}

/// `StackPushV2(handle, elem)`: pushes `elem` and passes it on.
struct Push;

fn build_push(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Push))
}

impl OpKernel for Push {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let item = ctx.take_input(1)?;
        input_stack(ctx)?.push(item.clone())?;
        ctx.set_output(0, item);
        Ok(())
    }
}

/// `StackPopV2(handle)`: the most recently pushed element.
struct Pop {
    elem_type: DType,
}

fn build_pop(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Pop { elem_type: init.node.attr_dtype("elem_type")? }))
}

impl OpKernel for Pop {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let stack = input_stack(ctx)?.clone();
        if stack.elem_type != self.elem_type {
            return Err(Status::invalid_argument(format!(
                "Stack[{}] holds elements of {} but the pop asks for {}",
                stack.name, stack.elem_type, self.elem_type
            )));
        }
        let item = stack.pop()?;
        ctx.set_output(0, item);
        Ok(())
    }
}

/// `StackCloseV2(handle)`: drops what is left; later pushes and pops fail.
struct Close;

fn build_close(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Close))
}

impl OpKernel for Close {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        input_stack(ctx)?.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::ty;
    use crate::ops::{ResourceMgr, run_kernel_once};

    fn run(node: &NodeSpec, inputs: Vec<Value>) -> Result<Vec<Value>> {
        run_kernel_once(node, inputs, &ResourceMgr::default())
    }

    fn make(max_size: i32) -> Value {
        let node = NodeSpec::new("f_acc", "StackV2")
            .attr("elem_type", ty(DType::F32))
            .attr("stack_name", AttrValue::Bytes(b"acc".to_vec()));
        run(&node, vec![Value::Tensor(Tensor::scalar(max_size))]).unwrap().remove(0)
    }

    fn push(stack: &Value, v: f32) -> Result<Vec<Value>> {
        let node = NodeSpec::new("push", "StackPushV2").attr("T", ty(DType::F32));
        run(&node, vec![stack.clone(), Value::Tensor(Tensor::scalar(v))])
    }

    fn pop(stack: &Value) -> Result<f32> {
        let node = NodeSpec::new("pop", "StackPopV2").attr("elem_type", ty(DType::F32));
        run(&node, vec![stack.clone()])?.remove(0).into_tensor()?.scalar_value::<f32>()
    }

    #[test]
    fn pops_come_back_in_reverse_and_each_stack_is_fresh() {
        let stack = make(-1);
        for v in [1.0, 2.0, 3.0] {
            let out = push(&stack, v).unwrap();
            assert_eq!(out[0].as_tensor().unwrap().scalar_value::<f32>().unwrap(), v, "a push passes its value on");
        }
        assert_eq!([pop(&stack).unwrap(), pop(&stack).unwrap(), pop(&stack).unwrap()], [3.0, 2.0, 1.0]);
        let err = pop(&stack).unwrap_err();
        assert!(err.message.contains("Stack[acc] is empty."), "{err}");
        push(&stack, 4.0).unwrap();
        assert!(pop(&make(-1)).is_err(), "a new run of StackV2 starts empty");
    }

    #[test]
    fn bounds_dtypes_and_closing_are_checked() {
        let stack = make(1);
        push(&stack, 1.0).unwrap();
        let err = push(&stack, 2.0).unwrap_err();
        assert!(err.message.contains("overflowed its max_size (1)"), "{err}");
        let ints = NodeSpec::new("push", "StackPushV2").attr("T", ty(DType::I32));
        let err = run(&ints, vec![stack.clone(), Value::Tensor(Tensor::scalar(1i32))]).unwrap_err();
        assert!(err.message.contains("holds elements of float32 but was pushed int32"), "{err}");
        run(&NodeSpec::new("close", "StackCloseV2"), vec![stack.clone()]).unwrap();
        let err = pop(&stack).unwrap_err();
        assert!(err.message.contains("already been closed"), "{err}");
    }
}
