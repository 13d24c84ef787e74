//! The wire side of the WorkerService, server end: decodes a request in
//! place, calls the [`Worker`], encodes the answer.
//!
//! Owns: one handler per WorkerService method. Runs on a transport thread,
//! so nothing here blocks: RunGraph starts the step and answers from
//! whichever thread finishes it; a partial run's waits happen on the
//! GraphMgr's own thread.

use super::Worker;
use super::interface::{PartialRunFlags, RunGraphRequest, WorkerInterface};
use super::remote::{ConnectionBack, cluster_from_wire, devices_to_wire, stats_to_wire};
use crate::error::{Code, Result, Status};
use crate::executor::RendezvousKey;
use crate::net::message::{self as msg, Method, PayloadList};
use crate::net::{Reply, Request};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Encodes `message` and sends it as the answer.
pub fn answer<M: msg::Encode>(reply: Reply, message: &M, payloads: &[crate::tensor::Tensor]) {
    match msg::encode(message) {
        Ok(meta) => reply.ok(&meta, payloads),
        Err(e) => reply.err(e),
    }
}

/// Answers `reply` with `result` (an empty message on success).
fn answer_empty(reply: Reply, result: Result<()>) {
    match result {
        Ok(()) => answer(reply, &msg::Empty {}, &[]),
        Err(e) => reply.err(e),
    }
}

/// Whether `method` is a WorkerService call.
pub fn is_worker_method(method: Method) -> bool {
    matches!(
        method,
        Method::GetStatus
            | Method::CreateWorkerSession
            | Method::DeleteWorkerSession
            | Method::RegisterGraph
            | Method::DeregisterGraph
            | Method::RunGraph
            | Method::CleanupGraph
            | Method::CleanupAll
            | Method::RecvTensor
            | Method::TensorPush
            | Method::AbortStep
    )
}

/// Handles one WorkerService request.
pub fn handle(worker: &Arc<Worker>, request: Request, reply: Reply) {
    let result = match request.method() {
        Method::RunGraph => return run_graph(worker, request, reply),
        Method::GetStatus => get_status(worker, &request),
        Method::CreateWorkerSession => request.meta::<msg::CreateWorkerSessionRequest>().and_then(|m| {
            worker
                .create_worker_session(&m.session_handle, &cluster_from_wire(&m.cluster), m.isolate_session_state)
                .map(|()| None)
        }),
        Method::DeleteWorkerSession => request
            .meta::<msg::DeleteWorkerSessionRequest>()
            .and_then(|m| worker.delete_worker_session(&m.session_handle).map(|()| None)),
        Method::RegisterGraph => register_graph(worker, &request),
        Method::DeregisterGraph => request
            .meta::<msg::DeregisterGraphRequest>()
            .and_then(|m| worker.deregister_graph(&m.session_handle, &m.graph_handle).map(|()| None)),
        Method::CleanupGraph => request
            .meta::<msg::CleanupGraphRequest>()
            .and_then(|m| worker.cleanup_graph(&m.session_handle, m.step_id.to_native()).map(|()| None)),
        Method::CleanupAll => request.meta::<msg::CleanupAllRequest>().and_then(|m| {
            let containers: Vec<String> = m.containers.iter().map(|c| c.to_string()).collect();
            if m.session_handle.is_empty() {
                worker.cleanup_all(&containers)
            } else {
                worker.reset_session(&m.session_handle, &containers)
            }
            .map(|()| None)
        }),
        Method::TensorPush => {
            if let Err(e) = tensor_push(worker, &request) {
                tracing::warn!("dropped a tensor pushed by {}: {e}", request.peer());
            }
            return;
        }
        Method::AbortStep => {
            match request.meta::<msg::AbortStep>() {
                Ok(m) => worker.abort_step(
                    &m.session_handle,
                    m.step_id.to_native(),
                    Status::new(Code::from_u8(m.code), m.message.to_string()),
                ),
                Err(e) => tracing::warn!("bad AbortStep from {}: {e}", request.peer()),
            }
            return;
        }
        Method::RecvTensor => Err(Status::unimplemented(
            "RecvTensor: this runtime pushes tensors to their consumer (TensorPush); nothing is held for pulling",
        )),
        other => Err(Status::unimplemented(format!("{other} is not a WorkerService call"))),
    };
    match result {
        Ok(Some((meta, payloads))) => reply.ok(&meta, &payloads),
        Ok(None) => answer_empty(reply, Ok(())),
        Err(e) => reply.err(e),
    }
}

type Encoded = Option<(rkyv::util::AlignedVec, Vec<crate::tensor::Tensor>)>;

