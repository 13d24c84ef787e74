//! A session over TensorFlow's MasterService on gRPC, `grpc://host:port`:
//! the calls TensorFlow's own client makes, with its messages, so the gRPC
//! front end (of ringflow, or of a TensorFlow server) is reachable from
//! Rust and from `ringflow run` / `ringflow devices`.
//!
//! Owns: [`GrpcSession`], [`GrpcChannel`] (one HTTP/2 connection on a
//! current-thread tokio runtime that the calling thread drives while it
//! waits, so an answer wakes the caller itself and no runtime thread) and
//! the client side of the status mapping. Must not know how a master runs a step.

use super::proto;
use super::tensor_proto::{tensor_from_proto, tensor_to_proto};
use super::wire::{self, CONTENT_TYPE, SERVICE_PREFIX};
use crate::error::{Code, Result, Status};
use crate::executor::NodeStats;
use crate::graph::GraphSpec;
use crate::graph::import::graph_to_proto;
use crate::session::{CallableHandle, DeviceAttributes, RunMetadata, RunOptions, Session, SessionOptions};
use crate::tensor::Tensor;
use bytes::Bytes;
use parking_lot::Mutex;
use std::time::Duration;

/// Deadline of calls that set none (session creation, devices, ...).
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a step's call waits beyond the step's own deadline, for the master
/// to report the overrun itself.
const DEADLINE_SLACK: Duration = Duration::from_secs(2);

/// One HTTP/2 connection to a MasterService.
pub struct GrpcChannel {
    address: String,
    runtime: tokio::runtime::Runtime,
    sender: h2::client::SendRequest<Bytes>,
}

impl GrpcChannel {
    pub fn connect(address: &str) -> Result<GrpcChannel> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| Status::internal(format!("starting a gRPC client runtime: {e}")))?;
        let sender = runtime.block_on(async {
            let connect = async {
                let stream = tokio::net::TcpStream::connect(address)
                    .await
                    .map_err(|e| Status::unavailable(format!("connecting to {address}: {e}")))?;
                let _ = stream.set_nodelay(true);
                let (sender, connection) = h2::client::Builder::new()
                    .initial_window_size(4 << 20)
                    .initial_connection_window_size(16 << 20)
                    .max_frame_size(1 << 20)
                    .handshake::<_, Bytes>(stream)
                    .await
                    .map_err(|e| wire::h2_status(&e, &format!("HTTP/2 handshake with {address}")))?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!("gRPC connection: {e}");
                    }
                });
                Ok::<_, Status>(sender)
            };
            tokio::time::timeout(CONNECT_TIMEOUT, connect)
                .await
                .map_err(|_| Status::unavailable(format!("connecting to {address} timed out")))?
        })?;
        Ok(GrpcChannel { address: address.to_string(), runtime, sender })
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// One unary call of `/tensorflow.MasterService/{method}`; the answer
    /// or the call's status as a [`Status`].
    pub fn call<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        method: &str,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp> {
        self.call_path(&format!("{SERVICE_PREFIX}{method}"), request, timeout)
    }

    /// One unary call of `/{service}/{method}` (TensorFlow Serving's
    /// `tensorflow.serving.PredictionService`, say).
    pub fn call_service<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        service: &str,
        method: &str,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp> {
        self.call_path(&format!("/{service}/{method}"), request, timeout)
    }

    fn call_path<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        path: &str,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp> {
        let body = wire::encode_message(request);
        let method = path.rsplit('/').next().unwrap_or(path);
        let what = format!("{method} on {}", self.address);
        let call = async {
            let mut sender = self.sender.clone().ready().await.map_err(|e| wire::h2_status(&e, &what))?;
            let http_request = http::Request::builder()
                .method(http::Method::POST)
                .uri(format!("http://{}{path}", self.address))
                .header(http::header::CONTENT_TYPE, CONTENT_TYPE)
                .header("te", "trailers")
                .header("grpc-timeout", wire::format_timeout(timeout))
                .body(())
                .map_err(|e| Status::internal(format!("{what}: {e}")))?;
            let (response, mut stream) =
                sender.send_request(http_request, false).map_err(|e| wire::h2_status(&e, &what))?;
            stream.send_data(body, true).map_err(|e| wire::h2_status(&e, &what))?;
            let response = response.await.map_err(|e| wire::h2_status(&e, &what))?;
            let (parts, mut recv) = response.into_parts();
            if parts.status != http::StatusCode::OK {
                return Err(Status::unavailable(format!("{what}: HTTP status {}", parts.status)));
            }
            if let Some(outcome) = wire::status_of(&parts.headers) {
                outcome?;
            }
            let message = wire::read_message(&mut recv, &what).await?;
            let trailers = recv.trailers().await.map_err(|e| wire::h2_status(&e, &what))?;
            match trailers.as_ref().and_then(wire::status_of) {
                Some(outcome) => outcome?,
                None => return Err(Status::internal(format!("{what}: the answer has no grpc-status"))),
            }
            wire::decode::<Resp>(message, &what)
        };
        self.runtime.block_on(async {
            tokio::time::timeout(timeout, call)
                .await
                .map_err(|_| Status::deadline_exceeded(format!("{what}: no answer within {timeout:?}")))?
        })
    }
}

