//! The wire side of the MasterService, server end: decodes a client's
//! request in place, calls the [`Master`], encodes the answer.
//!
//! Owns: one handler per MasterService method. A step runs on the transport
//! thread of the client's connection (the client is waiting for it anyway,
//! and a thread hop would cost a wake-up); partial runs, whose calls wait
//! for feeds that arrive in later requests on the same connection, run on
//! a thread of their own.

use super::{Master, RunOptions, SessionConfig};
use crate::error::{Result, Status};
use crate::graph::GraphSpec;
use crate::net::message::{self as msg, Method, PayloadList};
use crate::net::{Reply, Request};
use crate::tensor::Tensor;
use crate::worker::remote::{devices_to_wire, stats_to_wire};
use crate::worker::service::answer;
use std::sync::Arc;
use std::time::Duration;

pub fn is_master_method(method: Method) -> bool {
    matches!(
        method,
        Method::CreateSession
            | Method::ExtendSession
            | Method::PartialRunSetup
            | Method::RunStep
            | Method::CloseSession
            | Method::ListDevices
            | Method::Reset
            | Method::MakeCallable
            | Method::RunCallable
            | Method::ReleaseCallable
    )
}

fn strings(v: &rkyv::vec::ArchivedVec<rkyv::string::ArchivedString>) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn run_options(o: &msg::ArchivedRunOptions) -> RunOptions {
    let ms = o.timeout_ms.to_native();
    RunOptions { timeout: (ms > 0).then(|| Duration::from_millis(ms)), trace: o.trace }
}

fn deserialize_graph(graph: &<GraphSpec as rkyv::Archive>::Archived) -> Result<GraphSpec> {
    rkyv::deserialize::<GraphSpec, rkyv::rancor::Error>(graph)
        .map_err(|e| Status::invalid_argument(format!("malformed graph: {e}")))
}

