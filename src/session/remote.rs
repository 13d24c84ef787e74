//! A session on a master in another process, `ringflow://host:port`: every
//! call is a MasterService RPC; feeds go out as frame payloads and fetches
//! come back as tensors over the receive buffer (no copy).
//!
//! Owns: [`RemoteSession`] and the client's connection cache. Must not know
//! how the master runs a step.

use super::{CallableHandle, DeviceAttributes, RunMetadata, RunOptions, Session, SessionOptions};
use crate::error::{Code, Result, Status};
use crate::executor::cancellation::CancelRegistration;
use crate::graph::GraphSpec;
use crate::net::message::{self as msg, PayloadList};
use crate::net::{ChannelCache, Client, Response, TransportOptions};
use crate::tensor::Tensor;
use crate::worker::remote::{CONTROL_TIMEOUT, devices_from_wire, stats_from_wire};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A step running this long starts pinging its master, and again this long
/// after each answer.
const MASTER_PING_AFTER: Duration = Duration::from_secs(1);
/// A ping unanswered this long means the master is gone.
const MASTER_PING_TIMEOUT: Duration = Duration::from_secs(2);

/// When the next ping of a step in flight is due, on the coarse clock.
fn next_ping_ms() -> u64 {
    crate::coarse_clock::now_ms() + MASTER_PING_AFTER.as_millis() as u64
}

/// Whether the master of a step in flight still answers.
struct MasterWatch<'a> {
    session: &'a RemoteSession,
    /// On the coarse clock (milliseconds): checked every round of a wait.
    next_ping_ms: std::cell::Cell<u64>,
    lost: std::cell::Cell<Option<Status>>,
}

impl MasterWatch<'_> {
    /// Pings when due; true once the master failed to answer one.
    fn lost(&self) -> bool {
        if crate::coarse_clock::now_ms() < self.next_ping_ms.get() {
            return false;
        }
        match self.session.ping_master() {
            Ok(()) => {
                self.next_ping_ms.set(next_ping_ms());
                false
            }
            Err(e) => {
                self.lost.set(Some(Status::unavailable(format!(
                    "master at {} stopped answering while the step ran: {}",
                    self.session.address, e.message
                ))));
                true
            }
        }
    }
}

/// Extra time an RPC waits beyond a step's own deadline, for the master to
/// report the overrun itself.
const DEADLINE_SLACK: Duration = Duration::from_secs(2);

fn channels() -> &'static ChannelCache {
    static CHANNELS: OnceLock<ChannelCache> = OnceLock::new();
    CHANNELS
        .get_or_init(|| ChannelCache::new(TransportOptions { name: "client".into(), ..TransportOptions::default() }))
}

pub struct RemoteSession {
    address: String,
    client: Mutex<Arc<Client>>,
    handle: String,
    version: Mutex<u64>,
    operation_timeout: Option<Duration>,
    /// The connection steps ping the master on (see `call_step`).
    liveness: Mutex<Option<Arc<Client>>>,
}

fn run_options(options: &RunOptions, cancel_id: u64) -> msg::RunOptions {
    msg::RunOptions {
        timeout_ms: options.timeout.map_or(0, |t| t.as_millis().max(1) as u64),
        trace: options.trace,
        cancel_id,
    }
}

/// Cancel ids, unique within this process and so within each session.
static NEXT_CANCEL_ID: AtomicU64 = AtomicU64::new(1);

impl RemoteSession {
    /// Connects to the master at `address` and creates a session with `graph`.
    pub fn create(address: &str, graph: GraphSpec, options: &SessionOptions) -> Result<RemoteSession> {
        let client = channels().get(address)?;
        let request = msg::CreateSessionRequest {
            graph,
            config: msg::SessionConfig {
                operation_timeout_ms: options.config.operation_timeout.map_or(0, |t| t.as_millis() as u64),
                isolate_session_state: options.config.isolate_session_state,
                intra_op_threads: options.threads_per_device as u32,
                collect_stats: false,
            },
        };
        let response = client
            .call_rpc(&request, &[], Instant::now() + options.config.operation_timeout.unwrap_or(CONTROL_TIMEOUT))
            .map_err(|e| e.context(format_args!("creating a session on {address}")))?;
        let meta = response.meta::<msg::CreateSessionResponse>()?;
        Ok(RemoteSession {
            address: address.to_string(),
            client: Mutex::new(client),
            handle: meta.session_handle.to_string(),
            version: Mutex::new(meta.graph_version.to_native()),
            operation_timeout: options.config.operation_timeout,
            liveness: Mutex::new(None),
        })
    }

    pub fn handle(&self) -> &str {
        &self.handle
    }

