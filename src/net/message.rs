//! Every message that crosses the network, defined once as rkyv types, and
//! the [`Method`] numbers that name them on the wire.
//!
//! Owns: the MasterService and WorkerService request/response types (names
//! are TensorFlow's RPCs), a server's counters ([`GetStatsResponse`]), the
//! connection's [`Hello`] and [`ErrorMeta`],
//! [`encode`] / [`view`] / [`decode`], and [`TensorRef`] resolution.
//! Must not implement any handler: the master and worker do.
//!
//! Tensors are never inside an archive. A message names a tensor with a
//! [`TensorRef`] (dtype, dims, index into the frame's payload list) and the
//! frame carries the bytes, 64-byte aligned, outside the archive; on receipt
//! [`ArchivedTensorRef::resolve`] returns the payload tensor, which points
//! into the receive buffer (no copy).

use crate::error::{Result, Status};
use crate::graph::GraphSpec;
use crate::tensor::{DType, Tensor};
use rkyv::api::high::{HighDeserializer, HighSerializer, HighValidator};
use rkyv::bytecheck::CheckBytes;
use rkyv::rancor;
use rkyv::ser::allocator::ArenaHandle;
use rkyv::util::AlignedVec;
use rkyv::{Archive, Deserialize, Portable, Serialize};
use std::any::TypeId;

/// An RPC's number on the wire (u16). Numbers are never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Method {
    // MasterService
    CreateSession = 1,
    ExtendSession = 2,
    PartialRunSetup = 3,
    RunStep = 4,
    CloseSession = 5,
    ListDevices = 6,
    Reset = 7,
    MakeCallable = 8,
    RunCallable = 9,
    ReleaseCallable = 10,
    /// Cancels a step a client started with a cancel id.
    CancelStep = 11,
    // WorkerService
    GetStatus = 32,
    CreateWorkerSession = 33,
    DeleteWorkerSession = 34,
    RegisterGraph = 35,
    DeregisterGraph = 36,
    RunGraph = 37,
    CleanupGraph = 38,
    CleanupAll = 39,
    RecvTensor = 40,
    /// One-way: a tensor pushed to its consumer's rendezvous.
    TensorPush = 41,
    /// One-way: abort a step on a peer.
    AbortStep = 42,
    // 43 was Logging: step stats travel in RunGraph responses instead.
    // Transport
    /// Echo: the reply carries the request's meta and payloads back.
    Ping = 64,
    // Monitoring
    /// A server's counters (`ringflow stats`).
    GetStats = 80,
}

impl Method {
    pub const ALL: [Method; 24] = [
        Method::CreateSession,
        Method::ExtendSession,
        Method::PartialRunSetup,
        Method::RunStep,
        Method::CloseSession,
        Method::ListDevices,
        Method::Reset,
        Method::MakeCallable,
        Method::RunCallable,
        Method::ReleaseCallable,
        Method::CancelStep,
        Method::GetStatus,
        Method::CreateWorkerSession,
        Method::DeleteWorkerSession,
        Method::RegisterGraph,
        Method::DeregisterGraph,
        Method::RunGraph,
        Method::CleanupGraph,
        Method::CleanupAll,
        Method::RecvTensor,
        Method::TensorPush,
        Method::AbortStep,
        Method::Ping,
        Method::GetStats,
    ];

    /// The method numbered `value`: one indexed load (every received
    /// frame asks, and a scan of [`Method::ALL`] took up to 24 compares).
    pub fn from_u16(value: u16) -> Option<Method> {
        const BY_NUMBER: [Option<Method>; Method::NUMBERS] = {
            let mut table = [None; Method::NUMBERS];
            let mut i = 0;
            while i < Method::ALL.len() {
                table[Method::ALL[i] as usize] = Some(Method::ALL[i]);
                i += 1;
            }
            table
        };
        BY_NUMBER.get(usize::from(value)).copied().flatten()
    }

    /// One past the highest method number.
    const NUMBERS: usize = {
        let mut most = 0;
        let mut i = 0;
        while i < Method::ALL.len() {
            if Method::ALL[i] as usize > most {
                most = Method::ALL[i] as usize;
            }
            i += 1;
        }
        most + 1
    };

