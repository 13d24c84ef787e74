//! [`TransportOptions`]: every limit and knob of the transport, set once at
//! start-up (TigerBeetle's "a limit on everything").

use super::handshake::SecretSetting;
use crate::net::frame::FrameLimits;
use crate::net::io::TransportKind;
use std::sync::OnceLock;
use std::time::Duration;

/// How long a waiting thread spins before it sleeps, µs: long enough to
/// cover a small training step's wait on its peer, which a shorter spin
/// turned into a wake-up (ARCHITECTURE.md has the figures).
pub const DEFAULT_SPIN_US: u64 = 150;

#[derive(Debug, Clone)]
pub struct TransportOptions {
    /// io_uring, the socket fallback, or automatic (default: from
    /// `RINGFLOW_TRANSPORT`, else automatic).
    pub transport: TransportKind,
    /// Largest frame (header + body) accepted or sent, in bytes.
    pub max_frame_bytes: u64,
    pub max_payloads_per_frame: u32,
    /// Requests outstanding on one connection, each way.
    pub max_in_flight: usize,
    /// Connections one server keeps at once.
    pub max_connections: usize,
    /// How long a waiting thread spins before it sleeps. Spinning removes a
    /// wake-up (~100 µs here) from every small round trip; on 2 cores it
    /// must stay bounded.
    pub spin_us: u64,
    /// Frames with at least this many payload bytes are sent with
    /// zero-copy send (io_uring SENDMSG_ZC); `u64::MAX` disables it.
    pub zerocopy_send_min_bytes: u64,
    /// Size of the buffers small frames are received into.
    pub recv_chunk_bytes: usize,
    pub connect_timeout_ms: u64,
    /// Longest a frame's send may take (a peer that stops reading); the
    /// connection is closed after. Calls also stop sending at their deadline.
    pub send_timeout_ms: u64,
    /// This process's incarnation, sent in the hello.
    pub incarnation: u64,
    /// How this process names itself in the hello (logs only).
    pub name: String,
    /// A registered-memory region whose slots (of `recv_chunk_bytes` each)
    /// small frames are received into; io_uring threads register it as a
    /// fixed buffer. `None`: chunks come from the heap.
    pub recv_region: Option<crate::alloc::Region>,
    /// The cluster secret peers must prove (default: the file named by
    /// `RINGFLOW_SECRET_FILE`, else none).
    pub secret: SecretSetting,
    /// A server closes a connection that has not finished its handshake
    /// within this long.
    pub handshake_timeout_ms: u64,
    /// Connections a server holds in their handshake at once; past it, the
    /// oldest is closed (a real peer finishes in microseconds).
    pub max_pending_handshakes: usize,
    /// The shared-memory channel to peers on this host (on by default;
    /// `RINGFLOW_TRANSPORT=tcp` turns it off).
    pub shm: crate::net::shm::ShmOptions,
}

impl Default for TransportOptions {
    fn default() -> Self {
        TransportOptions {
            transport: TransportKind::from_env(),
            max_frame_bytes: 8 << 30,
            max_payloads_per_frame: 1 << 16,
            max_in_flight: 4096,
            max_connections: 256,
            spin_us: std::env::var("RINGFLOW_SPIN_US").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_SPIN_US),
            zerocopy_send_min_bytes: u64::MAX,
            recv_chunk_bytes: 256 << 10,
            connect_timeout_ms: 5_000,
            send_timeout_ms: 10_000,
            incarnation: process_incarnation(),
            name: String::new(),
            recv_region: None,
            secret: SecretSetting::process_default(),
            handshake_timeout_ms: 3_000,
            max_pending_handshakes: 4096,
            shm: crate::net::shm::ShmOptions::default(),
        }
    }
}

impl TransportOptions {
    pub fn frame_limits(&self) -> FrameLimits {
        FrameLimits { max_frame_bytes: self.max_frame_bytes, max_payloads: self.max_payloads_per_frame }
    }

    pub fn spin(&self) -> Duration {
        Duration::from_micros(self.spin_us)
    }

    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
}

/// A number that differs between runs of the process (time and pid mixed),
/// never zero.
pub fn process_incarnation() -> u64 {
    static INCARNATION: OnceLock<u64> = OnceLock::new();
    *INCARNATION.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mixed = nanos ^ (u64::from(std::process::id())).rotate_left(40);
        // splitmix64 finaliser, so nearby starts give unrelated numbers.
        let mut z = mixed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)).max(1)
    })
}
