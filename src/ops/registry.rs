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
    /// `Enter`: passes its input into a child frame (attr `frame_name`).
    Enter,
    /// `Exit`: passes its input out of its frame to the parent.
    Exit,
    /// `NextIteration`: passes its input to the next iteration of its frame.
    NextIteration,
    /// `Switch`: forwards its data to output 1 if the predicate holds, to
    /// output 0 otherwise; the other output is dead.
    Switch,
    /// `_SwitchN`: forwards its data to the output its index names.
    SwitchN,
    /// `Merge`: forwards the first live input, and its index.
    Merge,
    /// `LoopCond`: forwards the predicate of a loop.
    LoopCond,
}

impl Builtin {
    /// Whether only the control-flow executor runs this node.
    pub fn is_control_flow(self) -> bool {
        !matches!(self, Builtin::Arg | Builtin::Retval | Builtin::Send | Builtin::Recv)
    }
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

    /// The node's signature: [`signature`](Self::signature), or, for a
    /// node of a narrow dtype, the op's wide one with the narrow types put
    /// back (`widen`).
    pub fn resolve(&self, node: &NodeSpec) -> Result<OpSignature> {
        super::widen::signature(self, node)
    }

    /// Builds the node's kernel (an error for builtins): the op's own, or
    /// its wide one between conversions for a node of a narrow dtype.
    pub fn build_kernel(&self, init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
        super::widen::build(self, init)
    }
}

fn table() -> &'static HashMap<&'static str, OpDef> {
    static TABLE: OnceLock<HashMap<&'static str, OpDef>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let modules: &[&[OpDef]] = &[
            super::array::DEFS,
            super::control_flow::DEFS,
            super::control_flow::stack::DEFS,
            super::array::band_part::DEFS,
            super::array::bitcast::DEFS,
            super::array::tensor_diag::DEFS,
            super::array::bincount::DEFS,
            super::array::broadcast_to::DEFS,
            super::array::depth_space::DEFS,
            super::array::diag::DEFS,
            super::array::gather::DEFS,
            super::array::layout::DEFS,
            super::array::one_hot::DEFS,
            super::array::pad::DEFS,
            super::array::ragged_to_tensor::DEFS,
            super::array::range::DEFS,
            super::array::scan::DEFS,
            super::array::roll::DEFS,
            super::array::scatter_nd::DEFS,
            super::array::search::DEFS,
            super::sparse::to_dense::DEFS,
            super::sparse::segment::DEFS,
            super::sparse::rows::DEFS,
            super::sparse::arith::DEFS,
            super::sparse::sets::DEFS,
            super::sparse::cross::DEFS,
            super::array::split::DEFS,
            super::array::strided_slice::DEFS,
            super::array::top_k::DEFS,
            super::array::where_true::DEFS,
            super::image::DEFS,
            super::image::color::DEFS,
            super::image::cubic_area::DEFS,
            super::image::decode::DEFS,
            super::image::projective::DEFS,
            super::image::scale_translate::DEFS,
            super::io::filenames::DEFS,
            super::io::parse_example::DEFS,
            super::io::save_restore::DEFS,
            super::lookup::DEFS,
            super::string::DEFS,
            super::string::unicode::DEFS,
            super::string::pieces::DEFS,
            super::linalg::DEFS,
            super::list::DEFS,
            super::logging::DEFS,
            super::logging::check_numerics::DEFS,
            super::math::DEFS,
            super::math::einsum::DEFS,
            super::math::bitwise::DEFS,
            super::matmul::DEFS,
            super::nn::DEFS,
            super::nn::batch_norm::DEFS,
            super::nn::fake_quant::DEFS,
            super::nn::quantize_dequantize::DEFS,
            super::nn::ctc::DEFS,
            super::nn::ctc_loss::DEFS,
            super::nn::volume_grad::DEFS,
            super::nn::batch_norm_grad::DEFS,
            super::nn::conv::DEFS,
            super::nn::conv_grad::DEFS,
            super::nn::depthwise::DEFS,
            super::nn::pool::DEFS,
            super::nn::volume::DEFS,
            super::nn::lrn::DEFS,
            super::nn::patches::DEFS,
            super::nn::pool_grad::DEFS,
            super::random::DEFS,
            super::ragged::DEFS,
            super::random::stateless::DEFS,
            super::reduce::DEFS,
            super::shape_ops::DEFS,
            super::signal::DEFS,
            super::training::grad::DEFS,
            super::training::optimizer::DEFS,
            super::training::proximal::DEFS,
            super::training::plumbing::DEFS,
            super::training::segment::DEFS,
            super::training::sparse::DEFS,
            super::training::xent::DEFS,
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
    refuse_crossing_list(node, "T")?;
    Ok(OpSignature::new(vec![ValueType::Tensor(node.attr_dtype("T")?)], vec![]))
}