    pub fn name(self) -> &'static str {
        match self {
            Method::CreateSession => "CreateSession",
            Method::ExtendSession => "ExtendSession",
            Method::PartialRunSetup => "PartialRunSetup",
            Method::RunStep => "RunStep",
            Method::CloseSession => "CloseSession",
            Method::ListDevices => "ListDevices",
            Method::Reset => "Reset",
            Method::MakeCallable => "MakeCallable",
            Method::RunCallable => "RunCallable",
            Method::ReleaseCallable => "ReleaseCallable",
            Method::CancelStep => "CancelStep",
            Method::GetStatus => "GetStatus",
            Method::CreateWorkerSession => "CreateWorkerSession",
            Method::DeleteWorkerSession => "DeleteWorkerSession",
            Method::RegisterGraph => "RegisterGraph",
            Method::DeregisterGraph => "DeregisterGraph",
            Method::RunGraph => "RunGraph",
            Method::CleanupGraph => "CleanupGraph",
            Method::CleanupAll => "CleanupAll",
            Method::RecvTensor => "RecvTensor",
            Method::TensorPush => "TensorPush",
            Method::AbortStep => "AbortStep",
            Method::Ping => "Ping",
            Method::GetStats => "GetStats",
        }
    }

    /// True for methods that are pushed one way and never answered.
    pub fn is_one_way(self) -> bool {
        matches!(self, Method::TensorPush | Method::AbortStep)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Ties a request type to its method and response type.
pub trait Rpc {
    const METHOD: Method;
    type Response;
}

/// Ties a one-way message type to its method.
pub trait OneWay {
    const METHOD: Method;
}

/// A message rkyv can archive into a frame's metadata: the one bound every
/// encoder needs, named once.
pub trait Encode: for<'a> Serialize<HighSerializer<AlignedVec, ArenaHandle<'a>, rancor::Error>> {}

impl<M> Encode for M where M: for<'a> Serialize<HighSerializer<AlignedVec, ArenaHandle<'a>, rancor::Error>> {}

/// Bytes reserved for an encoded message before it is written.
const ENCODE_CAPACITY: usize = 512;

/// Serialises a message's metadata (tensors go beside it as payloads).
pub fn encode<M: Encode>(msg: &M) -> Result<AlignedVec> {
    // Room for a step's messages (handles, keys, a few tensor
    // descriptions) up front: growing from empty reallocates several times.
    let out = AlignedVec::with_capacity(ENCODE_CAPACITY);
    rkyv::api::high::to_bytes_in::<_, rancor::Error>(msg, out)
        .map_err(|e| Status::internal(format!("encoding message: {e}")))
}

/// The archived message in place, validated with bytecheck: every offset,
/// length, string and enum tag is checked before a field is read.
pub fn view<M: Archive>(bytes: &[u8]) -> Result<&M::Archived>
where
    M::Archived: Portable + for<'a> CheckBytes<HighValidator<'a, rancor::Error>>,
{
    rkyv::access::<M::Archived, rancor::Error>(bytes).map_err(|e| {
        Status::invalid_argument(format!(
            "malformed {} metadata ({} bytes): {e}",
            std::any::type_name::<M>().rsplit("::").next().unwrap_or("message"),
            bytes.len()
        ))
    })
}

/// A validated, owned copy of the message (for the rare caller that must
/// keep it beyond the frame's life).
pub fn decode<M: Archive>(bytes: &[u8]) -> Result<M>
where
    M::Archived: Portable
        + for<'a> CheckBytes<HighValidator<'a, rancor::Error>>
        + Deserialize<M, HighDeserializer<rancor::Error>>,
{
    let archived = view::<M>(bytes)?;
    rkyv::deserialize::<M, rancor::Error>(archived)
        .map_err(|e| Status::invalid_argument(format!("decoding message: {e}")))
}

/// Which archived type a frame's metadata passed bytecheck as, so that the
/// handler reading it as that type does not check the same bytes again
/// (a check costs about as much as the rest of parsing a small frame).
/// Issued only by [`validate_request`] and [`validate_response`]. Held as
/// the type's `TypeId::of` function (8 bytes, where a `TypeId` takes 16
/// and its option 24): a small call's response is then 128 bytes, which
/// moves without a call to the C library's `memcpy`.
#[derive(Clone, Copy)]
pub struct Validated(Option<fn() -> TypeId>);

impl Validated {
    fn as_message<M: Archive>() -> Validated
    where
        M::Archived: 'static,
    {
        Validated(Some(TypeId::of::<M::Archived>))
    }

    fn type_id(self) -> Option<TypeId> {
        self.0.map(|of| of())
    }
}

impl PartialEq for Validated {
    fn eq(&self, other: &Validated) -> bool {
        self.type_id() == other.type_id()
    }
}

impl Eq for Validated {}

impl std::fmt::Debug for Validated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Validated").field(&self.type_id()).finish()
    }
}

/// The archived message in place, like [`view`], but without checking the
/// bytes a second time when `validated` says they already passed as `M`.
///
/// # Safety
/// `validated` must have been returned by validating exactly `bytes` (the
/// same bytes and length, at the same address or a copy of them at an
/// address equal modulo 16, the largest alignment an archived type has),
/// and the bytes must not have changed since.
pub unsafe fn view_validated<M: Archive>(bytes: &[u8], validated: Validated) -> Result<&M::Archived>
where
    M::Archived: Portable + for<'a> CheckBytes<HighValidator<'a, rancor::Error>> + 'static,
{
    if validated == Validated::as_message::<M>() {
        // SAFETY: per this function's contract these bytes passed bytecheck
        // as `M::Archived` and are unchanged.
        return Ok(unsafe { rkyv::access_unchecked::<M::Archived>(bytes) });
    }
    view::<M>(bytes)
}

