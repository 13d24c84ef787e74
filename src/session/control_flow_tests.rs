//! v1 control flow through the in-process session: loops (zero, one and
//! many iterations, bounded parallel iterations, across steps), conds
//! taking each branch, a dead fetch, and step stats naming frame and
//! iteration.

use super::*;
use crate::graph::builder::{GraphBuilder, counting_loop_graph};
use crate::graph::{AttrValue, DataType};
use crate::tensor::DType;
use std::sync::Arc;

fn ty(d: DType) -> AttrValue {
    AttrValue::Type(DataType::Tensor(d))
}

fn run_loop(s: &dyn Session, n: i32) -> (i32, f32) {
    let out = s.run_simple(&[("n", Tensor::scalar(n))], &["i_out", "s_out"], &[]).unwrap();
    (out[0].scalar_value::<i32>().unwrap(), out[1].scalar_value::<f32>().unwrap())
}

#[test]
fn a_counting_loop_runs_zero_one_and_many_iterations() {
    for parallel in [1, 2, 10] {
        let s = create_session(counting_loop_graph(parallel), &SessionOptions::default()).unwrap();
        for n in [5, 0, 1, 1000, 3] {
            assert_eq!(run_loop(s.as_ref(), n), (n, n as f32), "n = {n}, parallel_iterations = {parallel}");
        }
    }
}