pub struct GrpcSession {
    channel: GrpcChannel,
    handle: String,
    version: Mutex<u64>,
    operation_timeout: Option<Duration>,
}

fn devices_from_proto(response: proto::ListDevicesResponse) -> Vec<DeviceAttributes> {
    response
        .local_device
        .into_iter()
        .chain(response.remote_device)
        .map(|d| DeviceAttributes {
            name: d.name,
            device_type: d.device_type,
            incarnation: d.incarnation,
            memory_limit: u64::try_from(d.memory_limit).unwrap_or(0),
        })
        .collect()
}

/// Every device of the cluster the master at `address` serves.
pub fn list_cluster_devices(address: &str) -> Result<Vec<DeviceAttributes>> {
    let channel = GrpcChannel::connect(address)?;
    let response: proto::ListDevicesResponse =
        channel.call("ListDevices", &proto::ListDevicesRequest::default(), CONTROL_TIMEOUT)?;
    Ok(devices_from_proto(response))
}

/// TensorFlow's Reset on the master at `address`.
pub fn reset(address: &str, containers: &[String]) -> Result<()> {
    let channel = GrpcChannel::connect(address)?;
    let request = proto::ResetRequest { container: containers.to_vec(), device_filters: Vec::new() };
    channel.call::<_, proto::ResetResponse>("Reset", &request, CONTROL_TIMEOUT).map(|_| ())
}

fn stats_of(metadata: Option<proto::RunMetadata>) -> Vec<NodeStats> {
    let Some(stats) = metadata.and_then(|m| m.step_stats) else {
        return Vec::new();
    };
    let mut nodes = Vec::new();
    for device in stats.dev_stats {
        for node in device.node_stats {
            let op = node
                .timeline_label
                .split_once(" = ")
                .map(|(_, op)| op.trim_end_matches("()").to_string())
                .unwrap_or_default();
            let start = u64::try_from(node.all_start_micros).unwrap_or(0);
            nodes.push(NodeStats {
                node: node.node_name,
                op,
                device: device.device.clone(),
                start_us: start,
                end_us: start + u64::try_from(node.all_end_rel_micros).unwrap_or(0),
                thread: node.thread_id,
                frame: String::new(),
                iter: 0,
                rendezvous_key: String::new(),
                bytes: 0,
            });
        }
    }
    nodes
}

fn run_options_proto(options: &RunOptions) -> proto::RunOptions {
    proto::RunOptions {
        trace_level: if options.trace { proto::FULL_TRACE } else { proto::NO_TRACE },
        timeout_in_ms: options.timeout.map_or(0, |t| t.as_millis().max(1) as i64),
        ..Default::default()
    }
}

