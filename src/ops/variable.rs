//! Variable kernels, both of TensorFlow's families.
//!
//! Owns: the kernels and signatures of
//! - ref variables: `VariableV2` (and v1 `Variable`) output `Value::Ref` to
//!   a [`Variable`] found or created in the device's [`ResourceMgr`];
//!   `Assign`, `AssignAdd`, `AssignSub` take that ref and pass it on;
//!   `IsVariableInitialized` asks it;
//! - resource variables: `VarHandleOp` outputs a [`ResourceHandle`] (built
//!   once per kernel); `ReadVariableOp`, `AssignVariableOp`,
//!   `AssignAddVariableOp`, `AssignSubVariableOp`, `VarIsInitializedOp`,
//!   `VariableShape`, `DestroyResourceOp` look the variable up by that handle on each run.
//!
//! Must not keep a variable in a kernel between steps: the resource manager
//! may be cleared (session reset) and the next lookup must see that. Every
//! op here is stateful. Read-modify-write updates go through
//! [`Variable::update`], atomic with respect to other updates.
//!
//! [`Variable`]: super::Variable
//! [`ResourceMgr`]: super::ResourceMgr
//! [`Variable::update`]: super::Variable::update

use super::broadcast::binary_map;
use super::math::REAL;
use super::numeric::Num;
use super::registry::OpDef;
use super::resource::{ResourceHandle, ResourceMgr, Variable};
use super::{KernelInit, OpContext, OpKernel, OpSignature, Value, ValueType, unsupported_dtype};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::{NodeSpec, ShapeSpec};
use crate::tensor::{DType, Tensor};
use std::sync::Arc;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("VariableV2", variable_signature, build_variable).stateful(),
    OpDef::kernel("Variable", variable_signature, build_variable).stateful(),
    OpDef::kernel("Assign", ref_update_signature, build_assign).stateful(),
    OpDef::kernel("AssignAdd", ref_update_signature, build_assign_add::<false>).stateful(),
    OpDef::kernel("AssignSub", ref_update_signature, build_assign_add::<true>).stateful(),
    OpDef::kernel("IsVariableInitialized", is_initialized_signature, build_is_initialized).stateful(),
    OpDef::kernel("VarHandleOp", var_handle_signature, build_var_handle).stateful(),
    OpDef::kernel("ReadVariableOp", read_signature, build_read).stateful(),
    OpDef::kernel("AssignVariableOp", resource_update_signature, build_assign_var).stateful(),
    OpDef::kernel("AssignAddVariableOp", resource_update_signature, build_assign_add_var::<false>).stateful(),
    OpDef::kernel("AssignSubVariableOp", resource_update_signature, build_assign_add_var::<true>).stateful(),
    OpDef::kernel("VarIsInitializedOp", var_is_initialized_signature, build_var_is_initialized).stateful(),
    OpDef::kernel("VariableShape", variable_shape_signature, build_variable_shape).stateful(),
    OpDef::kernel("DestroyResourceOp", destroy_signature, build_destroy).stateful(),
    OpDef::kernel("DisableCopyOnRead", destroy_signature, build_disable_copy_on_read).stateful(),
];

// ---------------------------------------------------------------------------
// Signatures

fn variable_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![], vec![ValueType::Ref(node.attr_dtype("dtype")?)]))
}

/// Assign, AssignAdd, AssignSub: `[T_ref, T] -> [T_ref]`.
fn ref_update_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = node.attr_dtype("T")?;
    Ok(OpSignature::new(vec![ValueType::Ref(t), ValueType::Tensor(t)], vec![ValueType::Ref(t)]))
}

fn is_initialized_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Ref(node.attr_dtype("dtype")?)], vec![ValueType::Tensor(DType::Bool)]))
}

fn var_handle_signature(node: &NodeSpec) -> Result<OpSignature> {
    node.attr_dtype("dtype")?;
    Ok(OpSignature::new(vec![], vec![ValueType::Resource]))
}

fn read_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Resource], vec![ValueType::Tensor(node.attr_dtype("dtype")?)]))
}

