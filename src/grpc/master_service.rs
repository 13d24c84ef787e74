//! TensorFlow's MasterService over gRPC, server end: the HTTP/2
//! connections that `net::Server` hands over (they opened with HTTP/2's
//! preface) are served one thread each, on a current-thread tokio runtime;
//! each call's TensorFlow protobuf is decoded and the step takes the same
//! path as a native one, through the [`Master`] and its `MasterSession`s.
//!
//! Owns: the connection threads, per-connection HTTP/2 serving, one handler
//! per MasterService method (`/tensorflow.MasterService/NAME`), and the
//! RunOptions TensorFlow's client attached to each callable. Must not run
//! steps itself or touch the native transport: everything a call does goes
//! through the master.
//!
//! A call alone on its connection runs on the connection's thread, so its
//! answer is written by the thread that computed it, without waking
//! anyone; a call that overlaps others on the connection, and a partial
//! run's step (which waits for feeds that later calls bring), run on the
//! runtime's blocking threads instead.

use super::prediction_service;
use super::proto::{self, NO_TRACE};
use super::tensor_proto::{tensor_from_proto, tensor_to_proto};
use super::wire::{self, CONTENT_TYPE, SERVICE_PREFIX};
use crate::error::{Result, Status};
use crate::executor::NodeStats;
use crate::graph::import::graph_from_proto;
use crate::master::{Master, RunOptions, SessionConfig};
use crate::net::Http2Handoff;
use crate::serving::Models;
use crate::tensor::Tensor;
use crate::worker::DeviceAttributes;
use bytes::Bytes;
use foldhash::{HashMap, HashMapExt};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// gRPC connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 256;
/// Calls in flight on one connection (HTTP/2's concurrent streams).
const MAX_STREAMS_PER_CONNECTION: u32 = 64;
/// How long a new connection may take to finish HTTP/2's handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request's body may take to arrive when the call sets no
/// deadline of its own.
const BODY_TIMEOUT: Duration = Duration::from_secs(60);

struct FrontEnd {
    master: Arc<Master>,
    /// Live connections' sockets, to shut them when the server stops.
    connections: Mutex<HashMap<u64, std::net::TcpStream>>,
    next_connection: AtomicU64,
    /// The RunOptions each callable was made with, by (session, handle):
    /// TensorFlow's RunCallable carries none of its own.
    callable_options: Mutex<HashMap<(String, i64), RunOptions>>,
    /// The models TensorFlow Serving's services answer for, once loaded.
    models: std::sync::OnceLock<Arc<Models>>,
}

/// The gRPC front end of one server's master.
pub struct GrpcMasterService {
    front: Arc<FrontEnd>,
}