fn feeds_to_proto(feeds: Vec<(String, Tensor)>) -> Result<Vec<proto::NamedTensorProto>> {
    feeds
        .into_iter()
        .map(|(name, t)| Ok(proto::NamedTensorProto { tensor: Some(tensor_to_proto(&t)?), name }))
        .collect()
}

impl GrpcSession {
    /// Connects to the master at `address` and creates a session with `graph`.
    pub fn create(address: &str, graph: GraphSpec, options: &SessionOptions) -> Result<GrpcSession> {
        let channel = GrpcChannel::connect(address)?;
        let config = proto::ConfigProto {
            operation_timeout_in_ms: options.config.operation_timeout.map_or(0, |t| t.as_millis() as i64),
            isolate_session_state: options.config.isolate_session_state,
            ..Default::default()
        };
        let request = proto::CreateSessionRequest {
            graph_def: Some(graph_to_proto(&graph)),
            config: Some(config),
            target: format!("grpc://{address}"),
        };
        let response: proto::CreateSessionResponse = channel
            .call("CreateSession", &request, CONTROL_TIMEOUT)
            .map_err(|e| e.context(format_args!("creating a session on {address}")))?;
        Ok(GrpcSession {
            channel,
            handle: response.session_handle,
            version: Mutex::new(u64::try_from(response.graph_version).unwrap_or(0)),
            operation_timeout: options.config.operation_timeout,
        })
    }

    pub fn handle(&self) -> &str {
        &self.handle
    }

    /// How long a step's call may wait: its deadline plus slack, or none
    /// beyond the control timeout's generous bound.
    fn step_timeout(&self, options: &RunOptions) -> Duration {
        match options.timeout.or(self.operation_timeout) {
            Some(t) => t + DEADLINE_SLACK,
            None => Duration::from_secs(24 * 3600),
        }
    }

    /// A RunStep as TensorFlow's client sends it (errors in the body).
    fn run_step(&self, request: proto::RunStepRequest, timeout: Duration) -> Result<proto::RunStepResponse> {
        let response: proto::RunStepResponse = self.channel.call("RunStep", &request, timeout)?;
        if response.status_code != 0 {
            let code = u8::try_from(response.status_code).map_or(Code::Unknown, Code::from_u8);
            return Err(Status::new(code, response.status_error_message));
        }
        Ok(response)
    }

    /// The fetched tensors in the order asked for, whatever order they came in.
    fn outputs_in_order(fetches: &[String], response: Vec<proto::NamedTensorProto>) -> Result<Vec<Tensor>> {
        let mut outputs: Vec<Option<Tensor>> = vec![None; fetches.len()];
        for named in response {
            let Some(index) = fetches.iter().position(|f| *f == named.name) else {
                return Err(Status::internal(format!(
                    "the master answered fetch '{}', which was not asked",
                    named.name
                )));
            };
            let tensor = named.tensor.unwrap_or_default();
            outputs[index] = Some(tensor_from_proto(&tensor, &format!("fetch '{}'", named.name))?);
        }
        outputs
            .into_iter()
            .zip(fetches)
            .map(|(t, name)| t.ok_or_else(|| Status::internal(format!("the master did not answer fetch '{name}'"))))
            .collect()
    }
}

impl Session for GrpcSession {
    fn graph_version(&self) -> Result<u64> {
        Ok(*self.version.lock())
    }

    fn extend(&self, graph: GraphSpec, current_version: u64) -> Result<u64> {
        let request = proto::ExtendSessionRequest {
            session_handle: self.handle.clone(),
            graph_def: Some(graph_to_proto(&graph)),
            current_graph_version: current_version as i64,
        };
        let response: proto::ExtendSessionResponse = self.channel.call("ExtendSession", &request, CONTROL_TIMEOUT)?;
        let version = u64::try_from(response.new_graph_version).unwrap_or(0);
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
        let request = proto::RunStepRequest {
            session_handle: self.handle.clone(),
            feed: feeds_to_proto(feeds)?,
            fetch: fetches.to_vec(),
            target: targets.to_vec(),
            options: Some(run_options_proto(options)),
            store_errors_in_response_body: true,
            ..Default::default()
        };
        let response = self.run_step(request, self.step_timeout(options))?;
        let outputs = Self::outputs_in_order(fetches, response.tensor)?;
        Ok((outputs, RunMetadata { step_stats: stats_of(response.metadata), ..Default::default() }))
    }

