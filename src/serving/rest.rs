//! TensorFlow Serving's REST API over HTTP/1.1 (`--rest_api_port`):
//!
//! - `POST /v1/models/NAME[/versions/N | /labels/L]:predict`: a JSON body
//!   in the row (`instances`) or columnar (`inputs`) form, answered in the
//!   same form ([`super::json`]);
//! - `POST ...:classify`, `POST ...:regress`: `{"examples": [...],
//!   "context"?}`, each example an object of features, answered as
//!   `{"result": ...}` ([`super::inference`]);
//! - `GET /v1/models/NAME[/versions/N | /labels/L]`: the versions' status;
//! - `GET /v1/models/NAME[/versions/N | /labels/L]/metadata`: the
//!   signatures.
//!
//! Errors are `{"error": "..."}` with the HTTP status TensorFlow Serving
//! gives the error's code.
//!
//! Owns: the listener, one thread per connection (at most
//! [`MAX_CONNECTIONS`]), HTTP/1.1 framing (keep-alive, `Content-Length` or
//! chunked bodies, `Expect: 100-continue`) and routing. Must not run steps
//! other than through [`Models`]. Bounded: a head of at most
//! [`MAX_HEAD_BYTES`], a body of at most [`MAX_BODY_BYTES`], an idle
//! connection closed after [`IDLE_TIMEOUT`], each predict given the
//! models' default timeout.

use super::json::{classify_answer, parse_examples_body, parse_predict_body, predict_answer, regress_answer};
use super::{ModelRequest, Models, STATE_AVAILABLE, tf_dtype_name};
use crate::error::{Code, Result, Status};
use crate::graph::saved_model::TensorInfo;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Connections served at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 256;
/// Longest request line plus headers.
pub const MAX_HEAD_BYTES: usize = 64 << 10;
/// Largest request body.
pub const MAX_BODY_BYTES: usize = 512 << 20;
/// A connection with no request for this long is closed; also the limit
/// on each read and write inside a request.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The REST endpoint of one server.
pub struct RestEndpoint {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    models: Arc<Models>,
    live: AtomicUsize,
    stop: Arc<AtomicBool>,
}

