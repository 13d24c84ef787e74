//! Golden checks: the kernels against TensorFlow's own outputs for the
//! cases in `tests/fixtures/tf-graphs` (exported by TensorFlow 2.21).
//!
//! Owns: a minimal step evaluator for tests only (each fetch and target is
//! computed by evaluating its inputs depth-first, reading through refs where
//! an input is declared a tensor, as the executor does) and the graphs of
//! those cases rebuilt node by node, so these tests need neither the
//! GraphDef importer nor the executor. Must not be used outside tests.
//!
//! Tolerance is the project's: rtol 1e-5, atol 1e-6.

use super::{ResourceMgr, Value, ValueType, lookup, run_kernel_once};
use crate::error::{Result, Status};
use crate::graph::spec::{AttrList, AttrValue, DataType, Endpoint, NodeSpec, ShapeSpec, TensorValue};
use crate::tensor::{DType, Tensor, npy};
use std::collections::HashMap;
use std::path::PathBuf;

fn fixture(case: &str, file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(case).join(file)
}

fn expected(case: &str, file: &str) -> Tensor {
    npy::read_npy(fixture(&format!("tf-graphs/{case}"), file)).unwrap()
}

fn weight(case: &str, name: &str) -> Tensor {
    npy::read_npy(fixture(&format!("tf-graphs-consts/{case}"), &format!("{name}.npy"))).unwrap()
}

/// A graph and the state that outlives its steps.
#[derive(Default)]
struct Session {
    nodes: HashMap<String, NodeSpec>,
    resources: ResourceMgr,
}

impl Session {
    fn add(&mut self, node: NodeSpec) -> &mut Self {
        self.nodes.insert(node.name.clone(), node);
        self
    }

    /// Runs one step: `fetches` by tensor name, after `targets` ran.
    fn step(&self, feeds: &[(&str, Tensor)], fetches: &[&str], targets: &[&str]) -> Result<Vec<Tensor>> {
        let mut done: HashMap<String, Vec<Value>> = HashMap::new();
        for (name, t) in feeds {
            let ep = Endpoint::parse(name)?;
            done.insert(ep.node, vec![Value::Tensor(t.clone())]);
        }
        for t in targets {
            self.eval(t, &mut done)?;
        }
        fetches
            .iter()
            .map(|f| {
                let ep = Endpoint::parse(f)?;
                self.eval(&ep.node, &mut done)?;
                done[&ep.node][ep.port as usize].clone().into_tensor()
            })
            .collect()
    }

    fn eval(&self, name: &str, done: &mut HashMap<String, Vec<Value>>) -> Result<()> {
        if done.contains_key(name) {
            return Ok(());
        }
        let node = self.nodes.get(name).ok_or_else(|| Status::not_found(format!("no node '{name}'")))?;
        for c in &node.control_inputs {
            self.eval(c, done)?;
        }
        let def = lookup(&node.op).ok_or_else(|| Status::not_found(node.op.clone()))?;
        let sig = (def.signature)(node)?;
        let mut inputs = Vec::new();
        for (i, ep) in node.inputs.iter().enumerate() {
            self.eval(&ep.node, done)?;
            let v = done[&ep.node][ep.port as usize].clone();
            // The executor reads through a ref feeding a tensor input.
            let v = match (v, sig.inputs[i]) {
                (Value::Ref(var), ValueType::Tensor(_)) => Value::Tensor(var.read()?),
                (v, _) => v,
            };
            inputs.push(v);
        }
        let outs = run_kernel_once(node, inputs, &self.resources)
            .map_err(|e| e.context(format!("node '{name}' ({})", node.op)))?;
        done.insert(name.to_string(), outs);
        Ok(())
    }
}

fn ty(d: DType) -> AttrValue {
    AttrValue::Type(DataType::Tensor(d))
}

fn n(name: &str, op: &str, inputs: &[&str]) -> NodeSpec {
    let mut node = NodeSpec::new(name, op);
    for i in inputs {
        if let Some(c) = i.strip_prefix('^') {
            node = node.control(c);
        } else {
            let ep = Endpoint::parse(i).unwrap();
            node = node.input(ep.node, ep.port);
        }
    }
    node
}

/// A float op node (`T = float32`).
fn f(name: &str, op: &str, inputs: &[&str]) -> NodeSpec {
    n(name, op, inputs).attr("T", ty(DType::F32))
}