/// Handles one MasterService request.
pub fn handle(master: &Arc<Master>, request: Request, reply: Reply) {
    let result: Result<(rkyv::util::AlignedVec, Vec<Tensor>)> = match request.method() {
        Method::CreateSession => (|| {
            let m = request.meta::<msg::CreateSessionRequest>()?;
            let ms = m.config.operation_timeout_ms.to_native();
            let config = SessionConfig { operation_timeout: (ms > 0).then(|| Duration::from_millis(ms)) };
            let session = master.create_session(deserialize_graph(&m.graph)?, config)?;
            let response =
                msg::CreateSessionResponse { session_handle: session.handle().to_string(), graph_version: 0 };
            Ok((msg::encode(&response)?, Vec::new()))
        })(),
        Method::ExtendSession => (|| {
            let m = request.meta::<msg::ExtendSessionRequest>()?;
            let session = master.session(&m.session_handle)?;
            let version = session.extend(deserialize_graph(&m.graph)?, m.current_graph_version.to_native())?;
            Ok((msg::encode(&msg::ExtendSessionResponse { new_graph_version: version })?, Vec::new()))
        })(),
        Method::PartialRunSetup => (|| {
            let m = request.meta::<msg::PartialRunSetupRequest>()?;
            let session = master.session(&m.session_handle)?;
            let handle = session.partial_run_setup(&strings(&m.feeds), &strings(&m.fetches), &strings(&m.targets))?;
            Ok((msg::encode(&msg::PartialRunSetupResponse { partial_run_handle: handle })?, Vec::new()))
        })(),
        Method::RunStep => return run_step(master, request, reply),
        Method::CloseSession => (|| {
            let m = request.meta::<msg::CloseSessionRequest>()?;
            master.close_session(&m.session_handle)?;
            Ok((msg::encode(&msg::Empty {})?, Vec::new()))
        })(),
        Method::ListDevices => (|| {
            let m = request.meta::<msg::ListDevicesRequest>()?;
            let devices = if m.session_handle.is_empty() {
                master.list_devices()?
            } else {
                master.session(&m.session_handle)?.list_devices()
            };
            let devices = devices_to_wire(devices);
            Ok((msg::encode(&msg::ListDevicesResponse { devices })?, Vec::new()))
        })(),
        Method::Reset => (|| {
            let m = request.meta::<msg::ResetRequest>()?;
            let containers = strings(&m.containers);
            if m.session_handle.is_empty() {
                master.reset(&containers)?;
            } else {
                master.session(&m.session_handle)?.reset(&containers)?;
            }
            Ok((msg::encode(&msg::Empty {})?, Vec::new()))
        })(),
        Method::MakeCallable => (|| {
            let m = request.meta::<msg::MakeCallableRequest>()?;
            let session = master.session(&m.session_handle)?;
            let handle = session.make_callable(&strings(&m.feeds), &strings(&m.fetches), &strings(&m.targets))?;
            Ok((msg::encode(&msg::MakeCallableResponse { handle })?, Vec::new()))
        })(),
        Method::RunCallable => (|| {
            let m = request.meta::<msg::RunCallableRequest>()?;
            let session = master.session(&m.session_handle)?;
            let feeds = m.feeds.iter().map(|t| t.resolve(&request.payloads)).collect::<Result<Vec<_>>>()?;
            let (outputs, metadata) = session.run_callable(m.handle.to_native(), feeds, &run_options(&m.options))?;
            let mut payloads = PayloadList::new();
            let fetches = outputs.iter().map(|t| payloads.add(t)).collect();
            let response = msg::RunCallableResponse { fetches, step_stats: stats_to_wire(&metadata.step_stats) };
            Ok((msg::encode(&response)?, payloads.into_vec()))
        })(),
        Method::ReleaseCallable => (|| {
            let m = request.meta::<msg::ReleaseCallableRequest>()?;
            master.session(&m.session_handle)?.release_callable(m.handle.to_native())?;
            Ok((msg::encode(&msg::Empty {})?, Vec::new()))
        })(),
        other => Err(Status::unimplemented(format!("{other} is not a MasterService call"))),
    };
    match result {
        Ok((meta, payloads)) => reply.ok(&meta, &payloads),
        Err(e) => reply.err(e),
    }
}

fn run_step(master: &Arc<Master>, request: Request, reply: Reply) {
    let parsed = (|| {
        let m = request.meta::<msg::RunStepRequest>()?;
        let session = master.session(&m.session_handle)?;
        let mut feeds = Vec::with_capacity(m.feeds.len());
        for f in m.feeds.iter() {
            feeds.push((f.name.to_string(), f.tensor.resolve(&request.payloads)?));
        }
        Ok::<_, Status>((
            session,
            feeds,
            strings(&m.fetches),
            strings(&m.targets),
            run_options(&m.options),
            m.partial_run_handle.to_string(),
        ))
    })();
    let (session, feeds, fetches, targets, options, partial) = match parsed {
        Ok(p) => p,
        Err(e) => return reply.err(e),
    };
    let names = fetches.clone();
    let respond = move |outputs: Result<(Vec<Tensor>, Vec<crate::executor::NodeStats>)>, reply: Reply| match outputs {
        Ok((tensors, stats)) => {
            let mut payloads = PayloadList::new();
            let outputs = names
                .iter()
                .zip(&tensors)
                .map(|(name, t)| msg::NamedTensorRef { name: name.clone(), tensor: payloads.add(t) })
                .collect();
            answer(reply, &msg::RunStepResponse { outputs, step_stats: stats_to_wire(&stats) }, payloads.tensors());
        }
        Err(e) => reply.err(e),
    };
    if partial.is_empty() {
        let result = session.run(&options, feeds, &fetches, &targets).map(|(t, m)| (t, m.step_stats));
        respond(result, reply);
    } else {
        // Waits for feeds that later requests on this connection bring.
        std::thread::spawn(move || {
            let result = session.partial_run(&partial, feeds, &fetches, &options).map(|t| (t, Vec::new()));
            respond(result, reply);
        });
    }
}