impl RestEndpoint {
    /// Binds `address` (port 0: any) and serves `models` until dropped;
    /// each predict runs within the models' default timeout.
    pub fn start(address: &str, models: Arc<Models>) -> Result<RestEndpoint> {
        let listener = TcpListener::bind(address)
            .map_err(|e| Status::unavailable(format!("REST API: cannot listen on {address}: {e}")))?;
        let bound = listener.local_addr().map_err(|e| Status::internal(format!("REST API address: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared { models, live: AtomicUsize::new(0), stop: stop.clone() });
        let thread = std::thread::Builder::new()
            .name("rf-rest-accept".into())
            .spawn(move || accept_loop(&listener, &shared))
            .map_err(|e| Status::resource_exhausted(format!("cannot start the REST API thread: {e}")))?;
        Ok(RestEndpoint { address: bound, stop, thread: Some(thread) })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for RestEndpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the blocked accept; if that fails the thread is left to
        // die with the process rather than joined forever.
        let woke = TcpStream::connect_timeout(&self.address, Duration::from_secs(2)).is_ok();
        if let Some(thread) = self.thread.take()
            && woke
        {
            let _ = thread.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut stream) = stream else {
            continue;
        };
        if shared.live.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            shared.live.fetch_sub(1, Ordering::AcqRel);
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = write_response(&mut stream, 503, &error_body("too many REST connections"), false);
            continue;
        }
        let conn_shared = shared.clone();
        let spawned = std::thread::Builder::new().name("rf-rest".into()).spawn(move || {
            let peer = stream.peer_addr().map_or_else(|_| "?".to_string(), |a| a.to_string());
            if let Err(e) = serve_connection(stream, &conn_shared) {
                tracing::debug!("REST connection from {peer}: {e}");
            }
            conn_shared.live.fetch_sub(1, Ordering::AcqRel);
        });
        if let Err(e) = spawned {
            tracing::warn!("REST API: spawning a connection thread: {e}");
            shared.live.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// One parsed request.
struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
    keep_alive: bool,
}

fn serve_connection(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    stream.set_write_timeout(Some(IDLE_TIMEOUT))?;
    let _ = stream.set_nodelay(true);
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::with_capacity(64 << 10, stream);
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        let request = match read_request(&mut reader, &mut writer) {
            Ok(Some(request)) => request,
            Ok(None) => return Ok(()),
            Err(Refusal { status, message }) => {
                write_response(&mut writer, status, &error_body(&message), false)?;
                return Ok(());
            }
        };
        let (status, body) = route(shared, &request);
        write_response(&mut writer, status, &body, request.keep_alive)?;
        if !request.keep_alive {
            return Ok(());
        }
    }
}

/// A request that cannot be read: answered, then the connection closes.
struct Refusal {
    status: u16,
    message: String,
}

impl Refusal {
    fn new(status: u16, message: impl Into<String>) -> Refusal {
        Refusal { status, message: message.into() }
    }
}

impl From<std::io::Error> for Refusal {
    fn from(e: std::io::Error) -> Refusal {
        Refusal::new(400, format!("reading the request: {e}"))
    }
}

fn read_line(reader: &mut BufReader<TcpStream>, budget: &mut usize) -> std::result::Result<String, Refusal> {
    let mut line = Vec::new();
    let limit = u64::try_from(*budget).unwrap_or(u64::MAX) + 1;
    reader.by_ref().take(limit).read_until(b'\n', &mut line)?;
    if line.len() > *budget {
        return Err(Refusal::new(431, format!("the request head is longer than {MAX_HEAD_BYTES} bytes")));
    }
    *budget -= line.len();
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    String::from_utf8(line).map_err(|_| Refusal::new(400, "the request head is not UTF-8"))
}

/// Reads one request; `None` when the client closed the connection
/// between requests.
fn read_request(
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
) -> std::result::Result<Option<Request>, Refusal> {
    let mut budget = MAX_HEAD_BYTES;
    let mut request_line = String::new();
    while request_line.is_empty() {
        if reader.fill_buf().map(|b| b.is_empty()).unwrap_or(true) {
            return Ok(None);
        }
        request_line = read_line(reader, &mut budget)?;
    }
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Refusal::new(400, format!("malformed request line '{request_line}'")));
    };
    let mut keep_alive = version != "HTTP/1.0";
    let mut content_length = None;
    let mut chunked = false;
    let mut expect_continue = false;
    loop {
        let line = read_line(reader, &mut budget)?;
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(Refusal::new(400, format!("malformed header line '{line}'")));
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                content_length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| Refusal::new(400, format!("Content-Length '{value}' is not a number")))?,
                );
            }
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            "connection" => {
                let value = value.to_ascii_lowercase();
                if value.contains("close") {
                    keep_alive = false;
                } else if value.contains("keep-alive") {
                    keep_alive = true;
                }
            }
            "expect" => expect_continue = value.eq_ignore_ascii_case("100-continue"),
            _ => {}
        }
    }
    if content_length.is_some_and(|len| len > MAX_BODY_BYTES) {
        return Err(Refusal::new(413, format!("the body is larger than {MAX_BODY_BYTES} bytes")));
    }
    if expect_continue && (chunked || content_length.is_some_and(|len| len > 0)) {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let body = if chunked {
        read_chunked(reader)?
    } else {
        let mut body = vec![0; content_length.unwrap_or(0)];
        reader.read_exact(&mut body)?;
        body
    };
    Ok(Some(Request { method: method.to_string(), path: path.to_string(), body, keep_alive }))
}

