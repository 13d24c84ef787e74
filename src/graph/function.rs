//! Function libraries and functional control flow, removed at import as
//! TensorFlow's graph optimizer removes them: calls (`PartitionedCall`,
//! `StatefulPartitionedCall`, a node whose op is a library function) are
//! inlined, and `If`/`StatelessIf`, `Case`/`StatelessCase` and
//! `While`/`StatelessWhile` are lowered to the executor's v1 primitives
//! (`Switch`/`_SwitchN`, `Merge`, `Enter`, `Exit`, `NextIteration`,
//! `LoopCond`), so a step runs one flat graph with no per-call overhead.
//!
//! Owns: the library model ([`Function`]) and the rewriting. The caller's
//! node name keeps standing for its outputs (an `IdentityN` of the same
//! name), so consumers, fetches and control edges need no renaming. Must
//! not know the protobufs (`graph::import` builds the library) nor run
//! anything.

use super::spec::{AttrList, AttrValue, DataType, Endpoint, NodeSpec};
use crate::error::{Result, Status};
use std::collections::{HashMap, VecDeque};

/// Calls nest at most this deep (a recursive function would never end).
const MAX_CALL_DEPTH: usize = 64;

/// One function of a graph's library.
#[derive(Debug, Clone, Default)]
pub struct Function {
    pub name: String,
    /// Input args: name and type (`None` when given by an attr).
    pub inputs: Vec<(String, Option<DataType>)>,
    pub outputs: Vec<(String, Option<DataType>)>,
    pub nodes: Vec<FunctionNode>,
    /// Output arg name → the tensor it returns, in the library's
    /// `node:out_arg:index` form.
    pub ret: HashMap<String, String>,
    /// Nodes that must run for a call to be complete (stateful ops).
    pub control_ret: Vec<String>,
}

/// A node of a function body; its inputs stay in the library's form
/// (`arg`, `node:out_arg:index`, `^node`) until the function is inlined.
#[derive(Debug, Clone)]
pub struct FunctionNode {
    pub spec: NodeSpec,
    pub inputs: Vec<String>,
}

pub type Library = HashMap<String, Function>;

/// Inlines every call and lowers every functional control-flow node of
/// `nodes`, recursively.
pub fn expand(nodes: Vec<NodeSpec>, library: &Library) -> Result<Vec<NodeSpec>> {
    let mut out = Vec::with_capacity(nodes.len());
    let mut work: VecDeque<(NodeSpec, usize)> = nodes.into_iter().map(|n| (n, 0)).collect();
    while let Some((node, depth)) = work.pop_front() {
        let kind = classify(&node, library)?;
        if matches!(kind, Kind::Plain) {
            out.push(node);
            continue;
        }
        if depth >= MAX_CALL_DEPTH {
            return Err(Status::invalid_argument(format!(
                "node '{}' ({}): functions nest more than {MAX_CALL_DEPTH} deep (a recursive function?)",
                node.name, node.op
            )));
        }
        let here = |e: Status| e.context(format_args!("node '{}' ({})", node.name, node.op));
        let lowered = match kind {
            Kind::Plain => unreachable!("handled above"),
            Kind::Call(f) => inline_call(&node, function(library, &f)?, library).map_err(here)?,
            Kind::If { then_branch, else_branch } => {
                let branches = [function(library, &else_branch)?, function(library, &then_branch)?];
                lower_branches(&node, Selector::Pred, &branches, library).map_err(here)?
            }
            Kind::Case(names) => {
                let branches = names.iter().map(|n| function(library, n)).collect::<Result<Vec<_>>>()?;
                lower_branches(&node, Selector::Index, &branches, library).map_err(here)?
            }
            Kind::While { cond, body } => {
                lower_while(&node, function(library, &cond)?, function(library, &body)?, library).map_err(here)?
            }
        };
        work.extend(lowered.into_iter().map(|n| (n, depth + 1)));
    }
    Ok(out)
}

enum Kind {
    Plain,
    Call(String),
    If { then_branch: String, else_branch: String },
    Case(Vec<String>),
    While { cond: String, body: String },
}

