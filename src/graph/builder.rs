//! Building graphs in code (benchmarks, the demo, tests): a thin layer
//! over [`GraphSpec`] that names tensors `node:port` and fills in the attrs
//! the common ops need.
//!
//! Owns: [`GraphBuilder`]. Must not validate; sessions do that.

use super::spec::{AttrValue, DataType, Endpoint, GraphSpec, NodeSpec, TensorValue};
use crate::tensor::{DType, Tensor};

#[derive(Default)]
pub struct GraphBuilder {
    nodes: Vec<NodeSpec>,
    device: String,
}

fn ty(d: DType) -> AttrValue {
    AttrValue::Type(DataType::Tensor(d))
}

impl GraphBuilder {
    pub fn new() -> GraphBuilder {
        GraphBuilder::default()
    }

    /// Device requested for the nodes added from now on ("" for none).
    pub fn set_device(&mut self, device: &str) -> &mut Self {
        self.device = device.to_string();
        self
    }

    /// Adds a node; `inputs` are tensor names (`node` or `node:port`).
    pub fn add(&mut self, name: &str, op: &str, inputs: &[&str], attrs: Vec<(&str, AttrValue)>) -> String {
        let mut node = NodeSpec::new(name, op).on(self.device.clone());
        for input in inputs {
            let e = Endpoint::parse(input).unwrap_or_else(|_| Endpoint::new(*input, 0));
            node.inputs.push(e);
        }
        for (k, v) in attrs {
            node.attrs.insert(k.to_string(), v);
        }
        self.nodes.push(node);
        format!("{name}:0")
    }

    pub fn placeholder(&mut self, name: &str, dtype: DType) -> String {
        self.add(name, "Placeholder", &[], vec![("dtype", ty(dtype))])
    }

    pub fn constant(&mut self, name: &str, value: &Tensor) -> String {
        self.add(
            name,
            "Const",
            &[],
            vec![("value", AttrValue::Tensor(TensorValue::from_tensor(value))), ("dtype", ty(value.dtype()))],
        )
    }

    /// An elementwise binary op (AddV2, Mul, ...) of dtype `dtype`.
    pub fn binary(&mut self, name: &str, op: &str, a: &str, b: &str, dtype: DType) -> String {
        self.add(name, op, &[a, b], vec![("T", ty(dtype))])
    }

    pub fn unary(&mut self, name: &str, op: &str, a: &str, dtype: DType) -> String {
        self.add(name, op, &[a], vec![("T", ty(dtype))])
    }

    pub fn matmul(&mut self, name: &str, a: &str, b: &str, dtype: DType) -> String {
        self.add(
            name,
            "MatMul",
            &[a, b],
            vec![("T", ty(dtype)), ("transpose_a", AttrValue::Bool(false)), ("transpose_b", AttrValue::Bool(false))],
        )
    }

    /// `links` MatMuls chained from `x`, each multiplying the last by `x`
    /// (`m0`, `m1`, ...); returns the last one's output.
    pub fn matmul_chain(&mut self, x: &str, links: usize, dtype: DType) -> String {
        let mut last = x.to_string();
        for i in 0..links {
            last = self.matmul(&format!("m{i}"), &last, x, dtype);
        }
        last
    }

    pub fn add_n(&mut self, name: &str, inputs: &[&str], dtype: DType) -> String {
        self.add(name, "AddN", inputs, vec![("T", ty(dtype)), ("N", AttrValue::Int(inputs.len() as i64))])
    }

    /// Adds a control dependency of the last-added node named `node` on `on`.
    pub fn control(&mut self, node: &str, on: &str) {
        if let Some(n) = self.nodes.iter_mut().find(|n| n.name == node) {
            n.control_inputs.push(on.to_string());
        }
    }

    pub fn finish(self) -> GraphSpec {
        GraphSpec { nodes: self.nodes }
    }
}

/// `y = x + 1` on a float scalar: the trivial step of the benchmarks.
pub fn trivial_add_graph() -> GraphSpec {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    b.binary("y", "AddV2", &x, &one, DType::F32);
    b.finish()
}