impl GrpcMasterService {
    pub fn new(master: Arc<Master>) -> GrpcMasterService {
        GrpcMasterService {
            front: Arc::new(FrontEnd {
                master,
                connections: Mutex::new(HashMap::new()),
                next_connection: AtomicU64::new(1),
                callable_options: Mutex::new(HashMap::new()),
                models: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Answers TensorFlow Serving's PredictionService and ModelService
    /// for `models` from now on; `false` if models were already set.
    pub fn serve_models(&self, models: Arc<Models>) -> bool {
        self.front.models.set(models).is_ok()
    }
}

impl Drop for GrpcMasterService {
    fn drop(&mut self) {
        // Each connection's thread sees its socket end and returns; steps
        // in flight end at their own deadlines.
        for stream in self.front.connections.lock().values() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Http2Handoff for GrpcMasterService {
    fn take_over(&self, stream: std::net::TcpStream, peer: &str) {
        let id = self.front.next_connection.fetch_add(1, Ordering::Relaxed);
        {
            let mut connections = self.front.connections.lock();
            if connections.len() >= MAX_CONNECTIONS {
                tracing::warn!("refusing gRPC connection from {peer}: {MAX_CONNECTIONS} open");
                return;
            }
            match stream.try_clone() {
                Ok(clone) => connections.insert(id, clone),
                Err(e) => {
                    tracing::warn!("gRPC connection from {peer}: {e}");
                    return;
                }
            };
        }
        let front = self.front.clone();
        let peer = peer.to_string();
        let spawned = std::thread::Builder::new().name(format!("rf-grpc-{id}")).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .max_blocking_threads(MAX_STREAMS_PER_CONNECTION as usize)
                .build();
            match runtime {
                Ok(runtime) => {
                    runtime.block_on(async {
                        let stream =
                            stream.set_nonblocking(true).and_then(|()| tokio::net::TcpStream::from_std(stream));
                        match stream {
                            Ok(stream) => serve_connection(&front, stream, &peer).await,
                            Err(e) => tracing::warn!("gRPC connection from {peer}: {e}"),
                        }
                    });
                    // Blocking calls still running end at their deadlines.
                    runtime.shutdown_background();
                }
                Err(e) => tracing::warn!("gRPC connection from {peer}: starting its runtime: {e}"),
            }
            front.connections.lock().remove(&id);
        });
        if let Err(e) = spawned {
            tracing::warn!("gRPC connection: spawning its thread: {e}");
            self.front.connections.lock().remove(&id);
        }
    }
}

async fn serve_connection(front: &Arc<FrontEnd>, stream: tokio::net::TcpStream, peer: &str) {
    let _ = stream.set_nodelay(true);
    let handshake = h2::server::Builder::new()
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .initial_window_size(4 << 20)
        .initial_connection_window_size(16 << 20)
        .max_frame_size(1 << 20)
        .max_header_list_size(64 << 10)
        .handshake::<_, Bytes>(stream);
    let mut connection = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(connection)) => connection,
        Ok(Err(e)) => {
            tracing::debug!("HTTP/2 handshake with {peer}: {e}");
            return;
        }
        Err(_) => {
            tracing::debug!("HTTP/2 handshake with {peer} timed out");
            return;
        }
    };
    let in_flight = Arc::new(AtomicUsize::new(0));
    while let Some(next) = connection.accept().await {
        match next {
            Ok((request, respond)) => {
                let front = front.clone();
                let in_flight = in_flight.clone();
                in_flight.fetch_add(1, Ordering::AcqRel);
                tokio::spawn(async move {
                    serve_call(&front, request, respond, &in_flight).await;
                    in_flight.fetch_sub(1, Ordering::AcqRel);
                });
            }
            Err(e) => {
                tracing::debug!("gRPC connection from {peer}: {e}");
                return;
            }
        }
    }
}

/// An HTTP-level refusal (not a gRPC call at all).
fn refuse(mut respond: h2::server::SendResponse<Bytes>, status: http::StatusCode) {
    let mut response = http::Response::new(());
    *response.status_mut() = status;
    let _ = respond.send_response(response, true);
}

async fn serve_call(
    front: &Arc<FrontEnd>,
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    in_flight: &AtomicUsize,
) {
    let (parts, mut body) = request.into_parts();
    if parts.method != http::Method::POST {
        return refuse(respond, http::StatusCode::METHOD_NOT_ALLOWED);
    }
    let is_grpc = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(CONTENT_TYPE.as_bytes()));
    if !is_grpc {
        return refuse(respond, http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    let call_timeout = parts.headers.get("grpc-timeout").and_then(|v| wire::parse_timeout(v.as_bytes()));
    let path = parts.uri.path();
    let route = match path.strip_prefix(SERVICE_PREFIX) {
        Some(method) => Some((Service::Master, method)),
        None => path.strip_prefix('/').and_then(|p| p.split_once('/')).and_then(|(service, method)| {
            [prediction_service::PREDICTION_SERVICE, prediction_service::MODEL_SERVICE]
                .into_iter()
                .find(|known| *known == service)
                .map(|known| (Service::Serving(known), method))
        }),
    };
    let outcome = match route {
        None => Err(Status::unimplemented(format!(
            "{path}: not a method of tensorflow.MasterService or TensorFlow Serving's services"
        ))),
        Some((service, method)) => {
            let what = format!("{method} request");
            match tokio::time::timeout(call_timeout.unwrap_or(BODY_TIMEOUT), wire::read_message(&mut body, &what)).await
            {
                Err(_) => Err(Status::deadline_exceeded(format!("{what}: its body did not arrive in time"))),
                Ok(Err(e)) => Err(e),
                Ok(Ok(message)) => {
                    let waits_for_later_calls =
                        service == Service::Master && method == "RunStep" && is_partial_run_step(&message);
                    if waits_for_later_calls || in_flight.load(Ordering::Acquire) > 1 {
                        let (front, method) = (front.clone(), method.to_string());
                        tokio::task::spawn_blocking(move || {
                            guarded_dispatch(&front, service, &method, message, call_timeout)
                        })
                        .await
                        .unwrap_or_else(|e| Err(Status::internal(format!("{path}: {e}"))))
                    } else {
                        guarded_dispatch(front, service, method, message, call_timeout)
                    }
                }
            }
        }
    };
    let mut response = http::Response::new(());
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(CONTENT_TYPE));
    match outcome {
        Ok(message) => {
            let Ok(mut stream) = respond.send_response(response, false) else {
                return;
            };
            if stream.send_data(message, false).is_err() {
                return;
            }
            let mut trailers = http::HeaderMap::new();
            wire::status_headers(&Ok(()), &mut trailers);
            let _ = stream.send_trailers(trailers);
        }
        Err(status) => {
            // A trailers-only answer: the status rides in the headers.
            wire::status_headers(&Err(status), response.headers_mut());
            let _ = respond.send_response(response, true);
        }
    }
}

/// Whether a RunStep request names a partial run (field 6, read without
/// decoding the feeds).
fn is_partial_run_step(message: &Bytes) -> bool {
    #[derive(prost::Message)]
    struct PartialRunHandleOnly {
        #[prost(string, tag = "6")]
        partial_run_handle: String,
    }
    <PartialRunHandleOnly as prost::Message>::decode(message.clone()).is_ok_and(|m| !m.partial_run_handle.is_empty())
}

/// Which service a call's path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    Master,
    /// One of TensorFlow Serving's, by its full name.
    Serving(&'static str),
}

/// [`dispatch`] (or TensorFlow Serving's), with a panicking handler
/// answered as Internal.
fn guarded_dispatch(
    front: &FrontEnd,
    service: Service,
    method: &str,
    message: Bytes,
    call_timeout: Option<Duration>,
) -> Result<Bytes> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match service {
        Service::Master => dispatch(front, method, message, call_timeout),
        Service::Serving(name) => match front.models.get() {
            Some(models) => prediction_service::dispatch(models, name, method, message, call_timeout),
            None => Err(Status::unimplemented(format!(
                "/{name}/{method}: this server serves no models (start it with `ringflow serve` or `ringflow server --model NAME=PATH`)"
            ))),
        },
    }))
    .unwrap_or_else(|_| Err(Status::internal(format!("{method} handler panicked"))))
}

