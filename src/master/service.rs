//! The wire side of the MasterService, server end: decodes a client's
//! request in place, calls the [`Master`], encodes the answer.
//!
//! Owns: one handler per MasterService method. A step runs on the transport
//! thread of the client's connection (the client is waiting for it anyway,
//! and a thread hop would cost a wake-up); partial runs, whose calls wait
//! for feeds that arrive in later requests on the same connection, run on
//! a thread of their own, and so do steps the client may cancel: its
//! CancelStep arrives on the same connection while the step runs.

use super::session::MasterSession;
use super::{Master, RunMetadata, RunOptions, SessionConfig};
use crate::error::{Result, Status};
use crate::executor::CancellationToken;
use crate::graph::GraphSpec;
use crate::net::message::{self as msg, Method, PayloadList};
use crate::net::{Reply, Request};
use crate::tensor::Tensor;
use crate::tensor::placement::SharedPlacement;
use crate::worker::remote::{devices_to_wire, stats_to_wire};
use crate::worker::service::answer;
use foldhash::HashMap;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A CancelStep that found no step is kept this long, in case its step is
/// still on the way.
const UNCLAIMED_CANCEL_TTL: Duration = Duration::from_secs(60);

/// The cancellation tokens of steps remote clients may cancel, by session
/// handle and the client's cancel id.
#[derive(Default)]
pub struct ClientCancels {
    tokens: Mutex<HashMap<(String, u64), (CancellationToken, Instant)>>,
}

impl ClientCancels {
    /// The token of (session, id), made if this is its first mention. The
    /// step holds the returned guard; dropping it forgets the entry.
    fn claim<'a>(&'a self, session: &str, id: u64) -> (CancellationToken, ClaimedCancel<'a>) {
        let token = self.find_or_make(session, id);
        (token, ClaimedCancel { cancels: self, key: (session.to_string(), id) })
    }

    /// Cancels (session, id); a step that has not arrived yet starts cancelled.
    fn cancel(&self, session: &str, id: u64) {
        self.find_or_make(session, id).cancel();
    }

    fn find_or_make(&self, session: &str, id: u64) -> CancellationToken {
        let mut tokens = self.tokens.lock();
        if tokens.len() >= 1024 {
            // Live steps' entries are never cancelled ones: only the
            // unclaimed cancels of steps that already ended expire.
            tokens.retain(|_, (token, made)| !token.is_cancelled() || made.elapsed() < UNCLAIMED_CANCEL_TTL);
        }
        tokens.entry((session.to_string(), id)).or_insert_with(|| (CancellationToken::new(), Instant::now())).0.clone()
    }
}

struct ClaimedCancel<'a> {
    cancels: &'a ClientCancels,
    key: (String, u64),
}

impl Drop for ClaimedCancel<'_> {
    fn drop(&mut self) {
        self.cancels.tokens.lock().remove(&self.key);
    }
}

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
            | Method::CancelStep
    )
}

fn strings(v: &rkyv::vec::ArchivedVec<rkyv::string::ArchivedString>) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A step's options as the client sent them, with the memory its answer
/// will be sent from (`placement`; `None` where the answer may come much
/// later, as a partial run's).
fn run_options(o: &msg::ArchivedRunOptions, placement: Option<SharedPlacement>) -> RunOptions {
    let ms = o.timeout_ms.to_native();
    RunOptions {
        timeout: (ms > 0).then(|| Duration::from_millis(ms)),
        trace: o.trace,
        cancel: None,
        reply_placement: placement,
    }
}

/// Runs `step` with the client's cancel token when it asked for one (on a
/// thread of its own, so that its CancelStep can be read meanwhile), or
/// right here. `cancel` names the session and the cancel id, built only
/// when the client sent an id (a step's name copy is not free).
fn run_maybe_cancellable(
    master: &Arc<Master>,
    cancel: Option<(String, u64)>,
    options: RunOptions,
    step: impl FnOnce(&RunOptions) + Send + 'static,
) {
    let Some((session, cancel_id)) = cancel else {
        return step(&options);
    };
    let master = master.clone();
    std::thread::spawn(move || with_client_cancel(&master, &session, cancel_id, options, step));
}

/// The session and id of a client's cancel, when it sent one (id nonzero).
fn client_cancel(session: &MasterSession, cancel_id: u64) -> Option<(String, u64)> {
    (cancel_id != 0).then(|| (session.handle().to_string(), cancel_id))
}

