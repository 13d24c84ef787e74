//! Pruning to a step's signature: keep only what the fetches and targets
//! need, cut fed tensors off from their producers, and give feeds and
//! fetches their own nodes (`_Arg`, `_Retval`) so an executor can hand
//! values in and out by index.
//!
//! Owns: [`ClientGraph`], the per-signature graph the master (or the
//! in-process session) places and partitions. Must not choose devices.

use super::spec::{AttrList, AttrValue, DataType, Endpoint, GraphSpec, NodeSpec};
use super::validate::{Graph, NodeId, Resolved, output_type, resolve_nodes};
use crate::error::{Result, Status};
use crate::ops::ValueType;
use crate::tensor::DType;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The subgraph one (feeds, fetches, targets) signature runs.
#[derive(Debug, Clone)]
pub struct ClientGraph {
    /// Kept nodes plus one `_Arg` per feed and one `_Retval` per fetch.
    pub graph: GraphSpec,
    pub feeds: Vec<Endpoint>,
    pub fetches: Vec<Endpoint>,
    pub targets: Vec<String>,
    pub feed_types: Vec<DType>,
    pub fetch_types: Vec<DType>,
    /// For each fetch, the feeds (by index) it transitively depends on.
    pub fetch_feed_deps: Vec<Vec<usize>>,
    /// For each target, the feeds (by index) it transitively depends on.
    pub target_feed_deps: Vec<Vec<usize>>,
}

fn dtype_attr(d: DType) -> AttrValue {
    AttrValue::Type(DataType::Tensor(d))
}

fn unique_name(base: String, taken: &mut HashSet<String>) -> String {
    let mut name = base.clone();
    let mut n = 1;
    while taken.contains(&name) {
        name = format!("{base}_{n}");
        n += 1;
    }
    taken.insert(name.clone());
    name
}