fn classify(node: &NodeSpec, library: &Library) -> Result<Kind> {
    Ok(match node.op.as_str() {
        "PartitionedCall" | "StatefulPartitionedCall" => Kind::Call(func_attr(node, "f")?),
        "If" | "StatelessIf" => {
            Kind::If { then_branch: func_attr(node, "then_branch")?, else_branch: func_attr(node, "else_branch")? }
        }
        "Case" | "StatelessCase" => match node.get_attr("branches") {
            Some(AttrValue::List(AttrList::Func(names))) if !names.is_empty() => Kind::Case(names.clone()),
            _ => {
                return Err(Status::invalid_argument(format!(
                    "node '{}' ({}): attr 'branches' must list at least one function",
                    node.name, node.op
                )));
            }
        },
        "While" | "StatelessWhile" => Kind::While { cond: func_attr(node, "cond")?, body: func_attr(node, "body")? },
        op if library.contains_key(op) => Kind::Call(op.to_string()),
        _ => Kind::Plain,
    })
}

fn func_attr(node: &NodeSpec, key: &str) -> Result<String> {
    match node.get_attr(key) {
        Some(AttrValue::Func(name)) => Ok(name.clone()),
        _ => {
            Err(Status::invalid_argument(format!("node '{}' ({}): missing function attr '{key}'", node.name, node.op)))
        }
    }
}

fn function<'a>(library: &'a Library, name: &str) -> Result<&'a Function> {
    library
        .get(name)
        .ok_or_else(|| Status::not_found(format!("function '{name}' is not in the graph's function library")))
}

/// A body instantiated in the caller's graph.
struct Instance {
    nodes: Vec<NodeSpec>,
    outputs: Vec<Endpoint>,
    /// Nodes that complete the call's side effects.
    control_outputs: Vec<String>,
}