/// Runs one decoded call; the answer is the encoded, prefixed response.
fn dispatch(front: &FrontEnd, method: &str, message: Bytes, call_timeout: Option<Duration>) -> Result<Bytes> {
    let master = &front.master;
    match method {
        "CreateSession" => {
            let request: proto::CreateSessionRequest = wire::decode(message, "CreateSessionRequest")?;
            let graph = graph_from_proto(&request.graph_def.unwrap_or_default())?;
            let config = request.config.unwrap_or_default();
            let config = SessionConfig {
                operation_timeout: millis(config.operation_timeout_in_ms),
                isolate_session_state: config.isolate_session_state,
            };
            let session = master.create_session(graph, config)?;
            let response =
                proto::CreateSessionResponse { session_handle: session.handle().to_string(), graph_version: 0 };
            Ok(wire::encode_message(&response))
        }
        "ExtendSession" => {
            let request: proto::ExtendSessionRequest = wire::decode(message, "ExtendSessionRequest")?;
            let session = master.session(&request.session_handle)?;
            let graph = graph_from_proto(&request.graph_def.unwrap_or_default())?;
            let version = u64::try_from(request.current_graph_version).map_err(|_| {
                Status::invalid_argument(format!("graph version {} is negative", request.current_graph_version))
            })?;
            let new_version = session.extend(graph, version)?;
            Ok(wire::encode_message(&proto::ExtendSessionResponse { new_graph_version: new_version as i64 }))
        }
        "PartialRunSetup" => {
            let request: proto::PartialRunSetupRequest = wire::decode(message, "PartialRunSetupRequest")?;
            let session = master.session(&request.session_handle)?;
            let handle = session.partial_run_setup(&request.feed, &request.fetch, &request.target)?;
            Ok(wire::encode_message(&proto::PartialRunSetupResponse { partial_run_handle: handle }))
        }
        "RunStep" => {
            let request: proto::RunStepRequest = wire::decode(message, "RunStepRequest")?;
            let in_body = request.store_errors_in_response_body;
            match run_step(front, request, call_timeout) {
                Ok(response) => Ok(wire::encode_message(&response)),
                // TensorFlow's client asks for errors in the body and
                // raises them from there.
                Err(e) if in_body => Ok(wire::encode_message(&proto::RunStepResponse {
                    status_code: e.code as i32,
                    status_error_message: e.message.clone(),
                    ..Default::default()
                })),
                Err(e) => Err(e),
            }
        }
        "CloseSession" => {
            let request: proto::CloseSessionRequest = wire::decode(message, "CloseSessionRequest")?;
            front.callable_options.lock().retain(|(session, _), _| *session != request.session_handle);
            master.close_session(&request.session_handle)?;
            Ok(wire::encode_message(&proto::CloseSessionResponse {}))
        }
        "ListDevices" => {
            let request: proto::ListDevicesRequest = wire::decode(message, "ListDevicesRequest")?;
            let devices = if request.session_handle.is_empty() {
                master.list_devices()?
            } else {
                master.session(&request.session_handle)?.list_devices()
            };
            Ok(wire::encode_message(&devices_to_proto(master.task_name(), devices)))
        }
        "Reset" => {
            let request: proto::ResetRequest = wire::decode(message, "ResetRequest")?;
            master.reset(&request.container)?;
            Ok(wire::encode_message(&proto::ResetResponse {}))
        }
        "MakeCallable" => {
            let request: proto::MakeCallableRequest = wire::decode(message, "MakeCallableRequest")?;
            let session = master.session(&request.session_handle)?;
            let callable = request.options.unwrap_or_default();
            let handle = session.make_callable(&callable.feed, &callable.fetch, &callable.target)?;
            let handle = i64::try_from(handle)
                .map_err(|_| Status::internal(format!("callable handle {handle} does not fit TensorFlow's int64")))?;
            let options = run_options(callable.run_options.as_ref(), None);
            front.callable_options.lock().insert((request.session_handle, handle), options);
            Ok(wire::encode_message(&proto::MakeCallableResponse { handle }))
        }
        "RunCallable" => {
            let request: proto::RunCallableRequest = wire::decode(message, "RunCallableRequest")?;
            let session = master.session(&request.session_handle)?;
            let key = (request.session_handle, request.handle);
            let mut options = front.callable_options.lock().get(&key).cloned().unwrap_or_default();
            options.timeout = earliest(options.timeout, call_timeout);
            let feeds = request
                .feed
                .iter()
                .enumerate()
                .map(|(i, t)| tensor_from_proto(t, &format!("callable {} feed {i}", key.1)))
                .collect::<Result<Vec<_>>>()?;
            let handle = u64::try_from(key.1)
                .map_err(|_| Status::invalid_argument(format!("callable handle {} is not valid", key.1)))?;
            let (outputs, metadata) = session.run_callable(handle, feeds, &options)?;
            let fetch = outputs.iter().map(tensor_to_proto).collect::<Result<Vec<_>>>()?;
            let metadata = options.trace.then(|| metadata_of(&metadata.step_stats));
            Ok(wire::encode_message(&proto::RunCallableResponse { fetch, metadata }))
        }
        "ReleaseCallable" => {
            let request: proto::ReleaseCallableRequest = wire::decode(message, "ReleaseCallableRequest")?;
            let session = master.session(&request.session_handle)?;
            front.callable_options.lock().remove(&(request.session_handle, request.handle));
            let handle = u64::try_from(request.handle)
                .map_err(|_| Status::invalid_argument(format!("callable handle {} is not valid", request.handle)))?;
            session.release_callable(handle)?;
            Ok(wire::encode_message(&proto::ReleaseCallableResponse {}))
        }
        other => Err(Status::unimplemented(format!("tensorflow.MasterService has no method {other} here"))),
    }
}