fn konst(name: &str, t: &Tensor) -> NodeSpec {
    NodeSpec::new(name, "Const")
        .attr("value", AttrValue::Tensor(TensorValue::from_tensor(t)))
        .attr("dtype", ty(t.dtype()))
}

fn placeholder(name: &str) -> NodeSpec {
    NodeSpec::new(name, "Placeholder").attr("dtype", ty(DType::F32))
}

fn i32s(v: &[i32]) -> Tensor {
    Tensor::from_slice::<i32>([v.len()], v).unwrap()
}

fn check(case: &str, got: &[Tensor], files: &[&str]) {
    assert_eq!(got.len(), files.len());
    for (g, file) in got.iter().zip(files) {
        let want = expected(case, file);
        if let Err(e) = g.all_close(&want, 1e-5, 1e-6) {
            panic!("{case}/{file}: {e}\n got {g:?}\nwant {want:?}");
        }
    }
}

#[test]
fn broadcast_reduce() {
    let mut s = Session::default();
    s.add(placeholder("a"))
        .add(placeholder("b"))
        .add(f("sum", "AddV2", &["a", "b"]))
        .add(konst("Const", &Tensor::scalar(2.0f32)))
        .add(f("mul", "Mul", &["sum", "Const"]))
        .add(konst("rsum/reduction_indices", &Tensor::scalar(1i32)))
        .add(f("rsum", "Sum", &["mul", "rsum/reduction_indices"]).attr("keep_dims", AttrValue::Bool(false)))
        .add(konst("rmean/reduction_indices", &Tensor::scalar(0i32)))
        .add(f("rmean", "Mean", &["mul", "rmean/reduction_indices"]).attr("keep_dims", AttrValue::Bool(true)))
        .add(konst("Const_1", &i32s(&[0, 1])))
        .add(f("rmax", "Max", &["mul", "Const_1"]))
        .add(konst("amax/dimension", &Tensor::scalar(1i32)))
        .add(f("amax", "ArgMax", &["mul", "amax/dimension"]).attr("output_type", ty(DType::I64)))
        .add(konst("Maximum/y", &Tensor::scalar(1.0f32)))
        .add(f("Maximum", "Maximum", &["mul", "Maximum/y"]))
        .add(konst("Minimum/y", &Tensor::scalar(-1.0f32)))
        .add(f("Minimum", "Minimum", &["mul", "Minimum/y"]))
        .add(f("clip", "Sub", &["Maximum", "Minimum"]))
        .add(f("Square", "Square", &["mul"]))
        .add(konst("add/y", &Tensor::scalar(1.0f32)))
        .add(f("add", "AddV2", &["Square", "add/y"]))
        .add(f("rs", "Rsqrt", &["add"]))
        .add(f("Abs", "Abs", &["mul"]))
        .add(f("Neg", "Neg", &["Abs"]))
        .add(f("e", "Exp", &["Neg"]))
        .add(f("Abs_1", "Abs", &["mul"]))
        .add(f("add_1", "AddV2", &["Abs_1", "add/y"]))
        .add(f("l", "Log", &["add_1"]))
        .add(konst("Const_2", &Tensor::scalar(3.0f32)))
        .add(f("div", "RealDiv", &["mul", "Const_2"]))
        .add(f("Abs_2", "Abs", &["mul"]))
        .add(f("sq", "Sqrt", &["Abs_2"]))
        .add(f("th", "Tanh", &["mul"]))
        .add(f("sg", "Sigmoid", &["mul"]));
    let case = "broadcast_reduce";
    let names = ["sum", "mul", "rsum", "rmean", "rmax", "amax", "clip", "rs", "e", "l", "div", "sq", "th", "sg"];
    let fetches: Vec<String> = names.iter().map(|n| format!("{n}:0")).collect();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let files: Vec<String> = names.iter().map(|n| format!("step0_expect_{n}_0.npy")).collect();
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let got = s
        .step(
            &[("a:0", expected(case, "step0_feed_a_0.npy")), ("b:0", expected(case, "step0_feed_b_0.npy"))],
            &fetches,
            &[],
        )
        .unwrap();
    check(case, &got, &files);
}

