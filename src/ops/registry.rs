//! The op registry: op name → signature, implementation, and traits the
//! placer and executor need (stateful, colocated with a resource).
//!
//! Owns: the one table of every op the runtime runs. Each kernel module
//! exports a `DEFS` slice; this file concatenates them. Adding an op means
//! adding an [`OpDef`] to its module's `DEFS`.

use super::{KernelInit, OpKernel, OpSignature, ValueType};
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use std::collections::HashMap;
use std::sync::OnceLock;

pub type SignatureFn = fn(&NodeSpec) -> Result<OpSignature>;
pub type KernelFactory = fn(&KernelInit<'_>) -> Result<Box<dyn OpKernel>>;

/// Nodes the executor runs itself rather than through a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// `_Arg`: a value fed by the caller of the step (attr `index`).
    Arg,
    /// `_Retval`: a value returned to the caller of the step (attr `index`).
    Retval,
    /// `_Send`: hands its input to the rendezvous under a key.
    Send,
    /// `_Recv`: waits for the rendezvous to deliver a value under a key.
    Recv,
}

#[derive(Clone, Copy)]
pub enum Implementation {
    Kernel(KernelFactory),
    Builtin(Builtin),
}

/// Everything the runtime knows about one op.
#[derive(Clone, Copy)]
pub struct OpDef {
    pub name: &'static str,
    pub signature: SignatureFn,
    pub implementation: Implementation,
    /// Has side effects or state: never pruned away as a target's dependency
    /// only, never constant-folded, colocated with the resource it touches.
    pub stateful: bool,
}

impl OpDef {
    pub const fn kernel(name: &'static str, signature: SignatureFn, build: KernelFactory) -> OpDef {
        OpDef { name, signature, implementation: Implementation::Kernel(build), stateful: false }
    }

    pub const fn stateful(mut self) -> OpDef {
        self.stateful = true;
        self
    }
}

fn table() -> &'static HashMap<&'static str, OpDef> {
    static TABLE: OnceLock<HashMap<&'static str, OpDef>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let modules: &[&[OpDef]] = &[
            super::array::DEFS,
            super::math::DEFS,
            super::math::einsum::DEFS,
            super::matmul::DEFS,
            super::nn::DEFS,
            super::reduce::DEFS,
            super::shape_ops::DEFS,
            super::variable::DEFS,
            BUILTINS,
            #[cfg(test)]
            super::test_kernels::DEFS,
        ];
        let mut map = HashMap::new();
        for defs in modules {
            for def in *defs {
                let previous = map.insert(def.name, *def);
                assert!(previous.is_none(), "op {} registered twice", def.name);
            }
        }
        map
    })
}

/// The definition of `op`, if registered.
pub fn lookup(op: &str) -> Option<&'static OpDef> {
    table().get(op)
}

/// Every registered op name, sorted.
pub fn op_names() -> Vec<&'static str> {
    let mut names: Vec<_> = table().keys().copied().collect();
    names.sort_unstable();
    names
}

fn arg_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![], vec![ValueType::Tensor(node.attr_dtype("T")?)]))
}

fn retval_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Tensor(node.attr_dtype("T")?)], vec![]))
}

fn send_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Tensor(node.attr_dtype("T")?)], vec![]))
}

fn recv_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![], vec![ValueType::Tensor(node.attr_dtype("tensor_type")?)]))
}

const fn builtin(name: &'static str, signature: SignatureFn, which: Builtin) -> OpDef {
    OpDef { name, signature, implementation: Implementation::Builtin(which), stateful: true }
}