/// Prunes `graph` to what `fetches` and `targets` need, given `feeds`.
pub fn prune(graph: &Graph, feeds: &[Endpoint], fetches: &[Endpoint], targets: &[String]) -> Result<ClientGraph> {
    if fetches.is_empty() && targets.is_empty() {
        return Err(Status::invalid_argument("a step must name at least one fetch or target"));
    }
    let mut resolved: HashMap<NodeId, Resolved> = HashMap::new();

    let mut fed: HashMap<(NodeId, u32), usize> = HashMap::new();
    let mut feed_types = Vec::with_capacity(feeds.len());
    for (i, feed) in feeds.iter().enumerate() {
        let id = graph.require(&feed.node, "feed")?;
        let ty =
            output_type(graph, &mut resolved, id, feed.port).map_err(|e| e.context(format_args!("feed '{feed}'")))?;
        let ValueType::Tensor(dtype) = ty else {
            return Err(Status::invalid_argument(format!("feed '{feed}' is of type {ty}; only tensors can be fed")));
        };
        if fed.insert((id, feed.port), i).is_some() {
            return Err(Status::invalid_argument(format!("'{feed}' is fed more than once")));
        }
        feed_types.push(dtype);
    }

    let mut fetch_ids = Vec::with_capacity(fetches.len());
    for fetch in fetches {
        fetch_ids.push(graph.require(&fetch.node, "fetch")?);
    }
    let mut target_ids = Vec::with_capacity(targets.len());
    for target in targets {
        target_ids.push(graph.require(target, "target")?);
    }

    // Reverse reachability, stopping at fed tensors.
    let mut keep = vec![false; graph.len()];
    let mut stack: Vec<NodeId> = Vec::new();
    for (fetch, &id) in fetches.iter().zip(&fetch_ids) {
        if !fed.contains_key(&(id, fetch.port)) {
            stack.push(id);
        }
    }
    stack.extend(&target_ids);
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut keep[id], true) {
            continue;
        }
        let node = graph.node(id);
        for &(p, port) in &node.inputs {
            if !fed.contains_key(&(p, port)) && !keep[p] {
                stack.push(p);
            }
        }
        stack.extend(node.control_inputs.iter().filter(|&&c| !keep[c]));
    }
    let kept: Vec<NodeId> = (0..graph.len()).filter(|&i| keep[i]).collect();
    resolved.extend(resolve_nodes(graph, &kept)?);

    let mut fetch_types = Vec::with_capacity(fetches.len());
    for (fetch, &id) in fetches.iter().zip(&fetch_ids) {
        let ty = output_type(graph, &mut resolved, id, fetch.port)
            .map_err(|e| e.context(format_args!("fetch '{fetch}'")))?;
        match ty.deref() {
            ValueType::Tensor(d) => fetch_types.push(d),
            other => {
                return Err(Status::invalid_argument(format!(
                    "fetch '{fetch}' is of type {other}; only tensors can be fetched"
                )));
            }
        }
    }

    let mut taken: HashSet<String> = graph.nodes().iter().map(|n| n.spec.name.clone()).collect();
    let arg_names: Vec<String> =
        feeds.iter().map(|f| unique_name(format!("_arg/{}_{}", f.node, f.port), &mut taken)).collect();

    let mut nodes = Vec::with_capacity(kept.len() + feeds.len() + fetches.len());
    for (i, feed) in feeds.iter().enumerate() {
        let fed_node = &graph.node(graph.require(&feed.node, "feed")?).spec;
        nodes.push(
            NodeSpec::new(arg_names[i].clone(), "_Arg")
                .attr("T", dtype_attr(feed_types[i]))
                .attr("index", AttrValue::Int(i as i64))
                .on(fed_node.device.clone()),
        );
    }
    for &id in &kept {
        let node = graph.node(id);
        let mut spec = node.spec.clone();
        for (slot, &(p, port)) in node.inputs.iter().enumerate() {
            if let Some(&feed) = fed.get(&(p, port)) {
                spec.inputs[slot] = Endpoint::new(arg_names[feed].clone(), 0);
            }
        }
        nodes.push(spec);
    }
    for (i, (fetch, &id)) in fetches.iter().zip(&fetch_ids).enumerate() {
        let (source, producer) = match fed.get(&(id, fetch.port)) {
            Some(&feed) => (Endpoint::new(arg_names[feed].clone(), 0), arg_names[feed].clone()),
            None => (fetch.clone(), fetch.node.clone()),
        };
        let name = unique_name(format!("_retval/{}_{}", fetch.node, fetch.port), &mut taken);
        nodes.push(
            NodeSpec::new(name, "_Retval")
                .input(source.node, source.port)
                .attr("T", dtype_attr(fetch_types[i]))
                .attr("index", AttrValue::Int(i as i64))
                .attr("_class", AttrValue::List(AttrList::Bytes(vec![format!("loc:@{producer}").into_bytes()]))),
        );
    }

    let feed_deps_of = |start: NodeId, start_port: Option<u32>| -> Vec<usize> {
        let mut deps = BTreeSet::new();
        if let Some(port) = start_port {
            if let Some(&f) = fed.get(&(start, port)) {
                return vec![f];
            }
        }
        let mut seen = HashSet::new();
        let mut stack = vec![start];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let node = graph.node(id);
            for &(p, port) in &node.inputs {
                match fed.get(&(p, port)) {
                    Some(&f) => {
                        deps.insert(f);
                    }
                    None => stack.push(p),
                }
            }
            stack.extend(&node.control_inputs);
        }
        deps.into_iter().collect()
    };
    let fetch_feed_deps = fetches.iter().zip(&fetch_ids).map(|(f, &id)| feed_deps_of(id, Some(f.port))).collect();
    let target_feed_deps = target_ids.iter().map(|&id| feed_deps_of(id, None)).collect();

    Ok(ClientGraph {
        graph: GraphSpec { nodes },
        feeds: feeds.to_vec(),
        fetches: fetches.to_vec(),
        targets: targets.to_vec(),
        feed_types,
        fetch_types,
        fetch_feed_deps,
        target_feed_deps,
    })
}