/// AssignVariableOp and friends: `[resource, dtype] -> []`.
fn resource_update_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Resource, ValueType::Tensor(node.attr_dtype("dtype")?)], vec![]))
}

fn var_is_initialized_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Resource], vec![ValueType::Tensor(DType::Bool)]))
}

fn variable_shape_signature(node: &NodeSpec) -> Result<OpSignature> {
    let out_type = super::attr_index_type_or(node, "out_type", DType::I32)?;
    Ok(OpSignature::new(vec![ValueType::Resource], vec![ValueType::Tensor(out_type)]))
}

fn destroy_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Resource], vec![]))
}

// ---------------------------------------------------------------------------
// Shared pieces

/// `shared_name`, or the node's name when it is empty (as TensorFlow
/// names a variable without one).
fn variable_name(node: &NodeSpec) -> Result<String> {
    let shared = node.attr_str_or("shared_name", "")?;
    Ok(if shared.is_empty() { node.name.clone() } else { shared })
}

/// `current + value` (or `- value` with `SUB`), same shapes required.
fn add_values<const SUB: bool>(var: &str, current: &Tensor, value: &Tensor) -> Result<Tensor> {
    if current.shape() != value.shape() {
        bail!(
            invalid_argument,
            "Cannot update variable '{var}' with shape {} using a Tensor with shape {}, shapes must be equal.",
            current.shape(),
            value.shape()
        );
    }
    fn go<T: Num, const SUB: bool>(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        binary_map::<T, T>(a, b, |x, y| if SUB { x.sub(y) } else { x.add(y) })
    }
    match current.dtype() {
        DType::F32 => go::<f32, SUB>(current, value),
        DType::F64 => go::<f64, SUB>(current, value),
        DType::I32 => go::<i32, SUB>(current, value),
        DType::I64 => go::<i64, SUB>(current, value),
        dtype => Err(unsupported_dtype(if SUB { "AssignSub" } else { "AssignAdd" }, dtype, REAL)),
    }
}

fn require_real(node: &NodeSpec, key: &str) -> Result<()> {
    let dtype = node.attr_dtype(key)?;
    if !REAL.contains(&dtype) {
        return Err(unsupported_dtype(&node.op, dtype, REAL));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Ref variables

/// Finds or creates `container/name` on every run and outputs a ref to it.
struct VariableKernel {
    container: String,
    name: String,
    dtype: DType,
    shape: ShapeSpec,
}

fn build_variable(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(VariableKernel {
        container: init.node.attr_str_or("container", "")?,
        name: variable_name(init.node)?,
        dtype: init.node.attr_dtype("dtype")?,
        shape: init.node.attr_shape_or_unknown("shape")?,
    }))
}

impl OpKernel for VariableKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let var = ctx.resources().lookup_or_create(&self.container, &self.name, self.dtype)?;
        var.declare_shape(&self.shape);
        ctx.set_output_value(0, Value::Ref(var));
        Ok(())
    }
}

struct AssignKernel {
    validate_shape: bool,
}

fn build_assign(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(AssignKernel { validate_shape: init.node.attr_bool_or("validate_shape", true)? }))
}

impl OpKernel for AssignKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let var = ctx.input_ref(0)?.clone();
        let value = ctx.take_input(1)?;
        var.assign(value, self.validate_shape)?;
        ctx.set_output_value(0, Value::Ref(var));
        Ok(())
    }
}

struct AssignAddKernel<const SUB: bool>;

fn build_assign_add<const SUB: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    require_real(init.node, "T")?;
    Ok(Box::new(AssignAddKernel::<SUB>))
}

impl<const SUB: bool> OpKernel for AssignAddKernel<SUB> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let var = ctx.input_ref(0)?.clone();
        let value = ctx.input(1)?;
        var.update(|current| add_values::<SUB>(var.name(), current, value))?;
        ctx.set_output_value(0, Value::Ref(var));
        Ok(())
    }
}

struct IsInitializedKernel;

fn build_is_initialized(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(IsInitializedKernel))
}

impl OpKernel for IsInitializedKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let initialized = ctx.input_ref(0)?.is_initialized();
        ctx.set_output(0, Tensor::scalar(initialized));
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Resource variables