/// Validates `bytes` as the archived request of `method` (bytecheck), so a
/// corrupted archive is rejected before any handler sees it. `Ping`
/// carries free-form bytes.
pub fn validate_request(method: Method, bytes: &[u8]) -> Result<Validated> {
    macro_rules! check {
        ($($m:ident => $t:ty),* $(,)?) => {
            match method {
                $(Method::$m => view::<$t>(bytes).map(|_| Validated::as_message::<$t>()),)*
                Method::Ping => Ok(Validated(None)),
            }
        };
    }
    check! {
        CreateSession => CreateSessionRequest,
        ExtendSession => ExtendSessionRequest,
        PartialRunSetup => PartialRunSetupRequest,
        RunStep => RunStepRequest,
        CloseSession => CloseSessionRequest,
        ListDevices => ListDevicesRequest,
        Reset => ResetRequest,
        MakeCallable => MakeCallableRequest,
        RunCallable => RunCallableRequest,
        ReleaseCallable => ReleaseCallableRequest,
        CancelStep => CancelStepRequest,
        GetStatus => GetStatusRequest,
        CreateWorkerSession => CreateWorkerSessionRequest,
        DeleteWorkerSession => DeleteWorkerSessionRequest,
        RegisterGraph => RegisterGraphRequest,
        DeregisterGraph => DeregisterGraphRequest,
        RunGraph => RunGraphRequest,
        CleanupGraph => CleanupGraphRequest,
        CleanupAll => CleanupAllRequest,
        RecvTensor => RecvTensorRequest,
        TensorPush => TensorPush,
        AbortStep => AbortStep,
        GetStats => GetStatsRequest,
    }
}

/// Validates `bytes` as the archived response of `method`.
pub fn validate_response(method: Method, bytes: &[u8]) -> Result<Validated> {
    macro_rules! check {
        ($($m:ident => $t:ty),* $(,)?) => {
            match method {
                $(Method::$m => view::<$t>(bytes).map(|_| Validated::as_message::<$t>()),)*
                Method::Ping => Ok(Validated(None)),
                Method::TensorPush | Method::AbortStep => Err(Status::invalid_argument(format!(
                    "{method} is one-way and has no response"
                ))),
            }
        };
    }
    check! {
        CreateSession => CreateSessionResponse,
        ExtendSession => ExtendSessionResponse,
        PartialRunSetup => PartialRunSetupResponse,
        RunStep => RunStepResponse,
        CloseSession => Empty,
        ListDevices => ListDevicesResponse,
        Reset => Empty,
        MakeCallable => MakeCallableResponse,
        RunCallable => RunCallableResponse,
        ReleaseCallable => Empty,
        CancelStep => Empty,
        GetStatus => GetStatusResponse,
        CreateWorkerSession => Empty,
        DeleteWorkerSession => Empty,
        RegisterGraph => RegisterGraphResponse,
        DeregisterGraph => Empty,
        RunGraph => RunGraphResponse,
        CleanupGraph => Empty,
        CleanupAll => Empty,
        RecvTensor => RecvTensorResponse,
        GetStats => GetStatsResponse,
    }
}

// ---------------------------------------------------------------------------
// Transport messages

/// First frame each way on a connection (`rpc/handshake.rs` has the
/// exchange); nothing else is decoded before it and, with a cluster secret,
/// before the proofs check.
#[derive(Debug, Clone, PartialEq, Default, Archive, Serialize, Deserialize)]
pub struct Hello {
    pub protocol_version: u16,
    /// Changes whenever the process restarts, so a peer detects restarts.
    pub incarnation: u64,
    /// Who is speaking (task name or address), for logs.
    pub name: String,
    /// Fresh random bytes the peer's proof must cover (empty without a
    /// cluster secret).
    pub nonce: Vec<u8>,
    /// The server's proof that it holds the cluster secret (empty without
    /// one, and always empty from a client: its proof is the next frame).
    pub auth: Vec<u8>,
}

/// A client's cluster-secret proof (`FrameKind::Auth`), and the server's
/// acceptance of it (empty).
#[derive(Debug, Clone, PartialEq, Default, Archive, Serialize, Deserialize)]
pub struct AuthProof {
    pub proof: Vec<u8>,
}

/// The metadata of an error frame.
#[derive(Debug, Clone, PartialEq, Default, Archive, Serialize, Deserialize)]
pub struct ErrorMeta {
    /// `crate::error::Code as u8`.
    pub code: u8,
    pub message: String,
}

/// A tensor carried beside the archive: `payload` indexes the frame's
/// payload list.
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct TensorRef {
    /// `DType::code`.
    pub dtype: u8,
    pub dims: Vec<u64>,
    pub payload: u32,
}

impl TensorRef {
    pub fn describe(tensor: &Tensor, payload: u32) -> TensorRef {
        TensorRef { dtype: tensor.dtype().code(), dims: tensor.dims().iter().map(|&d| d as u64).collect(), payload }
    }
}

