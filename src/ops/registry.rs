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
        OpDef {
            name,
            signature,
            implementation: Implementation::Kernel(build),
            stateful: false,
        }
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
            super::matmul::DEFS,
            super::nn::DEFS,
            super::reduce::DEFS,
            super::shape_ops::DEFS,
            super::variable::DEFS,
            BUILTINS,
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
    Ok(OpSignature::new(
        vec![],
        vec![ValueType::Tensor(node.attr_dtype("T")?)],
    ))
}

fn retval_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(
        vec![ValueType::Tensor(node.attr_dtype("T")?)],
        vec![],
    ))
}

fn send_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(
        vec![ValueType::Tensor(node.attr_dtype("T")?)],
        vec![],
    ))
}

fn recv_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(
        vec![],
        vec![ValueType::Tensor(node.attr_dtype("tensor_type")?)],
    ))
}

const fn builtin(name: &'static str, signature: SignatureFn, which: Builtin) -> OpDef {
    OpDef {
        name,
        signature,
        implementation: Implementation::Builtin(which),
        stateful: true,
    }
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