/// Hands out the same handle on every run.
struct VarHandleKernel {
    handle: Arc<ResourceHandle>,
}

fn build_var_handle(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(VarHandleKernel {
        handle: Arc::new(ResourceHandle {
            container: init.node.attr_str_or("container", "")?,
            name: variable_name(init.node)?,
            dtype: init.node.attr_dtype("dtype")?,
        }),
    }))
}

impl OpKernel for VarHandleKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        ctx.set_output_value(0, Value::Resource(self.handle.clone()));
        Ok(())
    }
}

/// The existing variable behind `handle`, or FailedPrecondition naming it.
fn existing(resources: &ResourceMgr, handle: &ResourceHandle) -> Result<Arc<Variable>> {
    resources
        .lookup(&handle.container, &handle.name)
        .ok_or_else(|| {
            Status::failed_precondition(format!(
                "Could not find variable {} (container '{}'). It has not been created or initialized, or it has been destroyed.",
                handle.name, handle.container
            ))
        })
}

fn check_var_dtype(var: &Variable, dtype: DType, what: &str) -> Result<()> {
    if var.dtype() != dtype {
        bail!(
            invalid_argument,
            "Trying to {what} variable {} with wrong dtype. Expected {} got {dtype}",
            var.name(),
            var.dtype()
        );
    }
    Ok(())
}

struct ReadKernel {
    dtype: DType,
}

fn build_read(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ReadKernel { dtype: init.node.attr_dtype("dtype")? }))
}

impl OpKernel for ReadKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let var = existing(ctx.resources(), ctx.input_resource(0)?)?;
        check_var_dtype(&var, self.dtype, "read")?;
        let value = var.read()?;
        ctx.set_output(0, value);
        Ok(())
    }
}

struct AssignVarKernel {
    dtype: DType,
    validate_shape: bool,
}

fn build_assign_var(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(AssignVarKernel {
        dtype: init.node.attr_dtype("dtype")?,
        validate_shape: init.node.attr_bool_or("validate_shape", false)?,
    }))
}

impl OpKernel for AssignVarKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let handle = ctx.input_resource(0)?.clone();
        let value = ctx.take_input(1)?;
        let var = ctx.resources().lookup_or_create(&handle.container, &handle.name, self.dtype)?;
        var.assign(value, self.validate_shape)
    }
}

struct AssignAddVarKernel<const SUB: bool> {
    dtype: DType,
}

fn build_assign_add_var<const SUB: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    require_real(init.node, "dtype")?;
    Ok(Box::new(AssignAddVarKernel::<SUB> { dtype: init.node.attr_dtype("dtype")? }))
}

impl<const SUB: bool> OpKernel for AssignAddVarKernel<SUB> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let var = existing(ctx.resources(), ctx.input_resource(0)?)?;
        check_var_dtype(&var, self.dtype, "update")?;
        let value = ctx.input(1)?;
        var.update(|current| add_values::<SUB>(var.name(), current, value))?;
        Ok(())
    }
}

struct VarIsInitializedKernel;

fn build_var_is_initialized(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(VarIsInitializedKernel))
}

impl OpKernel for VarIsInitializedKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let handle = ctx.input_resource(0)?;
        let initialized = ctx.resources().lookup(&handle.container, &handle.name).is_some_and(|v| v.is_initialized());
        ctx.set_output(0, Tensor::scalar(initialized));
        Ok(())
    }
}

/// `VariableShape`: the shape of a resource variable's value, as a vector
/// of `out_type` (what `tf.shape` of a resource variable, and gradients of
/// gathers from one, compute).
struct VariableShapeKernel {
    out_type: DType,
}

fn build_variable_shape(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(VariableShapeKernel { out_type: super::attr_index_type_or(init.node, "out_type", DType::I32)? }))
}