    /// One round trip to the master's process on a connection of its own
    /// (the step's connection may be busy with the step). Any answer, an
    /// error included, means it lives.
    fn ping_master(&self) -> Result<()> {
        let mut slot = self.liveness.lock();
        let client = match slot.as_ref() {
            Some(c) if !c.is_dead() => c.clone(),
            _ => {
                let mut options = TransportOptions {
                    name: "client-liveness".into(),
                    connect_timeout_ms: MASTER_PING_TIMEOUT.as_millis() as u64,
                    ..TransportOptions::default()
                };
                options.shm.enabled = false;
                let fresh = Arc::new(Client::connect(&self.address, options)?);
                *slot = Some(fresh.clone());
                fresh
            }
        };
        drop(slot);
        match client.call_rpc(&msg::GetStatusRequest::default(), &[], Instant::now() + MASTER_PING_TIMEOUT) {
            Err(e) if matches!(e.code, Code::Unavailable | Code::DeadlineExceeded) => Err(e),
            _ => Ok(()),
        }
    }

    fn client(&self) -> Result<Arc<Client>> {
        let mut client = self.client.lock();
        if client.is_dead() {
            *client = channels().get(&self.address)?;
        }
        Ok(client.clone())
    }

    fn call<R>(&self, request: &R, payloads: &[Tensor], deadline: Instant) -> Result<Response>
    where
        R: msg::Rpc + msg::Encode,
    {
        self.client()?.call_rpc(request, payloads, deadline).map_err(|e| match e.code {
            Code::Unavailable => e.context(format_args!("master at {}", self.address)),
            _ => e,
        })
    }

    /// A step's call: besides its deadline, it gives up when the master
    /// stops answering pings on a connection of their own (a frozen master
    /// process or a silent network), so even a step without a deadline
    /// cannot hang its client. Steps shorter than [`MASTER_PING_AFTER`]
    /// send no ping.
    fn call_step<R>(&self, request: &R, payloads: &[Tensor], deadline: Instant) -> Result<Response>
    where
        R: msg::Rpc + msg::Encode,
    {
        let call = self.client()?.start_call(R::METHOD, &msg::encode(request)?, payloads)?;
        let watch =
            MasterWatch { session: self, next_ping_ms: std::cell::Cell::new(next_ping_ms()), lost: Default::default() };
        call.wait_unless(deadline, &|| watch.lost()).map_err(|e| match watch.lost.take() {
            Some(lost) => lost,
            None if e.code == Code::Unavailable => e.context(format_args!("master at {}", self.address)),
            None => e,
        })
    }

    /// The transport deadline of a step: its own deadline plus slack, or
    /// none (a dead master still fails the call: the connection closes).
    fn step_deadline(&self, options: &RunOptions) -> Instant {
        match options.timeout.or(self.operation_timeout) {
            Some(t) => Instant::now() + t + DEADLINE_SLACK,
            None => crate::executor::deadline::far_future(),
        }
    }

    /// When the step carries a cancel token: a cancel id for the master,
    /// and a registration that sends CancelStep if the token fires while
    /// the step runs.
    fn arm_cancel(&self, options: &RunOptions) -> Result<(u64, Option<CancelRegistration>)> {
        let Some(token) = &options.cancel else {
            return Ok((0, None));
        };
        let id = NEXT_CANCEL_ID.fetch_add(1, Ordering::Relaxed);
        let client = self.client()?;
        let request = msg::CancelStepRequest { session_handle: self.handle.clone(), cancel_id: id };
        let registration = token
            .register(move || {
                if let Err(e) = client.call_rpc(&request, &[], Instant::now() + CONTROL_TIMEOUT) {
                    tracing::warn!("could not cancel step {id} of session {}: {e}", request.session_handle);
                }
            })
            .ok_or_else(|| Status::cancelled("the step was cancelled before it ran"))?;
        Ok((id, Some(registration)))
    }

    fn run_step(
        &self,
        options: &RunOptions,
        feeds: Vec<(String, Tensor)>,
        fetches: &[String],
        targets: &[String],
        partial_run_handle: &str,
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        let (cancel_id, _cancel_registration) = self.arm_cancel(options)?;
        let mut payloads = PayloadList::new();
        let feeds =
            feeds.iter().map(|(name, t)| msg::NamedTensorRef { name: name.clone(), tensor: payloads.add(t) }).collect();
        let request = msg::RunStepRequest {
            session_handle: self.handle.clone(),
            feeds,
            fetches: fetches.to_vec(),
            targets: targets.to_vec(),
            options: run_options(options, cancel_id),
            partial_run_handle: partial_run_handle.to_string(),
        };
        let response = self.call_step(&request, payloads.tensors(), self.step_deadline(options))?;
        let meta = response.meta::<msg::RunStepResponse>()?;
        if meta.outputs.len() != fetches.len() {
            return Err(Status::internal(format!(
                "the master returned {} outputs for {} fetches",
                meta.outputs.len(),
                fetches.len()
            )));
        }
        let outputs = meta.outputs.iter().map(|o| o.tensor.resolve(&response.payloads)).collect::<Result<Vec<_>>>()?;
        Ok((outputs, metadata_from_wire(&meta.step_stats)))
    }
}