/// Instantiates `f` under `prefix` with its args bound to `args`; body
/// nodes without inputs get a control input from `anchor` (so they run in
/// the caller's frame and branch), or else `anchor_controls`.
fn instantiate(
    f: &Function,
    library: &Library,
    prefix: &str,
    args: &[Endpoint],
    anchor: &[String],
    device: &str,
) -> Result<Instance> {
    if args.len() != f.inputs.len() {
        return Err(Status::invalid_argument(format!(
            "function '{}' takes {} inputs, the call gives {}",
            f.name,
            f.inputs.len(),
            args.len()
        )));
    }
    let arg_index: HashMap<&str, usize> = f.inputs.iter().enumerate().map(|(i, (n, _))| (n.as_str(), i)).collect();
    let op_of: HashMap<&str, &NodeSpec> = f.nodes.iter().map(|n| (n.spec.name.as_str(), &n.spec)).collect();
    let here = |what: &str| format!("function '{}': {what}", f.name);
    let resolve = |raw: &str| -> Result<Endpoint> {
        let parts: Vec<&str> = raw.split(':').collect();
        match parts.as_slice() {
            [name] => match arg_index.get(name) {
                Some(&i) => Ok(args[i].clone()),
                None if op_of.contains_key(name) => Ok(Endpoint::new(format!("{prefix}{name}"), 0)),
                None => Err(Status::invalid_argument(here(&format!("input '{raw}' names no arg or node")))),
            },
            [name, index] => {
                let index: u32 =
                    index.parse().map_err(|_| Status::invalid_argument(here(&format!("bad input '{raw}'"))))?;
                match arg_index.get(name) {
                    Some(&i) if index == 0 => Ok(args[i].clone()),
                    _ if op_of.contains_key(name) => Ok(Endpoint::new(format!("{prefix}{name}"), index)),
                    _ => Err(Status::invalid_argument(here(&format!("input '{raw}' names no arg or node")))),
                }
            }
            [name, out_arg, index] => {
                let index: u32 =
                    index.parse().map_err(|_| Status::invalid_argument(here(&format!("bad input '{raw}'"))))?;
                let op = op_of
                    .get(name)
                    .ok_or_else(|| Status::invalid_argument(here(&format!("input '{raw}' names no node"))))?;
                let port = match library.get(op.op.as_str()) {
                    // A call of another library function: its output args in order.
                    Some(callee) => callee.outputs.iter().position(|(n, _)| n == out_arg).map(|p| p as u32 + index),
                    None => output_port(op, out_arg, index),
                };
                let port = port.ok_or_else(|| {
                    Status::unimplemented(here(&format!(
                        "input '{raw}': output '{out_arg}' of op {} is not known to this runtime",
                        op.op
                    )))
                })?;
                Ok(Endpoint::new(format!("{prefix}{name}"), port))
            }
            _ => Err(Status::invalid_argument(here(&format!("bad input '{raw}'")))),
        }
    };
    let mut nodes = Vec::with_capacity(f.nodes.len());
    for fnode in &f.nodes {
        let mut spec = fnode.spec.clone();
        spec.name = format!("{prefix}{}", fnode.spec.name);
        if spec.device.is_empty() {
            spec.device = device.to_string();
        }
        for (key, value) in &spec.attrs {
            if matches!(value, AttrValue::Func(p) if p.starts_with('$')) {
                return Err(Status::unimplemented(here(&format!(
                    "node '{}': attr '{key}' is a placeholder for a function attr, which is not supported",
                    fnode.spec.name
                ))));
            }
        }
        for raw in &fnode.inputs {
            if let Some(control) = raw.strip_prefix('^') {
                match arg_index.get(control) {
                    Some(&i) => spec.control_inputs.push(args[i].node.clone()),
                    None => spec.control_inputs.push(format!("{prefix}{control}")),
                }
            } else {
                spec.inputs.push(resolve(raw).map_err(|e| e.context(format_args!("node '{}'", fnode.spec.name)))?);
            }
        }
        if spec.inputs.is_empty() && spec.control_inputs.is_empty() {
            spec.control_inputs.extend(anchor.iter().cloned());
        }
        nodes.push(spec);
    }
    let outputs = f
        .outputs
        .iter()
        .map(|(name, _)| {
            let raw = f
                .ret
                .get(name)
                .ok_or_else(|| Status::invalid_argument(here(&format!("output '{name}' is not returned"))))?;
            resolve(raw)
        })
        .collect::<Result<Vec<_>>>()?;
    let control_outputs = f.control_ret.iter().map(|n| format!("{prefix}{n}")).collect();
    Ok(Instance { nodes, outputs, control_outputs })
}

/// The port of output `index` of the output arg `arg` of `op`: ops with
/// several output args (TensorFlow's OpDefs, `op_defs`) number them in
/// order; one output arg (possibly a list) numbers from 0.
fn output_port(node: &NodeSpec, arg: &str, index: u32) -> Option<u32> {
    use super::op_defs::Len;
    let args = super::op_defs::output_args(&node.op);
    if args.is_empty() {
        return Some(index);
    }
    // A list arg's length comes from the node's attrs.
    let len = |len: Len| -> Option<u32> {
        match len {
            Len::One => Some(1),
            Len::Number(attr) => node.attr_int(attr).ok().and_then(|n| u32::try_from(n).ok()),
            Len::Types(attr) => Some(type_list(node, attr).ok()?.len() as u32),
        }
    };
    let mut offset = 0;
    for &(name, length) in args {
        let n = len(length)?;
        if name == arg {
            return (index < n).then_some(offset + index);
        }
        offset += n;
    }
    None
}

fn type_list(node: &NodeSpec, key: &str) -> Result<Vec<DataType>> {
    if node.get_attr(key).is_none() {
        return Ok(Vec::new());
    }
    node.attr_type_list(key)
}

fn ty(t: DataType) -> AttrValue {
    AttrValue::Type(t)
}

fn new_node(name: String, op: &str, device: &str) -> NodeSpec {
    NodeSpec::new(name, op).on(device.to_string())
}