fn millis(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().filter(|&ms| ms > 0).map(Duration::from_millis)
}

fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A step's options: TensorFlow's RunOptions and the call's own deadline,
/// whichever ends first.
fn run_options(options: Option<&proto::RunOptions>, call_timeout: Option<Duration>) -> RunOptions {
    let (timeout, trace) = options.map_or((None, false), |o| (millis(o.timeout_in_ms), o.trace_level != NO_TRACE));
    RunOptions { timeout: earliest(timeout, call_timeout), trace, cancel: None, reply_placement: None }
}

fn run_step(
    front: &FrontEnd,
    request: proto::RunStepRequest,
    call_timeout: Option<Duration>,
) -> Result<proto::RunStepResponse> {
    let session = front.master.session(&request.session_handle)?;
    let options = run_options(request.options.as_ref(), call_timeout);
    let mut feeds: Vec<(String, Tensor)> = Vec::with_capacity(request.feed.len());
    for named in request.feed {
        let tensor = match &named.tensor {
            Some(t) => tensor_from_proto(t, &format!("feed '{}'", named.name))?,
            None => return Err(Status::invalid_argument(format!("feed '{}' carries no tensor", named.name))),
        };
        feeds.push((named.name, tensor));
    }
    let (outputs, stats) = if request.partial_run_handle.is_empty() {
        let (outputs, metadata) = session.run(&options, feeds, &request.fetch, &request.target)?;
        (outputs, metadata.step_stats)
    } else {
        (session.partial_run(&request.partial_run_handle, feeds, &request.fetch, &options)?, Vec::new())
    };
    let mut tensor = Vec::with_capacity(outputs.len());
    for (name, output) in request.fetch.into_iter().zip(&outputs) {
        tensor.push(proto::NamedTensorProto { name, tensor: Some(tensor_to_proto(output)?) });
    }
    let metadata = options.trace.then(|| metadata_of(&stats));
    Ok(proto::RunStepResponse { tensor, metadata, ..Default::default() })
}

