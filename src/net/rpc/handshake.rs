//! The hello exchange: the protocol check, the cluster secret proved both
//! ways, and reading a peer's first frames within a small, fixed budget.
//!
//! Owns: [`ClusterSecret`] (read from `--secret-file` /
//! `RINGFLOW_SECRET_FILE`), nonces and proofs, and `SmallFrame`, which
//! assembles a hello without ever holding more than [`MAX_HELLO_BYTES`].
//! Must not know methods: after the handshake, frames are the reader's.
//!
//! With a secret, each side proves it holds the key without sending it:
//!
//! ```text
//! client → server   Hello { nonce_c }
//! server → client   Hello { nonce_s, auth: HMAC(k, "ringflow server" ‖ nonce_c ‖ nonce_s) }
//! client → server   Auth  { proof:     HMAC(k, "ringflow client" ‖ nonce_s ‖ nonce_c) }
//! server → client   Auth  { }                       (or an Error frame, then close)
//! ```
//!
//! k is SHA-256 of the secret file's contents (trailing whitespace
//! trimmed). Fresh nonces on both sides mean a recorded exchange proves
//! nothing later. Nothing but these frames is decoded before the proof
//! checks; the wire is not encrypted (deploy/README.md says what that leaves open).

use super::TransportOptions;
use super::conn::NetError;
use crate::error::{Code, Status};
use crate::net::frame::{self, FrameHeader, FrameKind, FrameLimits, HEADER_BYTES, OutgoingFrame, ReceivedFrame};
use crate::net::message::{self, AuthProof, ErrorMeta, Hello};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Largest hello or auth frame (header + body) either side accepts: a peer
/// that has not proved itself costs at most this much memory.
pub const MAX_HELLO_BYTES: usize = 1024;
const NONCE_BYTES: usize = 16;
const SERVER_LABEL: &[u8] = b"ringflow server";
const CLIENT_LABEL: &[u8] = b"ringflow client";
/// The environment variable naming the secret file when no flag does.
pub const SECRET_FILE_ENV: &str = "RINGFLOW_SECRET_FILE";

fn hello_limits() -> FrameLimits {
    FrameLimits { max_frame_bytes: MAX_HELLO_BYTES as u64, max_payloads: 0 }
}

/// The key every task of a cluster shares.
pub struct ClusterSecret {
    key: [u8; 32],
    /// Where it came from, for errors.
    source: String,
    /// The file it was read from, if any (child processes get it too).
    file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterSecret(from {})", self.source)
    }
}

impl ClusterSecret {
    /// Reads the secret file. An empty file is an error (it would protect
    /// nothing); a file others can read is used, with a warning.
    pub fn from_file(path: &Path) -> Result<ClusterSecret, Status> {
        let bytes = std::fs::read(path)
            .map_err(|e| Status::invalid_argument(format!("cluster secret file {}: {e}", path.display())))?;
        let trimmed = bytes.trim_ascii_end();
        if trimmed.is_empty() {
            return Err(Status::invalid_argument(format!("cluster secret file {} is empty", path.display())));
        }
        if let Ok(meta) = std::fs::metadata(path) {
            use std::os::unix::fs::PermissionsExt;
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!("cluster secret file {} is readable by others (chmod 600 it)", path.display());
            }
        }
        let mut secret = ClusterSecret::from_bytes(trimmed, path.display().to_string());
        secret.file = Some(path.to_path_buf());
        Ok(secret)
    }

    pub fn from_bytes(secret: &[u8], source: String) -> ClusterSecret {
        ClusterSecret { key: Sha256::digest(secret).into(), source, file: None }
    }

    fn proof(&self, label: &[u8], first: &[u8], second: &[u8]) -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(label);
        mac.update(first);
        mac.update(second);
        mac.finalize().into_bytes().to_vec()
    }

    /// Constant-time check of a peer's proof.
    fn verify(&self, label: &[u8], first: &[u8], second: &[u8], proof: &[u8]) -> bool {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(label);
        mac.update(first);
        mac.update(second);
        mac.verify_slice(proof).is_ok()
    }
}