/// The node standing for a call's outputs: `IdentityN` under the call's
/// name (a `NoOp` when it has none), waiting for `controls`.
fn outputs_node(call: &NodeSpec, outputs: Vec<Endpoint>, types: Vec<DataType>, controls: Vec<String>) -> NodeSpec {
    let mut node = if outputs.is_empty() {
        new_node(call.name.clone(), "NoOp", &call.device)
    } else {
        new_node(call.name.clone(), "IdentityN", &call.device).attr("T", AttrValue::List(AttrList::Type(types)))
    };
    node.inputs = outputs;
    node.control_inputs = controls;
    node
}

fn output_types(call: &NodeSpec, f: &Function, key: &str) -> Result<Vec<DataType>> {
    let declared = type_list(call, key)?;
    if !declared.is_empty() || f.outputs.is_empty() {
        return Ok(declared);
    }
    f.outputs
        .iter()
        .map(|(name, t)| {
            t.ok_or_else(|| {
                Status::unimplemented(format!("output '{name}' of function '{}' has an attr-given type", f.name))
            })
        })
        .collect()
}

fn inline_call(call: &NodeSpec, f: &Function, library: &Library) -> Result<Vec<NodeSpec>> {
    let prefix = format!("{}/", call.name);
    // The call's control inputs gate the whole body.
    let mut anchor = Vec::new();
    let mut nodes = Vec::new();
    if !call.control_inputs.is_empty() {
        let gate = format!("{prefix}_control_inputs");
        let mut noop = new_node(gate.clone(), "NoOp", &call.device);
        noop.control_inputs = call.control_inputs.clone();
        nodes.push(noop);
        anchor.push(gate);
    }
    let instance = instantiate(f, library, &prefix, &call.inputs, &anchor, &call.device)?;
    let types = output_types(call, f, "Tout")?;
    nodes.extend(instance.nodes);
    nodes.push(outputs_node(call, instance.outputs, types, instance.control_outputs));
    Ok(nodes)
}

#[derive(Clone, Copy, PartialEq)]
enum Selector {
    /// `If`: a predicate; branch 0 is else, branch 1 is then.
    Pred,
    /// `Case`: an int32 index; out of range runs the last branch.
    Index,
}