fn read_chunked(reader: &mut BufReader<TcpStream>) -> std::result::Result<Vec<u8>, Refusal> {
    let mut body = Vec::new();
    loop {
        let mut budget = MAX_HEAD_BYTES;
        let line = read_line(reader, &mut budget)?;
        let size = line.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(size, 16).map_err(|_| Refusal::new(400, format!("malformed chunk size '{size}'")))?;
        if size == 0 {
            // Trailers, up to the blank line.
            while !read_line(reader, &mut budget)?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY_BYTES {
            return Err(Refusal::new(413, format!("the body is larger than {MAX_BODY_BYTES} bytes")));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut end = [0u8; 2];
        reader.read_exact(&mut end)?;
        if &end != b"\r\n" {
            return Err(Refusal::new(400, "a chunk does not end with CRLF"));
        }
    }
}

/// What a path asks for.
#[derive(Debug, PartialEq)]
enum Route {
    Status(ModelRequest),
    Metadata(ModelRequest),
    Predict(ModelRequest),
    Classify(ModelRequest),
    Regress(ModelRequest),
    /// A verb TensorFlow Serving does not have either.
    OtherVerb(String),
}

/// `/v1/models/NAME[/versions/N|/labels/L][/metadata|:VERB]`.
fn parse_route(path: &str) -> std::result::Result<Route, Status> {
    let malformed = || Status::invalid_argument(format!("malformed request: {path} (expected /v1/models/NAME...)"));
    let path = path.split('?').next().unwrap_or_default();
    let rest = path.strip_prefix("/v1/models/").ok_or_else(malformed)?;
    let (rest, verb) = match rest.rsplit_once(':') {
        Some((rest, verb)) if !verb.contains('/') => (rest, Some(verb)),
        _ => (rest, None),
    };
    let mut segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let metadata = verb.is_none() && segments.last() == Some(&"metadata") && segments.len() > 1;
    if metadata {
        segments.pop();
    }
    let mut request = ModelRequest::default();
    match segments.as_slice() {
        [name] => request.name = percent_decoded(name),
        [name, "versions", n] => {
            request.name = percent_decoded(name);
            request.version =
                Some(n.parse().map_err(|_| Status::invalid_argument(format!("version '{n}' is not a number")))?);
        }
        [name, "labels", label] => {
            request.name = percent_decoded(name);
            request.label = Some(percent_decoded(label));
        }
        _ => return Err(malformed()),
    }
    Ok(match (verb, metadata) {
        (Some("predict"), _) => Route::Predict(request),
        (Some("classify"), _) => Route::Classify(request),
        (Some("regress"), _) => Route::Regress(request),
        (Some(other), _) => Route::OtherVerb(other.to_string()),
        (None, true) => Route::Metadata(request),
        (None, false) => Route::Status(request),
    })
}

fn percent_decoded(text: &str) -> String {
    crate::grpc::wire::percent_decode(text.as_bytes())
}

fn route(shared: &Shared, request: &Request) -> (u16, String) {
    let answer = match parse_route(&request.path) {
        Err(e) => Err(e),
        Ok(route) => match (request.method.as_str(), route) {
            ("POST", Route::Predict(spec)) => predict(shared, spec, &request.body),
            ("GET", Route::Status(spec)) => status(&shared.models, &spec),
            ("GET", Route::Metadata(spec)) => metadata(&shared.models, &spec),
            ("POST", Route::Classify(spec)) => classify(shared, spec, &request.body),
            ("POST", Route::Regress(spec)) => regress(shared, spec, &request.body),
            ("POST", Route::OtherVerb(verb)) => Err(Status::unimplemented(format!(
                "':{verb}' is not served: the verbs are ':predict', ':classify' and ':regress'"
            ))),
            (method, _) => Err(Status::new(
                Code::Unimplemented,
                format!(
                    "{method} {}: predict, classify and regress are POST, status and metadata are GET",
                    request.path
                ),
            )),
        },
    };
    match answer {
        Ok(body) => (200, body),
        Err(e) => (http_status(e.code), error_body(&e.message)),
    }
}

fn predict(shared: &Shared, mut spec: ModelRequest, body: &[u8]) -> Result<String> {
    let parsed = parse_predict_body(body)?;
    spec.signature = parsed.signature.clone();
    let form = parsed.form;
    let (version, signature) = shared.models.signature(&spec)?;
    let inputs = parsed.inputs(signature).map_err(|e| {
        e.context(format_args!(
            "model '{}' version {} signature '{}'",
            spec.name,
            version.version,
            spec.signature_or_default()
        ))
    })?;
    let prediction = shared.models.predict(&spec, inputs, &[])?;
    predict_answer(form, &prediction.outputs)
}

fn classify(shared: &Shared, mut spec: ModelRequest, body: &[u8]) -> Result<String> {
    let parsed = parse_examples_body(body)?;
    spec.signature = parsed.signature;
    classify_answer(&shared.models.classify(&spec, &parsed.input, None)?)
}

fn regress(shared: &Shared, mut spec: ModelRequest, body: &[u8]) -> Result<String> {
    let parsed = parse_examples_body(body)?;
    spec.signature = parsed.signature;
    regress_answer(&shared.models.regress(&spec, &parsed.input, None)?)
}

fn status(models: &Models, spec: &ModelRequest) -> Result<String> {
    let versions: Vec<_> = models
        .status(spec)?
        .into_iter()
        .map(|v| json!({"version": v.to_string(), "state": state_name(STATE_AVAILABLE), "status": {"error_code": "OK", "error_message": ""}}))
        .collect();
    Ok(json!({ "model_version_status": versions }).to_string())
}

fn state_name(state: i32) -> &'static str {
    match state {
        STATE_AVAILABLE => "AVAILABLE",
        _ => "UNKNOWN",
    }
}

fn metadata(models: &Models, spec: &ModelRequest) -> Result<String> {
    let version = models.version(spec)?;
    let info = |info: &TensorInfo| {
        let shape = match &info.shape {
            None => json!({"dim": [], "unknown_rank": true}),
            Some(dims) => json!({
                "dim": dims.iter().map(|d| json!({"size": d.to_string(), "name": ""})).collect::<Vec<_>>(),
                "unknown_rank": false,
            }),
        };
        json!({"dtype": tf_dtype_name(info.dtype), "tensor_shape": shape, "name": info.tensor})
    };
    let signatures: serde_json::Map<String, serde_json::Value> = version
        .model
        .meta_graph()
        .signatures
        .iter()
        .map(|(key, sig)| {
            let side = |ends: &std::collections::BTreeMap<String, TensorInfo>| {
                ends.iter().map(|(k, v)| (k.clone(), info(v))).collect::<serde_json::Map<_, _>>()
            };
            (
                key.clone(),
                json!({"inputs": side(&sig.inputs), "outputs": side(&sig.outputs), "method_name": sig.method, "defaults": {}}),
            )
        })
        .collect();
    Ok(json!({
        "model_spec": {"name": spec.name, "signature_name": "", "version": version.version.to_string()},
        "metadata": {"signature_def": {"signature_def": signatures}},
    })
    .to_string())
}

/// TensorFlow Serving's HTTP status for each error code.
fn http_status(code: Code) -> u16 {
    match code {
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
        Code::Unauthenticated => 401,
        Code::PermissionDenied => 403,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::Aborted => 409,
        Code::ResourceExhausted => 429,
        Code::Cancelled => 499,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
        Code::DeadlineExceeded => 504,
        Code::Unknown | Code::Internal | Code::DataLoss => 500,
    }
}

fn error_body(message: &str) -> String {
    json!({ "error": message }).to_string()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        499 => "Client Closed Request",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Internal Server Error",
    }
}

