//! GraphMgr: a worker session's registered graphs. Registration splits a
//! task's partition by local device and builds one executor per device,
//! once; RunGraph runs them for a step under an ExecutorBarrier.
//!
//! Owns: [`GraphMgr`], [`RegisteredGraph`] and the step bookkeeping of one
//! worker session (running steps, so a master can abort them; partial runs
//! that span several RunGraph calls). Must not know the wire.

use super::interface::{RunGraphDone, RunGraphRequest, RunGraphResponse};
use super::rendezvous_mgr::RendezvousMgr;
use crate::cluster::DeviceName;
use crate::error::{Result, Status};
use crate::executor::{
    Args, Device, Executor, ExecutorBarrier, LocalRendezvous, Notification, Rendezvous, StepContext,
};
use crate::graph::{GraphSpec, PartitionOptions, partition};
use crate::ops::{ResourceMgr, Value};
use foldhash::{HashMap, HashMapExt};
use parking_lot::{Mutex, RwLock};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One registered partition: an executor per local device it uses.
pub struct RegisteredGraph {
    executors: Vec<Arc<Executor>>,
    /// `_Arg` indices present in this partition.
    pub arg_indices: Vec<u32>,
    /// `_Retval` indices present in this partition.
    pub retval_indices: Vec<u32>,
    /// Largest feed/fetch index + 1 (sizes the step's call frame).
    num_args: usize,
    num_retvals: usize,
    /// Whether any Send/Recv crosses to another task (needs the step's
    /// shared rendezvous rather than a private one).
    crosses_tasks: bool,
    /// The other tasks this partition exchanges tensors with: told when a
    /// step fails here, so their Recvs do not wait for us.
    peer_tasks: Vec<String>,
}

struct PartialStep {
    step: Arc<StepContext>,
    finished: Notification,
    result: Mutex<Option<Result<()>>>,
}

pub struct GraphMgr {
    task_name: String,
    devices: Vec<Arc<Device>>,
    resources: Vec<Arc<ResourceMgr>>,
    graphs: RwLock<HashMap<String, Arc<RegisteredGraph>>>,
    next_handle: AtomicU64,
    pub rendezvous: RendezvousMgr,
    running: Mutex<HashMap<u64, Arc<StepContext>>>,
    partial: Mutex<HashMap<u64, Arc<PartialStep>>>,
}

fn int_attr(spec: &crate::graph::NodeSpec, key: &str) -> Result<u32> {
    u32::try_from(spec.attr_int(key)?).map_err(|_| Status::invalid_argument(format!("node '{}': bad {key}", spec.name)))
}

impl GraphMgr {
    /// `resources` holds one container set per device (shared with other
    /// sessions, or the session's own).
    pub fn new(
        task_name: &str,
        devices: Vec<Arc<Device>>,
        resources: Vec<Arc<ResourceMgr>>,
        rendezvous: RendezvousMgr,
    ) -> GraphMgr {
        assert_eq!(resources.len(), devices.len(), "one resource container set per device");
        GraphMgr {
            task_name: task_name.to_string(),
            devices,
            resources,
            graphs: RwLock::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            rendezvous,
            running: Mutex::new(HashMap::new()),
            partial: Mutex::new(HashMap::new()),
        }
    }

    pub fn resources(&self) -> &[Arc<ResourceMgr>] {
        &self.resources
    }

    fn device_index(&self, name: &str) -> Option<usize> {
        self.devices.iter().position(|d| d.name_str == name)
    }