/// `y = x + 1 + 1 + ...`: a chain of `length` scalar adds.
pub fn chain_graph(length: usize) -> GraphSpec {
    let mut b = GraphBuilder::new();
    let mut prev = b.placeholder("x", DType::F32);
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    for i in 0..length {
        let name = if i + 1 == length { "y".to_string() } else { format!("add_{i}") };
        prev = b.binary(&name, "AddV2", &prev, &one, DType::F32);
    }
    b.finish()
}

/// `total = AddN(x @ w_i for i in 0..branches)` with `size`×`size` floats:
/// independent MatMul branches joined at the end.
/// Branch `branch`'s `size`×`size` weights in [`fanout_graph`], row-major
/// (the raw baseline of `ringflow bench fanout` multiplies the same).
pub fn fanout_weights(branch: usize, size: usize) -> Vec<f32> {
    (0..size * size).map(|k| ((k * 7 + branch * 13) % 17) as f32 / 17.0 - 0.5).collect()
}

pub fn fanout_graph(branches: usize, size: usize) -> GraphSpec {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    let mut outs = Vec::with_capacity(branches);
    for i in 0..branches {
        let w = Tensor::from_slice::<f32>([size, size], &fanout_weights(i, size)).expect("a small weight matrix");
        let w = b.constant(&format!("w_{i}"), &w);
        outs.push(b.matmul(&format!("branch_{i}"), &x, &w, DType::F32));
    }
    let refs: Vec<&str> = outs.iter().map(String::as_str).collect();
    b.add_n("total", &refs, DType::F32);
    b.finish()
}

/// A resource variable `v` of two floats with `init` (assign zeros),
/// `bump` (add [1, 2]) and `read` (after bump), on `device` ("" for none).
pub fn counter_graph(device: &str) -> GraphSpec {
    let mut b = GraphBuilder::new();
    b.set_device(device);
    let zeros = b.constant("zeros", &Tensor::from_slice::<f32>([2], &[0.0, 0.0]).expect("two floats"));
    let inc = b.constant("inc", &Tensor::from_slice::<f32>([2], &[1.0, 2.0]).expect("two floats"));
    let v = b.add(
        "v",
        "VarHandleOp",
        &[],
        vec![("dtype", ty(DType::F32)), ("shape", AttrValue::Shape(super::spec::ShapeSpec::known(&[2])))],
    );
    b.add("init", "AssignVariableOp", &[&v, &zeros], vec![("dtype", ty(DType::F32))]);
    b.add("bump", "AssignAddVariableOp", &[&v, &inc], vec![("dtype", ty(DType::F32))]);
    b.add("read", "ReadVariableOp", &[&v], vec![("dtype", ty(DType::F32))]);
    b.control("read", "bump");
    b.finish()
}

/// `i, s = 0, 0.0; while i < n: i += 1; s += 1.0` in TensorFlow's v1
/// control flow (what `tf.compat.v1.while_loop` emits), `n` an int32
/// placeholder; fetch `i_out` and `s_out`. With `prefix` "", node names are
/// bare; loops nest by building one inside another's body with a prefix.
pub fn counting_loop_graph(parallel_iterations: i64) -> GraphSpec {
    let mut b = GraphBuilder::new();
    let n = b.placeholder("n", DType::I32);
    let i0 = b.constant("i0", &Tensor::scalar(0i32));
    let s0 = b.constant("s0", &Tensor::scalar(0.0f32));
    let (i_out, s_out) = b.counting_loop("loop", &n, &i0, &s0, parallel_iterations);
    b.add("i_out", "Identity", &[&i_out], vec![("T", ty(DType::I32))]);
    b.add("s_out", "Identity", &[&s_out], vec![("T", ty(DType::F32))]);
    b.finish()
}