impl OpKernel for VariableShapeKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let var = existing(ctx.resources(), ctx.input_resource(0)?)?;
        let value = var.read()?;
        let dims = value.dims();
        let shape = if self.out_type == DType::I64 {
            Tensor::from_slice::<i64>([dims.len()], &dims.iter().map(|&d| d as i64).collect::<Vec<_>>())?
        } else {
            let dims = dims
                .iter()
                .map(|&d| {
                    i32::try_from(d).map_err(|_| {
                        Status::invalid_argument(format!(
                            "variable {} has dimension {d}, which does not fit out_type int32",
                            var.name()
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Tensor::from_slice::<i32>([dims.len()], &dims)?
        };
        ctx.set_output(0, shape);
        Ok(())
    }
}

struct DestroyKernel {
    ignore_lookup_error: bool,
}

fn build_destroy(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(DestroyKernel { ignore_lookup_error: init.node.attr_bool_or("ignore_lookup_error", true)? }))
}

impl OpKernel for DestroyKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let handle = ctx.input_resource(0)?;
        let removed = ctx.resources().remove(&handle.container, &handle.name);
        if removed.is_none() && !self.ignore_lookup_error {
            bail!(not_found, "Resource {}/{} does not exist", handle.container, handle.name);
        }
        Ok(())
    }
}

/// TensorFlow's savers call it before reading a variable to save it: it
/// turns off the copy a sparse update makes of a variable being read.
/// Variables here have no such mode; the variable must still exist.
struct DisableCopyOnReadKernel;

fn build_disable_copy_on_read(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(DisableCopyOnReadKernel))
}