fn get_status(worker: &Arc<Worker>, request: &Request) -> Result<Encoded> {
    let m = request.meta::<msg::GetStatusRequest>()?;
    for handle in m.keep_alive.iter() {
        worker.keep_alive(handle);
    }
    let registered_graphs =
        if m.session_handle.is_empty() { 0 } else { worker.registered_graphs(&m.session_handle).unwrap_or(0) as u64 };
    let devices = devices_to_wire(worker.get_status()?);
    let response = msg::GetStatusResponse {
        devices,
        incarnation: worker.incarnation(),
        registered_graphs,
        sessions: worker.num_sessions() as u64,
        wall_clock_us: crate::executor::wall_clock_us(),
    };
    Ok(Some((msg::encode(&response)?, Vec::new())))
}

fn register_graph(worker: &Arc<Worker>, request: &Request) -> Result<Encoded> {
    let m = request.meta::<msg::RegisterGraphRequest>()?;
    let graph: crate::graph::GraphSpec = rkyv::deserialize::<_, rkyv::rancor::Error>(&m.graph)
        .map_err(|e| Status::invalid_argument(format!("RegisterGraph: malformed graph: {e}")))?;
    let handle = worker.register_graph(&m.session_handle, graph, m.collect_stats)?;
    Ok(Some((msg::encode(&msg::RegisterGraphResponse { graph_handle: handle })?, Vec::new())))
}

fn tensor_push(worker: &Arc<Worker>, request: &Request) -> Result<()> {
    let m = request.meta::<msg::TensorPush>()?;
    let tensor = if m.dead { None } else { Some(m.tensor.resolve(&request.payloads)?) };
    let key = RendezvousKey::parse(&m.rendezvous_key)?;
    worker.deliver(&m.session_handle, m.step_id.to_native(), &key, tensor)
}

fn run_graph(worker: &Arc<Worker>, request: Request, reply: Reply) {
    let parsed = (|| -> Result<RunGraphRequest> {
        let m = request.meta::<msg::RunGraphRequest>()?;
        let mut feeds = Vec::with_capacity(m.feeds.len());
        for f in m.feeds.iter() {
            feeds.push((f.index.to_native(), f.tensor.resolve(&request.payloads)?));
        }
        let partial = (m.partial & msg::PARTIAL_RUN != 0).then_some(PartialRunFlags {
            first: m.partial & msg::PARTIAL_FIRST != 0,
            last: m.partial & msg::PARTIAL_LAST != 0,
        });
        let timeout_ms = m.timeout_ms.to_native();
        Ok(RunGraphRequest {
            session_handle: m.session_handle.as_str().to_owned(),
            graph_handle: m.graph_handle.as_str().to_owned(),
            step_id: m.step_id.to_native(),
            feeds,
            fetches: m.fetches.iter().map(|f| f.to_native()).collect(),
            partial,
            deadline: (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms)),
            collect_stats: m.collect_stats,
            // The requester reads this connection until our answer comes,
            // and our pushes precede the answer on it; a partial run's
            // later calls could find nobody reading.
            return_route: match partial {
                None => request.back_channel().map(|c| ConnectionBack::route(&m.session_handle, c)),
                Some(_) => None,
            },
            // A partial run's fetches may be answered long after.
            reply_placement: match partial {
                None => request.output_placement(),
                Some(_) => None,
            },
        })
    })();
    let run = match parsed {
        Ok(r) => r,
        Err(e) => {
            // Never reached the worker, which counts the runs it starts.
            crate::counters::record_graph_run(Instant::now(), false);
            return reply.err(e);
        }
    };
    let worker_for_errors = worker.clone();
    let done = Box::new(move |result: Result<super::RunGraphResponse>| match result {
        Ok(response) => {
            let mut payloads = PayloadList::new();
            let fetches = payloads.add_large_last(response.fetches.iter().map(|(_, t)| t), |at, tensor| {
                msg::IndexedTensorRef { index: response.fetches[at].0, tensor }
            });
            let wire = msg::RunGraphResponse { fetches, step_stats: stats_to_wire(&response.stats) };
            answer(reply, &wire, payloads.tensors());
        }
        Err(e) => reply.err(on_task(worker_for_errors.task_name(), e)),
    });
    // An in-process worker never hands back a call to drive.
    let drive = worker.run_graph(run, done);
    debug_assert!(drive.is_none());
}

/// Names this task in an error its step raised, unless it already does: the
/// master and the client see which process failed.
pub(crate) fn on_task(task: &str, status: crate::error::Status) -> crate::error::Status {
    if status.message.contains(task) {
        return status;
    }
    status.context(format_args!("on {task}"))
}