impl Session for RemoteSession {
    fn graph_version(&self) -> Result<u64> {
        Ok(*self.version.lock())
    }

    fn extend(&self, graph: GraphSpec, current_version: u64) -> Result<u64> {
        let request = msg::ExtendSessionRequest {
            session_handle: self.handle.clone(),
            graph,
            current_graph_version: current_version,
        };
        let response = self.call(&request, &[], Instant::now() + CONTROL_TIMEOUT)?;
        let version = response.meta::<msg::ExtendSessionResponse>()?.new_graph_version.to_native();
        *self.version.lock() = version;
        Ok(version)
    }

    fn run(
        &self,
        options: &RunOptions,
        feeds: Vec<(String, Tensor)>,
        fetches: &[String],
        targets: &[String],
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        self.run_step(options, feeds, fetches, targets, "")
    }

    fn partial_run_setup(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<String> {
        let request = msg::PartialRunSetupRequest {
            session_handle: self.handle.clone(),
            feeds: feeds.to_vec(),
            fetches: fetches.to_vec(),
            targets: targets.to_vec(),
        };
        let response = self.call(&request, &[], Instant::now() + CONTROL_TIMEOUT)?;
        Ok(response.meta::<msg::PartialRunSetupResponse>()?.partial_run_handle.to_string())
    }

    fn partial_run(&self, handle: &str, feeds: Vec<(String, Tensor)>, fetches: &[String]) -> Result<Vec<Tensor>> {
        self.run_step(&RunOptions::default(), feeds, fetches, &[], handle).map(|(t, _)| t)
    }

    fn make_callable(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<CallableHandle> {
        let request = msg::MakeCallableRequest {
            session_handle: self.handle.clone(),
            feeds: feeds.to_vec(),
            fetches: fetches.to_vec(),
            targets: targets.to_vec(),
        };
        let response = self.call(&request, &[], Instant::now() + CONTROL_TIMEOUT)?;
        Ok(response.meta::<msg::MakeCallableResponse>()?.handle.to_native())
    }

    fn run_callable(
        &self,
        handle: CallableHandle,
        feeds: Vec<Tensor>,
        options: &RunOptions,
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        let (cancel_id, _cancel_registration) = self.arm_cancel(options)?;
        let mut payloads = PayloadList::new();
        let refs = feeds.iter().map(|t| payloads.add(t)).collect();
        let request = msg::RunCallableRequest {
            session_handle: self.handle.clone(),
            handle,
            feeds: refs,
            options: run_options(options, cancel_id),
        };
        let response = self.call_step(&request, payloads.tensors(), self.step_deadline(options))?;
        let meta = response.meta::<msg::RunCallableResponse>()?;
        let outputs = meta.fetches.iter().map(|t| t.resolve(&response.payloads)).collect::<Result<Vec<_>>>()?;
        Ok((outputs, metadata_from_wire(&meta.step_stats)))
    }

    fn release_callable(&self, handle: CallableHandle) -> Result<()> {
        let request = msg::ReleaseCallableRequest { session_handle: self.handle.clone(), handle };
        self.call(&request, &[], Instant::now() + CONTROL_TIMEOUT).map(drop)
    }

    fn list_devices(&self) -> Result<Vec<DeviceAttributes>> {
        let response = self.call(
            &msg::ListDevicesRequest { session_handle: self.handle.clone() },
            &[],
            Instant::now() + CONTROL_TIMEOUT,
        )?;
        Ok(devices_from_wire(&response.meta::<msg::ListDevicesResponse>()?.devices))
    }

    fn reset(&self, containers: &[String]) -> Result<()> {
        let request = msg::ResetRequest { session_handle: self.handle.clone(), containers: containers.to_vec() };
        self.call(&request, &[], Instant::now() + CONTROL_TIMEOUT).map(drop)
    }

    fn close(&self) -> Result<()> {
        let request = msg::CloseSessionRequest { session_handle: self.handle.clone() };
        match self.call(&request, &[], Instant::now() + CONTROL_TIMEOUT) {
            Ok(_) => Ok(()),
            // Closed twice: nothing left to release.
            Err(e) if e.code == Code::Aborted => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Lists the devices of the cluster a master at `address` serves, without
/// a session.
pub fn list_cluster_devices(address: &str) -> Result<Vec<DeviceAttributes>> {
    let client = channels().get(address)?;
    let response = client.call_rpc(&msg::ListDevicesRequest::default(), &[], Instant::now() + CONTROL_TIMEOUT)?;
    Ok(devices_from_wire(&response.meta::<msg::ListDevicesResponse>()?.devices))
}

/// A RunStep's stats: every task's nodes on the master's clock, and how
/// each task's clock was aligned.
fn metadata_from_wire(stats: &msg::ArchivedStepStats) -> RunMetadata {
    RunMetadata { step_stats: stats_from_wire(stats), clocks: crate::master::clock::clocks_from_wire(&stats.clocks) }
}