impl OpKernel for DisableCopyOnReadKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        existing(ctx.resources(), ctx.input_resource(0)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::graph::spec::AttrValue;
    use crate::ops::run_kernel_once;
    use crate::ops::testing::ty;

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(shape, v).unwrap()
    }

    /// Runs `node` against `mgr` and returns its outputs.
    fn run(mgr: &ResourceMgr, node: &NodeSpec, inputs: Vec<Value>) -> Result<Vec<Value>> {
        run_kernel_once(node, inputs, mgr)
    }

    fn variable_v2(name: &str, shape: &[usize]) -> NodeSpec {
        NodeSpec::new(name, "VariableV2")
            .attr("dtype", ty(DType::F32))
            .attr("shape", AttrValue::Shape(ShapeSpec::known(shape)))
    }

    fn ref_op(op: &str) -> NodeSpec {
        NodeSpec::new(op.to_lowercase(), op).attr("T", ty(DType::F32))
    }

    fn var_ref(mgr: &ResourceMgr, node: &NodeSpec) -> Value {
        run(mgr, node, vec![]).unwrap().remove(0)
    }

    #[test]
    fn ref_variable_lifecycle() {
        let mgr = ResourceMgr::default();
        let v = variable_v2("v", &[2]);
        let r = var_ref(&mgr, &v);
        let Value::Ref(var) = &r else { panic!("VariableV2 gives a ref") };
        assert_eq!(var.name(), "v");
        // Uninitialised: reading through the ref fails naming the variable.
        let err = r.clone().into_tensor().unwrap_err();
        assert_eq!(err.code, Code::FailedPrecondition);
        assert!(err.message.contains("v"), "{err}");
        let init = NodeSpec::new("init", "IsVariableInitialized").attr("dtype", ty(DType::F32));
        let out = run(&mgr, &init, vec![r.clone()]).unwrap();
        assert!(!out[0].as_tensor().unwrap().scalar_value::<bool>().unwrap());
        // Assign passes the ref on; the value persists in the manager.
        let out = run(&mgr, &ref_op("Assign"), vec![r.clone(), Value::Tensor(f32s(&[2], &[1., 2.]))]).unwrap();
        assert!(matches!(&out[0], Value::Ref(v) if v.name() == "v"));
        let again = var_ref(&mgr, &v);
        assert_eq!(again.into_tensor().unwrap().as_slice::<f32>().unwrap(), &[1., 2.]);
        // AssignAdd and AssignSub persist across "steps".
        for _ in 0..3 {
            let r = var_ref(&mgr, &v);
            run(&mgr, &ref_op("AssignAdd"), vec![r, Value::Tensor(f32s(&[2], &[0.5, 1.]))]).unwrap();
        }
        let r = var_ref(&mgr, &v);
        let out = run(&mgr, &ref_op("AssignSub"), vec![r.clone(), Value::Tensor(f32s(&[2], &[1., 1.]))]).unwrap();
        assert_eq!(out[0].clone().into_tensor().unwrap().as_slice::<f32>().unwrap(), &[1.5, 4.]);
        let out = run(&mgr, &init, vec![r]).unwrap();
        assert!(out[0].as_tensor().unwrap().scalar_value::<bool>().unwrap());
    }

    #[test]
    fn assign_validates_shapes() {
        let mgr = ResourceMgr::default();
        let r = var_ref(&mgr, &variable_v2("w", &[2, 3]));
        // Before any value, the declared shape is what must match.
        let err = run(&mgr, &ref_op("Assign"), vec![r.clone(), Value::Tensor(f32s(&[3], &[0.; 3]))]).unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
        assert!(
            err.message.starts_with("Assign requires shapes of both tensors to match. lhs shape= [2,3] rhs shape= [3]"),
            "{err}"
        );
        run(&mgr, &ref_op("Assign"), vec![r.clone(), Value::Tensor(f32s(&[2, 3], &[0.; 6]))]).unwrap();
        let err = run(&mgr, &ref_op("Assign"), vec![r.clone(), Value::Tensor(f32s(&[6], &[0.; 6]))]).unwrap_err();
        assert!(err.message.contains("lhs shape= [2,3] rhs shape= [6]"), "{err}");
        // validate_shape = false lets the shape change.
        let loose = ref_op("Assign").attr("validate_shape", AttrValue::Bool(false));
        run(&mgr, &loose, vec![r.clone(), Value::Tensor(f32s(&[6], &[0.; 6]))]).unwrap();
        assert_eq!(r.clone().into_tensor().unwrap().dims(), &[6]);
        // AssignAdd needs equal shapes and an initialised variable.
        let err = run(&mgr, &ref_op("AssignAdd"), vec![r, Value::Tensor(f32s(&[2], &[0.; 2]))]).unwrap_err();
        assert!(err.message.contains("shapes must be equal"), "{err}");
        let fresh = var_ref(&mgr, &variable_v2("u", &[1]));
        let err = run(&mgr, &ref_op("AssignAdd"), vec![fresh, Value::Tensor(f32s(&[1], &[1.]))]).unwrap_err();
        assert_eq!(err.code, Code::FailedPrecondition);
        assert!(err.message.contains("u"), "{err}");
    }

    fn handle_op(name: &str) -> NodeSpec {
        NodeSpec::new(name, "VarHandleOp")
            .attr("dtype", ty(DType::I64))
            .attr("shape", AttrValue::Shape(ShapeSpec::known(&[])))
    }

    fn res_op(op: &str) -> NodeSpec {
        NodeSpec::new(op.to_lowercase(), op).attr("dtype", ty(DType::I64))
    }

    #[test]
    fn resource_variable_lifecycle() {
        let mgr = ResourceMgr::default();
        let h = run(&mgr, &handle_op("counter"), vec![]).unwrap().remove(0);
        let Value::Resource(handle) = &h else { panic!("VarHandleOp gives a handle") };
        assert_eq!(handle.name, "counter", "empty shared_name takes the node name");
        // Reading before any assignment: FailedPrecondition naming it.
        let err = run(&mgr, &res_op("ReadVariableOp"), vec![h.clone()]).unwrap_err();
        assert_eq!(err.code, Code::FailedPrecondition);
        assert!(err.message.contains("counter"), "{err}");
        let is_init = NodeSpec::new("ii", "VarIsInitializedOp");
        let out = run(&mgr, &is_init, vec![h.clone()]).unwrap();
        assert!(!out[0].as_tensor().unwrap().scalar_value::<bool>().unwrap());
        let err = run(&mgr, &res_op("AssignAddVariableOp"), vec![h.clone(), Value::Tensor(Tensor::scalar(1i64))])
            .unwrap_err();
        assert_eq!(err.code, Code::FailedPrecondition);
        // Assign creates it; AssignAdd accumulates across runs.
        let out =
            run(&mgr, &res_op("AssignVariableOp"), vec![h.clone(), Value::Tensor(Tensor::scalar(10i64))]).unwrap();
        assert!(out.is_empty());
        for _ in 0..3 {
            run(&mgr, &res_op("AssignAddVariableOp"), vec![h.clone(), Value::Tensor(Tensor::scalar(2i64))]).unwrap();
        }
        run(&mgr, &res_op("AssignSubVariableOp"), vec![h.clone(), Value::Tensor(Tensor::scalar(1i64))]).unwrap();
        let out = run(&mgr, &res_op("ReadVariableOp"), vec![h.clone()]).unwrap();
        assert_eq!(out[0].as_tensor().unwrap().scalar_value::<i64>().unwrap(), 15);
        let out = run(&mgr, &is_init, vec![h.clone()]).unwrap();
        assert!(out[0].as_tensor().unwrap().scalar_value::<bool>().unwrap());
        run(&mgr, &NodeSpec::new("dc", "DisableCopyOnRead"), vec![h.clone()]).unwrap();
        let shape = run(&mgr, &NodeSpec::new("shape", "VariableShape"), vec![h.clone()]).unwrap();
        assert_eq!(shape[0].as_tensor().unwrap().dims(), &[0], "a scalar variable's shape is []");
        // A read with the wrong dtype names both.
        let wrong = NodeSpec::new("r", "ReadVariableOp").attr("dtype", ty(DType::F32));
        let err = run(&mgr, &wrong, vec![h.clone()]).unwrap_err();
        assert!(err.message.contains("Expected int64 got float32"), "{err}");
        // Destroy, then it is gone; a strict destroy of nothing fails.
        let destroy = NodeSpec::new("d", "DestroyResourceOp");
        run(&mgr, &destroy, vec![h.clone()]).unwrap();
        assert!(run(&mgr, &res_op("ReadVariableOp"), vec![h.clone()]).is_err());
        let gone = run(&mgr, &NodeSpec::new("dc", "DisableCopyOnRead"), vec![h.clone()]).unwrap_err();
        assert!(gone.message.contains("counter"), "{gone}");
        run(&mgr, &destroy, vec![h.clone()]).unwrap();
        let strict = destroy.attr("ignore_lookup_error", AttrValue::Bool(false));
        let err = run(&mgr, &strict, vec![h]).unwrap_err();
        assert_eq!(err.code, Code::NotFound);
    }

    #[test]
    fn handles_are_built_once_and_share_by_name() {
        let mgr = ResourceMgr::default();
        let node = handle_op("h").attr("shared_name", AttrValue::Bytes(b"shared".to_vec()));
        let def = crate::ops::lookup("VarHandleOp").unwrap();
        let sig = (def.signature)(&node).unwrap();
        let crate::ops::Implementation::Kernel(build) = def.implementation else { panic!("a kernel") };
        let kernel = build(&KernelInit { node: &node, signature: &sig }).unwrap();
        let outs = |k: &dyn OpKernel| {
            let mut inputs: Vec<Option<Value>> = vec![];
            let mut outputs = vec![None];
            k.compute(&mut OpContext::new(&mut inputs, &mut outputs, &mgr)).unwrap();
            match outputs.remove(0) {
                Some(Value::Resource(h)) => h,
                other => panic!("{other:?}"),
            }
        };
        let (a, b) = (outs(kernel.as_ref()), outs(kernel.as_ref()));
        assert!(Arc::ptr_eq(&a, &b), "one handle per kernel");
        assert_eq!(a.name, "shared");
        // A second handle op with the same shared_name reaches the same
        // variable.
        run(&mgr, &res_op("AssignVariableOp"), vec![Value::Resource(a), Value::Tensor(Tensor::scalar(7i64))]).unwrap();
        let other = run(&mgr, &handle_op("h2").attr("shared_name", AttrValue::Bytes(b"shared".to_vec())), vec![])
            .unwrap()
            .remove(0);
        let out = run(&mgr, &res_op("ReadVariableOp"), vec![other]).unwrap();
        assert_eq!(out[0].as_tensor().unwrap().scalar_value::<i64>().unwrap(), 7);
        assert!(def.stateful);
    }
}