/// Step stats as TensorFlow's RunMetadata: nodes grouped by device, times
/// in wall-clock microseconds.
pub fn metadata_of(stats: &[NodeStats]) -> proto::RunMetadata {
    let mut by_device: Vec<proto::DeviceStepStats> = Vec::new();
    for node in stats {
        let index = match by_device.iter().position(|d| d.device == node.device) {
            Some(i) => i,
            None => {
                by_device.push(proto::DeviceStepStats { device: node.device.clone(), ..Default::default() });
                by_device.len() - 1
            }
        };
        let duration = node.end_us.saturating_sub(node.start_us) as i64;
        by_device[index].node_stats.push(proto::NodeExecStats {
            node_name: node.node.clone(),
            all_start_micros: node.start_us as i64,
            op_start_rel_micros: 0,
            op_end_rel_micros: duration,
            all_end_rel_micros: duration,
            timeline_label: format!("{} = {}()", node.node, node.op),
            thread_id: node.thread,
        });
    }
    proto::RunMetadata { step_stats: Some(proto::StepStats { dev_stats: by_device }) }
}

/// The master's own task's devices are local, every other task's remote.
fn devices_to_proto(master_task: &str, devices: Vec<DeviceAttributes>) -> proto::ListDevicesResponse {
    let mut response = proto::ListDevicesResponse::default();
    for device in devices {
        let is_local = device.name.strip_prefix(master_task).is_some_and(|rest| rest.starts_with('/'));
        let attributes = proto::DeviceAttributes {
            name: device.name,
            device_type: device.device_type,
            memory_limit: i64::try_from(device.memory_limit).unwrap_or(i64::MAX),
            incarnation: device.incarnation,
            physical_device_desc: String::new(),
        };
        if is_local {
            response.local_device.push(attributes);
        } else {
            response.remote_device.push(attributes);
        }
    }
    response
}