#[test]
fn shapes() {
    let mut s = Session::default();
    s.add(placeholder("x"))
        .add(konst("r/shape", &i32s(&[6, 4])))
        .add(f("r", "Reshape", &["x", "r/shape"]))
        .add(konst("t/perm", &i32s(&[2, 0, 1])))
        .add(f("t", "Transpose", &["x", "t/perm"]))
        .add(konst("mul/y", &Tensor::scalar(2.0f32)))
        .add(f("mul", "Mul", &["r", "mul/y"]))
        .add(konst("c/axis", &Tensor::scalar(1i32)))
        .add(f("c", "ConcatV2", &["r", "mul", "c/axis"]).attr("N", AttrValue::Int(2)))
        .add(
            n("ci", "Cast", &["c"])
                .attr("SrcT", ty(DType::F32))
                .attr("DstT", ty(DType::I32))
                .attr("Truncate", AttrValue::Bool(false)),
        )
        // TensorFlow folded `tf.shape(t)` into a Const; compute it instead.
        .add(f("shp", "Shape", &["t"]))
        .add(konst("Reshape/shape", &i32s(&[-1])))
        .add(f("Reshape", "Reshape", &["x", "Reshape/shape"]))
        .add(f("flat", "Identity", &["Reshape"]))
        .add(f("mm_tb", "MatMul", &["r", "r"]).attr("transpose_b", AttrValue::Bool(true)))
        .add(f("mm_ta", "MatMul", &["r", "r"]).attr("transpose_a", AttrValue::Bool(true)));
    let case = "shapes";
    let names = ["r", "t", "c", "ci", "shp", "flat", "mm_tb", "mm_ta"];
    let fetches: Vec<String> = names.iter().map(|n| format!("{n}:0")).collect();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let files: Vec<String> = names.iter().map(|n| format!("step0_expect_{n}_0.npy")).collect();
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let got = s.step(&[("x:0", expected(case, "step0_feed_x_0.npy"))], &fetches, &[]).unwrap();
    check(case, &got, &files);
}

/// Dense layers: MatMul, BiasAdd, then an activation.
fn mlp(case: &str, activations: &[&str]) {
    let mut s = Session::default();
    s.add(placeholder("x"));
    let mut prev = "x".to_string();
    for (i, act) in activations.iter().enumerate() {
        let (w, b) = (format!("w{i}"), format!("b{i}"));
        let mm = if i == 0 { "MatMul".to_string() } else { format!("MatMul_{i}") };
        let (logits, out) = (format!("logits{i}"), format!("act{i}"));
        s.add(konst(&w, &weight(case, &w)))
            .add(konst(&b, &weight(case, &b)))
            .add(f(&mm, "MatMul", &[&prev, &w]))
            .add(f(&logits, "BiasAdd", &[&mm, &b]).attr("data_format", AttrValue::Bytes(b"NHWC".to_vec())))
            .add(f(&out, act, &[&logits]));
        prev = out;
    }
    s.add(f("y", "Identity", &[&prev]));
    let got = s.step(&[("x:0", expected(case, "step0_feed_x_0.npy"))], &["y:0"], &[]).unwrap();
    check(case, &got, &["step0_expect_y_0.npy"]);
}

#[test]
fn mlp2_frozen() {
    mlp("mlp2_frozen", &["Relu", "Softmax"]);
}

#[test]
fn mlp3() {
    mlp("mlp3_two_tasks", &["Relu", "Tanh", "Softmax"]);
}

#[test]
fn fanout() {
    // total = sum over i < 8 of reduce_sum(x @ (x + i)): 64x64 products on
    // the gemm path, then full float32 sums.
    let mut s = Session::default();
    s.add(placeholder("x"));
    let mut branches = Vec::new();
    for i in 0..8 {
        let sfx = if i == 0 { String::new() } else { format!("_{i}") };
        let (y, add, mm, axes, br) = (
            format!("add{sfx}/y"),
            format!("add{sfx}"),
            format!("MatMul{sfx}"),
            format!("Const{sfx}"),
            format!("branch{i}"),
        );
        s.add(konst(&y, &Tensor::scalar(i as f32)))
            .add(f(&add, "AddV2", &["x", &y]))
            .add(f(&mm, "MatMul", &["x", &add]))
            .add(konst(&axes, &i32s(&[0, 1])))
            .add(f(&br, "Sum", &[&mm, &axes]));
        branches.push(br);
    }
    let inputs: Vec<&str> = branches.iter().map(String::as_str).collect();
    s.add(f("total", "AddN", &inputs).attr("N", AttrValue::Int(8)));
    let case = "fanout_two_tasks";
    let got = s.step(&[("x:0", expected(case, "step0_feed_x_0.npy"))], &["total:0"], &[]).unwrap();
    check(case, &got, &["step0_expect_total_0.npy"]);
}