    fn partial_run_setup(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<String> {
        let request = proto::PartialRunSetupRequest {
            session_handle: self.handle.clone(),
            feed: feeds.to_vec(),
            fetch: fetches.to_vec(),
            target: targets.to_vec(),
            request_id: 0,
        };
        let response: proto::PartialRunSetupResponse =
            self.channel.call("PartialRunSetup", &request, CONTROL_TIMEOUT)?;
        Ok(response.partial_run_handle)
    }

    fn partial_run(&self, handle: &str, feeds: Vec<(String, Tensor)>, fetches: &[String]) -> Result<Vec<Tensor>> {
        let request = proto::RunStepRequest {
            session_handle: self.handle.clone(),
            feed: feeds_to_proto(feeds)?,
            fetch: fetches.to_vec(),
            partial_run_handle: handle.to_string(),
            store_errors_in_response_body: true,
            ..Default::default()
        };
        let response = self.run_step(request, self.step_timeout(&RunOptions::default()))?;
        Self::outputs_in_order(fetches, response.tensor)
    }

    fn make_callable(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<CallableHandle> {
        let request = proto::MakeCallableRequest {
            session_handle: self.handle.clone(),
            options: Some(proto::CallableOptions {
                feed: feeds.to_vec(),
                fetch: fetches.to_vec(),
                target: targets.to_vec(),
                ..Default::default()
            }),
            request_id: 0,
        };
        let response: proto::MakeCallableResponse = self.channel.call("MakeCallable", &request, CONTROL_TIMEOUT)?;
        u64::try_from(response.handle)
            .map_err(|_| Status::internal(format!("the master answered callable handle {}", response.handle)))
    }

    fn run_callable(
        &self,
        handle: CallableHandle,
        feeds: Vec<Tensor>,
        options: &RunOptions,
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        let request = proto::RunCallableRequest {
            session_handle: self.handle.clone(),
            handle: handle as i64,
            feed: feeds.iter().map(tensor_to_proto).collect::<Result<_>>()?,
            request_id: 0,
        };
        let response: proto::RunCallableResponse =
            self.channel.call("RunCallable", &request, self.step_timeout(options))?;
        let outputs = response
            .fetch
            .iter()
            .enumerate()
            .map(|(i, t)| tensor_from_proto(t, &format!("callable {handle} fetch {i}")))
            .collect::<Result<Vec<_>>>()?;
        Ok((outputs, RunMetadata { step_stats: stats_of(response.metadata), ..Default::default() }))
    }

    fn release_callable(&self, handle: CallableHandle) -> Result<()> {
        let request = proto::ReleaseCallableRequest { session_handle: self.handle.clone(), handle: handle as i64 };
        self.channel.call::<_, proto::ReleaseCallableResponse>("ReleaseCallable", &request, CONTROL_TIMEOUT).map(|_| ())
    }

    fn list_devices(&self) -> Result<Vec<DeviceAttributes>> {
        let request = proto::ListDevicesRequest { session_handle: self.handle.clone() };
        let response: proto::ListDevicesResponse = self.channel.call("ListDevices", &request, CONTROL_TIMEOUT)?;
        Ok(devices_from_proto(response))
    }

    fn reset(&self, containers: &[String]) -> Result<()> {
        let request = proto::ResetRequest { container: containers.to_vec(), device_filters: Vec::new() };
        self.channel.call::<_, proto::ResetResponse>("Reset", &request, CONTROL_TIMEOUT).map(|_| ())
    }

    fn close(&self) -> Result<()> {
        let request = proto::CloseSessionRequest { session_handle: self.handle.clone() };
        self.channel.call::<_, proto::CloseSessionResponse>("CloseSession", &request, CONTROL_TIMEOUT).map(|_| ())
    }
}
