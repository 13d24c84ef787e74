//! Tests of prune → place → partition together, on small graphs built in
//! code and on the golden TensorFlow graphs in `tests/fixtures`.

use super::*;
use crate::cluster::DeviceName;
use crate::graph::builder::nodes::{f32_const, identity, placeholder};
use crate::tensor::DType;
use std::collections::BTreeMap;

fn two_tasks() -> Vec<DeviceName> {
    vec![DeviceName::cpu("worker", 0, 0, 0), DeviceName::cpu("worker", 0, 1, 0)]
}

fn fixture(name: &str) -> GraphSpec {
    load_graph(format!("{}/tests/fixtures/tf-graphs/{name}/graph.pb", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

type Split = Result<(ClientGraph, BTreeMap<String, GraphSpec>), crate::Status>;

/// prune + place + partition by task, every cut edge a Send/Recv pair.
fn split(spec: GraphSpec, feeds: &[&str], fetches: &[&str], targets: &[&str], devices: &[DeviceName]) -> Split {
    split_with(spec, feeds, fetches, targets, devices, false)
}

/// As the master splits: fed values go straight to every task that reads them.
fn split_as_master(spec: GraphSpec, feeds: &[&str], fetches: &[&str], devices: &[DeviceName]) -> Split {
    split_with(spec, feeds, fetches, &[], devices, true)
}

fn split_with(
    spec: GraphSpec,
    feeds: &[&str],
    fetches: &[&str],
    targets: &[&str],
    devices: &[DeviceName],
    feeds_to_consumers: bool,
) -> Split {
    let graph = Graph::build(spec)?;
    let parse = |names: &[&str]| names.iter().map(|n| Endpoint::parse(n)).collect::<Result<Vec<_>, _>>();
    let targets: Vec<String> = targets.iter().map(|s| s.to_string()).collect();
    let client = prune(&graph, &parse(feeds)?, &parse(fetches)?, &targets)?;
    let placed = place(&Graph::build(client.graph.clone())?, devices, &devices[0])?;
    let parts = partition(
        &placed,
        &PartitionOptions {
            location_of: &|d: &DeviceName| d.task_name(),
            incarnation_of: &|_: &str| 7,
            feeds_to_consumers,
        },
    )?;
    Ok((client, parts))
}

fn ops_in<'a>(part: &'a GraphSpec, op: &str) -> Vec<&'a NodeSpec> {
    part.nodes.iter().filter(|n| n.op == op).collect()
}

fn key_of(node: &NodeSpec) -> String {
    let s = |k: &str| match node.get_attr(k) {
        Some(AttrValue::Bytes(b)) => String::from_utf8(b.clone()).unwrap(),
        other => panic!("{k}: {other:?}"),
    };
    let inc = match node.get_attr("send_device_incarnation") {
        Some(AttrValue::Int(i)) => *i as u64,
        other => panic!("{other:?}"),
    };
    rendezvous_key(&s("send_device"), inc, &s("recv_device"), &s("tensor_name"))
}

/// Every Send has exactly one Recv with the same key in another partition.
fn assert_paired(parts: &BTreeMap<String, GraphSpec>) -> usize {
    let mut sends = BTreeMap::new();
    let mut recvs = BTreeMap::new();
    for (loc, part) in parts {
        for n in ops_in(part, "_Send") {
            assert!(sends.insert(key_of(n), loc.clone()).is_none(), "duplicate send key");
        }
        for n in ops_in(part, "_Recv") {
            assert!(recvs.insert(key_of(n), loc.clone()).is_none(), "duplicate recv key");
        }
    }
    assert_eq!(sends.keys().collect::<Vec<_>>(), recvs.keys().collect::<Vec<_>>());
    for (key, loc) in &sends {
        assert_ne!(&recvs[key], loc, "a send and its recv share a partition");
    }
    sends.len()
}

#[test]
fn prune_cuts_fed_producers_and_unneeded_nodes() {
    let spec =
        GraphSpec { nodes: vec![f32_const("c", 1.0), identity("a", "c"), identity("b", "a"), identity("unused", "c")] };
    let graph = Graph::build(spec).unwrap();
    let client = prune(&graph, &[Endpoint::new("a", 0)], &[Endpoint::new("b", 0)], &[]).unwrap();
    let names: Vec<&str> = client.graph.nodes.iter().map(|n| n.name.as_str()).collect();
    assert!(names.contains(&"b") && !names.contains(&"a") && !names.contains(&"c") && !names.contains(&"unused"));
    let arg = ops_in(&client.graph, "_Arg")[0];
    assert_eq!(client.graph.node("b").unwrap().inputs[0].node, arg.name);
    assert_eq!(ops_in(&client.graph, "_Retval").len(), 1);
    assert_eq!(client.fetch_feed_deps, vec![vec![0]]);
}

#[test]
fn prune_errors_name_the_culprit() {
    let graph = Graph::build(GraphSpec { nodes: vec![f32_const("c", 1.0), NodeSpec::new("n", "NoOp")] }).unwrap();
    let e = |feeds: &[Endpoint], fetches: &[Endpoint], targets: &[String]| {
        prune(&graph, feeds, fetches, targets).unwrap_err().into_message()
    };
    assert_eq!(e(&[], &[Endpoint::new("nope", 0)], &[]), "fetch 'nope' is not a node in the graph");
    assert_eq!(e(&[Endpoint::new("nope", 0)], &[Endpoint::new("c", 0)], &[]), "feed 'nope' is not a node in the graph");
    assert_eq!(e(&[], &[], &["ghost".into()]), "target 'ghost' is not a node in the graph");
    assert!(e(&[], &[Endpoint::new("c", 1)], &[]).contains("output index 1 of node 'c' (Const) is out of range"));
    assert!(e(&[], &[Endpoint::new("n", 0)], &[]).contains("fetch 'n:0'"));
    assert_eq!(e(&[], &[], &[]), "a step must name at least one fetch or target");
}

#[test]
fn unsatisfiable_pin_lists_available_devices() {
    let spec = GraphSpec { nodes: vec![f32_const("c", 1.0).on("/job:worker/task:7")] };
    let err = split(spec, &[], &["c:0"], &[], &two_tasks()).unwrap_err();
    assert_eq!(
        err.message,
        "Could not satisfy explicit device specification '/job:worker/task:7' for node 'c': no such device. \
         Available devices: /job:worker/replica:0/task:0/device:CPU:0, /job:worker/replica:0/task:1/device:CPU:0"
    );
}

#[test]
fn unpinned_source_follows_its_single_consumer() {
    let spec =
        GraphSpec { nodes: vec![f32_const("c", 1.0), identity("i", "c").on("/job:worker/task:1"), identity("j", "i")] };
    let (_, parts) = split(spec, &[], &["j:0"], &[], &two_tasks()).unwrap();
    let t1 = &parts["/job:worker/replica:0/task:1"];
    assert!(t1.node("c").is_some() && t1.node("i").is_some());
    let t0 = &parts["/job:worker/replica:0/task:0"];
    assert!(t0.node("j").is_some(), "unpinned non-source goes to the default task");
    assert_eq!(assert_paired(&parts), 1);
}

#[test]
fn control_edges_cross_partitions() {
    let spec = GraphSpec {
        nodes: vec![
            f32_const("c", 1.0).on("/job:worker/task:1"),
            NodeSpec::new("after", "NoOp").control("c").on("/job:worker/task:0"),
        ],
    };
    let (_, parts) = split(spec, &[], &[], &["after"], &two_tasks()).unwrap();
    assert_eq!(assert_paired(&parts), 1);
    let t0 = &parts["/job:worker/replica:0/task:0"];
    let after = t0.node("after").unwrap();
    assert_eq!(after.control_inputs.len(), 1);
    assert_eq!(t0.node(&after.control_inputs[0]).unwrap().op, "_Recv");
}

#[test]
fn feeding_a_placeholder_places_its_arg_with_the_consumer() {
    let spec = GraphSpec { nodes: vec![placeholder("x"), identity("y", "x").on("/job:worker/task:1")] };
    let (client, parts) = split(spec, &["x:0"], &["y:0"], &[], &two_tasks()).unwrap();
    assert_eq!(client.feed_types, vec![DType::F32]);
    let t1 = &parts["/job:worker/replica:0/task:1"];
    assert_eq!(ops_in(t1, "_Arg").len(), 1);
    assert_eq!(ops_in(t1, "_Retval").len(), 1, "a fetch's retval sits with its producer");
    assert!(!parts.contains_key("/job:worker/replica:0/task:0"));
}

#[test]
fn golden_mlp3_two_tasks_partitions_by_layer() {
    let (_, parts) = split(fixture("mlp3_two_tasks"), &["x:0"], &["y:0"], &[], &two_tasks()).unwrap();
    assert_eq!(parts.len(), 2);
    let t0 = &parts["/job:worker/replica:0/task:0"];
    let t1 = &parts["/job:worker/replica:0/task:1"];
    for n in ["MatMul", "logits0", "act0", "MatMul_2", "logits2", "act2", "y"] {
        assert!(t0.node(n).is_some(), "{n} on task 0");
    }
    for n in ["MatMul_1", "logits1", "act1", "w1", "b1"] {
        assert!(t1.node(n).is_some(), "{n} on task 1");
    }
    assert_eq!(ops_in(t0, "_Arg").len(), 1, "x follows its only consumer to task 0");
    // act0 goes 0 → 1, act1 comes back 1 → 0.
    assert_eq!(assert_paired(&parts), 2);
    assert_eq!(ops_in(t0, "_Send").len(), 1);
    assert_eq!(ops_in(t1, "_Send").len(), 1);
    assert_eq!(t1.node("MatMul_1").unwrap().inputs[0].node, ops_in(t1, "_Recv")[0].name);
}

#[test]
fn golden_fanout_two_tasks_sends_x_once_per_task() {
    let (_, parts) = split(fixture("fanout_two_tasks"), &["x:0"], &["total:0"], &[], &two_tasks()).unwrap();
    let t0 = &parts["/job:worker/replica:0/task:0"];
    let t1 = &parts["/job:worker/replica:0/task:1"];
    assert!(t0.node("total").is_some() && t0.node("branch0").is_some());
    for i in [1, 3, 5, 7] {
        assert!(t1.node(&format!("branch{i}")).is_some() && t1.node(&format!("MatMul_{i}")).is_some());
    }
    // x crosses once (shared by 8 consumers on task 1), four branch sums come back.
    assert_eq!(assert_paired(&parts), 5);
    assert_eq!(ops_in(t1, "_Recv").len(), 1);
    assert_eq!(ops_in(t0, "_Recv").len(), 4);
}

#[test]
fn golden_ref_variable_colocates_with_its_variable() {
    let mut spec = fixture("ref_variable");
    for n in &mut spec.nodes {
        if n.name == "v" {
            n.device = "/job:worker/task:1".into();
        }
    }
    let (_, parts) = split(spec, &["x:0"], &["scale:0"], &["init"], &two_tasks()).unwrap();
    let t1 = &parts["/job:worker/replica:0/task:1"];
    for n in ["v", "scale", "v/Assign", "v/read"] {
        assert!(t1.node(n).is_some(), "{n} sits with v on task 1");
    }
}

#[test]
fn a_variables_reader_pinned_elsewhere_moves_to_the_variable_but_colocation_conflicts_fail() {
    let pinned = |reader_device: &str, class: bool| {
        let mut spec = fixture("ref_variable");
        for n in &mut spec.nodes {
            if n.name == "v" {
                n.device = "/job:worker/task:1".into();
            }
            if n.name == "v/read" {
                n.device = reader_device.into();
                n.attrs.remove("_class");
                if class {
                    n.attrs.insert(
                        "_class".into(),
                        crate::graph::spec::AttrValue::List(crate::graph::spec::AttrList::Bytes(vec![
                            b"loc:@v".to_vec(),
                        ])),
                    );
                }
            }
        }
        split(spec, &["x:0"], &["scale:0"], &["init"], &two_tasks())
    };
    // As replica_device_setter builds `v.read_value()`: the reader asks for
    // the worker, the variable is on the ps; TensorFlow moves the reader.
    let (_, parts) = pinned("/job:worker/task:0", false).unwrap();
    assert!(parts["/job:worker/replica:0/task:1"].node("v/read").is_some());
    let err = pinned("/job:worker/task:0", true).unwrap_err();
    assert!(err.message.contains("cannot colocate node 'v/read'"), "{err}");
}

#[test]
fn golden_graphs_import_place_and_partition() {
    for (case, feeds, fetches, targets) in [
        ("add_scalar", vec!["x:0"], vec!["y:0"], vec![]),
        ("counter_resource_var", vec![], vec!["after:0"], vec!["init"]),
        ("mlp2_frozen", vec!["x:0"], vec!["y:0"], vec![]),
        ("shapes", vec!["x:0"], vec!["r:0", "t:0", "c:0", "ci:0", "shp:0", "flat:0", "mm_tb:0", "mm_ta:0"], vec![]),
        ("broadcast_reduce", vec!["a:0", "b:0"], vec!["rsum:0", "amax:0", "sg:0"], vec![]),
    ] {
        let (_, parts) =
            split(fixture(case), &feeds, &fetches, &targets, &two_tasks()).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(parts.len(), 1, "{case}: unpinned graphs stay on the default task");
        assert_eq!(assert_paired(&parts), 0);
    }
}

#[test]
fn golden_ring_four_tasks_partitions_every_task() {
    let tasks: Vec<DeviceName> = (0..4).map(|t| DeviceName::cpu("worker", 0, t, 0)).collect();
    let (_, parts) = split(fixture("ring_four_tasks"), &["x:0"], &["out:0"], &[], &tasks).unwrap();
    assert_eq!(parts.len(), 4);
    let part = |t: u32| &parts[&format!("/job:worker/replica:0/task:{t}")];
    for t in 0..4 {
        for n in [format!("v{t}"), format!("bump{t}"), format!("h{t}"), format!("part{t}")] {
            assert!(part(t).node(&n).is_some(), "{n} on task {t}");
        }
    }
    assert!(part(0).node("total").is_some() && part(0).node("out").is_some() && part(3).node("done3").is_some());
    // x: 0 → 1, 2, 3; part0: 0 → 1; ring1: 1 → 2; ring2: 2 → 3; ring3: 3 → 0;
    // part1..3 → 0 for the AddN; done3 → 0 as a control edge.
    assert_eq!(assert_paired(&parts), 11);
    assert_eq!(ops_in(part(0), "_Recv").len(), 5);
    for t in 1..4 {
        assert_eq!(ops_in(part(t), "_Arg").len(), 0, "x is fed on task 0 only");
    }
    let total = part(0).node("total").unwrap();
    assert_eq!(total.control_inputs.len(), 1);
    assert_eq!(part(0).node(&total.control_inputs[0]).unwrap().op, "_Recv");
}

#[test]
fn fed_value_read_on_another_task_is_fed_there_without_a_hop() {
    let mut b = crate::graph::builder::GraphBuilder::new();
    b.set_device("/job:worker/task:0");
    let x = b.placeholder("x", DType::F32);
    b.set_device("/job:worker/task:1");
    let one = b.constant("one", &crate::tensor::Tensor::scalar(1.0f32));
    b.binary("y", "AddV2", &x, &one, DType::F32);
    let spec = b.finish();
    let (_, plain) = split(spec.clone(), &["x:0"], &["y:0"], &[], &two_tasks()).unwrap();
    assert_eq!(assert_paired(&plain), 1, "without the master's option x is sent from task 0");

    let (_, parts) = split_as_master(spec, &["x:0"], &["y:0"], &two_tasks()).unwrap();
    assert_eq!(parts.len(), 1, "task 0 has nothing left to run: {:?}", parts.keys());
    let t1 = &parts["/job:worker/replica:0/task:1"];
    let args = ops_in(t1, "_Arg");
    assert_eq!(args.len(), 1);
    assert_eq!(args[0].device, "/job:worker/replica:0/task:1/device:CPU:0");
    assert_eq!(t1.node("y").unwrap().inputs[0].node, args[0].name);
    assert_eq!(assert_paired(&parts), 0);
}

#[test]
fn fed_value_read_on_several_tasks_is_fed_to_each() {
    let (_, parts) = split_as_master(fixture("fanout_two_tasks"), &["x:0"], &["total:0"], &two_tasks()).unwrap();
    for t in 0..2 {
        let part = &parts[&format!("/job:worker/replica:0/task:{t}")];
        assert_eq!(ops_in(part, "_Arg").len(), 1, "task {t} has its own copy of x");
    }
    // Only the four branch sums cross now.
    assert_eq!(assert_paired(&parts), 4);
    assert_eq!(ops_in(&parts["/job:worker/replica:0/task:1"], "_Recv").len(), 0);

    let tasks: Vec<DeviceName> = (0..4).map(|t| DeviceName::cpu("worker", 0, t, 0)).collect();
    let (_, ring) = split_as_master(fixture("ring_four_tasks"), &["x:0"], &["out:0"], &tasks).unwrap();
    for t in 0..4 {
        assert_eq!(ops_in(&ring[&format!("/job:worker/replica:0/task:{t}")], "_Arg").len(), 1, "task {t}");
    }
    // 11 pairs less x's three.
    assert_eq!(assert_paired(&ring), 8);
}

#[test]
fn import_puts_back_the_default_attrs_a_writer_stripped() {
    use crate::graph::import::proto;
    let attr_type = |t: i32| proto::AttrValue { value: Some(proto::attr_value::Value::Type(t)) };
    let attr_s = |s: &[u8]| proto::AttrValue { value: Some(proto::attr_value::Value::S(s.to_vec())) };
    let node = |name: &str, op: &str, attrs: Vec<(&str, proto::AttrValue)>| proto::NodeDef {
        name: name.into(),
        op: op.into(),
        attr: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        ..Default::default()
    };
    let def = proto::GraphDef {
        node: vec![
            // As a SavedModel stores it: T (float32) and data_format (NHWC) left out.
            node("pool", "MaxPool", vec![("padding", attr_s(b"VALID"))]),
            // Given values are kept.
            node("pool64", "MaxPool", vec![("T", attr_type(2)), ("data_format", attr_s(b"NCHW"))]),
        ],
        ..Default::default()
    };
    let graph = crate::graph::import::graph_from_proto(&def).unwrap();
    let pool = &graph.nodes[0];
    assert_eq!(pool.attr_dtype("T").unwrap(), DType::F32);
    assert_eq!(pool.get_attr("data_format"), Some(&AttrValue::Bytes(b"NHWC".to_vec())));
    assert_eq!(pool.get_attr("padding"), Some(&AttrValue::Bytes(b"VALID".to_vec())));
    let pool64 = &graph.nodes[1];
    assert_eq!(pool64.attr_dtype("T").unwrap(), DType::F64);
    assert_eq!(pool64.get_attr("data_format"), Some(&AttrValue::Bytes(b"NCHW".to_vec())));
}