/// `If` and `Case` as a switch per input, one inlined body per branch, a
/// `Merge` per output, and a `Merge` of the branches' completions.
fn lower_branches(
    node: &NodeSpec,
    selector: Selector,
    branches: &[&Function],
    library: &Library,
) -> Result<Vec<NodeSpec>> {
    let name = &node.name;
    let device = node.device.as_str();
    let (sel_input, data) =
        node.inputs.split_first().ok_or_else(|| Status::invalid_argument("missing the branch selector input"))?;
    let n = branches.len();
    let mut out = Vec::new();
    let (switch_op, sel_type) = match selector {
        Selector::Pred => ("Switch", DataType::Tensor(crate::tensor::DType::Bool)),
        Selector::Index => ("_SwitchN", DataType::Tensor(crate::tensor::DType::I32)),
    };
    let switch = |switch_name: String, input: Endpoint, t: DataType, selector: &Endpoint| {
        let mut s = new_node(switch_name, switch_op, device).attr("T", ty(t));
        if selector_is_n(switch_op) {
            s = s.attr("num_outs", AttrValue::Int(n as i64));
        }
        s.inputs = vec![input, selector.clone()];
        s
    };
    // A non-bool predicate is true when nonzero, as TensorFlow's If says.
    let mut sel = sel_input.clone();
    if selector == Selector::Pred {
        let tcond = node.get_attr("Tcond").map(|_| node.attr_data_type("Tcond")).transpose()?;
        if let Some(t) = tcond.filter(|t| *t != sel_type) {
            let cast_name = format!("{name}/pred_as_bool");
            let mut cast = new_node(cast_name.clone(), "Cast", device).attr("SrcT", ty(t)).attr("DstT", ty(sel_type));
            cast.inputs = vec![sel_input.clone()];
            out.push(cast);
            sel = Endpoint::new(cast_name, 0);
        }
    }
    let pred_switch = format!("{name}/switch_pred");
    let mut ps = switch(pred_switch.clone(), sel.clone(), sel_type, &sel);
    ps.control_inputs = node.control_inputs.clone();
    out.push(ps);
    let pivots: Vec<String> = (0..n)
        .map(|k| {
            let pivot = format!("{name}/pivot_{k}");
            let mut id = new_node(pivot.clone(), "Identity", device).attr("T", ty(sel_type));
            id.inputs = vec![Endpoint::new(pred_switch.clone(), k as u32)];
            out.push(id);
            pivot
        })
        .collect();
    let tin = type_list(node, "Tin")?;
    if tin.len() != data.len() {
        return Err(Status::invalid_argument(format!(
            "attr 'Tin' lists {} types for {} inputs",
            tin.len(),
            data.len()
        )));
    }
    let input_switches: Vec<String> = data
        .iter()
        .zip(&tin)
        .enumerate()
        .map(|(i, (input, &t))| {
            let s = format!("{name}/input_{i}");
            out.push(switch(s.clone(), input.clone(), t, &sel));
            s
        })
        .collect();
    let tout = output_types(node, branches[0], "Tout")?;
    let mut merged: Vec<Vec<Endpoint>> = vec![Vec::new(); tout.len()];
    let mut done_inputs = Vec::with_capacity(n);
    for (k, branch) in branches.iter().enumerate() {
        let args: Vec<Endpoint> = input_switches.iter().map(|s| Endpoint::new(s.clone(), k as u32)).collect();
        let prefix = format!("{name}/branch_{k}/");
        let instance = instantiate(branch, library, &prefix, &args, std::slice::from_ref(&pivots[k]), device)?;
        if instance.outputs.len() != tout.len() {
            return Err(Status::invalid_argument(format!(
                "branch function '{}' returns {} values, the node declares {}",
                branch.name,
                instance.outputs.len(),
                tout.len()
            )));
        }
        out.extend(instance.nodes);
        for (j, o) in instance.outputs.into_iter().enumerate() {
            merged[j].push(o);
        }
        // The branch is complete once its side effects ran.
        let done = format!("{name}/branch_{k}_done");
        let mut id = new_node(done.clone(), "Identity", device).attr("T", ty(sel_type));
        id.inputs = vec![Endpoint::new(pivots[k].clone(), 0)];
        id.control_inputs = instance.control_outputs;
        out.push(id);
        done_inputs.push(Endpoint::new(done, 0));
    }
    let executed = format!("{name}/branch_executed");
    out.push(merge(executed.clone(), done_inputs, sel_type, device));
    let outputs = merged
        .into_iter()
        .zip(&tout)
        .enumerate()
        .map(|(j, (inputs, &t))| {
            let m = format!("{name}/output_{j}");
            out.push(merge(m.clone(), inputs, t, device));
            Endpoint::new(m, 0)
        })
        .collect();
    out.push(outputs_node(node, outputs, tout, vec![executed]));
    Ok(out)
}

fn selector_is_n(op: &str) -> bool {
    op == "_SwitchN"
}

fn merge(name: String, inputs: Vec<Endpoint>, t: DataType, device: &str) -> NodeSpec {
    let mut m = new_node(name, "Merge", device).attr("T", ty(t)).attr("N", AttrValue::Int(inputs.len() as i64));
    m.inputs = inputs;
    m
}