    /// Splits `graph` by device, builds executors, returns a handle.
    pub fn register(&self, graph: GraphSpec) -> Result<String> {
        let mut peer_tasks: Vec<String> = Vec::new();
        let (mut arg_indices, mut retval_indices) = (Vec::new(), Vec::new());
        for node in &graph.nodes {
            let name = DeviceName::parse(&node.device)?;
            if name.task_name() != self.task_name {
                return Err(Status::invalid_argument(format!(
                    "node '{}' is placed on {}, not on this task ({})",
                    node.name, node.device, self.task_name
                )));
            }
            if self.device_index(&node.device).is_none() {
                return Err(Status::invalid_argument(format!(
                    "node '{}' is placed on {}, which this task does not have (it has {})",
                    node.name,
                    node.device,
                    self.devices.iter().map(|d| d.name_str.as_str()).collect::<Vec<_>>().join(", ")
                )));
            }
            match node.op.as_str() {
                "_Arg" => arg_indices.push(int_attr(node, "index")?),
                "_Retval" => retval_indices.push(int_attr(node, "index")?),
                "_Send" | "_Recv" => {
                    for attr in ["send_device", "recv_device"] {
                        if let Some(crate::graph::AttrValue::Bytes(d)) = node.get_attr(attr) {
                            let task = crate::cluster::task_of(&String::from_utf8_lossy(d)).to_string();
                            if task != self.task_name && !peer_tasks.contains(&task) {
                                peer_tasks.push(task);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        let devices = &self.devices;
        let parts = partition(
            &graph,
            &PartitionOptions {
                location_of: &|d: &DeviceName| d.to_string(),
                incarnation_of: &|name: &str| devices.iter().find(|d| d.name_str == name).map_or(0, |d| d.incarnation),
                feeds_to_consumers: false,
            },
        )?;
        let mut executors = Vec::with_capacity(parts.len());
        for (device_name, part) in &parts {
            let index = self
                .device_index(device_name)
                .ok_or_else(|| Status::internal(format!("partition for unknown device {device_name}")))?;
            executors.push(Executor::new(part, self.devices[index].clone(), self.resources[index].clone())?);
        }
        let num_args = arg_indices.iter().max().map_or(0, |&m| m as usize + 1);
        let num_retvals = retval_indices.iter().max().map_or(0, |&m| m as usize + 1);
        let handle = format!("g{}", self.next_handle.fetch_add(1, Ordering::Relaxed));
        self.graphs.write().insert(
            handle.clone(),
            Arc::new(RegisteredGraph {
                executors,
                arg_indices,
                retval_indices,
                num_args,
                num_retvals,
                crosses_tasks: !peer_tasks.is_empty(),
                peer_tasks,
            }),
        );
        Ok(handle)
    }

    pub fn deregister(&self, handle: &str) -> Result<()> {
        self.graphs
            .write()
            .remove(handle)
            .map(|_| ())
            .ok_or_else(|| Status::not_found(format!("graph handle '{handle}' is not registered")))
    }

    pub fn len(&self) -> usize {
        self.graphs.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Steps started here that have not ended yet.
    pub fn running_steps(&self) -> usize {
        self.running.lock().len()
    }

    fn lookup(&self, handle: &str) -> Result<Arc<RegisteredGraph>> {
        self.graphs.read().get(handle).cloned().ok_or_else(|| {
            Status::not_found(format!("graph handle '{handle}' is not registered on {}", self.task_name))
        })
    }

    /// Runs the graph for one step.
    pub fn run(self: &Arc<Self>, request: RunGraphRequest, done: RunGraphDone) {
        let graph = match self.lookup(&request.graph_handle) {
            Ok(g) => g,
            Err(e) => return done(Err(e)),
        };
        if request.partial.is_some() {
            let mgr = self.clone();
            // Partial runs wait between calls; keep that off the caller's thread.
            std::thread::spawn(move || {
                let result = mgr.run_partial(&graph, request);
                done(result)
            });
            return;
        }
        let mut args = vec![None; graph.num_args];
        for (index, tensor) in request.feeds {
            match args.get_mut(index as usize) {
                Some(slot) => *slot = Some(Value::Tensor(tensor)),
                None => {
                    return done(Err(Status::invalid_argument(format!("feed index {index} is not in this graph"))));
                }
            }
        }
        if let Some(&missing) = graph.arg_indices.iter().find(|&&i| args[i as usize].is_none()) {
            return done(Err(Status::invalid_argument(format!("feed #{missing} was not provided"))));
        }
        let rendezvous: Arc<dyn Rendezvous> = if graph.crosses_tasks {
            let rendezvous = self.rendezvous.find_or_create(request.step_id);
            if let Some(route) = request.return_route {
                rendezvous.set_return_route(route);
            }
            rendezvous
        } else {
            Arc::new(LocalRendezvous::new())
        };
        let step = Arc::new(
            StepContext::new(request.step_id, rendezvous, Args::Ready(args), graph.num_retvals, request.collect_stats)
                .with_retval_placement(request.reply_placement),
        );
        self.running.lock().insert(request.step_id, step.clone());
        // The master aborts a step at its deadline; this covers a master
        // that died or cannot reach us.
        let deadline_guard = request.deadline.map(|at| {
            let mgr = Arc::downgrade(self);
            let step_id = request.step_id;
            crate::executor::deadline::call_at(at, move || {
                if let Some(mgr) = mgr.upgrade() {
                    let status = Status::deadline_exceeded(format!(
                        "step {step_id} passed its deadline on {} before it finished",
                        mgr.task_name
                    ));
                    mgr.abort_step(step_id, status);
                }
            })
        });
        let mgr = self.clone();
        let step2 = step.clone();
        let graph2 = graph.clone();
        let finish = Box::new(move |result: Result<()>| {
            drop(deadline_guard);
            mgr.running.lock().remove(&step2.step_id);
            if graph2.crosses_tasks {
                mgr.rendezvous.remove(step2.step_id);
                if let Err(status) = &result {
                    mgr.tell_peers(&graph2, &step2, status);
                }
            }
            let response = result.and_then(|()| {
                let mut values = step2.frame.retvals.take_all();
                let mut fetches = Vec::with_capacity(graph2.retval_indices.len());
                for &i in &graph2.retval_indices {
                    let v = values
                        .get_mut(i as usize)
                        .and_then(Option::take)
                        .ok_or_else(|| Status::internal(format!("fetch #{i} was not produced")))?;
                    fetches.push((i, v.into_tensor()?));
                }
                Ok(RunGraphResponse { fetches, stats: step2.take_stats() })
            });
            done(response)
        });
        run_executors(&graph.executors, step, finish);
    }

    fn run_partial(&self, graph: &Arc<RegisteredGraph>, request: RunGraphRequest) -> Result<RunGraphResponse> {
        let flags = request.partial.expect("checked by the caller");
        let partial = if flags.first {
            let step = Arc::new(StepContext::new(
                request.step_id,
                self.rendezvous.find_or_create(request.step_id) as Arc<dyn Rendezvous>,
                Args::Partial,
                graph.num_retvals,
                request.collect_stats,
            ));
            let partial =
                Arc::new(PartialStep { step: step.clone(), finished: Notification::new(), result: Mutex::new(None) });
            self.partial.lock().insert(request.step_id, partial.clone());
            self.running.lock().insert(request.step_id, step.clone());
            let p2 = partial.clone();
            run_executors(
                &graph.executors,
                step,
                Box::new(move |result| {
                    if let Err(e) = &result {
                        p2.step.frame.retvals.fail(e.clone());
                    }
                    *p2.result.lock() = Some(result);
                    p2.finished.notify();
                }),
            );
            partial
        } else {
            self.partial
                .lock()
                .get(&request.step_id)
                .cloned()
                .ok_or_else(|| Status::not_found(format!("partial run step {} is not running", request.step_id)))?
        };
        for (index, tensor) in request.feeds {
            partial.step.rendezvous.send(&crate::executor::step::arg_key(index as usize), Value::Tensor(tensor))?;
        }
        let mut fetches = Vec::with_capacity(request.fetches.len());
        for &index in &request.fetches {
            if graph.retval_indices.contains(&index) {
                let v = partial.step.frame.retvals.wait_take(index as usize, request.deadline);
                let v = v.inspect_err(|e| {
                    partial.step.cancel(e.clone());
                })?;
                fetches.push((index, v.into_tensor()?));
            }
        }
        if flags.last {
            let ended = partial.finished.wait_until(request.deadline, Duration::ZERO);
            self.partial.lock().remove(&request.step_id);
            self.running.lock().remove(&request.step_id);
            self.rendezvous.cleanup(request.step_id);
            if !ended {
                partial.step.cancel(Status::deadline_exceeded("partial run did not finish before its deadline"));
                return Err(Status::deadline_exceeded("partial run did not finish before its deadline"));
            }
            if let Some(Err(e)) = partial.result.lock().take() {
                return Err(e);
            }
        }
        Ok(RunGraphResponse { fetches, stats: if flags.last { partial.step.take_stats() } else { Vec::new() } })
    }

    /// A step failed here: its peers would wait for our tensors forever.
    fn tell_peers(&self, graph: &RegisteredGraph, step: &StepContext, status: &Status) {
        if step.was_cancelled_from_outside() {
            return;
        }
        if let Some(remote) = self.rendezvous.remote() {
            let status = super::service::on_task(&self.task_name, status.clone());
            for peer in &graph.peer_tasks {
                remote.abort_remote(peer, step.step_id, &status);
            }
        }
    }

    /// Cancels a step because the master or a peer said so.
    pub fn abort_step(&self, step_id: u64, status: Status) {
        let step = self.running.lock().get(&step_id).cloned();
        if let Some(step) = step {
            step.cancel_from_outside(status.clone());
        }
        if let Some(p) = self.partial.lock().remove(&step_id) {
            p.step.cancel_from_outside(status.clone());
        }
        self.rendezvous.abort(step_id, status);
    }

    /// Cancels everything running (the session is going away).
    pub fn abort_all(&self, status: Status) {
        let steps: Vec<_> = self.running.lock().drain().map(|(_, s)| s).collect();
        for s in steps {
            s.cancel(status.clone());
        }
        self.partial.lock().clear();
        self.rendezvous.abort_all(status);
    }

    pub fn clear_resources(&self, containers: &[String]) {
        for r in &self.resources {
            r.clear(containers);
        }
    }
}

/// Runs every executor of a step under one barrier (or directly, for one).
pub fn run_executors(executors: &[Arc<Executor>], step: Arc<StepContext>, done: crate::executor::StepDone) {
    match executors {
        [] => done(Ok(())),
        [only] => {
            let step2 = step.clone();
            only.run_async(
                step,
                Box::new(move |result| {
                    if let Err(e) = &result {
                        step2.cancel(e.clone());
                    }
                    done(result)
                }),
            )
        }
        many => {
            let barrier = ExecutorBarrier::new(many.len(), step.clone(), done);
            for executor in many {
                let b = barrier.clone();
                executor.run_async(step.clone(), Box::new(move |result| b.partition_done(result)));
            }
        }
    }
}