impl GraphBuilder {
    /// Adds the v1 loop `while i < n: i += 1; s += 1.0` named `frame`
    /// (nodes `frame/...`) over `i` (int32), `s` (float) and the bound `n`;
    /// returns the loop's outputs `(i, s)`.
    pub fn counting_loop(
        &mut self,
        frame: &str,
        n: &str,
        i: &str,
        s: &str,
        parallel_iterations: i64,
    ) -> (String, String) {
        let enter = |b: &mut Self, name: &str, input: &str, dtype: DType, constant: bool| {
            b.add(
                &format!("{frame}/{name}"),
                "Enter",
                &[input],
                vec![
                    ("T", ty(dtype)),
                    ("frame_name", AttrValue::Bytes(frame.as_bytes().to_vec())),
                    ("is_constant", AttrValue::Bool(constant)),
                    ("parallel_iterations", AttrValue::Int(parallel_iterations)),
                ],
            )
        };
        let enter_i = enter(self, "enter_i", i, DType::I32, false);
        let enter_s = enter(self, "enter_s", s, DType::F32, false);
        let enter_n = enter(self, "enter_n", n, DType::I32, true);
        let next_i = format!("{frame}/next_i:0");
        let next_s = format!("{frame}/next_s:0");
        let merge = |b: &mut Self, name: &str, first: &str, back: &str, dtype: DType| {
            b.add(&format!("{frame}/{name}"), "Merge", &[first, back], vec![("T", ty(dtype)), ("N", AttrValue::Int(2))])
        };
        let merge_i = merge(self, "merge_i", &enter_i, &next_i, DType::I32);
        let merge_s = merge(self, "merge_s", &enter_s, &next_s, DType::F32);
        let less = self.binary(&format!("{frame}/less"), "Less", &merge_i, &enter_n, DType::I32);
        let cond = self.add(&format!("{frame}/cond"), "LoopCond", &[&less], vec![]);
        let switch_i =
            self.add(&format!("{frame}/switch_i"), "Switch", &[&merge_i, &cond], vec![("T", ty(DType::I32))]);
        let switch_s =
            self.add(&format!("{frame}/switch_s"), "Switch", &[&merge_s, &cond], vec![("T", ty(DType::F32))]);
        let exit_i = self.add(&format!("{frame}/exit_i"), "Exit", &[&switch_i], vec![("T", ty(DType::I32))]);
        let exit_s = self.add(&format!("{frame}/exit_s"), "Exit", &[&switch_s], vec![("T", ty(DType::F32))]);
        let body_i = self.add(
            &format!("{frame}/body_i"),
            "Identity",
            &[&format!("{frame}/switch_i:1")],
            vec![("T", ty(DType::I32))],
        );
        let body_s = self.add(
            &format!("{frame}/body_s"),
            "Identity",
            &[&format!("{frame}/switch_s:1")],
            vec![("T", ty(DType::F32))],
        );
        let one_i = self.constant(&format!("{frame}/one_i"), &Tensor::scalar(1i32));
        let one_f = self.constant(&format!("{frame}/one_f"), &Tensor::scalar(1.0f32));
        // Constants run in the loop's frame: a control edge from the body.
        self.control(&format!("{frame}/one_i"), &format!("{frame}/body_i"));
        self.control(&format!("{frame}/one_f"), &format!("{frame}/body_i"));
        let add_i = self.binary(&format!("{frame}/add_i"), "AddV2", &body_i, &one_i, DType::I32);
        let add_s = self.binary(&format!("{frame}/add_s"), "AddV2", &body_s, &one_f, DType::F32);
        self.add(&format!("{frame}/next_i"), "NextIteration", &[&add_i], vec![("T", ty(DType::I32))]);
        self.add(&format!("{frame}/next_s"), "NextIteration", &[&add_s], vec![("T", ty(DType::F32))]);
        (exit_i, exit_s)
    }
}

/// Single nodes for tests.
#[cfg(test)]
pub(crate) mod nodes {
    use super::*;

    pub fn f32_const(name: &str, v: f32) -> NodeSpec {
        NodeSpec::new(name, "Const")
            .attr("value", AttrValue::Tensor(TensorValue::from_tensor(&Tensor::scalar(v))))
            .attr("dtype", ty(DType::F32))
    }

    pub fn identity(name: &str, input: &str) -> NodeSpec {
        NodeSpec::new(name, "Identity").input(input, 0).attr("T", ty(DType::F32))
    }

    pub fn placeholder(name: &str) -> NodeSpec {
        NodeSpec::new(name, "Placeholder").attr("dtype", ty(DType::F32))
    }
}