impl ArchivedTensorRef {
    /// The payload tensor this reference names, checked against the
    /// reference's dtype and dims. Shares the payload's bytes (no copy).
    pub fn resolve(&self, payloads: &[Tensor]) -> Result<Tensor> {
        let index = self.payload.to_native() as usize;
        let tensor = payloads.get(index).ok_or_else(|| {
            Status::invalid_argument(format!(
                "tensor reference to payload {index}, but the frame has {}",
                payloads.len()
            ))
        })?;
        let dtype = DType::from_code(self.dtype)
            .ok_or_else(|| Status::invalid_argument(format!("unknown dtype code {}", self.dtype)))?;
        let dims_match = self.dims.len() == tensor.rank()
            && self.dims.iter().zip(tensor.dims()).all(|(a, &b)| a.to_native() == b as u64);
        if dtype != tensor.dtype() || !dims_match {
            let dims: Vec<u64> = self.dims.iter().map(|d| d.to_native()).collect();
            return Err(Status::invalid_argument(format!(
                "tensor reference says {dtype}{dims:?} but payload {index} is {}{}",
                tensor.dtype(),
                tensor.shape()
            )));
        }
        Ok(tensor.clone())
    }
}

/// Collects the tensors of an outgoing message and hands out their
/// references.
#[derive(Default, Debug, Clone)]
pub struct PayloadList {
    tensors: Vec<Tensor>,
}

impl PayloadList {
    pub fn new() -> PayloadList {
        PayloadList::default()
    }

    /// Adds `tensor` (shared, not copied) and returns its reference.
    pub fn add(&mut self, tensor: &Tensor) -> TensorRef {
        let reference = TensorRef::describe(tensor, self.tensors.len() as u32);
        self.tensors.push(tensor.clone());
        reference
    }

    /// Adds `tensors` with the large ones last and returns, in `tensors`'
    /// order, `record(index, reference)` for each: a frame over shared
    /// memory can leave its last payload where a kernel wrote it when the
    /// rest fit a ring slot. The records are the answer's own list, so the
    /// usual answer (nothing large) costs one pass and no other vector.
    pub fn add_large_last<'t, R>(
        &mut self,
        tensors: impl Iterator<Item = &'t Tensor> + Clone,
        mut record: impl FnMut(usize, TensorRef) -> R,
    ) -> Vec<R> {
        let large = |t: &Tensor| t.byte_len() >= crate::tensor::placement::PLACE_MIN_BYTES;
        if !tensors.clone().any(large) {
            return tensors.enumerate().map(|(index, t)| record(index, self.add(t))).collect();
        }
        let mut records: Vec<Option<R>> = tensors.clone().map(|_| None).collect();
        for pass_large in [false, true] {
            for (index, tensor) in tensors.clone().enumerate() {
                if large(tensor) == pass_large {
                    records[index] = Some(record(index, self.add(tensor)));
                }
            }
        }
        records.into_iter().map(|r| r.expect("each tensor added in one of the two passes")).collect()
    }

    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    pub fn into_vec(self) -> Vec<Tensor> {
        self.tensors
    }
}

/// `RunGraphRequest::partial` bits.
pub const PARTIAL_RUN: u8 = 1;
pub const PARTIAL_FIRST: u8 = 2;
pub const PARTIAL_LAST: u8 = 4;