/// Whether connections must prove a cluster secret.
#[derive(Debug, Clone, Default)]
pub enum SecretSetting {
    /// No secret: anyone who reaches the port may connect.
    #[default]
    Open,
    Key(Arc<ClusterSecret>),
    /// A secret was asked for but could not be read: every handshake fails
    /// with this reason rather than silently running open.
    Unreadable(Arc<str>),
}

/// What [`SecretSetting::process_default`] returns once set.
static PROCESS_DEFAULT: std::sync::OnceLock<SecretSetting> = std::sync::OnceLock::new();

impl SecretSetting {
    /// The setting every `TransportOptions::default()` of this process
    /// starts with: what the command line chose (`--secret-file`), else
    /// `RINGFLOW_SECRET_FILE`.
    pub fn process_default() -> SecretSetting {
        PROCESS_DEFAULT.get().cloned().unwrap_or_else(SecretSetting::from_env)
    }

    /// Fixes the process default (once; the command line does it first).
    pub fn set_process_default(setting: SecretSetting) {
        let _ = PROCESS_DEFAULT.set(setting);
    }

    /// From `RINGFLOW_SECRET_FILE`, when set.
    pub fn from_env() -> SecretSetting {
        match std::env::var_os(SECRET_FILE_ENV) {
            Some(path) if !path.is_empty() => SecretSetting::from_file(Path::new(&path)),
            _ => SecretSetting::Open,
        }
    }

    pub fn from_file(path: &Path) -> SecretSetting {
        match ClusterSecret::from_file(path) {
            Ok(secret) => SecretSetting::Key(Arc::new(secret)),
            Err(e) => SecretSetting::Unreadable(e.message.as_str().into()),
        }
    }

    /// Fails when a secret was asked for but is unusable.
    pub fn check(&self) -> Result<(), Status> {
        match self {
            SecretSetting::Unreadable(reason) => Err(Status::invalid_argument(reason.to_string())),
            _ => Ok(()),
        }
    }

    /// The secret file in use, if the secret came from one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            SecretSetting::Key(secret) => secret.file.as_deref(),
            _ => None,
        }
    }

    pub fn is_set(&self) -> bool {
        !matches!(self, SecretSetting::Open)
    }
}

fn nonce() -> Vec<u8> {
    let mut n = vec![0u8; NONCE_BYTES];
    if getrandom::fill(&mut n).is_err() {
        // No OS randomness: still unique per connection, not unpredictable.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        n.copy_from_slice(&Sha256::digest(t.to_le_bytes())[..NONCE_BYTES]);
    }
    n
}

/// A hello or auth frame being received: at most [`MAX_HELLO_BYTES`],
/// read exactly (never past the frame), so what follows it stays in the
/// socket for the connection's reader.
pub(crate) struct SmallFrame {
    buf: Box<[u8; MAX_HELLO_BYTES]>,
    have: usize,
    need: usize,
}

/// What a read made of a [`SmallFrame`].
pub(crate) enum Progress {
    /// More bytes are needed; wait for the socket.
    Pending,
    Done(ReceivedFrame),
}

impl SmallFrame {
    pub(crate) fn new() -> SmallFrame {
        SmallFrame { buf: Box::new([0; MAX_HELLO_BYTES]), have: 0, need: HEADER_BYTES }
    }

    /// Whether nothing has arrived yet.
    pub(crate) fn is_empty(&self) -> bool {
        self.have == 0
    }

