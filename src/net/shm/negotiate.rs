//! Setting the channel up, after the hello, over the TCP connection: the
//! client creates the region and offers it (`ShmOffer`); the server, on
//! the same host, fetches its descriptor over an abstract Unix-domain
//! socket (SCM_RIGHTS), maps it and answers at each stage (`ShmAnswer`).
//! Any failure on either side means TCP, with one log line saying why.
//!
//! Owns: the host identity, the two messages, the descriptor hand-out and
//! both sides' steps. Must not touch the channel once it is built (the
//! connection decides when to use it) or read frames other than its own:
//! it speaks through [`ControlChannel`], which the connection implements.

use super::region::{self, Layout, SharedRegion};
use super::{ShmChannel, ShmFault, ShmOptions, Side};
use crate::net::frame::{FrameKind, FrameLimits};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

/// This host, as both ends compare it: the kernel's boot id and the host
/// name. Equal identities are necessary, not sufficient: the Unix-domain
/// socket must also connect (same network namespace).
pub fn host_identity() -> String {
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}/{}", boot_id.trim(), host.trim())
}

/// The client's offer: a region it created, and where to fetch it.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ShmOffer {
    pub host: String,
    /// Abstract Unix-socket name the region's descriptor is handed out on.
    pub socket_name: String,
    pub slots: u32,
    pub ring_bytes: u64,
    pub token: [u64; 2],
}

/// The server's answers: `CONNECTING` (it will fetch the region), then
/// `MAPPED` (both sides switch) or `DECLINED` with a reason.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ShmAnswer {
    pub stage: u8,
    pub reason: String,
}

pub const DECLINED: u8 = 0;
pub const CONNECTING: u8 = 1;
pub const MAPPED: u8 = 2;

fn random_token() -> [u64; 2] {
    let mut bytes = [0u8; 16];
    // getrandom(2) never fails for 16 bytes once the pool is ready; a
    // failure leaves time-derived values, which only weakens the token.
    // SAFETY: writes at most 16 bytes into our array.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != 16 {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        bytes = (nanos ^ u128::from(std::process::id())).to_le_bytes();
    }
    [
        u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")),
        u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes")),
    ]
}

/// What the client's side of the negotiation needs from the connection.
pub(crate) trait ControlChannel {
    fn peer(&self) -> &str;
    fn send_control(&self, meta: &[u8]) -> Result<(), String>;
    fn recv_control(&mut self, deadline: Instant) -> Result<Vec<u8>, String>;
}

/// The client's side: offers a region when enabled; `Ok(None)` means TCP
/// (after one log line saying why, unless shared memory is off). `Err`: the
/// connection itself failed.
pub(crate) fn negotiate_client(
    control: &mut dyn ControlChannel,
    options: &ShmOptions,
    limits: FrameLimits,
    deadline: Instant,
) -> Result<Option<ShmChannel>, String> {
    if !options.enabled {
        return Ok(None);
    }
    let peer = control.peer().to_string();
    let fallback = |reason: String| {
        tracing::warn!("shared memory with {peer} unavailable ({reason}); using TCP");
        Ok(None)
    };
    let layout = match Layout::new(options.slots, options.ring_bytes) {
        Ok(layout) => layout,
        Err(reason) => return fallback(reason),
    };
    let token = random_token();
    let created = if options.fault == Some(ShmFault::Memfd) {
        Err(std::io::Error::other("memfd_create: disabled by a test"))
    } else if options.hugetlb {
        SharedRegion::create_hugetlb(layout, token).or_else(|e| {
            tracing::warn!("shared memory with {peer}: no huge pages ({e}); using regular pages");
            SharedRegion::create(layout, token)
        })
    } else {
        SharedRegion::create(layout, token)
    };
    let (region, fd) = match created {
        Ok(pair) => pair,
        Err(e) => return fallback(e.to_string()),
    };
    let socket_name = format!("ringflow-shm.{}.{:016x}{:016x}", std::process::id(), token[0], token[1]);
    let listener = match bind_abstract(&socket_name, options.fault) {
        Ok(listener) => listener,
        Err(e) => return fallback(format!("unix socket: {e}")),
    };
    let offer =
        ShmOffer { host: host_identity(), socket_name, slots: options.slots, ring_bytes: options.ring_bytes, token };
    let meta = crate::net::message::encode(&offer).map_err(|s| s.into_message())?;
    control.send_control(&meta)?;
    let first = read_answer(control, deadline)?;
    if first.stage != CONNECTING {
        tracing::info!("shared memory with {peer} declined ({}); using TCP", first.reason);
        return Ok(None);
    }
    if let Err(e) = hand_out(&listener, &fd, deadline) {
        drop(listener); // the server's connect or receive fails: it declines
        let _ = read_answer(control, deadline)?;
        return fallback(format!("handing the region out: {e}"));
    }
    drop(fd);
    let last = read_answer(control, deadline)?;
    if last.stage != MAPPED {
        return fallback(format!("the server could not map the region: {}", last.reason));
    }
    tracing::debug!("shared memory with {peer}: {} bytes", layout.total);
    Ok(Some(ShmChannel::new(region, Side::Client, limits, options.trim_after).writing_in_place(options.write_in_place)))
}