/// A tensor addressed by feed or fetch index.
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct IndexedTensorRef {
    pub index: u32,
    pub tensor: TensorRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct NamedTensorRef {
    pub name: String,
    pub tensor: TensorRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct NodeStats {
    pub node: String,
    pub op: String,
    pub device: String,
    pub start_us: u64,
    pub end_us: u64,
    pub thread: u32,
    pub frame: String,
    pub iter: u64,
    /// `_Send`/`_Recv`: the rendezvous key and the tensor's bytes.
    pub rendezvous_key: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct StepStats {
    pub nodes: Vec<NodeStats>,
    /// How each task's clock was aligned with the master's (a RunStep's
    /// answer to a traced step; empty in RunGraph's).
    pub clocks: Vec<TaskClock>,
}

/// One task's clock against the master's, estimated from round trips
/// (`master::clock`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize, serde::Serialize)]
pub struct TaskClock {
    /// `/job:J/replica:R/task:T`.
    pub task: String,
    /// The task's clock minus the master's, µs, as applied: a time the task
    /// stamped is `stamp - offset_us` on the master's clock. The value in
    /// `midpoint_offset_us ± bound_us` nearest 0.
    pub offset_us: i64,
    /// NTP's estimate: the task's reading minus the shortest round trip's
    /// midpoint.
    pub midpoint_offset_us: i64,
    /// How far `offset_us` may be from the true offset, µs.
    pub bound_us: u64,
    /// The shortest round trip seen, µs.
    pub min_rtt_us: u64,
    pub samples: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct DeviceAttributes {
    pub name: String,
    pub device_type: String,
    pub incarnation: u64,
    pub memory_limit: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct SessionConfig {
    /// 0 = no timeout.
    pub operation_timeout_ms: u64,
    /// Threads per device pool; 0 = the server's default.
    pub intra_op_threads: u32,
    /// Collect step stats for every step.
    pub collect_stats: bool,
    /// Keep the session's resources private instead of sharing each task's.
    pub isolate_session_state: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct RunOptions {
    /// 0 = the session's operation timeout.
    pub timeout_ms: u64,
    pub trace: bool,
    /// Nonzero: the client may cancel the step with a CancelStep naming
    /// this id (unique within the session, chosen by the client).
    pub cancel_id: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct TaskAddr {
    pub index: u32,
    pub address: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct JobDef {
    pub name: String,
    pub tasks: Vec<TaskAddr>,
}

/// An empty response.
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct Empty {}

macro_rules! rpc {
    ($req:ident => $resp:ty, $method:ident) => {
        impl Rpc for $req {
            const METHOD: Method = Method::$method;
            type Response = $resp;
        }
    };
}

// ---------------------------------------------------------------------------
// MasterService

#[derive(Debug, Clone, PartialEq, Default, Archive, Serialize, Deserialize)]
pub struct CreateSessionRequest {
    pub graph: GraphSpec,
    pub config: SessionConfig,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct CreateSessionResponse {
    pub session_handle: String,
    pub graph_version: u64,
}
rpc!(CreateSessionRequest => CreateSessionResponse, CreateSession);

#[derive(Debug, Clone, PartialEq, Default, Archive, Serialize, Deserialize)]
pub struct ExtendSessionRequest {
    pub session_handle: String,
    pub graph: GraphSpec,
    pub current_graph_version: u64,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct ExtendSessionResponse {
    pub new_graph_version: u64,
}
rpc!(ExtendSessionRequest => ExtendSessionResponse, ExtendSession);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct PartialRunSetupRequest {
    pub session_handle: String,
    pub feeds: Vec<String>,
    pub fetches: Vec<String>,
    pub targets: Vec<String>,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct PartialRunSetupResponse {
    pub partial_run_handle: String,
}
rpc!(PartialRunSetupRequest => PartialRunSetupResponse, PartialRunSetup);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct RunStepRequest {
    pub session_handle: String,
    pub feeds: Vec<NamedTensorRef>,
    pub fetches: Vec<String>,
    pub targets: Vec<String>,
    pub options: RunOptions,
    /// Empty = not a partial run.
    pub partial_run_handle: String,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct RunStepResponse {
    pub outputs: Vec<NamedTensorRef>,
    pub step_stats: StepStats,
}
rpc!(RunStepRequest => RunStepResponse, RunStep);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct CloseSessionRequest {
    pub session_handle: String,
}
rpc!(CloseSessionRequest => Empty, CloseSession);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct ListDevicesRequest {
    pub session_handle: String,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct ListDevicesResponse {
    pub devices: Vec<DeviceAttributes>,
}
rpc!(ListDevicesRequest => ListDevicesResponse, ListDevices);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct ResetRequest {
    /// The session whose containers to clear; empty: every session.
    pub session_handle: String,
    pub containers: Vec<String>,
}
rpc!(ResetRequest => Empty, Reset);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct MakeCallableRequest {
    pub session_handle: String,
    pub feeds: Vec<String>,
    pub fetches: Vec<String>,
    pub targets: Vec<String>,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct MakeCallableResponse {
    pub handle: u64,
}
rpc!(MakeCallableRequest => MakeCallableResponse, MakeCallable);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct RunCallableRequest {
    pub session_handle: String,
    pub handle: u64,
    pub feeds: Vec<TensorRef>,
    pub options: RunOptions,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct RunCallableResponse {
    pub fetches: Vec<TensorRef>,
    pub step_stats: StepStats,
}
rpc!(RunCallableRequest => RunCallableResponse, RunCallable);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct ReleaseCallableRequest {
    pub session_handle: String,
    pub handle: u64,
}
rpc!(ReleaseCallableRequest => Empty, ReleaseCallable);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct CancelStepRequest {
    pub session_handle: String,
    pub cancel_id: u64,
}
rpc!(CancelStepRequest => Empty, CancelStep);

// ---------------------------------------------------------------------------
// WorkerService

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct GetStatusRequest {
    /// When set, the response counts this session's registered graphs.
    pub session_handle: String,
    /// Sessions the asking master still holds (its heartbeats name them, so
    /// the worker does not collect them as idle).
    pub keep_alive: Vec<String>,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct GetStatusResponse {
    pub devices: Vec<DeviceAttributes>,
    pub incarnation: u64,
    /// Graphs registered by the session named in the request.
    pub registered_graphs: u64,
    /// Live worker sessions on this task.
    pub sessions: u64,
    /// This task's wall clock when it answered, µs since the Unix epoch: a
    /// master's round trips with it align step stats across tasks.
    pub wall_clock_us: u64,
}
rpc!(GetStatusRequest => GetStatusResponse, GetStatus);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct CreateWorkerSessionRequest {
    pub session_handle: String,
    pub master_task: String,
    pub cluster: Vec<JobDef>,
    pub isolate_session_state: bool,
}
rpc!(CreateWorkerSessionRequest => Empty, CreateWorkerSession);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct DeleteWorkerSessionRequest {
    pub session_handle: String,
}
rpc!(DeleteWorkerSessionRequest => Empty, DeleteWorkerSession);

#[derive(Debug, Clone, PartialEq, Default, Archive, Serialize, Deserialize)]
pub struct RegisterGraphRequest {
    pub session_handle: String,
    pub graph: GraphSpec,
    pub collect_stats: bool,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct RegisterGraphResponse {
    pub graph_handle: String,
}
rpc!(RegisterGraphRequest => RegisterGraphResponse, RegisterGraph);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct DeregisterGraphRequest {
    pub session_handle: String,
    pub graph_handle: String,
}
rpc!(DeregisterGraphRequest => Empty, DeregisterGraph);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct RunGraphRequest {
    pub session_handle: String,
    pub graph_handle: String,
    pub step_id: u64,
    /// Values for the partition's `_Arg` nodes, by feed index.
    pub feeds: Vec<IndexedTensorRef>,
    /// Partial runs: the fetch indices this call waits for. Ordinary runs
    /// return every `_Retval` of the partition.
    pub fetches: Vec<u32>,
    /// `PARTIAL_*` bits; 0 for an ordinary run.
    pub partial: u8,
    /// 0: no deadline.
    pub timeout_ms: u64,
    pub collect_stats: bool,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct RunGraphResponse {
    /// Values of the partition's `_Retval` nodes, by fetch index.
    pub fetches: Vec<IndexedTensorRef>,
    pub step_stats: StepStats,
}
rpc!(RunGraphRequest => RunGraphResponse, RunGraph);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct CleanupGraphRequest {
    pub session_handle: String,
    pub step_id: u64,
}
rpc!(CleanupGraphRequest => Empty, CleanupGraph);

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct CleanupAllRequest {
    /// The session whose containers to clear; empty: every session.
    pub session_handle: String,
    pub containers: Vec<String>,
}
rpc!(CleanupAllRequest => Empty, CleanupAll);

/// Pull a tensor from its producer's rendezvous.
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct RecvTensorRequest {
    pub step_id: u64,
    pub rendezvous_key: String,
}
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct RecvTensorResponse {
    pub tensor: TensorRef,
}
rpc!(RecvTensorRequest => RecvTensorResponse, RecvTensor);

/// Push a tensor to its consumer's rendezvous (one way).
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct TensorPush {
    pub session_handle: String,
    pub step_id: u64,
    pub rendezvous_key: String,
    pub tensor: TensorRef,
    /// No tensor: the sender's value was dead (an untaken branch, a loop's
    /// last iteration); the receiver's `_Recv` outputs a dead value.
    pub dead: bool,
}
impl OneWay for TensorPush {
    const METHOD: Method = Method::TensorPush;
}

/// Abort a step on a peer (one way).
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct AbortStep {
    pub session_handle: String,
    pub step_id: u64,
    /// `crate::error::Code as u8`.
    pub code: u8,
    pub message: String,
}
impl OneWay for AbortStep {
    const METHOD: Method = Method::AbortStep;
}

// ---------------------------------------------------------------------------
// Monitoring

#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize)]
pub struct GetStatsRequest {}

/// Latencies since the server started, in nanoseconds (0 when none);
/// `counters` fills it from its histograms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Archive, Serialize, Deserialize, serde::Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub sum_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// A server's counters since it started (`crate::server::stats`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Archive, Serialize, Deserialize, serde::Serialize)]
pub struct GetStatsResponse {
    pub task: String,
    pub uptime_ms: u64,
    /// Steps the master ran for clients (RunStep, RunCallable) and those that failed.
    pub steps: u64,
    pub step_errors: u64,
    /// Graph partitions the worker ran (RunGraph) and those that failed.
    pub graph_runs: u64,
    pub graph_run_errors: u64,
    /// Bytes this process's native connections sent and received.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Frames sent through shared-memory rings; frames of shared-memory
    /// channels sent over the socket instead (too large for the ring, or
    /// no room); waits for ring space that ran out.
    pub shm_frames: u64,
    pub shm_socket_frames: u64,
    pub shm_space_stalls: u64,
    /// Of `shm_frames`, those whose tensor a kernel wrote into the ring
    /// itself (nothing copied when sent).
    pub shm_frames_in_place: u64,
    /// Bytes that crossed shared-memory rings where their kernels wrote
    /// them, and bytes senders copied into the rings (frames and their
    /// heads, and payloads no kernel wrote there).
    pub shm_bytes_in_place: u64,
    pub shm_bytes_copied: u64,
    /// Payload bytes readers copied out of rings on arrival because the
    /// spans they already lent made as many ranges as a ring lists, or
    /// most of its bytes.
    pub shm_bytes_copied_out: u64,
    /// Live sessions now, and master sessions created since start.
    pub master_sessions: u64,
    pub worker_sessions: u64,
    pub sessions_created: u64,
    pub step_latency: LatencySummary,
    pub graph_run_latency: LatencySummary,
}
rpc!(GetStatsRequest => GetStatsResponse, GetStats);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<M>(msg: &M)
    where
        M: Archive + PartialEq + std::fmt::Debug + Encode,
        M::Archived: Portable
            + for<'a> CheckBytes<HighValidator<'a, rancor::Error>>
            + Deserialize<M, HighDeserializer<rancor::Error>>,
    {
        let bytes = encode(msg).unwrap();
        assert_eq!(&decode::<M>(&bytes).unwrap(), msg);
    }

    #[test]
    fn method_numbers_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for m in Method::ALL {
            assert_eq!(Method::from_u16(m as u16), Some(m));
            seen.insert(m as u16);
        }
        assert_eq!(seen.len(), Method::ALL.len());
        assert_eq!(Method::from_u16(43), None, "43 (Logging) is retired, never reused");
        assert_eq!(Method::from_u16(999), None);
        let numbered = (0..=u16::MAX).filter(|&n| Method::from_u16(n).is_some()).count();
        assert_eq!(numbered, Method::ALL.len(), "only listed methods have numbers");
    }

    #[test]
    fn corrupted_archive_is_rejected_not_read() {
        let msg = RunStepRequest { session_handle: "s".repeat(40), fetches: vec!["y:0".into()], ..Default::default() };
        let mut bytes = encode(&msg).unwrap();
        // The root is at the end; its first field, `session_handle`, is an
        // out-of-line string: point its relative offset far outside.
        let root = bytes.len() - std::mem::size_of::<ArchivedRunStepRequest>();
        bytes[root + 4..root + 8].copy_from_slice(&0x7fff_0000i32.to_le_bytes());
        let err = view::<RunStepRequest>(&bytes).map(drop).unwrap_err();
        assert!(err.message.contains("malformed RunStepRequest"), "{err}");
        assert!(view::<RunStepRequest>(&bytes[..3]).is_err());
    }

    #[test]
    fn a_check_is_skipped_only_for_the_type_it_vouches_for() {
        let msg = RunStepRequest { session_handle: "s".repeat(40), fetches: vec!["y:0".into()], ..Default::default() };
        let bytes = encode(&msg).unwrap();
        let validated = validate_request(Method::RunStep, &bytes).unwrap();
        // SAFETY: `validated` came from checking these very bytes.
        let archived = unsafe { view_validated::<RunStepRequest>(&bytes, validated) }.unwrap();
        assert_eq!(archived.session_handle.as_str(), msg.session_handle);
        // The same bytes corrupted, with a token for another type (a Ping's,
        // which vouches for nothing): the archive is checked and rejected.
        let mut corrupted = bytes.clone();
        let root = corrupted.len() - std::mem::size_of::<ArchivedRunStepRequest>();
        corrupted[root + 4..root + 8].copy_from_slice(&0x7fff_0000i32.to_le_bytes());
        let ping = validate_request(Method::Ping, &corrupted).unwrap();
        // SAFETY: `ping` came from "checking" these bytes as a Ping.
        let err = unsafe { view_validated::<RunStepRequest>(&corrupted, ping) }.map(drop).unwrap_err();
        assert!(err.message.contains("malformed RunStepRequest"), "{err}");
        let as_push = validate_request(Method::TensorPush, &encode(&TensorPush::default()).unwrap()).unwrap();
        assert_ne!(as_push, validated, "tokens name the type they were checked as");
    }

    #[test]
    fn tensor_refs_resolve_to_the_payload_itself() {
        let t = Tensor::from_slice::<f64>([2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let mut list = PayloadList::new();
        let r = list.add(&t);
        let bytes = encode(&r).unwrap();
        let archived = view::<TensorRef>(&bytes).unwrap();
        let got = archived.resolve(list.tensors()).unwrap();
        assert!(got.shares_bytes_with(&t));
        let wrong = encode(&TensorRef { dtype: DType::F32.code(), ..r.clone() }).unwrap();
        assert!(view::<TensorRef>(&wrong).unwrap().resolve(list.tensors()).is_err());
        let missing = encode(&TensorRef { payload: 5, ..r }).unwrap();
        assert!(view::<TensorRef>(&missing).unwrap().resolve(list.tensors()).is_err());
    }

    #[test]
    fn every_message_type_round_trips() {
        use crate::graph::NodeSpec;
        let graph =
            GraphSpec { nodes: vec![NodeSpec::new("a", "Const"), NodeSpec::new("b", "Identity").input("a", 0)] };
        let t = TensorRef { dtype: 1, dims: vec![2, 3], payload: 0 };
        let named = NamedTensorRef { name: "x:0".into(), tensor: t.clone() };
        let stats = StepStats {
            nodes: vec![NodeStats {
                node: "a".into(),
                op: "Const".into(),
                device: "/job:w/replica:0/task:0/device:CPU:0".into(),
                start_us: 1,
                end_us: u64::MAX,
                thread: 3,
                frame: "while/while_context".into(),
                iter: 7,
                rendezvous_key: "a;1;b;e;0:0".into(),
                bytes: 24,
            }],
            clocks: vec![TaskClock {
                task: "/job:w/replica:0/task:1".into(),
                offset_us: -3,
                midpoint_offset_us: -43,
                bound_us: 40,
                min_rtt_us: 80,
                samples: 8,
            }],
        };
        let dev = DeviceAttributes {
            name: "/job:w/replica:0/task:0/device:CPU:0".into(),
            device_type: "CPU".into(),
            incarnation: 42,
            memory_limit: 1 << 40,
        };
        let strings = vec!["a".to_string(), "ü".to_string(), String::new()];
        round_trip(&Hello {
            protocol_version: 1,
            incarnation: 7,
            name: "w0".into(),
            nonce: vec![3; 16],
            auth: vec![1, 2],
        });
        round_trip(&ErrorMeta { code: 14, message: "gone".into() });
        round_trip(&Empty {});
        round_trip(&CreateSessionRequest {
            graph: graph.clone(),
            config: SessionConfig {
                operation_timeout_ms: 5,
                intra_op_threads: 2,
                collect_stats: true,
                isolate_session_state: true,
            },
        });
        round_trip(&CreateSessionResponse { session_handle: "s1".into(), graph_version: 3 });
        round_trip(&ExtendSessionRequest {
            session_handle: "s1".into(),
            graph: graph.clone(),
            current_graph_version: 3,
        });
        round_trip(&ExtendSessionResponse { new_graph_version: 4 });
        round_trip(&PartialRunSetupRequest {
            session_handle: "s".into(),
            feeds: strings.clone(),
            fetches: strings.clone(),
            targets: strings.clone(),
        });
        round_trip(&PartialRunSetupResponse { partial_run_handle: "p".into() });
        round_trip(&RunStepRequest {
            session_handle: "s".into(),
            feeds: vec![named.clone(), named.clone()],
            fetches: strings.clone(),
            targets: strings.clone(),
            options: RunOptions { timeout_ms: 9, trace: true, cancel_id: 3 },
            partial_run_handle: String::new(),
        });
        round_trip(&RunStepResponse { outputs: vec![named.clone()], step_stats: stats.clone() });
        round_trip(&CloseSessionRequest { session_handle: "s".into() });
        round_trip(&ListDevicesRequest { session_handle: "s".into() });
        round_trip(&ListDevicesResponse { devices: vec![dev.clone(), dev.clone()] });
        round_trip(&ResetRequest { session_handle: "s".into(), containers: strings.clone() });
        round_trip(&MakeCallableRequest {
            session_handle: "s".into(),
            feeds: strings.clone(),
            fetches: strings.clone(),
            targets: vec![],
        });
        round_trip(&MakeCallableResponse { handle: 77 });
        round_trip(&RunCallableRequest {
            session_handle: "s".into(),
            handle: 77,
            feeds: vec![t.clone()],
            options: RunOptions::default(),
        });
        round_trip(&RunCallableResponse { fetches: vec![t.clone(), t.clone()], step_stats: stats.clone() });
        round_trip(&ReleaseCallableRequest { session_handle: "s".into(), handle: 77 });
        round_trip(&CancelStepRequest { session_handle: "s".into(), cancel_id: 78 });
        round_trip(&GetStatusRequest { session_handle: "s".into(), keep_alive: vec!["t".into()] });
        round_trip(&GetStatusResponse {
            devices: vec![dev.clone()],
            incarnation: 11,
            registered_graphs: 2,
            sessions: 1,
            wall_clock_us: 1_764_000_000_000_000,
        });
        round_trip(&CreateWorkerSessionRequest {
            session_handle: "s".into(),
            master_task: "/job:master/task:0".into(),
            cluster: vec![JobDef {
                name: "worker".into(),
                tasks: vec![TaskAddr { index: 1, address: "127.0.0.1:2222".into() }],
            }],
            isolate_session_state: true,
        });
        round_trip(&DeleteWorkerSessionRequest { session_handle: "s".into() });
        round_trip(&RegisterGraphRequest { session_handle: "s".into(), graph, collect_stats: true });
        round_trip(&RegisterGraphResponse { graph_handle: "g".into() });
        round_trip(&DeregisterGraphRequest { session_handle: "s".into(), graph_handle: "g".into() });
        let indexed = IndexedTensorRef { index: 3, tensor: t.clone() };
        round_trip(&RunGraphRequest {
            session_handle: "s".into(),
            graph_handle: "g".into(),
            step_id: 5,
            feeds: vec![indexed.clone()],
            fetches: vec![0, 2],
            partial: PARTIAL_RUN | PARTIAL_LAST,
            timeout_ms: 100,
            collect_stats: false,
        });
        round_trip(&RunGraphResponse { fetches: vec![indexed], step_stats: stats.clone() });
        round_trip(&CleanupGraphRequest { session_handle: "s".into(), step_id: 5 });
        round_trip(&CleanupAllRequest { session_handle: String::new(), containers: strings });
        round_trip(&RecvTensorRequest { step_id: 5, rendezvous_key: "a;1;b;x:0;0:0".into() });
        round_trip(&RecvTensorResponse { tensor: t.clone() });
        round_trip(&TensorPush {
            session_handle: "s".into(),
            step_id: 5,
            rendezvous_key: "k".into(),
            tensor: t,
            dead: false,
        });
        round_trip(&AbortStep { session_handle: "s".into(), step_id: 5, code: 10, message: "aborted".into() });
        round_trip(&stats);
    }
}