    /// Reads what the socket has (without blocking) and decodes the frame
    /// once whole. A header that announces more than the budget is refused
    /// before anything else is read.
    pub(crate) fn read_from(&mut self, fd: RawFd) -> Result<Progress, String> {
        loop {
            if self.have == self.need {
                if self.need == HEADER_BYTES {
                    let header = FrameHeader::decode(&self.buf[..HEADER_BYTES], &hello_limits())
                        .map_err(|e| format!("first frames must be small hellos: {e}"))?;
                    self.need = header.frame_len() as usize;
                    if self.need > HEADER_BYTES {
                        continue;
                    }
                }
                let frame = frame::decode_frame(&self.buf[..self.need], &hello_limits()).map_err(|e| e.to_string())?;
                self.have = 0;
                self.need = HEADER_BYTES;
                return Ok(Progress::Done(frame));
            }
            let want = self.need - self.have;
            // SAFETY: the destination is `want` bytes of our own buffer
            // (`need` ≤ MAX_HELLO_BYTES by the header check).
            let got = unsafe {
                libc::recv(
                    fd,
                    self.buf.as_mut_ptr().add(self.have).cast(),
                    want,
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if got == 0 {
                return Err(if self.have == 0 {
                    "closed before its hello".into()
                } else {
                    format!("closed after {} bytes of a hello", self.have)
                });
            }
            if got < 0 {
                let e = std::io::Error::last_os_error();
                return match e.kind() {
                    std::io::ErrorKind::WouldBlock => Ok(Progress::Pending),
                    std::io::ErrorKind::Interrupted => continue,
                    _ => Err(format!("recv: {e}")),
                };
            }
            self.have += got as usize;
        }
    }

    /// Blocks (polling) until the frame is whole or `deadline` passes.
    pub(crate) fn read_by(&mut self, fd: RawFd, deadline: Instant) -> Result<ReceivedFrame, String> {
        loop {
            if let Progress::Done(frame) = self.read_from(fd)? {
                return Ok(frame);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("no answer to the hello before the connect timeout".into());
            }
            let mut pollfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd for the duration of the call.
            unsafe { libc::poll(&mut pollfd, 1, left.as_millis().clamp(1, i32::MAX as u128) as i32) };
        }
    }
}

/// Writes a small frame without blocking; a peer whose socket cannot take
/// a few hundred bytes at once is not worth waiting for.
pub(crate) fn send_small(fd: RawFd, kind: FrameKind, meta: &[u8]) -> Result<(), String> {
    let frame = OutgoingFrame::new(kind, 0, 0, meta, &[], &hello_limits()).map_err(|e| e.to_string())?;
    let bytes = frame.to_vec();
    // SAFETY: `bytes` is valid for its length for the call.
    let sent = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if sent == bytes.len() as isize {
        Ok(())
    } else if sent < 0 {
        Err(format!("send: {}", std::io::Error::last_os_error()))
    } else {
        Err("the peer's socket took only part of a hello".into())
    }
}

fn send_error(fd: RawFd, status: &Status) {
    if let Ok(meta) = message::encode(&ErrorMeta { code: status.code as u8, message: status.message.clone() }) {
        let _ = send_small(fd, FrameKind::Error, &meta);
    }
}

fn our_hello(options: &TransportOptions, nonce: Vec<u8>, auth: Vec<u8>) -> Result<Vec<u8>, String> {
    message::encode(&Hello {
        protocol_version: frame::PROTOCOL_VERSION,
        incarnation: options.incarnation,
        name: options.name.clone(),
        nonce,
        auth,
    })
    .map(|meta| meta.to_vec())
    .map_err(|s| s.into_message())
}

fn decode_hello(frame: &ReceivedFrame) -> Result<Hello, String> {
    match frame.header.kind {
        FrameKind::Hello => {}
        FrameKind::Error => return Err(error_text(frame)),
        kind => return Err(format!("first frame is {kind:?}, not a hello")),
    }
    let hello = message::decode::<Hello>(frame.meta_bytes()).map_err(|s| s.into_message())?;
    if hello.protocol_version != frame::PROTOCOL_VERSION {
        return Err(format!("peer speaks protocol {}, we speak {}", hello.protocol_version, frame::PROTOCOL_VERSION));
    }
    Ok(hello)
}

fn is_unauthenticated(frame: &ReceivedFrame) -> bool {
    message::decode::<ErrorMeta>(frame.meta_bytes()).is_ok_and(|e| e.code == Code::Unauthenticated as u8)
}

fn error_text(frame: &ReceivedFrame) -> String {
    match message::decode::<ErrorMeta>(frame.meta_bytes()) {
        Ok(e) => format!("refused: {}", e.message),
        Err(_) => "refused with an unreadable error".into(),
    }
}

/// The server's side of one connection's handshake, driven by whoever
/// watches its socket: feed it frames as they complete.
pub(crate) struct ServerHandshake {
    state: ServerState,
}

enum ServerState {
    AwaitHello,
    AwaitProof { hello: Hello, ours: Vec<u8> },
    Failed,
}

/// What the server does after a frame of the handshake.
pub(crate) enum ServerStep {
    /// Wait for the next frame.
    Continue,
    /// The peer is in: hand the connection to its reader.
    Accepted(Hello),
}

impl ServerHandshake {
    pub(crate) fn new() -> ServerHandshake {
        ServerHandshake { state: ServerState::AwaitHello }
    }

    /// Takes one complete frame. `Err` means refuse the peer (the reason
    /// is for the log; the peer got an error frame where that helps it).
    pub(crate) fn on_frame(
        &mut self,
        fd: RawFd,
        frame: ReceivedFrame,
        options: &TransportOptions,
    ) -> Result<ServerStep, String> {
        match std::mem::replace(&mut self.state, ServerState::Failed) {
            ServerState::AwaitHello => {
                let hello = decode_hello(&frame)?;
                match &options.secret {
                    SecretSetting::Open => {
                        send_small(fd, FrameKind::Hello, &our_hello(options, Vec::new(), Vec::new())?)?;
                        Ok(ServerStep::Accepted(hello))
                    }
                    SecretSetting::Unreadable(reason) => {
                        send_error(fd, &Status::unavailable("the server's cluster secret is unusable"));
                        Err(format!("cannot check the cluster secret: {reason}"))
                    }
                    SecretSetting::Key(secret) => {
                        if hello.nonce.len() != NONCE_BYTES {
                            send_error(
                                fd,
                                &Status::new(Code::Unauthenticated, "this server requires the cluster secret"),
                            );
                            return Err(format!("hello from '{}' without a nonce (no secret?)", hello.name));
                        }
                        let ours = nonce();
                        let proof = secret.proof(SERVER_LABEL, &hello.nonce, &ours);
                        send_small(fd, FrameKind::Hello, &our_hello(options, ours.clone(), proof)?)?;
                        self.state = ServerState::AwaitProof { hello, ours };
                        Ok(ServerStep::Continue)
                    }
                }
            }
            ServerState::AwaitProof { hello, ours } => {
                let SecretSetting::Key(secret) = &options.secret else {
                    return Err("secret setting changed during a handshake".into());
                };
                if frame.header.kind != FrameKind::Auth {
                    return Err(format!("expected the cluster-secret proof, got a {:?} frame", frame.header.kind));
                }
                let proof = message::decode::<AuthProof>(frame.meta_bytes()).map_err(|s| s.into_message())?;
                if !secret.verify(CLIENT_LABEL, &ours, &hello.nonce, &proof.proof) {
                    send_error(fd, &Status::new(Code::Unauthenticated, "wrong cluster secret"));
                    return Err(format!("'{}' does not hold the cluster secret", hello.name));
                }
                let ack = message::encode(&AuthProof { proof: Vec::new() }).map_err(|s| s.into_message())?;
                send_small(fd, FrameKind::Auth, &ack)?;
                Ok(ServerStep::Accepted(hello))
            }
            ServerState::Failed => Err("handshake already failed".into()),
        }
    }
}

/// The client's side: hello, the server's proof checked, ours sent and
/// acknowledged. Returns the server's hello.
pub(crate) fn client_handshake(
    fd: RawFd,
    peer: &str,
    options: &TransportOptions,
    deadline: Instant,
) -> Result<Hello, NetError> {
    let fail = |reason: String| NetError::Handshake { peer: peer.to_string(), reason };
    let refused = |reason: String| NetError::Auth { peer: peer.to_string(), reason };
    let secret = match &options.secret {
        SecretSetting::Open => None,
        SecretSetting::Key(secret) => Some(secret.clone()),
        SecretSetting::Unreadable(reason) => return Err(refused(reason.to_string())),
    };
    let ours = if secret.is_some() { nonce() } else { Vec::new() };
    send_blocking(fd, FrameKind::Hello, &our_hello(options, ours.clone(), Vec::new()).map_err(fail)?, deadline)
        .map_err(fail)?;
    let mut small = SmallFrame::new();
    let first = small.read_by(fd, deadline).map_err(fail)?;
    if first.header.kind == FrameKind::Error && is_unauthenticated(&first) {
        return Err(refused(error_text(&first)));
    }
    let hello = decode_hello(&first).map_err(fail)?;
    let Some(secret) = secret else {
        if !hello.auth.is_empty() {
            return Err(refused(format!(
                "the server requires the cluster secret: give this process --secret-file or {SECRET_FILE_ENV}"
            )));
        }
        return Ok(hello);
    };
    if hello.auth.is_empty() || hello.nonce.len() != NONCE_BYTES {
        return Err(refused("the server did not prove the cluster secret (started without --secret-file?)".into()));
    }
    if !secret.verify(SERVER_LABEL, &ours, &hello.nonce, &hello.auth) {
        return Err(refused("the server's cluster-secret proof is wrong (a different secret?)".into()));
    }
    let proof = AuthProof { proof: secret.proof(CLIENT_LABEL, &hello.nonce, &ours) };
    send_blocking(fd, FrameKind::Auth, &message::encode(&proof).map_err(|s| fail(s.into_message()))?, deadline)
        .map_err(fail)?;
    let ack = small.read_by(fd, deadline).map_err(fail)?;
    match ack.header.kind {
        FrameKind::Auth => Ok(hello),
        FrameKind::Error => Err(refused(error_text(&ack))),
        kind => Err(fail(format!("expected the server's acceptance, got a {kind:?} frame"))),
    }
}

/// Sends a small frame, waiting for the socket up to `deadline`.
fn send_blocking(fd: RawFd, kind: FrameKind, meta: &[u8], deadline: Instant) -> Result<(), String> {
    let frame = OutgoingFrame::new(kind, 0, 0, meta, &[], &hello_limits()).map_err(|e| e.to_string())?;
    let bytes = frame.to_vec();
    let mut sent = 0;
    while sent < bytes.len() {
        // SAFETY: the rest of `bytes` is valid for the call.
        let n = unsafe {
            libc::send(fd, bytes[sent..].as_ptr().cast(), bytes.len() - sent, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        };
        if n > 0 {
            sent += n as usize;
            continue;
        }
        let e = std::io::Error::last_os_error();
        if n < 0 && e.kind() == std::io::ErrorKind::WouldBlock {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("hello not sent before the connect timeout".into());
            }
            let mut pollfd = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
            // SAFETY: one valid pollfd for the duration of the call.
            unsafe { libc::poll(&mut pollfd, 1, left.as_millis().clamp(1, i32::MAX as u128) as i32) };
            continue;
        }
        if n < 0 && e.kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return Err(format!("send: {e}"));
    }
    Ok(())
}

/// The fuzzer's entry: `bytes` as everything a peer sends before its
/// connection is accepted, to a server with or without a secret, over a
/// socket pair. Refusals are expected; panics are the bugs.
#[doc(hidden)]
pub fn fuzz_server_handshake(bytes: &[u8], with_secret: bool) {
    use std::os::fd::AsRawFd;
    let Ok((mut peer, ours)) = std::os::unix::net::UnixStream::pair() else { return };
    let _ = std::io::Write::write_all(&mut peer, &bytes[..bytes.len().min(4096)]);
    drop(peer);
    let options = TransportOptions {
        secret: if with_secret {
            SecretSetting::Key(Arc::new(ClusterSecret::from_bytes(b"fuzz", "fuzz".into())))
        } else {
            SecretSetting::Open
        },
        ..TransportOptions::default()
    };
    let mut small = SmallFrame::new();
    let mut handshake = ServerHandshake::new();
    for _ in 0..4 {
        match small.read_from(ours.as_raw_fd()) {
            Ok(Progress::Done(frame)) => match handshake.on_frame(ours.as_raw_fd(), frame, &options) {
                Ok(ServerStep::Continue) => continue,
                Ok(ServerStep::Accepted(_)) | Err(_) => return,
            },
            Ok(Progress::Pending) | Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn options(secret: Option<&[u8]>) -> TransportOptions {
        TransportOptions {
            secret: match secret {
                Some(s) => SecretSetting::Key(Arc::new(ClusterSecret::from_bytes(s, "test".into()))),
                None => SecretSetting::Open,
            },
            name: "t".into(),
            ..TransportOptions::default()
        }
    }

    /// Runs the server side over a socket pair on a thread, the client here.
    fn handshake(server: Option<&[u8]>, client: Option<&[u8]>) -> (Result<Hello, NetError>, Result<Hello, String>) {
        let (a, b) = UnixStream::pair().unwrap();
        let server_options = options(server);
        let serving = std::thread::spawn(move || {
            let mut hs = ServerHandshake::new();
            let mut small = SmallFrame::new();
            let deadline = Instant::now() + std::time::Duration::from_secs(5);
            loop {
                let frame = small.read_by(b.as_raw_fd(), deadline)?;
                if let ServerStep::Accepted(hello) = hs.on_frame(b.as_raw_fd(), frame, &server_options)? {
                    return Ok(hello);
                }
            }
        });
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        let client_result = client_handshake(a.as_raw_fd(), "peer", &options(client), deadline);
        drop(a);
        (client_result, serving.join().unwrap())
    }

    #[test]
    fn same_secret_proves_both_ways_and_no_secret_stays_open() {
        let (c, s) = handshake(Some(b"k1"), Some(b"k1"));
        assert!(c.is_ok() && s.is_ok(), "{c:?} {s:?}");
        let (c, s) = handshake(None, None);
        assert!(c.is_ok() && s.is_ok(), "{c:?} {s:?}");
    }

    #[test]
    fn wrong_or_missing_secret_is_refused_on_both_sides() {
        let (c, s) = handshake(Some(b"k1"), Some(b"k2"));
        assert!(c.unwrap_err().to_string().contains("proof is wrong"));
        assert!(s.is_err());
        let (c, s) = handshake(Some(b"k1"), None);
        assert!(c.unwrap_err().to_string().contains("requires the cluster secret"), "");
        assert!(s.is_err());
        let (c, _) = handshake(None, Some(b"k1"));
        assert!(c.unwrap_err().to_string().contains("did not prove"));
    }

    #[test]
    fn a_hostile_header_is_refused_before_its_body_is_read() {
        let (a, b) = UnixStream::pair().unwrap();
        let big = OutgoingFrame::new(FrameKind::Hello, 0, 0, &vec![0u8; 4096], &[], &FrameLimits::default()).unwrap();
        std::io::Write::write_all(&mut &a, &big.to_vec()[..HEADER_BYTES]).unwrap();
        let mut small = SmallFrame::new();
        let err = small.read_from(b.as_raw_fd()).err().unwrap();
        assert!(err.contains("exceeds the limit of 1024"), "{err}");
    }

    #[test]
    fn a_secret_file_is_read_trimmed_and_an_empty_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        std::fs::write(&path, "abc\n").unwrap();
        let a = ClusterSecret::from_file(&path).unwrap();
        assert_eq!(a.key, ClusterSecret::from_bytes(b"abc", String::new()).key);
        std::fs::write(&path, "\n").unwrap();
        assert!(ClusterSecret::from_file(&path).unwrap_err().message.contains("is empty"));
        let missing = dir.path().join("missing");
        let err = ClusterSecret::from_file(&missing).unwrap_err();
        assert!(err.message.contains("missing"), "{}", err.message);
    }
}