fn read_answer(control: &mut dyn ControlChannel, deadline: Instant) -> Result<ShmAnswer, String> {
    let meta = control.recv_control(deadline)?;
    crate::net::message::decode::<ShmAnswer>(&meta).map_err(|s| s.into_message())
}

fn bind_abstract(name: &str, fault: Option<ShmFault>) -> std::io::Result<std::os::unix::net::UnixListener> {
    use std::os::linux::net::SocketAddrExt;
    if fault == Some(ShmFault::UnixSocket) {
        return Err(std::io::Error::other("disabled by a test"));
    }
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Accepts the server's connection (until `deadline`) and sends it `fd`.
fn hand_out(listener: &std::os::unix::net::UnixListener, fd: &OwnedFd, deadline: Instant) -> std::io::Result<()> {
    wait_readable(listener.as_raw_fd(), deadline)?;
    let (stream, _) = listener.accept()?;
    region::send_fd(stream.as_raw_fd(), fd.as_raw_fd())
}

fn wait_readable(fd: std::os::fd::RawFd, deadline: Instant) -> std::io::Result<()> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"));
        }
        let mut pollfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { libc::poll(&mut pollfd, 1, left.as_millis().clamp(1, i32::MAX as u128) as i32) };
        if ready > 0 {
            return Ok(());
        }
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// The server's side, given the client's offer: fetches and maps the
/// region, answering at each stage. `None` means TCP (the reason was sent
/// to the client and logged).
pub(crate) fn answer_offer(
    control: &mut dyn ControlChannel,
    offer_meta: &[u8],
    options: &ShmOptions,
    limits: FrameLimits,
    deadline: Instant,
) -> Result<Option<ShmChannel>, String> {
    let answer = |control: &mut dyn ControlChannel, stage: u8, reason: String| {
        let meta = crate::net::message::encode(&ShmAnswer { stage, reason }).map_err(|s| s.into_message())?;
        control.send_control(&meta)
    };
    let peer = control.peer().to_string();
    let offer = match crate::net::message::decode::<ShmOffer>(offer_meta) {
        Ok(offer) => offer,
        Err(status) => return Err(format!("malformed shared-memory offer: {}", status.message)),
    };
    let decline = |control: &mut dyn ControlChannel, reason: String| {
        tracing::info!("shared memory with {peer} declined ({reason}); using TCP");
        answer(control, DECLINED, reason).map(|()| None)
    };
    if !options.enabled {
        return decline(control, "shared memory is off on this server".into());
    }
    if offer.host != host_identity() {
        return decline(control, "the peer is on another host".into());
    }
    let layout = match Layout::new(offer.slots, offer.ring_bytes) {
        Ok(layout) => layout,
        Err(reason) => return decline(control, reason),
    };
    answer(control, CONNECTING, String::new())?;
    let fetched = fetch_region(&offer.socket_name, options.fault, deadline);
    let opened = fetched.and_then(|fd| SharedRegion::open(&fd, layout, offer.token));
    match opened {
        Ok(region) => {
            answer(control, MAPPED, String::new())?;
            tracing::debug!("shared memory with {peer}: {} bytes", layout.total);
            Ok(Some(
                ShmChannel::new(region, Side::Server, limits, options.trim_after)
                    .writing_in_place(options.write_in_place),
            ))
        }
        Err(reason) => {
            tracing::warn!("shared memory with {peer} unavailable ({reason}); using TCP");
            answer(control, DECLINED, reason).map(|()| None)
        }
    }
}

fn fetch_region(name: &str, fault: Option<ShmFault>, deadline: Instant) -> Result<OwnedFd, String> {
    use std::os::linux::net::SocketAddrExt;
    if fault == Some(ShmFault::UnixSocket) {
        return Err("unix socket: disabled by a test".into());
    }
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| format!("unix socket name: {e}"))?;
    let stream = std::os::unix::net::UnixStream::connect_addr(&addr).map_err(|e| format!("unix socket: {e}"))?;
    stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    wait_readable(stream.as_raw_fd(), deadline).map_err(|e| format!("waiting for the region: {e}"))?;
    region::recv_fd(stream.as_raw_fd())
        .map_err(|e| format!("receiving the region: {e}"))?
        .ok_or_else(|| "the peer sent no region".to_string())
}

/// Whether `frame` is a negotiation frame (the first after the hello).
pub(crate) fn is_control(kind: FrameKind) -> bool {
    kind == FrameKind::Transport
}