fn write_response(stream: &mut TcpStream, status: u16, body: &str, keep_alive: bool) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        reason(status),
        body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    );
    // One write for a small answer: the head alone would wait on the
    // client's delayed ACK.
    let mut whole = Vec::with_capacity(head.len() + body.len());
    whole.extend_from_slice(head.as_bytes());
    whole.extend_from_slice(body.as_bytes());
    stream.write_all(&whole)?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, version: Option<i64>, label: Option<&str>) -> ModelRequest {
        ModelRequest { name: name.into(), version, label: label.map(str::to_string), signature: String::new() }
    }

    #[test]
    fn paths_route_as_tensorflow_servings() {
        assert_eq!(parse_route("/v1/models/mlp").unwrap(), Route::Status(spec("mlp", None, None)));
        assert_eq!(parse_route("/v1/models/mlp/versions/3").unwrap(), Route::Status(spec("mlp", Some(3), None)));
        assert_eq!(parse_route("/v1/models/mlp/metadata").unwrap(), Route::Metadata(spec("mlp", None, None)));
        assert_eq!(
            parse_route("/v1/models/mlp/labels/stable/metadata").unwrap(),
            Route::Metadata(spec("mlp", None, Some("stable")))
        );
        assert_eq!(parse_route("/v1/models/mlp:predict").unwrap(), Route::Predict(spec("mlp", None, None)));
        assert_eq!(
            parse_route("/v1/models/my%20mlp/versions/2:predict").unwrap(),
            Route::Predict(spec("my mlp", Some(2), None))
        );
        assert_eq!(parse_route("/v1/models/mlp:classify").unwrap(), Route::Classify(spec("mlp", None, None)));
        assert_eq!(
            parse_route("/v1/models/mlp/versions/3:regress").unwrap(),
            Route::Regress(spec("mlp", Some(3), None))
        );
        assert_eq!(parse_route("/v1/models/mlp:explain").unwrap(), Route::OtherVerb("explain".into()));
        assert!(parse_route("/v2/models/mlp").unwrap_err().to_string().contains("/v2/models/mlp"));
        assert!(parse_route("/v1/models/mlp/versions/x").unwrap_err().to_string().contains("'x'"));
        assert!(parse_route("/v1/models/").is_err());
    }

    #[test]
    fn error_codes_map_to_tensorflow_servings_http_statuses() {
        assert_eq!(http_status(Code::InvalidArgument), 400);
        assert_eq!(http_status(Code::NotFound), 404);
        assert_eq!(http_status(Code::Unimplemented), 501);
        assert_eq!(http_status(Code::DeadlineExceeded), 504);
        assert_eq!(reason(http_status(Code::Internal)), "Internal Server Error");
    }
}