#[test]
fn ref_variable_across_steps() {
    let mut s = Session::default();
    s.add(konst("ones", &Tensor::from_slice::<f32>([3], &[1.0; 3]).unwrap()))
        .add(
            n("v", "VariableV2", &[])
                .attr("dtype", ty(DType::F32))
                .attr("shape", AttrValue::Shape(ShapeSpec::known(&[3])))
                .attr("container", AttrValue::Bytes(vec![]))
                .attr("shared_name", AttrValue::Bytes(vec![])),
        )
        .add(
            f("v/Assign", "Assign", &["v", "ones"])
                .attr("validate_shape", AttrValue::Bool(true))
                .attr("use_locking", AttrValue::Bool(true))
                .attr("_class", AttrValue::List(AttrList::Bytes(vec![b"loc:@v".to_vec()]))),
        )
        .add(f("v/read", "Identity", &["v"]))
        .add(placeholder("x"))
        .add(f("mul", "Mul", &["v/read", "x"]))
        .add(f("scale", "Assign", &["v", "mul"]).attr("validate_shape", AttrValue::Bool(true)))
        .add(f("read", "Identity", &["v/read"]))
        .add(n("init", "NoOp", &["^v/Assign"]));
    let case = "ref_variable";
    // Before init, reading fails naming the variable.
    let err = s.step(&[], &["read:0"], &[]).unwrap_err();
    assert_eq!(err.code, crate::error::Code::FailedPrecondition);
    assert!(err.message.contains("v"), "{err}");
    s.step(&[], &[], &["init"]).unwrap();
    s.step(&[("x:0", expected(case, "step1_feed_x_0.npy"))], &[], &["scale"]).unwrap();
    let got = s.step(&[], &["read:0"], &[]).unwrap();
    check(case, &got, &["step2_expect_read_0.npy"]);
    let got = s.step(&[("x:0", expected(case, "step3_feed_x_0.npy"))], &["scale:0"], &[]).unwrap();
    check(case, &got, &["step3_expect_scale_0.npy"]);
}

#[test]
fn counter_resource_var_across_steps() {
    let res = |name: &str, op: &str, inputs: &[&str]| n(name, op, inputs).attr("dtype", ty(DType::F32));
    let mut s = Session::default();
    s.add(konst("zeros", &Tensor::from_slice::<f32>([2], &[0.0; 2]).unwrap()))
        .add(
            res("counter", "VarHandleOp", &[])
                .attr("shared_name", AttrValue::Bytes(b"counter".to_vec()))
                .attr("container", AttrValue::Bytes(vec![]))
                .attr("shape", AttrValue::Shape(ShapeSpec::known(&[2]))),
        )
        .add(n("counter/IsInitialized/VarIsInitializedOp", "VarIsInitializedOp", &["counter"]))
        .add(
            res("counter/Assign", "AssignVariableOp", &["counter", "zeros"])
                .attr("validate_shape", AttrValue::Bool(false)),
        )
        .add(res("counter/Read/ReadVariableOp", "ReadVariableOp", &["counter"]))
        .add(konst("Const", &Tensor::from_slice::<f32>([2], &[1.0, 2.0]).unwrap()))
        .add(res("AssignAddVariableOp", "AssignAddVariableOp", &["counter", "Const"]))
        .add(res("Read/ReadVariableOp", "ReadVariableOp", &["counter", "^AssignAddVariableOp"]))
        .add(f("Identity", "Identity", &["Read/ReadVariableOp"]))
        .add(f("after", "Identity", &["Identity"]))
        .add(n("init", "NoOp", &["^counter/Assign"]));
    let case = "counter_resource_var";
    let init = s.step(&[], &["counter/IsInitialized/VarIsInitializedOp:0"], &[]).unwrap();
    assert!(!init[0].scalar_value::<bool>().unwrap());
    s.step(&[], &[], &["init"]).unwrap();
    for step in 1..=3 {
        let got = s.step(&[], &["after:0"], &[]).unwrap();
        check(case, &got, &[&format!("step{step}_expect_after_0.npy")]);
    }
}

#[test]
fn add_scalar() {
    let mut s = Session::default();
    s.add(placeholder("x")).add(konst("y/y", &Tensor::scalar(1.0f32))).add(f("y", "AddV2", &["x", "y/y"]));
    let case = "add_scalar";
    let got = s.step(&[("x:0", expected(case, "step0_feed_x_0.npy"))], &["y:0"], &[]).unwrap();
    check(case, &got, &["step0_expect_y_0.npy"]);
}