/// Executor-run nodes, inserted by pruning (feeds and fetches) and
/// partitioning (cross-device edges). Their attributes:
/// - `_Arg`/`_Retval`: `T` (dtype), `index` (position in the step's feeds or
///   fetches).
/// - `_Send`/`_Recv`: `T`/`tensor_type` (dtype), `tensor_name`,
///   `send_device`, `send_device_incarnation`, `recv_device`; together they
///   form the rendezvous key.
pub const BUILTINS: &[OpDef] = &[
    builtin("_Arg", arg_signature, Builtin::Arg),
    builtin("_Retval", retval_signature, Builtin::Retval),
    builtin("_Send", send_signature, Builtin::Send),
    builtin("_Recv", recv_signature, Builtin::Recv),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrValue, DataType};
    use crate::ops::KernelInit;
    use crate::tensor::DType;

    const F: ValueType = ValueType::Tensor(DType::F32);
    const B: ValueType = ValueType::Tensor(DType::Bool);
    const I32: ValueType = ValueType::Tensor(DType::I32);
    const I64: ValueType = ValueType::Tensor(DType::I64);
    const REF: ValueType = ValueType::Ref(DType::F32);
    const RES: ValueType = ValueType::Resource;

    fn ty(d: DType) -> AttrValue {
        AttrValue::Type(DataType::Tensor(d))
    }

    /// Every op the kernels provide, with a typical attribute set and the
    /// signature TensorFlow's op definition gives for it.
    fn table() -> Vec<(&'static str, NodeSpec, Vec<ValueType>, Vec<ValueType>)> {
        let t = |op: &'static str| NodeSpec::new("n", op).attr("T", ty(DType::F32));
        let dtype = |op: &'static str| NodeSpec::new("n", op).attr("dtype", ty(DType::F32));
        let mut rows = Vec::new();
        let unary = [
            "Abs",
            "Neg",
            "Square",
            "Sign",
            "Round",
            "Exp",
            "Expm1",
            "Log",
            "Log1p",
            "Sqrt",
            "Rsqrt",
            "Reciprocal",
            "Inv",
            "Tanh",
            "Sigmoid",
            "Sin",
            "Cos",
            "Floor",
            "Ceil",
            "Erf",
            "Erfc",
            "Relu",
            "Relu6",
            "Elu",
            "Softplus",
            "Softsign",
            "LeakyRelu",
            "Softmax",
            "LogSoftmax",
            "Squeeze",
            "ZerosLike",
            "OnesLike",
            "Identity",
            "StopGradient",
        ];
        for op in unary {
            rows.push((op, t(op), vec![F], vec![F]));
        }
        for op in ["IsNan", "IsFinite", "IsInf"] {
            rows.push((op, t(op), vec![F], vec![B]));
        }
        let binary = [
            "Add",
            "AddV2",
            "Sub",
            "Mul",
            "RealDiv",
            "Div",
            "DivNoNan",
            "FloorDiv",
            "FloorMod",
            "Mod",
            "TruncateMod",
            "Maximum",
            "Minimum",
            "Pow",
            "SquaredDifference",
            "BiasAdd",
            "BiasAddV1",
            "MatMul",
            "BatchMatMul",
            "BatchMatMulV2",
        ];
        for op in binary {
            rows.push((op, t(op), vec![F, F], vec![F]));
        }
        rows.push((
            "TruncateDiv",
            NodeSpec::new("n", "TruncateDiv").attr("T", ty(DType::I32)),
            vec![I32, I32],
            vec![I32],
        ));
        for op in ["Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"] {
            rows.push((op, t(op), vec![F, F], vec![B]));
        }
        for op in ["LogicalAnd", "LogicalOr"] {
            rows.push((op, NodeSpec::new("n", op), vec![B, B], vec![B]));
        }
        rows.push(("LogicalNot", NodeSpec::new("n", "LogicalNot"), vec![B], vec![B]));
        rows.push((
            "Einsum",
            t("Einsum").attr("N", AttrValue::Int(2)).attr("equation", AttrValue::Bytes(b"ij,jk->ik".to_vec())),
            vec![F, F],
            vec![F],
        ));
        rows.push((
            "Einsum",
            t("Einsum").attr("N", AttrValue::Int(1)).attr("equation", AttrValue::Bytes(b"ii->".to_vec())),
            vec![F],
            vec![F],
        ));
        rows.push(("AddN", t("AddN").attr("N", AttrValue::Int(3)), vec![F, F, F], vec![F]));
        for op in ["Select", "SelectV2"] {
            rows.push((op, t(op), vec![B, F, F], vec![F]));
        }
        for op in ["Sum", "Mean", "Prod", "Max", "Min"] {
            rows.push((op, t(op), vec![F, I32], vec![F]));
        }
        rows.push(("Sum", t("Sum").attr("Tidx", ty(DType::I64)), vec![F, I64], vec![F]));
        for op in ["All", "Any"] {
            rows.push((op, NodeSpec::new("n", op), vec![B, I32], vec![B]));
        }
        for op in ["ArgMax", "ArgMin"] {
            rows.push((op, t(op), vec![F, I32], vec![I64]));
        }
        rows.push(("ArgMax", t("ArgMax").attr("output_type", ty(DType::I32)), vec![F, I32], vec![I32]));
        for op in ["Reshape", "Transpose", "Tile", "ExpandDims"] {
            rows.push((op, t(op), vec![F, I32], vec![F]));
        }
        rows.push(("ConcatV2", t("ConcatV2").attr("N", AttrValue::Int(2)), vec![F, F, I32], vec![F]));
        rows.push(("Concat", t("Concat").attr("N", AttrValue::Int(2)), vec![I32, F, F], vec![F]));
        rows.push(("Pack", t("Pack").attr("N", AttrValue::Int(2)), vec![F, F], vec![F]));
        rows.push(("Slice", t("Slice").attr("Index", ty(DType::I64)), vec![F, I64, I64], vec![F]));
        for op in ["Shape", "Size", "Rank"] {
            rows.push((op, t(op), vec![F], vec![I32]));
        }
        rows.push(("Shape", t("Shape").attr("out_type", ty(DType::I64)), vec![F], vec![I64]));
        rows.push((
            "Cast",
            NodeSpec::new("n", "Cast").attr("SrcT", ty(DType::F32)).attr("DstT", ty(DType::I64)),
            vec![F],
            vec![I64],
        ));
        rows.push(("Fill", t("Fill"), vec![I32, F], vec![F]));
        rows.push(("NoOp", NodeSpec::new("n", "NoOp"), vec![], vec![]));
        rows.push(("Placeholder", dtype("Placeholder"), vec![], vec![F]));
        for op in ["VariableV2", "Variable"] {
            rows.push((op, dtype(op), vec![], vec![REF]));
        }
        for op in ["Assign", "AssignAdd", "AssignSub"] {
            rows.push((op, t(op), vec![REF, F], vec![REF]));
        }
        rows.push(("IsVariableInitialized", dtype("IsVariableInitialized"), vec![REF], vec![B]));
        rows.push(("VarHandleOp", dtype("VarHandleOp"), vec![], vec![RES]));
        rows.push(("ReadVariableOp", dtype("ReadVariableOp"), vec![RES], vec![F]));
        for op in ["AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"] {
            rows.push((op, dtype(op), vec![RES, F], vec![]));
        }
        rows.push(("VarIsInitializedOp", NodeSpec::new("n", "VarIsInitializedOp"), vec![RES], vec![B]));
        rows.push(("DestroyResourceOp", NodeSpec::new("n", "DestroyResourceOp"), vec![RES], vec![]));
        rows
    }

    #[test]
    fn every_op_is_registered_with_its_signature_and_builds() {
        for (op, node, inputs, outputs) in table() {
            let def = lookup(op).unwrap_or_else(|| panic!("{op} is not registered"));
            let sig = (def.signature)(&node).unwrap_or_else(|e| panic!("{op}: {e}"));
            assert_eq!(sig.inputs, inputs, "{op} inputs");
            assert_eq!(sig.outputs, outputs, "{op} outputs");
            let Implementation::Kernel(build) = def.implementation else {
                panic!("{op} should be a kernel");
            };
            build(&KernelInit { node: &node, signature: &sig }).unwrap_or_else(|e| panic!("{op} does not build: {e}"));
        }
    }

    #[test]
    fn stateful_ops_are_exactly_the_variable_ops() {
        for (op, ..) in table() {
            let def = lookup(op).unwrap();
            let want = matches!(
                op,
                "VariableV2"
                    | "Variable"
                    | "Assign"
                    | "AssignAdd"
                    | "AssignSub"
                    | "IsVariableInitialized"
                    | "VarHandleOp"
                    | "ReadVariableOp"
                    | "AssignVariableOp"
                    | "AssignAddVariableOp"
                    | "AssignSubVariableOp"
                    | "VarIsInitializedOp"
                    | "DestroyResourceOp"
            );
            assert_eq!(def.stateful, want, "{op}");
        }
    }

    #[test]
    fn missing_attrs_name_node_and_attr() {
        let node = NodeSpec::new("my_add", "AddV2");
        let err = (lookup("AddV2").unwrap().signature)(&node).unwrap_err();
        assert!(err.message.contains("'my_add'") && err.message.contains("missing attr 'T'"), "{err}");
        let node = NodeSpec::new("my_concat", "ConcatV2").attr("T", ty(DType::F32));
        let err = (lookup("ConcatV2").unwrap().signature)(&node).unwrap_err();
        assert!(err.message.contains("missing attr 'N'"), "{err}");
        let node = NodeSpec::new("c", "Cast").attr("SrcT", ty(DType::F32));
        let err = (lookup("Cast").unwrap().signature)(&node).unwrap_err();
        assert!(err.message.contains("'DstT'"), "{err}");
        let bad_idx = NodeSpec::new("s", "Sum").attr("T", ty(DType::F32)).attr("Tidx", ty(DType::F32));
        let err = (lookup("Sum").unwrap().signature)(&bad_idx).unwrap_err();
        assert!(err.message.contains("'Tidx'"), "{err}");
    }
}