/// Runs `step` on this thread, with the token of (session, cancel id) when
/// the id is nonzero.
fn with_client_cancel(
    master: &Master,
    session: &str,
    cancel_id: u64,
    mut options: RunOptions,
    step: impl FnOnce(&RunOptions),
) {
    let _claimed = (cancel_id != 0).then(|| {
        let (token, claimed) = master.client_cancels.claim(session, cancel_id);
        options.cancel = Some(token);
        claimed
    });
    step(&options);
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
            let config = SessionConfig {
                operation_timeout: (ms > 0).then(|| Duration::from_millis(ms)),
                isolate_session_state: m.config.isolate_session_state,
            };
            let session = master.create_session(deserialize_graph(&m.graph)?, config)?;
            crate::counters::record_session_created();
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
        Method::RunCallable => return run_callable(master, request, reply),
        Method::CancelStep => (|| {
            let m = request.meta::<msg::CancelStepRequest>()?;
            master.session(&m.session_handle)?;
            master.client_cancels.cancel(&m.session_handle, m.cancel_id.to_native());
            Ok((msg::encode(&msg::Empty {})?, Vec::new()))
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

fn run_callable(master: &Arc<Master>, request: Request, reply: Reply) {
    let started = Instant::now();
    let parsed = (|| {
        let m = request.meta::<msg::RunCallableRequest>()?;
        let session = master.session(&m.session_handle)?;
        let feeds = m.feeds.iter().map(|t| t.resolve(&request.payloads)).collect::<Result<Vec<_>>>()?;
        Ok::<_, Status>((
            session,
            m.handle.to_native(),
            feeds,
            run_options(&m.options, request.output_placement()),
            m.options.cancel_id.to_native(),
        ))
    })();
    let (session, handle, feeds, options, cancel_id) = match parsed {
        Ok(p) => p,
        Err(e) => {
            crate::counters::record_step(started, false);
            return reply.err(e);
        }
    };
    run_maybe_cancellable(master, client_cancel(&session, cancel_id), options, move |options| {
        let result = session.run_callable(handle, feeds, options);
        crate::counters::record_step(started, result.is_ok());
        match result {
            Ok((outputs, metadata)) => {
                let mut payloads = PayloadList::new();
                let fetches = payloads.add_large_last(outputs.iter(), |_, tensor| tensor);
                let response = msg::RunCallableResponse { fetches, step_stats: metadata_to_wire(&metadata) };
                answer(reply, &response, payloads.tensors());
            }
            Err(e) => reply.err(e),
        }
    });
}

fn run_step(master: &Arc<Master>, request: Request, reply: Reply) {
    let started = Instant::now();
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
            run_options(&m.options, request.output_placement().filter(|_| m.partial_run_handle.is_empty())),
            m.options.cancel_id.to_native(),
            m.partial_run_handle.to_string(),
        ))
    })();
    let (session, feeds, fetches, targets, options, cancel_id, partial) = match parsed {
        Ok(p) => p,
        Err(e) => {
            crate::counters::record_step(started, false);
            return reply.err(e);
        }
    };
    let names = fetches.clone();
    let respond = move |outputs: Result<(Vec<Tensor>, RunMetadata)>, reply: Reply| {
        crate::counters::record_step(started, outputs.is_ok());
        match outputs {
            Ok((tensors, metadata)) => {
                let mut payloads = PayloadList::new();
                debug_assert_eq!(tensors.len(), names.len(), "a step answers each fetch once");
                let outputs = payloads.add_large_last(tensors.iter(), |index, tensor| msg::NamedTensorRef {
                    name: names.get(index).cloned().unwrap_or_default(),
                    tensor,
                });
                let response = msg::RunStepResponse { outputs, step_stats: metadata_to_wire(&metadata) };
                answer(reply, &response, payloads.tensors());
            }
            Err(e) => reply.err(e),
        }
    };
    if partial.is_empty() {
        run_maybe_cancellable(master, client_cancel(&session, cancel_id), options, move |options| {
            let result = session.run(options, feeds, &fetches, &targets);
            respond(result, reply);
        });
    } else {
        // Waits for feeds that later requests on this connection bring.
        let master = master.clone();
        let name = session.handle().to_string();
        std::thread::spawn(move || {
            with_client_cancel(&master, &name, cancel_id, options, |options| {
                let result =
                    session.partial_run(&partial, feeds, &fetches, options).map(|t| (t, RunMetadata::default()));
                respond(result, reply);
            });
        });
    }
}

/// A step's stats as a RunStep answer carries them, with the clocks.
fn metadata_to_wire(metadata: &RunMetadata) -> msg::StepStats {
    msg::StepStats { clocks: super::clock::clocks_to_wire(&metadata.clocks), ..stats_to_wire(&metadata.step_stats) }
}