/// `While` as a v1 loop in a frame named after the node.
fn lower_while(node: &NodeSpec, cond: &Function, body: &Function, library: &Library) -> Result<Vec<NodeSpec>> {
    let name = &node.name;
    let device = node.device.as_str();
    let types = type_list(node, "T")?;
    if types.len() != node.inputs.len() || types.is_empty() {
        return Err(Status::invalid_argument(format!(
            "attr 'T' lists {} types for {} loop variables (at least one is needed)",
            types.len(),
            node.inputs.len()
        )));
    }
    let parallel = node.attr_int_or("parallel_iterations", 10)?;
    let frame = format!("{name}/while_context");
    let bool_t = DataType::Tensor(crate::tensor::DType::Bool);
    let mut out = Vec::new();
    let mut merges = Vec::new();
    for (i, (input, &t)) in node.inputs.iter().zip(&types).enumerate() {
        let enter = format!("{name}/enter_{i}");
        let mut e = new_node(enter.clone(), "Enter", device)
            .attr("T", ty(t))
            .attr("frame_name", AttrValue::Bytes(frame.clone().into_bytes()))
            .attr("is_constant", AttrValue::Bool(false))
            .attr("parallel_iterations", AttrValue::Int(parallel));
        e.inputs = vec![input.clone()];
        e.control_inputs = node.control_inputs.clone();
        out.push(e);
        let m = format!("{name}/merge_{i}");
        out.push(merge(
            m.clone(),
            vec![Endpoint::new(enter, 0), Endpoint::new(format!("{name}/next_{i}"), 0)],
            t,
            device,
        ));
        merges.push(m);
    }
    let merged: Vec<Endpoint> = merges.iter().map(|m| Endpoint::new(m.clone(), 0)).collect();
    let c = instantiate(cond, library, &format!("{name}/cond/"), &merged, std::slice::from_ref(&merges[0]), device)?;
    let [pred] = c.outputs.as_slice() else {
        return Err(Status::invalid_argument(format!("cond function '{}' must return one value", cond.name)));
    };
    let mut pred = pred.clone();
    out.extend(c.nodes);
    if let Some((_, Some(t))) = cond.outputs.first().filter(|(_, t)| *t != Some(bool_t)) {
        let cast = format!("{name}/cond_as_bool");
        let mut n = new_node(cast.clone(), "Cast", device).attr("SrcT", ty(*t)).attr("DstT", ty(bool_t));
        n.inputs = vec![pred];
        out.push(n);
        pred = Endpoint::new(cast, 0);
    }
    let loop_cond = format!("{name}/loop_cond");
    let mut lc = new_node(loop_cond.clone(), "LoopCond", device);
    lc.inputs = vec![pred];
    lc.control_inputs = c.control_outputs;
    out.push(lc);
    let mut exits = Vec::new();
    let mut body_args = Vec::new();
    for (i, &t) in types.iter().enumerate() {
        let s = format!("{name}/switch_{i}");
        let mut sw = new_node(s.clone(), "Switch", device).attr("T", ty(t));
        sw.inputs = vec![Endpoint::new(merges[i].clone(), 0), Endpoint::new(loop_cond.clone(), 0)];
        out.push(sw);
        let x = format!("{name}/exit_{i}");
        let mut exit = new_node(x.clone(), "Exit", device).attr("T", ty(t));
        exit.inputs = vec![Endpoint::new(s.clone(), 0)];
        out.push(exit);
        exits.push(Endpoint::new(x, 0));
        let b = format!("{name}/identity_{i}");
        let mut id = new_node(b.clone(), "Identity", device).attr("T", ty(t));
        id.inputs = vec![Endpoint::new(s, 1)];
        out.push(id);
        body_args.push(Endpoint::new(b, 0));
    }
    let pivot = body_args[0].node.clone();
    let b = instantiate(body, library, &format!("{name}/body/"), &body_args, &[pivot], device)?;
    if b.outputs.len() != types.len() {
        return Err(Status::invalid_argument(format!(
            "body function '{}' returns {} values for {} loop variables",
            body.name,
            b.outputs.len(),
            types.len()
        )));
    }
    out.extend(b.nodes);
    for (i, (o, &t)) in b.outputs.into_iter().zip(&types).enumerate() {
        let mut next = new_node(format!("{name}/next_{i}"), "NextIteration", device).attr("T", ty(t));
        next.inputs = vec![o];
        next.control_inputs = b.control_outputs.clone();
        out.push(next);
    }
    out.push(outputs_node(node, exits, types, Vec::new()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    #[test]
    fn output_ports_follow_the_ops_output_args() {
        let op = |op: &str| NodeSpec::new("n", op);
        assert_eq!(output_port(&op("AddV2"), "z", 0), Some(0));
        assert_eq!(output_port(&op("Split"), "output", 2), Some(2));
        assert_eq!(output_port(&op("Switch"), "output_true", 0), Some(1));
        assert_eq!(output_port(&op("FusedBatchNormV3"), "batch_variance", 0), Some(2));
        assert_eq!(output_port(&op("TensorListPopBack"), "tensor", 0), Some(1));
        assert_eq!(output_port(&op("TopKV2"), "nonsense", 0), None);
        // From the OpDefs: every op with several output args is known.
        assert_eq!(output_port(&op("StringSplitV2"), "values", 0), Some(1));
        assert_eq!(output_port(&op("NonMaxSuppressionV5"), "valid_outputs", 0), Some(2));
        assert_eq!(output_port(&op("StatelessRandomGetKeyCounter"), "counter", 0), Some(1));
        // List args beside others: offsets from the node's attrs.
        let types = |n: usize| AttrValue::List(AttrList::Type(vec![DataType::Tensor(DType::F32); n]));
        let parse = op("ParseExampleV2")
            .attr("num_sparse", AttrValue::Int(2))
            .attr("sparse_types", types(2))
            .attr("Tdense", types(3))
            .attr("ragged_value_types", types(0))
            .attr("ragged_split_types", types(0));
        assert_eq!(output_port(&parse, "sparse_values", 1), Some(3));
        assert_eq!(output_port(&parse, "dense_values", 2), Some(8));
        assert_eq!(output_port(&parse, "dense_values", 3), None);
    }

    fn f32() -> AttrValue {
        AttrValue::Type(DataType::Tensor(DType::F32))
    }

    /// `double(x) = x + x`, with a constant that has no inputs.
    fn double() -> Function {
        Function {
            name: "double".into(),
            inputs: vec![("x".into(), Some(DataType::Tensor(DType::F32)))],
            outputs: vec![("y".into(), Some(DataType::Tensor(DType::F32)))],
            nodes: vec![
                FunctionNode {
                    spec: NodeSpec::new("add", "AddV2").attr("T", f32()),
                    inputs: vec!["x".into(), "x".into()],
                },
                FunctionNode { spec: NodeSpec::new("c", "Const"), inputs: vec![] },
            ],
            ret: HashMap::from([("y".to_string(), "add:z:0".to_string())]),
            control_ret: vec![],
        }
    }

    #[test]
    fn a_call_is_inlined_under_its_name() {
        let lib = Library::from([("double".to_string(), double())]);
        let call = NodeSpec::new("call", "PartitionedCall")
            .input("x", 0)
            .control("before")
            .attr("f", AttrValue::Func("double".into()))
            .attr("Tout", AttrValue::List(AttrList::Type(vec![DataType::Tensor(DType::F32)])));
        let nodes = expand(vec![call], &lib).unwrap();
        let by_name: HashMap<&str, &NodeSpec> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        assert_eq!(by_name["call/add"].inputs, vec![Endpoint::new("x", 0), Endpoint::new("x", 0)]);
        assert_eq!(by_name["call"].op, "IdentityN");
        assert_eq!(by_name["call"].inputs, vec![Endpoint::new("call/add", 0)]);
        assert_eq!(by_name["call/c"].control_inputs, vec!["call/_control_inputs".to_string()]);
        assert_eq!(by_name["call/_control_inputs"].control_inputs, vec!["before".to_string()]);
    }

    #[test]
    fn recursion_and_unknown_functions_are_errors() {
        let mut f = double();
        f.name = "loop".into();
        f.nodes[0] = FunctionNode { spec: NodeSpec::new("again", "loop"), inputs: vec!["x".into()] };
        f.ret = HashMap::from([("y".to_string(), "again:y:0".to_string())]);
        let lib = Library::from([("loop".to_string(), f)]);
        let err = expand(vec![NodeSpec::new("call", "loop").input("x", 0)], &lib).unwrap_err();
        assert!(err.message.contains("nest more than"), "{err}");
        let call = NodeSpec::new("call", "PartitionedCall").attr("f", AttrValue::Func("missing".into()));
        let err = expand(vec![call], &lib).unwrap_err();
        assert!(err.message.contains("function 'missing' is not in the graph's function library"), "{err}");
    }
}