fn recv_signature(node: &NodeSpec) -> Result<OpSignature> {
    refuse_crossing_list(node, "tensor_type")?;
    Ok(OpSignature::new(vec![], vec![ValueType::Tensor(node.attr_dtype("tensor_type")?)]))
}

/// Only tensors cross devices and tasks: a TensorList (a `variant` edge)
/// split by partitioning is refused, naming the edge it would cross on.
fn refuse_crossing_list(node: &NodeSpec, key: &str) -> Result<()> {
    if let Ok(crate::graph::spec::DataType::Variant) = node.attr_data_type(key) {
        let edge = node.attr_str_or("tensor_name", "")?;
        return Err(crate::error::Status::unimplemented(format!(
            "node '{}' ({}): the TensorList (variant) '{edge}' would cross from {} to {}; lists do not cross \
             devices or tasks here: place its producer and consumers together",
            node.name,
            node.op,
            node.attr_str_or("send_device", "?")?,
            node.attr_str_or("recv_device", "?")?
        )));
    }
    Ok(())
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
    use crate::graph::spec::{AttrList, AttrValue, DataType};
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
            "Tan",
            "Asin",
            "Acos",
            "Atan",
            "Sinh",
            "Cosh",
            "Asinh",
            "Acosh",
            "Atanh",
            "Rint",
            "Lgamma",
            "Digamma",
            "Erfinv",
            "Ndtri",
            "BesselI0e",
            "BesselI1e",
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
            "Atan2",
            "Xlogy",
            "Xlog1py",
            "Xdivy",
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
        for op in ["RandomUniform", "RandomStandardNormal", "TruncatedNormal"] {
            rows.push((
                op,
                NodeSpec::new("n", op).attr("T", ty(DType::I32)).attr("dtype", ty(DType::F32)),
                vec![I32],
                vec![F],
            ));
        }
        rows.push(("NoOp", NodeSpec::new("n", "NoOp"), vec![], vec![]));
        rows.push(("Placeholder", dtype("Placeholder"), vec![], vec![F]));
        rows.push(("PlaceholderWithDefault", dtype("PlaceholderWithDefault"), vec![F], vec![F]));
        // Checkpoints.
        const S: ValueType = ValueType::Tensor(DType::String);
        let dtypes = AttrValue::List(AttrList::Type(vec![DataType::Tensor(DType::F32), DataType::Tensor(DType::I64)]));
        rows.push((
            "SaveV2",
            NodeSpec::new("n", "SaveV2").attr("dtypes", dtypes.clone()),
            vec![S, S, S, F, I64],
            vec![],
        ));
        rows.push(("RestoreV2", NodeSpec::new("n", "RestoreV2").attr("dtypes", dtypes), vec![S, S, S], vec![F, I64]));
        rows.push(("MergeV2Checkpoints", NodeSpec::new("n", "MergeV2Checkpoints"), vec![S, S], vec![]));
        rows.push(("ShardedFilename", NodeSpec::new("n", "ShardedFilename"), vec![S, I32, I32], vec![S]));
        rows.push(("ShardedFilespec", NodeSpec::new("n", "ShardedFilespec"), vec![S, I32], vec![S]));
        rows.push(("StringJoin", NodeSpec::new("n", "StringJoin").attr("N", AttrValue::Int(2)), vec![S, S], vec![S]));
        let regex = NodeSpec::new("n", "StaticRegexFullMatch").attr("pattern", AttrValue::Bytes(b"^s3://.*".to_vec()));
        rows.push(("StaticRegexFullMatch", regex, vec![S], vec![B]));
        // Lookup tables.
        let st = |dtype: DType| AttrValue::Type(DataType::Tensor(dtype));
        let table =
            |op: &str| NodeSpec::new("n", op).attr("key_dtype", st(DType::String)).attr("value_dtype", st(DType::I64));
        rows.push(("HashTableV2", table("HashTableV2"), vec![], vec![RES]));
        rows.push(("MutableHashTableV2", table("MutableHashTableV2"), vec![], vec![RES]));
        let tin_tout = |op: &str| NodeSpec::new("n", op).attr("Tin", st(DType::String)).attr("Tout", st(DType::I64));
        rows.push(("LookupTableImportV2", tin_tout("LookupTableImportV2"), vec![RES, S, I64], vec![]));
        rows.push(("LookupTableInsertV2", tin_tout("LookupTableInsertV2"), vec![RES, S, I64], vec![]));
        let init = NodeSpec::new("n", "InitializeTableV2").attr("Tkey", st(DType::String)).attr("Tval", st(DType::I64));
        rows.push(("InitializeTableV2", init, vec![RES, S, I64], vec![]));
        rows.push(("LookupTableFindV2", tin_tout("LookupTableFindV2"), vec![RES, S, I64], vec![I64]));
        let from_file = NodeSpec::new("n", "InitializeTableFromTextFileV2")
            .attr("key_index", AttrValue::Int(-2))
            .attr("value_index", AttrValue::Int(-1));
        rows.push(("InitializeTableFromTextFileV2", from_file, vec![RES, S], vec![]));
        rows.push(("LookupTableSizeV2", NodeSpec::new("n", "LookupTableSizeV2"), vec![RES], vec![I64]));
        let export =
            NodeSpec::new("n", "LookupTableExportV2").attr("Tkeys", st(DType::String)).attr("Tvalues", st(DType::I64));
        rows.push(("LookupTableExportV2", export, vec![RES], vec![S, I64]));
        // Text.
        for op in ["StringLower", "StringUpper"] {
            rows.push((op, NodeSpec::new("n", op), vec![S], vec![S]));
        }
        let replace = NodeSpec::new("n", "StaticRegexReplace")
            .attr("pattern", AttrValue::Bytes(b"[,.]".to_vec()))
            .attr("rewrite", AttrValue::Bytes(Vec::new()));
        rows.push(("StaticRegexReplace", replace, vec![S], vec![S]));
        rows.push(("RegexReplace", NodeSpec::new("n", "RegexReplace"), vec![S, S, S], vec![S]));
        rows.push(("RegexFullMatch", NodeSpec::new("n", "RegexFullMatch"), vec![S, S], vec![B]));
        rows.push(("StringSplitV2", NodeSpec::new("n", "StringSplitV2"), vec![S, S], vec![I64, S, I64]));
        let ngrams =
            NodeSpec::new("n", "StringNGrams").attr("ngram_widths", AttrValue::List(AttrList::Int(vec![1, 2])));
        rows.push(("StringNGrams", ngrams, vec![S, I64], vec![S, I64]));
        let ragged_count = NodeSpec::new("n", "RaggedBincount").attr("T", st(DType::F32)).attr("Tidx", st(DType::I64));
        rows.push(("RaggedBincount", ragged_count, vec![I64, I64, I64, F], vec![F]));
        let buckets = |op: &str| NodeSpec::new("n", op).attr("num_buckets", AttrValue::Int(10));
        rows.push(("StringToHashBucketFast", buckets("StringToHashBucketFast"), vec![S], vec![I64]));
        let strong = buckets("StringToHashBucketStrong").attr("key", AttrValue::List(AttrList::Int(vec![1, 2])));
        rows.push(("StringToHashBucketStrong", strong, vec![S], vec![I64]));
        rows.push(("AsString", NodeSpec::new("n", "AsString").attr("T", st(DType::I64)), vec![I64], vec![S]));
        let ragged = NodeSpec::new("n", "RaggedTensorToTensor")
            .attr("T", st(DType::F32))
            .attr("Tindex", st(DType::I64))
            .attr("Tshape", st(DType::I64))
            .attr("num_row_partition_tensors", AttrValue::Int(2))
            .attr(
                "row_partition_types",
                AttrValue::List(AttrList::Bytes(vec![b"FIRST_DIM_SIZE".to_vec(), b"VALUE_ROWIDS".to_vec()])),
            );
        rows.push(("RaggedTensorToTensor", ragged, vec![I64, F, F, I64, I64], vec![F]));
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
        rows.push(("StridedSlice", t("StridedSlice").attr("Index", ty(DType::I32)), vec![F, I32, I32, I32], vec![F]));
        rows.push((
            "StridedSliceGrad",
            t("StridedSliceGrad").attr("Index", ty(DType::I64)),
            vec![I64, I64, I64, I64, F],
            vec![F],
        ));
        let gather = |op: &'static str| {
            NodeSpec::new("n", op)
                .attr("Tparams", ty(DType::F32))
                .attr("Tindices", ty(DType::I64))
                .attr("Taxis", ty(DType::I32))
        };
        rows.push(("GatherV2", gather("GatherV2"), vec![F, I64, I32], vec![F]));
        rows.push(("Gather", gather("Gather"), vec![F, I64], vec![F]));
        rows.push((
            "ResourceGather",
            dtype("ResourceGather").attr("Tindices", ty(DType::I32)),
            vec![RES, I32],
            vec![F],
        ));
        rows.push(("Range", NodeSpec::new("n", "Range"), vec![I32, I32, I32], vec![I32]));
        rows.push(("Range", NodeSpec::new("n", "Range").attr("Tidx", ty(DType::F32)), vec![F, F, F], vec![F]));
        rows.push(("OneHot", t("OneHot"), vec![I64, I32, F, F], vec![F]));
        rows.push(("OneHot", t("OneHot").attr("TI", ty(DType::I32)), vec![I32, I32, F, F], vec![F]));
        rows.push(("Split", t("Split").attr("num_split", AttrValue::Int(3)), vec![I32, F], vec![F, F, F]));
        rows.push(("SplitV", t("SplitV").attr("num_split", AttrValue::Int(2)), vec![F, I64, I32], vec![F, F]));
        rows.push(("Unpack", t("Unpack").attr("num", AttrValue::Int(2)), vec![F], vec![F, F]));
        rows.push(("Where", NodeSpec::new("n", "Where"), vec![B], vec![I64]));
        rows.push(("Where", t("Where"), vec![F], vec![I64]));
        for op in ["Cumsum", "Cumprod", "CumulativeLogsumexp"] {
            rows.push((op, t(op), vec![F, I32], vec![F]));
        }
        rows.push(("Cumsum", t("Cumsum").attr("Tidx", ty(DType::I64)), vec![F, I64], vec![F]));
        rows.push(("TopKV2", t("TopKV2"), vec![F, I32], vec![F, I32]));
        rows.push(("TopKV2", t("TopKV2").attr("index_type", ty(DType::I64)), vec![F, I32], vec![F, I64]));
        let list = |v: &[i64]| AttrValue::List(AttrList::Int(v.to_vec()));
        let s = |v: &str| AttrValue::Bytes(v.as_bytes().to_vec());
        let window = |op: &'static str| {
            t(op).attr("strides", list(&[1, 2, 2, 1])).attr("padding", s("SAME")).attr("ksize", list(&[1, 3, 3, 1]))
        };
        for op in ["Conv2D", "DepthwiseConv2dNative"] {
            rows.push((op, window(op), vec![F, F], vec![F]));
        }
        rows.push(("Conv2DBackpropInput", window("Conv2DBackpropInput"), vec![I32, F, F], vec![F]));
        rows.push(("Conv2DBackpropFilter", window("Conv2DBackpropFilter"), vec![F, I32, F], vec![F]));
        for op in ["MaxPool", "AvgPool"] {
            rows.push((op, window(op), vec![F], vec![F]));
        }
        rows.push(("MaxPoolV2", t("MaxPoolV2").attr("padding", s("VALID")), vec![F, I32, I32], vec![F]));
        rows.push(("FusedBatchNorm", t("FusedBatchNorm"), vec![F; 5], vec![F; 5]));
        let bn = |op: &'static str| t(op).attr("U", ty(DType::F32)).attr("is_training", AttrValue::Bool(false));
        rows.push(("FusedBatchNormV2", bn("FusedBatchNormV2"), vec![F; 5], vec![F; 5]));
        rows.push(("FusedBatchNormV3", bn("FusedBatchNormV3"), vec![F; 5], vec![F; 6]));
        rows.push(("MaxPoolGrad", window("MaxPoolGrad"), vec![F; 3], vec![F]));
        rows.push(("MaxPoolGradV2", t("MaxPoolGradV2").attr("padding", s("SAME")), vec![F, F, F, I32, I32], vec![F]));
        rows.push(("AvgPoolGrad", window("AvgPoolGrad"), vec![I32, F], vec![F]));
        rows.push(("FusedBatchNormGrad", t("FusedBatchNormGrad"), vec![F; 5], vec![F; 5]));
        rows.push(("FusedBatchNormGradV2", bn("FusedBatchNormGradV2"), vec![F; 5], vec![F; 5]));
        rows.push(("FusedBatchNormGradV3", bn("FusedBatchNormGradV3"), vec![F; 6], vec![F; 5]));
        rows.push(("Pad", t("Pad"), vec![F, I32], vec![F]));
        rows.push(("Pad", t("Pad").attr("Tpaddings", ty(DType::I64)), vec![F, I64], vec![F]));
        rows.push(("PadV2", t("PadV2"), vec![F, I32, F], vec![F]));
        rows.push(("MirrorPad", t("MirrorPad").attr("mode", s("REFLECT")), vec![F, I32], vec![F]));
        rows.push(("BroadcastTo", t("BroadcastTo"), vec![F, I32], vec![F]));
        rows.push(("BroadcastArgs", NodeSpec::new("n", "BroadcastArgs"), vec![I32, I32], vec![I32]));
        rows.push(("BroadcastArgs", t("BroadcastArgs").attr("T", ty(DType::I64)), vec![I64, I64], vec![I64]));
        rows.push(("MatrixBandPart", t("MatrixBandPart"), vec![F, I64, I64], vec![F]));
        rows.push(("GatherNd", NodeSpec::new("n", "GatherNd").attr("Tparams", ty(DType::F32)), vec![F, I32], vec![F]));
        rows.push(("ScatterNd", t("ScatterNd").attr("Tindices", ty(DType::I64)), vec![I64, F, I64], vec![F]));
        for op in
            ["TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub", "TensorScatterMax", "TensorScatterMin"]
        {
            rows.push((op, t(op), vec![F, I32, F], vec![F]));
        }
        for op in ["DepthToSpace", "SpaceToDepth"] {
            rows.push((op, t(op).attr("block_size", AttrValue::Int(2)), vec![F], vec![F]));
        }
        rows.push(("ResizeBilinear", t("ResizeBilinear").attr("T", ty(DType::I32)), vec![I32, I32], vec![F]));
        rows.push(("ResizeNearestNeighbor", t("ResizeNearestNeighbor"), vec![F, I32], vec![F]));
        rows.push(("Roll", t("Roll"), vec![F, I32, I32], vec![F]));
        rows.push(("ReverseSequence", t("ReverseSequence").attr("seq_dim", AttrValue::Int(1)), vec![F, I64], vec![F]));
        rows.push(("MatrixDiagPart", t("MatrixDiagPart"), vec![F], vec![F]));
        for op in ["MatrixDiagPartV2", "MatrixDiagPartV3"] {
            rows.push((op, t(op), vec![F, I32, F], vec![F]));
        }
        rows.push(("MatrixSetDiag", t("MatrixSetDiag"), vec![F, F], vec![F]));
        for op in ["MatrixSetDiagV2", "MatrixSetDiagV3"] {
            rows.push((op, t(op), vec![F, F, I32], vec![F]));
        }
        rows.push(("LowerBound", t("LowerBound"), vec![F, F], vec![I32]));
        rows.push(("UpperBound", t("UpperBound").attr("out_type", ty(DType::I64)), vec![F, F], vec![I64]));
        rows.push(("Bucketize", t("Bucketize"), vec![F], vec![I32]));
        rows.push(("EuclideanNorm", t("EuclideanNorm"), vec![F, I32], vec![F]));
        for op in ["SegmentSum", "SegmentMean", "SegmentProd", "SegmentMax", "SegmentMin"] {
            rows.push((op, t(op), vec![F, I32], vec![F]));
        }
        let conv3d = t("Conv3D").attr("strides", AttrValue::List(AttrList::Int(vec![1; 5]))).attr("padding", s("SAME"));
        rows.push(("Conv3D", conv3d, vec![F, F], vec![F]));
        for op in ["MaxPool3D", "AvgPool3D"] {
            let pool = t(op)
                .attr("ksize", AttrValue::List(AttrList::Int(vec![1, 2, 2, 2, 1])))
                .attr("strides", AttrValue::List(AttrList::Int(vec![1, 2, 2, 2, 1])))
                .attr("padding", s("VALID"));
            rows.push((op, pool, vec![F], vec![F]));
        }
        for op in ["MatrixInverse", "MatrixDeterminant", "Cholesky"] {
            rows.push((op, t(op), vec![F], vec![F]));
        }
        rows.push(("LogMatrixDeterminant", t("LogMatrixDeterminant"), vec![F], vec![F, F]));
        for op in ["MatrixSolve", "MatrixTriangularSolve"] {
            rows.push((op, t(op), vec![F, F], vec![F]));
        }
        rows.push(("CropAndResize", t("CropAndResize"), vec![F, F, I32, I32], vec![F]));
        rows.push(("NonMaxSuppressionV2", t("NonMaxSuppressionV2"), vec![F, F, I32, F], vec![I32]));
        rows.push(("NonMaxSuppressionV3", t("NonMaxSuppressionV3"), vec![F, F, I32, F, F], vec![I32]));
        rows.push(("NonMaxSuppressionV4", t("NonMaxSuppressionV4"), vec![F, F, I32, F, F], vec![I32, I32]));
        rows.push(("NonMaxSuppressionV5", t("NonMaxSuppressionV5"), vec![F, F, I32, F, F, F], vec![I32, F, I32]));
        for op in ["RGBToHSV", "HSVToRGB"] {
            rows.push((op, t(op), vec![F], vec![F]));
        }
        for op in ["AdjustContrastv2", "AdjustHue", "AdjustSaturation"] {
            rows.push((op, t(op), vec![F, F], vec![F]));
        }
        rows.push(("LRN", t("LRN"), vec![F], vec![F]));
        // Sparse tensors.
        for op in ["SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"] {
            rows.push((op, t(op), vec![F, I32, I32], vec![F]));
        }
        for op in ["SparseSegmentSumWithNumSegments", "SparseSegmentMeanWithNumSegments"] {
            rows.push((op, t(op).attr("Tidx", ty(DType::I64)), vec![F, I64, I32, I32], vec![F]));
        }
        for op in ["SparseSegmentSumGrad", "SparseSegmentMeanGrad", "SparseSegmentSqrtNGrad"] {
            rows.push((op, t(op), vec![F, I32, I32, I32], vec![F]));
        }
        rows.push(("SparseSegmentMeanGradV2", t("SparseSegmentMeanGradV2"), vec![F, I32, I32, I32], vec![F, I32]));
        rows.push(("SparseFillEmptyRows", t("SparseFillEmptyRows"), vec![I64, F, I64, F], vec![I64, F, B, I64]));
        rows.push(("SparseFillEmptyRowsGrad", t("SparseFillEmptyRowsGrad"), vec![I64, F], vec![F, F]));
        rows.push(("SparseReshape", NodeSpec::new("n", "SparseReshape"), vec![I64, I64, I64], vec![I64, I64]));
        rows.push(("SparseReorder", t("SparseReorder"), vec![I64, F, I64], vec![I64, F]));
        rows.push(("SparseSlice", t("SparseSlice"), vec![I64, F, I64, I64, I64], vec![I64, F, I64]));
        let concat = t("SparseConcat").attr("N", AttrValue::Int(2)).attr("concat_dim", AttrValue::Int(1));
        rows.push(("SparseConcat", concat, vec![I64, I64, F, F, I64, I64], vec![I64, F, I64]));
        rows.push(("SparseTensorDenseMatMul", t("SparseTensorDenseMatMul"), vec![I64, F, I64, F], vec![F]));
        rows.push(("SparseTensorDenseAdd", t("SparseTensorDenseAdd"), vec![I64, F, I64, F], vec![F]));
        for op in ["SparseDenseCwiseAdd", "SparseDenseCwiseMul", "SparseDenseCwiseDiv"] {
            rows.push((op, t(op), vec![I64, F, I64, F], vec![F]));
        }
        rows.push(("SparseAdd", t("SparseAdd"), vec![I64, F, I64, I64, F, I64, F], vec![I64, F, I64]));
        for op in ["SparseSparseMaximum", "SparseSparseMinimum"] {
            rows.push((op, t(op), vec![I64, F, I64, I64, F, I64], vec![I64, F]));
        }
        for op in ["SparseReduceSum", "SparseReduceMax"] {
            rows.push((op, t(op), vec![I64, F, I64, I32], vec![F]));
        }
        rows.push(("SparseSoftmax", t("SparseSoftmax"), vec![I64, F, I64], vec![F]));
        for op in ["ResizeBicubic", "ResizeArea"] {
            rows.push((op, t(op).attr("T", ty(DType::I64)), vec![I64, I32], vec![F]));
        }
        let spatial = |op: &'static str, keys: &[&str]| {
            let mut n = t(op).attr("padding", AttrValue::Bytes(b"VALID".to_vec()));
            for k in keys {
                n = n.attr(*k, AttrValue::List(AttrList::Int(vec![1, 2, 2, 1])));
            }
            n
        };
        rows.push((
            "ExtractImagePatches",
            spatial("ExtractImagePatches", &["ksizes", "strides", "rates"]),
            vec![F],
            vec![F],
        ));
        rows.push(("MaxPoolWithArgmax", spatial("MaxPoolWithArgmax", &["ksize", "strides"]), vec![F], vec![F, I64]));
        rows.push(("Dilation2D", spatial("Dilation2D", &["strides", "rates"]), vec![F, F], vec![F]));
        rows.push(("VarIsInitializedOp", NodeSpec::new("n", "VarIsInitializedOp"), vec![RES], vec![B]));
        rows.push(("DestroyResourceOp", NodeSpec::new("n", "DestroyResourceOp"), vec![RES], vec![]));
        rows.push(("DisableCopyOnRead", NodeSpec::new("n", "DisableCopyOnRead"), vec![RES], vec![]));
        // Training: gradients.
        for op in [
            "ReluGrad",
            "Relu6Grad",
            "EluGrad",
            "SoftplusGrad",
            "SoftsignGrad",
            "LeakyReluGrad",
            "SigmoidGrad",
            "TanhGrad",
            "RsqrtGrad",
            "SqrtGrad",
            "ReciprocalGrad",
            "InvGrad",
        ] {
            rows.push((op, t(op), vec![F, F], vec![F]));
        }
        for op in ["BiasAddGrad", "L2Loss", "PreventGradient", "Snapshot"] {
            rows.push((op, t(op), vec![F], vec![F]));
        }
        rows.push(("SoftmaxCrossEntropyWithLogits", t("SoftmaxCrossEntropyWithLogits"), vec![F, F], vec![F, F]));
        let sparse_xent = t("SparseSoftmaxCrossEntropyWithLogits");
        rows.push(("SparseSoftmaxCrossEntropyWithLogits", sparse_xent.clone(), vec![F, I64], vec![F, F]));
        let sparse_xent = sparse_xent.attr("Tlabels", ty(DType::I32));
        rows.push(("SparseSoftmaxCrossEntropyWithLogits", sparse_xent, vec![F, I32], vec![F, F]));
        let bga = NodeSpec::new("n", "BroadcastGradientArgs");
        rows.push(("BroadcastGradientArgs", bga.clone(), vec![I32, I32], vec![I32, I32]));
        let bga = bga.attr("T", ty(DType::I64));
        rows.push(("BroadcastGradientArgs", bga, vec![I64, I64], vec![I64, I64]));
        let shape_n = t("ShapeN").attr("N", AttrValue::Int(2));
        rows.push(("ShapeN", shape_n.clone(), vec![F, F], vec![I32, I32]));
        rows.push(("ShapeN", shape_n.attr("out_type", ty(DType::I64)), vec![F, F], vec![I64, I64]));
        let concat_offset = NodeSpec::new("n", "ConcatOffset").attr("N", AttrValue::Int(2));
        rows.push(("ConcatOffset", concat_offset, vec![I32, I32, I32], vec![I32, I32]));
        rows.push(("InvertPermutation", NodeSpec::new("n", "InvertPermutation"), vec![I32], vec![I32]));
        for op in ["DynamicStitch", "ParallelDynamicStitch"] {
            rows.push((op, t(op).attr("N", AttrValue::Int(2)), vec![I32, I32, F, F], vec![F]));
        }
        for op in ["UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd"] {
            rows.push((op, t(op).attr("Tindices", ty(DType::I64)), vec![F, I64, I32], vec![F]));
        }
        rows.push(("Unique", t("Unique"), vec![F], vec![F, I32]));
        rows.push(("ClipByValue", t("ClipByValue"), vec![F, F, F], vec![F]));
        rows.push(("ScaleAndTranslate", t("ScaleAndTranslate"), vec![F, I32, F, F], vec![F]));
        let c64 = ValueType::Tensor(DType::Complex64);
        rows.push(("RFFT", NodeSpec::new("n", "RFFT"), vec![F, I32], vec![c64]));
        rows.push(("IRFFT", NodeSpec::new("n", "IRFFT"), vec![c64, I32], vec![F]));
        for op in ["FFT", "IFFT", "Conj"] {
            rows.push((op, NodeSpec::new("n", op), vec![c64], vec![c64]));
        }
        for op in ["ComplexAbs", "Real", "Imag", "Angle"] {
            rows.push((op, NodeSpec::new("n", op).attr("T", ty(DType::Complex64)), vec![c64], vec![F]));
        }
        rows.push(("Complex", t("Complex"), vec![F, F], vec![c64]));
        let u64s = ValueType::Tensor(DType::U64);
        for op in ["StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal"] {
            rows.push((op, dtype(op).attr("T", ty(DType::I32)).attr("Tseed", ty(DType::I64)), vec![I32, I64], vec![F]));
        }
        rows.push((
            "StatelessRandomGetKeyCounter",
            t("StatelessRandomGetKeyCounter").attr("Tseed", ty(DType::I32)),
            vec![I32],
            vec![u64s, u64s],
        ));
        rows.push((
            "StatelessRandomGetKeyCounterAlg",
            NodeSpec::new("n", "StatelessRandomGetKeyCounterAlg"),
            vec![I64],
            vec![u64s, u64s, I32],
        ));
        rows.push(("StatelessRandomGetAlg", NodeSpec::new("n", "StatelessRandomGetAlg"), vec![], vec![I32]));
        for op in ["StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2"] {
            rows.push((op, dtype(op), vec![I32, u64s, u64s, I32], vec![F]));
        }
        rows.push((
            "StatelessRandomUniformIntV2",
            NodeSpec::new("n", "StatelessRandomUniformIntV2")
                .attr("dtype", ty(DType::I64))
                .attr("Tshape", ty(DType::I64)),
            vec![I64, u64s, u64s, I32, I64, I64],
            vec![I64],
        ));
        rows.push(("UniqueWithCounts", t("UniqueWithCounts"), vec![F], vec![F, I32, I32]));
        rows.push(("Bincount", t("Bincount"), vec![I32, I32, F], vec![F]));
        rows.push(("DenseBincount", t("DenseBincount").attr("Tidx", ty(DType::I64)), vec![I64, I64, F], vec![F]));
        rows.push(("HistogramFixedWidth", t("HistogramFixedWidth"), vec![F, F, I32], vec![I32]));
        rows.push((
            "HistogramFixedWidth",
            t("HistogramFixedWidth").attr("dtype", ty(DType::I64)),
            vec![F, F, I32],
            vec![I64],
        ));
        rows.push((
            "SparseToDense",
            t("SparseToDense").attr("Tindices", ty(DType::I64)),
            vec![I64, I64, F, F],
            vec![F],
        ));
        rows.push((
            "Assert",
            NodeSpec::new("n", "Assert").attr(
                "T",
                AttrValue::List(AttrList::Type(vec![DataType::Tensor(DType::String), DataType::Tensor(DType::F32)])),
            ),
            vec![B, ValueType::Tensor(DType::String), F],
            vec![],
        ));
        // Training: dense optimizers, (ref form, resource form, variables,
        // other inputs).
        let dense: [(Option<&'static str>, &'static str, usize, usize); 7] = [
            (Some("ApplyGradientDescent"), "ResourceApplyGradientDescent", 1, 2),
            (Some("ApplyMomentum"), "ResourceApplyMomentum", 2, 3),
            (None, "ResourceApplyKerasMomentum", 2, 3),
            (Some("ApplyAdam"), "ResourceApplyAdam", 3, 7),
            (Some("ApplyAdagrad"), "ResourceApplyAdagrad", 2, 2),
            (Some("ApplyAdagradV2"), "ResourceApplyAdagradV2", 2, 3),
            (Some("ApplyRMSProp"), "ResourceApplyRMSProp", 3, 5),
        ];
        for (ref_form, resource_form, vars, args) in dense {
            rows.push((resource_form, t(resource_form), [vec![RES; vars], vec![F; args]].concat(), vec![]));
            if let Some(op) = ref_form {
                rows.push((op, t(op), [vec![REF; vars], vec![F; args]].concat(), vec![REF]));
            }
        }
        // Training: sparse optimizers (inputs after var and accum) and
        // scatters.
        let with_indices = |op: &'static str| t(op).attr("Tindices", ty(DType::I32));
        let sparse: [(Option<&'static str>, &'static str, Vec<ValueType>); 4] = [
            (Some("SparseApplyAdagrad"), "ResourceSparseApplyAdagrad", vec![F, F, I32]),
            (Some("SparseApplyAdagradV2"), "ResourceSparseApplyAdagradV2", vec![F, F, F, I32]),
            (Some("SparseApplyMomentum"), "ResourceSparseApplyMomentum", vec![F, F, I32, F]),
            (None, "ResourceSparseApplyKerasMomentum", vec![F, F, I32, F]),
        ];
        for (ref_form, resource_form, args) in sparse {
            rows.push((resource_form, with_indices(resource_form), [vec![RES, RES], args.clone()].concat(), vec![]));
            if let Some(op) = ref_form {
                rows.push((op, with_indices(op), [vec![REF, REF], args].concat(), vec![REF]));
            }
        }
        let scatters = [
            ("ScatterAdd", "ResourceScatterAdd"),
            ("ScatterSub", "ResourceScatterSub"),
            ("ScatterUpdate", "ResourceScatterUpdate"),
            ("ScatterMul", "ResourceScatterMul"),
            ("ScatterDiv", "ResourceScatterDiv"),
            ("ScatterMin", "ResourceScatterMin"),
            ("ScatterMax", "ResourceScatterMax"),
        ];
        for (ref_form, resource_form) in scatters {
            rows.push((ref_form, with_indices(ref_form), vec![REF, I32, F], vec![REF]));
            let node = dtype(resource_form).attr("Tindices", ty(DType::I64));
            rows.push((resource_form, node, vec![RES, I64, F], vec![]));
        }
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

    /// The optimizer and scatter ops: they rewrite variables.
    fn is_training_update(op: &str) -> bool {
        let op = op.strip_prefix("Resource").unwrap_or(op);
        // ScatterNd makes a new tensor; it updates nothing.
        op != "ScatterNd" && ["Apply", "SparseApply", "Scatter"].iter().any(|p| op.starts_with(p))
    }

    #[test]
    fn stateful_ops_are_exactly_the_variable_table_random_and_checkpoint_ops() {
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
                    | "DisableCopyOnRead"
                    | "HashTableV2"
                    | "MutableHashTableV2"
                    | "LookupTableImportV2"
                    | "LookupTableInsertV2"
                    | "InitializeTableV2"
                    | "InitializeTableFromTextFileV2"
                    | "LookupTableFindV2"
                    | "LookupTableSizeV2"
                    | "LookupTableExportV2"
                    | "ResourceGather"
                    | "RandomUniform"
                    | "RandomStandardNormal"
                    | "TruncatedNormal"
                    | "SaveV2"
                    | "RestoreV2"
                    | "MergeV2Checkpoints"
                    | "PrintV2"
                    | "Print"
                    | "Timestamp"
            ) || is_training_update(op);
            assert_eq!(def.stateful, want, "{op}");
        }
    }

    #[test]
    fn a_list_crossing_devices_is_refused_naming_the_edge() {
        let send = NodeSpec::new("lstm/send", "_Send")
            .attr("T", AttrValue::Type(DataType::Variant))
            .attr("tensor_name", AttrValue::Bytes(b"lstm/TensorListReserve:0".to_vec()))
            .attr("send_device", AttrValue::Bytes(b"/job:worker/task:0/device:CPU:0".to_vec()))
            .attr("recv_device", AttrValue::Bytes(b"/job:worker/task:1/device:CPU:0".to_vec()));
        let err = send_signature(&send).unwrap_err();
        assert!(
            err.message.contains("'lstm/send' (_Send)") && err.message.contains("lstm/TensorListReserve:0"),
            "{err}"
        );
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