#[test]
fn loop_steps_run_concurrently_on_one_session() {
    let s: Arc<dyn Session> = Arc::from(create_session(counting_loop_graph(4), &SessionOptions::default()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for k in 0..50 {
                    let n = (t * 50 + k) % 37;
                    assert_eq!(run_loop(s.as_ref(), n), (n, n as f32));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// `pred ? x * 2 : x + 10` in v1 form (Switch, two branches, Merge).
fn cond_graph() -> GraphSpec {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    let pred = b.placeholder("pred", DType::Bool);
    b.add("switch", "Switch", &[&x, &pred], vec![("T", ty(DType::F32))]);
    let two = b.constant("two", &Tensor::scalar(2.0f32));
    let ten = b.constant("ten", &Tensor::scalar(10.0f32));
    let t = b.binary("then", "Mul", "switch:1", &two, DType::F32);
    let f = b.binary("else", "AddV2", "switch:0", &ten, DType::F32);
    b.add("merge", "Merge", &[&f, &t], vec![("T", ty(DType::F32)), ("N", AttrValue::Int(2))]);
    b.finish()
}

#[test]
fn a_cond_takes_each_branch_and_says_which() {
    let s = create_session(cond_graph(), &SessionOptions::default()).unwrap();
    for (pred, want, index) in [(true, 6.0f32, 1), (false, 13.0, 0), (true, 6.0, 1)] {
        let out = s
            .run_simple(&[("x", Tensor::scalar(3.0f32)), ("pred", Tensor::scalar(pred))], &["merge:0", "merge:1"], &[])
            .unwrap();
        assert_eq!(out[0].scalar_value::<f32>().unwrap(), want);
        assert_eq!(out[1].scalar_value::<i32>().unwrap(), index);
    }
}

#[test]
fn fetching_an_untaken_branch_is_an_error_naming_it() {
    let s = create_session(cond_graph(), &SessionOptions::default()).unwrap();
    let err =
        s.run_simple(&[("x", Tensor::scalar(3.0f32)), ("pred", Tensor::scalar(true))], &["else"], &[]).unwrap_err();
    assert!(err.message.contains("dead") && err.message.contains("not taken"), "{err}");
    // The session keeps serving.
    let out = s.run_simple(&[("x", Tensor::scalar(3.0f32)), ("pred", Tensor::scalar(false))], &["else"], &[]).unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), 13.0);
}

#[test]
fn step_stats_name_the_frame_and_iteration() {
    let s = create_session(counting_loop_graph(10), &SessionOptions::default()).unwrap();
    let options = RunOptions { trace: true, ..RunOptions::default() };
    let (_, meta) = s.run(&options, vec![("n".into(), Tensor::scalar(3i32))], &["s_out".to_string()], &[]).unwrap();
    let adds: Vec<(String, u64)> =
        meta.step_stats.iter().filter(|n| n.node == "loop/add_s").map(|n| (n.frame.clone(), n.iter)).collect();
    let mut iters: Vec<u64> = adds.iter().map(|(_, i)| *i).collect();
    iters.sort();
    assert_eq!(iters, [0, 1, 2]);
    assert!(adds.iter().all(|(f, _)| f == "loop"), "{adds:?}");
    let outside = meta.step_stats.iter().find(|n| n.node == "s_out").unwrap();
    assert_eq!((outside.frame.as_str(), outside.iter), ("", 0));
}

#[test]
fn an_error_inside_a_loop_ends_the_step_and_names_the_node() {
    // The loop body divides by (3 - i): at i = 3 the int32 division fails.
    let mut b = GraphBuilder::new();
    let n = b.placeholder("n", DType::I32);
    let i0 = b.constant("i0", &Tensor::scalar(0i32));
    let s0 = b.constant("s0", &Tensor::scalar(0.0f32));
    let (i_out, _) = b.counting_loop("loop", &n, &i0, &s0, 10);
    b.add("i_out", "Identity", &[&i_out], vec![("T", ty(DType::I32))]);
    let three = b.constant("loop/three", &Tensor::scalar(3i32));
    b.control("loop/three", "loop/body_i");
    let gap = b.binary("loop/gap", "Sub", &three, "loop/body_i:0", DType::I32);
    b.binary("loop/div", "FloorDiv", &three, &gap, DType::I32);
    b.control("loop/next_i", "loop/div");
    let s = create_session(b.finish(), &SessionOptions::default()).unwrap();
    assert_eq!(
        s.run_simple(&[("n", Tensor::scalar(2i32))], &["i_out"], &[]).unwrap()[0].scalar_value::<i32>().unwrap(),
        2
    );
    let err = s.run_simple(&[("n", Tensor::scalar(5i32))], &["i_out"], &[]).unwrap_err();
    assert!(err.message.contains("loop/div"), "{err}");
}

/// A string riding a v1 loop as a loop variable (Enter, Merge, Switch,
/// Identity, NextIteration, Exit) and picked by a cond (`pred ? name :
/// "default"`).
fn string_loop_and_cond_graph() -> GraphSpec {
    let mut b = GraphBuilder::new();
    let n = b.placeholder("n", DType::I32);
    let name = b.placeholder("name", DType::String);
    let i0 = b.constant("i0", &Tensor::scalar(0i32));
    let s0 = b.constant("s0", &Tensor::scalar(0.0f32));
    let (i_out, _) = b.counting_loop("loop", &n, &i0, &s0, 1);
    b.add("i_out", "Identity", &[&i_out], vec![("T", ty(DType::I32))]);
    let string = || ("T", ty(DType::String));
    let enter = b.add(
        "loop/enter_str",
        "Enter",
        &[&name],
        vec![
            string(),
            ("frame_name", AttrValue::Bytes(b"loop".to_vec())),
            ("is_constant", AttrValue::Bool(false)),
            ("parallel_iterations", AttrValue::Int(1)),
        ],
    );
    let merge =
        b.add("loop/merge_str", "Merge", &[&enter, "loop/next_str:0"], vec![string(), ("N", AttrValue::Int(2))]);
    b.add("loop/switch_str", "Switch", &[&merge, "loop/cond:0"], vec![string()]);
    let exit = b.add("loop/exit_str", "Exit", &["loop/switch_str:0"], vec![string()]);
    let body = b.add("loop/body_str", "Identity", &["loop/switch_str:1"], vec![string()]);
    b.add("loop/next_str", "NextIteration", &[&body], vec![string()]);
    b.add("str_out", "Identity", &[&exit], vec![string()]);

    let pred = b.placeholder("pred", DType::Bool);
    b.add("pick", "Switch", &[&name, &pred], vec![string()]);
    let pivot = b.add("pick/else", "Identity", &["pick:0"], vec![string()]);
    let taken = b.add("pick/then", "Identity", &["pick:1"], vec![string()]);
    let default = b.constant("pick/default", &Tensor::string_scalar("default"));
    b.control("pick/default", pivot.trim_end_matches(":0"));
    b.add("picked", "Merge", &[&default, &taken], vec![string(), ("N", AttrValue::Int(2))]);
    b.finish()
}

#[test]
fn string_tensors_ride_loops_and_conds() {
    let s = create_session(string_loop_and_cond_graph(), &SessionOptions::default()).unwrap();
    let name = Tensor::string_scalar(b"model.ckpt-\xff");
    for n in [0, 1, 4] {
        let out =
            s.run_simple(&[("n", Tensor::scalar(n)), ("name", name.clone())], &["i_out", "str_out"], &[]).unwrap();
        assert_eq!(out[0].scalar_value::<i32>().unwrap(), n);
        assert!(out[1].bit_eq(&name), "{:?} after {n} iterations", out[1]);
    }
    for (pred, want) in [(true, &b"model.ckpt-\xff"[..]), (false, b"default")] {
        let out = s.run_simple(&[("name", name.clone()), ("pred", Tensor::scalar(pred))], &["picked"], &[]).unwrap();
        assert_eq!(out[0].string_value().unwrap(), want);
    }
}

/// Pins the nodes named in `on_second` to the second CPU device.
fn split_across_devices(mut graph: GraphSpec, on_second: &[&str]) -> GraphSpec {
    for node in &mut graph.nodes {
        if on_second.contains(&node.name.as_str()) {
            node.device = "/device:CPU:1".to_string();
        }
    }
    graph
}

fn two_device_session(graph: GraphSpec) -> Box<dyn Session> {
    create_session(graph, &SessionOptions { cpu_devices: 2, ..SessionOptions::default() }).unwrap()
}

#[test]
fn a_loop_whose_body_spans_devices_iterates_in_step_on_both() {
    // The float accumulator's body on CPU:1, the counter and the loop's
    // predicate on CPU:0: CPU:1's partition gets a control loop driven by
    // the LoopCond it receives once per iteration.
    for parallel in [1, 10] {
        let graph = split_across_devices(counting_loop_graph(parallel), &["loop/body_s", "loop/add_s", "loop/one_f"]);
        let s = two_device_session(graph);
        for n in [5, 0, 1, 200, 3] {
            assert_eq!(run_loop(s.as_ref(), n), (n, n as f32), "n = {n}, parallel_iterations = {parallel}");
        }
    }
}

#[test]
fn nested_loops_split_across_devices_run_every_inner_iteration() {
    // for o in 0..n { for i in 1..n { s += 1 } }: the outer loop carries s
    // through the inner one, whose float add runs on CPU:1, so both frames
    // span the devices.
    let mut b = GraphBuilder::new();
    let n = b.placeholder("n", DType::I32);
    let o0 = b.constant("o0", &Tensor::scalar(0i32));
    let s0 = b.constant("s0", &Tensor::scalar(0.0f32));
    let (o_out, s_out) = b.counting_loop("outer", &n, &o0, &s0, 10);
    // Inputs of the inner loop, in the outer frame.
    let inner_n = b.add("outer/inner_n", "Identity", &["outer/enter_n"], vec![("T", ty(DType::I32))]);
    let inner_i0 = b.add("outer/inner_i0", "Identity", &["outer/one_i"], vec![("T", ty(DType::I32))]);
    let (_, inner_s) = b.counting_loop("inner", &inner_n, &inner_i0, "outer/body_s", 10);
    b.add("o_out", "Identity", &[&o_out], vec![("T", ty(DType::I32))]);
    b.add("s_out", "Identity", &[&s_out], vec![("T", ty(DType::F32))]);
    let mut graph = b.finish();
    for node in &mut graph.nodes {
        if node.name == "outer/next_s" {
            node.inputs[0] = crate::graph::Endpoint::new(inner_s.trim_end_matches(":0"), 0);
        }
    }
    let s = two_device_session(split_across_devices(graph, &["inner/body_s", "inner/add_s", "inner/one_f"]));
    for n in [0, 1, 3, 5] {
        let out = s.run_simple(&[("n", Tensor::scalar(n))], &["o_out", "s_out"], &[]).unwrap();
        assert_eq!(out[0].scalar_value::<i32>().unwrap(), n, "n = {n}");
        assert_eq!(out[1].scalar_value::<f32>().unwrap(), (n * (n - 1).max(0)) as f32, "n = {n}");
    }
}

#[test]
fn a_dead_branch_crosses_devices_as_dead() {
    // Both branches on CPU:1; the Switch and Merge on CPU:0: the untaken
    // branch's value crosses back dead, and the Merge takes the live one.
    let s = two_device_session(split_across_devices(cond_graph(), &["then", "else", "two", "ten"]));
    for (x, pred, want) in [(3.0f32, true, 6.0f32), (3.0, false, 13.0), (-1.0, true, -2.0)] {
        let out = s.run_simple(&[("x", Tensor::scalar(x)), ("pred", Tensor::scalar(pred))], &["merge"], &[]).unwrap();
        assert_eq!(out[0].scalar_value::<f32>().unwrap(), want, "x = {x}, pred = {pred}");
    }
    // Fetching the untaken branch across devices is still an error naming it.
    let err =
        s.run_simple(&[("x", Tensor::scalar(1.0f32)), ("pred", Tensor::scalar(false))], &["then"], &[]).unwrap_err();
    assert!(err.message.contains("dead"), "{err}");
}
