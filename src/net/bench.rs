//! `ringflow bench pingpong bulk`: the transport measured against raw TCP
//! between the same two processes, in the same run.
//!
//! Owns: the scenarios and their peer process (this binary, started with a
//! hidden subcommand, see [`run_peer`]). Each ringflow figure carries the
//! raw baseline measured just before it, and the ratio.
//!
//! - pingpong: 64-byte request, 64-byte response (ringflow: 64 B of
//!   metadata in a 64 B-header frame each way). Raw baseline: both ends spin
//!   on non-blocking `recv` of 64-byte messages.
//! - bulk: one tensor one way per call (64 MiB by default), answered by an
//!   empty response. Raw baseline: `write_all` of the same bytes, read by a
//!   4 MiB `read` loop, a one-byte ack. The receiver's RSS is sampled in the
//!   peer: idle (after connecting) and peak (VmHWM, reset before the run).
//! - [`RawEcho::relay`], for the remote step's bench: 64-byte round trips through
//!   a relay process to an echo process, every end spinning then yielding.

use crate::bench::{Figure, LatencyRecorder};
use crate::error::{Result, Status};
use crate::net::io::{self, TransportKind};
use crate::net::message::Method;
use crate::net::rpc::{Client, Reply, Request, Server, Service, SmallCall, SmallReply, TransportOptions};
use crate::tensor::{DType, Tensor};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to measure and how much.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub pingpong_iterations: usize,
    pub pingpong_warmup: usize,
    pub message_bytes: usize,
    pub bulk_bytes: u64,
    pub bulk_iterations: usize,
    /// Transports measured; io_uring is skipped (with a note) when the
    /// probe fails.
    pub transports: Vec<TransportKind>,
    pub spin_us: u64,
    /// Zero-copy send threshold for the sending side (see
    /// `TransportOptions::zerocopy_send_min_bytes`).
    pub zerocopy_send_min_bytes: u64,
    /// pingpong: the client on one core, its peers on another.
    pub pin: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            pingpong_iterations: 20_000,
            pingpong_warmup: 2_000,
            message_bytes: 64,
            bulk_bytes: 64 << 20,
            bulk_iterations: 20,
            transports: vec![TransportKind::Uring, TransportKind::Socket, TransportKind::Auto],
            spin_us: 100,
            zerocopy_send_min_bytes: TransportOptions::default().zerocopy_send_min_bytes,
            pin: false,
        }
    }
}

/// In these benches `Auto` stands for the shared-memory channel (`shm`,
/// which takes the automatic driver for its socket); the other kinds are
/// TCP over that driver.
fn transport_name(kind: TransportKind) -> &'static str {
    match kind {
        TransportKind::Uring => "io_uring",
        TransportKind::Socket => "socket",
        TransportKind::Auto => "shm",
    }
}

fn transport_arg(kind: TransportKind) -> &'static str {
    match kind {
        TransportKind::Uring => "uring",
        TransportKind::Socket => "socket",
        TransportKind::Auto => "shm",
    }
}

fn available(kinds: &[TransportKind], notes: &mut Vec<Figure>) -> Vec<TransportKind> {
    kinds
        .iter()
        .copied()
        .filter(|&k| match io::select_driver(k) {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!("bench: skipping {}: {e}", transport_name(k));
                notes.push(
                    Figure::new("transport", "skipped", 0.0, "x", 0).with_note(format!("{}: {e}", transport_name(k))),
                );
                false
            }
        })
        .collect()
}

/// The peer process, killed and reaped on drop.
struct Peer {
    child: Child,
    _stdout: BufReader<ChildStdout>,
    addr: String,
}

impl Peer {
    fn spawn(mode: &str, extra: &[String]) -> Result<Peer> {
        let exe = std::env::current_exe().map_err(|e| Status::internal(format!("locating this binary: {e}")))?;
        let mut child = Command::new(exe)
            .arg("__net-peer")
            .arg(mode)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Status::internal(format!("spawning bench peer: {e}")))?;
        let stdout = child.stdout.take().expect("stdout was piped");
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line).map_err(|e| Status::internal(format!("reading peer's address: {e}")))?;
        let addr = line
            .trim()
            .strip_prefix("READY ")
            .ok_or_else(|| Status::internal(format!("bench peer said {line:?}")))?
            .to_string();
        Ok(Peer { child, _stdout: stdout, addr })
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a raw end waits for bytes between polls of its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpinStyle {
    /// Never gives its core away: the classic ping-pong end.
    Pure,
    /// Pure at first, then yields each round as ringflow's own waits do
    /// ([`crate::net::io::spin_pause`]), so three processes on two cores
    /// take turns instead of waiting out time slices.
    Yielding,
}

impl SpinStyle {
    fn pause(self, spin_start: Instant) {
        match self {
            SpinStyle::Pure => std::hint::spin_loop(),
            SpinStyle::Yielding => crate::net::io::spin_pause(spin_start),
        }
    }
}

fn spin_read_exact(stream: &mut TcpStream, buf: &mut [u8], style: SpinStyle) -> std::io::Result<bool> {
    let spin_start = Instant::now();
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Ok(false),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => style.pause(spin_start),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Where a pinned pingpong runs: the client (this thread) on one CPU, its
/// peers on another, so the two ends never share a core. Unpinned, the
/// kernel may put a woken peer on its waker's CPU while the other core
/// idles, and two threads handing one core back and forth are not moved
/// apart for milliseconds (seen as runs at 2-3x the usual round trip).
#[derive(Debug, Clone, Copy)]
struct Pinning {
    client: usize,
    peer: usize,
}

impl Pinning {
    /// The first two CPUs this thread may use; `None` (with a log line)
    /// when there is only one.
    fn choose() -> Result<Option<Pinning>> {
        let mut cpus = allowed_cpus()?.into_iter();
        match (cpus.next(), cpus.next()) {
            (Some(client), Some(peer)) => Ok(Some(Pinning { client, peer })),
            _ => {
                tracing::warn!("only one CPU available: the raw ping-pong runs unpinned");
                Ok(None)
            }
        }
    }
}

/// The CPUs this thread may run on, in order.
pub(crate) fn allowed_cpus() -> Result<Vec<usize>> {
    let allowed = this_thread_cpus()?;
    Ok(crate::host::cpus_in(&allowed).collect())
}

fn cpu_set(cpus: &[usize]) -> Result<nix::sched::CpuSet> {
    let mut set = nix::sched::CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(|e| Status::invalid_argument(format!("CPU {cpu}: {e}")))?;
    }
    Ok(set)
}

fn this_thread_cpus() -> Result<nix::sched::CpuSet> {
    nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map_err(|e| Status::internal(format!("reading this thread's CPUs: {e}")))
}

fn set_thread_cpus(set: &nix::sched::CpuSet) -> nix::Result<()> {
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), set)
}

/// This thread held on one CPU until dropped, then given its old CPUs back.
pub(crate) struct ThreadOnCpu {
    before: nix::sched::CpuSet,
}

impl ThreadOnCpu {
    pub(crate) fn enter(cpu: usize) -> Result<ThreadOnCpu> {
        let before = this_thread_cpus()?;
        set_thread_cpus(&cpu_set(&[cpu])?)
            .map_err(|e| Status::internal(format!("moving the client to CPU {cpu}: {e}")))?;
        Ok(ThreadOnCpu { before })
    }
}

impl Drop for ThreadOnCpu {
    fn drop(&mut self) {
        if let Err(e) = set_thread_cpus(&self.before) {
            tracing::warn!("could not give the bench thread its CPUs back: {e}");
        }
    }
}

/// A raw TCP echo peer and the connection to it: the baseline's two ends.
pub struct RawEcho {
    stream: TcpStream,
    msg: Vec<u8>,
    back: Vec<u8>,
    style: SpinStyle,
    /// Where the calling thread runs its round trips, when pinned apart
    /// from the peer ([`RawEcho::pingpong_apart`]).
    client_cpu: Option<usize>,
    /// Held from a turn's first round trip to its end ([`Timed::turn_over`]).
    on_client_cpu: Option<ThreadOnCpu>,
    /// Last, so it drops after `stream`: the peer exits when the
    /// connection closes, and dropping a `Peer` waits for its exit.
    _peer: Peer,
    /// Peers behind `_peer` (a relay's echo), which exit once it has.
    _behind: Vec<Peer>,
}

impl RawEcho {
    /// A raw spinning ping-pong of `message_bytes` messages whose two ends
    /// never share a core: the peer process is pinned to one CPU, and the
    /// calling thread is held on another for each turn of round trips
    /// ([`crate::bench::interleaved`]) and given its CPUs back after it, so
    /// other measurements' turns run as they would without it (holding and
    /// releasing it for every round trip cost ~1 µs of the round trip).
    /// Unpinned, a peer woken while the other core is busy may be put on
    /// its waker's core, and two ends that never yield then wait out each
    /// other's time slices for as long as the kernel leaves them together
    /// (seen: whole 250-round-trip turns at 130 µs instead of 13 µs).
    /// Unpinned where only one CPU is allowed.
    pub fn pingpong_apart(message_bytes: usize) -> Result<RawEcho> {
        let pin = Pinning::choose()?;
        let mut echo = RawEcho::start(message_bytes, pin)?;
        echo.client_cpu = pin.map(|p| p.client);
        Ok(echo)
    }

    fn start(message_bytes: usize, pin: Option<Pinning>) -> Result<RawEcho> {
        let mut args = vec![format!("--msg-bytes={message_bytes}")];
        args.extend(pin.map(|p| format!("--cpu={}", p.peer)));
        let peer = Peer::spawn("raw-echo", &args)?;
        RawEcho::connect(peer, message_bytes, SpinStyle::Pure, Vec::new())
    }

    /// Round trips through a relay process that passes each message on to
    /// an echo process and the echo back: three processes, two hops each
    /// way, as a remote step's client, master and worker, every end waiting
    /// as ringflow's do (`SpinStyle::Yielding`; with pure spinning, three
    /// processes on two cores wait out each other's time slices).
    pub fn relay(message_bytes: usize) -> Result<RawEcho> {
        let bytes = format!("--msg-bytes={message_bytes}");
        let echo = Peer::spawn("raw-echo", &[bytes.clone(), "--yielding".into()])?;
        let relay = Peer::spawn("raw-relay", &[bytes, "--yielding".into(), format!("--next={}", echo.addr)])?;
        RawEcho::connect(relay, message_bytes, SpinStyle::Yielding, vec![echo])
    }

    fn connect(peer: Peer, message_bytes: usize, style: SpinStyle, behind: Vec<Peer>) -> Result<RawEcho> {
        let stream = TcpStream::connect(&peer.addr)?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(RawEcho {
            stream,
            msg: vec![0x5au8; message_bytes],
            back: vec![0u8; message_bytes],
            style,
            client_cpu: None,
            on_client_cpu: None,
            _peer: peer,
            _behind: behind,
        })
    }

    /// One message there and back, its bytes checked; how long it took.
    pub fn round_trip(&mut self) -> Result<Duration> {
        if let (Some(cpu), None) = (self.client_cpu, &self.on_client_cpu) {
            self.on_client_cpu = Some(ThreadOnCpu::enter(cpu)?);
        }
        let start = Instant::now();
        write_all_nonblocking(&mut self.stream, &self.msg)?;
        if !spin_read_exact(&mut self.stream, &mut self.back, self.style)? {
            return Err(Status::unavailable("raw echo peer closed"));
        }
        let elapsed = start.elapsed();
        if self.back != self.msg {
            return Err(Status::internal("the raw echo came back with other bytes than were sent"));
        }
        Ok(elapsed)
    }
}

impl crate::bench::Timed<Status> for RawEcho {
    fn run_once(&mut self) -> Result<Duration> {
        self.round_trip()
    }

    fn turn_over(&mut self) {
        self.on_client_cpu = None;
    }
}

/// A ringflow RPC echo peer and a client of it.
struct RpcEcho {
    client: Client,
    meta: Vec<u8>,
    /// Last, so the connection closes before the peer is waited for.
    _peer: Peer,
}

impl RpcEcho {
    fn start(kind: TransportKind, opts: &BenchOptions, message_bytes: usize, pin: Option<Pinning>) -> Result<RpcEcho> {
        let mut args = peer_rpc_args(kind, opts.spin_us);
        args.extend(pin.map(|p| format!("--cpu={}", p.peer)));
        let peer = Peer::spawn("rpc", &args)?;
        let client = Client::connect(&peer.addr, bench_transport_options(kind, opts.spin_us))?;
        Ok(RpcEcho { client, meta: vec![0x5au8; message_bytes], _peer: peer })
    }

    fn round_trip(&self) -> Result<Duration> {
        let start = Instant::now();
        let resp = self.client.call(Method::Ping, &self.meta, &[], start + Duration::from_secs(10))?;
        let elapsed = start.elapsed();
        if !same_bytes(resp.meta_bytes(), &self.meta) {
            return Err(Status::internal("echo returned the wrong bytes"));
        }
        Ok(elapsed)
    }
}

/// Whether `a` and `b` hold the same bytes, compared inline a word at a
/// time: the raw ping-pong compares its fixed-size message inline, and a
/// call to the C library's `bcmp` for a few dozen bytes would cost the
/// ringflow side more than the comparison.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tails_equal = wa.remainder() == wb.remainder();
    let mut differ = 0u64;
    for (x, y) in wa.zip(wb) {
        differ |=
            u64::from_ne_bytes(x.try_into().expect("8 bytes")) ^ u64::from_ne_bytes(y.try_into().expect("8 bytes"));
    }
    differ == 0 && tails_equal
}

/// Like [`spin_read_exact`], but after `spin` without a byte it sleeps in
/// `poll` until the socket is readable: the echo peer stays idle while the
/// ringflow connection takes its turn (a peer spinning forever would steal
/// a core from it), and spins as raw as ever within a block.
fn spin_then_poll_read_exact(
    stream: &mut TcpStream,
    buf: &mut [u8],
    spin: Duration,
    style: SpinStyle,
) -> std::io::Result<bool> {
    use std::os::fd::AsFd;
    let mut got = 0;
    let mut idle_since = Instant::now();
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                got += n;
                idle_since = Instant::now();
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if idle_since.elapsed() < spin {
                    style.pause(idle_since);
                    continue;
                }
                let mut fds = [nix::poll::PollFd::new(stream.as_fd(), nix::poll::PollFlags::POLLIN)];
                match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => idle_since = Instant::now(),
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn write_all_nonblocking(stream: &mut TcpStream, mut bytes: &[u8]) -> Result<()> {
    while !bytes.is_empty() {
        match stream.write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn bench_transport_options(kind: TransportKind, spin_us: u64) -> TransportOptions {
    let mut options =
        TransportOptions { transport: kind, spin_us, name: "bench".into(), ..TransportOptions::default() };
    options.shm.enabled = kind == TransportKind::Auto;
    options
}

fn peer_rpc_args(kind: TransportKind, spin_us: u64) -> Vec<String> {
    vec![format!("--transport={}", transport_arg(kind)), format!("--spin-us={spin_us}")]
}

/// Round trips per block: the raw and ringflow connections take turns by
/// blocks, so a noisy machine's slow and fast phases fall on both alike.
const PINGPONG_BLOCK: usize = 500;

/// The shortest pingpong warm-up: a few of `host::has_spare_core`'s
/// windows.
const PINGPONG_WARMUP_TIME: Duration = Duration::from_millis(200);

/// Raw and ringflow round trips for `kind`, interleaved by blocks.
fn interleaved_pingpong(
    kind: TransportKind,
    opts: &BenchOptions,
    message_bytes: usize,
    pin: Option<Pinning>,
) -> Result<(LatencyRecorder, LatencyRecorder)> {
    // Held for the whole measurement: this thread is the client of both.
    let _on_client_cpu = pin.map(|p| ThreadOnCpu::enter(p.client)).transpose()?;
    let mut raw: Box<dyn crate::bench::Timed<Status>> = if kind == TransportKind::Auto {
        Box::new(RawShmEcho::start(opts.spin_us, pin)?)
    } else {
        Box::new(RawEcho::start(opts.message_bytes, pin)?)
    };
    let rpc = RpcEcho::start(kind, opts, message_bytes, pin)?;
    if kind == TransportKind::Auto && !rpc.client.is_shared_memory() {
        return Err(Status::unavailable("pingpong shm: the connection fell back to TCP (see the log)"));
    }
    // Between blocks the side that just ran spins on for its `spin_us`
    // before it sleeps; the pause lets it sleep, so neither side's block
    // shares its cores with the other's leftover spinner, and the untimed
    // first round trip of a block wakes the sleeping peer.
    let handover = Duration::from_micros(2 * opts.spin_us + 50);
    pingpong_in_turns(
        opts,
        |_| std::thread::sleep(handover),
        |turn| match turn {
            Turn::Raw => raw.run_once(),
            Turn::Measured => rpc.round_trip(),
        },
    )
}

/// Which subject of a ping-pong taken in turns runs a block.
#[derive(Debug, Clone, Copy)]
enum Turn {
    Raw,
    Measured,
}

/// Round trips of a raw baseline and a measured subject, taken in turns by
/// blocks of `PINGPONG_BLOCK`: `start_turn` runs before each block, whose
/// first round trip is untimed, and `round_trip` makes one. The warm-up
/// runs as the measurement does, and for at least PINGPONG_WARMUP_TIME:
/// both sides' spin-waits settle on whether nobody else waits for their
/// cores (`host::has_spare_core`), as a long-running loop's do. Returns
/// (raw, measured).
fn pingpong_in_turns(
    opts: &BenchOptions,
    mut start_turn: impl FnMut(Turn),
    mut round_trip: impl FnMut(Turn) -> Result<Duration>,
) -> Result<(LatencyRecorder, LatencyRecorder)> {
    let mut blocks = |rounds: usize, raw: &mut LatencyRecorder, measured: &mut LatencyRecorder| -> Result<()> {
        let mut left = rounds;
        while left > 0 {
            let block = left.min(PINGPONG_BLOCK);
            for (turn, recorder) in [(Turn::Raw, &mut *raw), (Turn::Measured, &mut *measured)] {
                start_turn(turn);
                round_trip(turn)?;
                for _ in 0..block {
                    recorder.record(round_trip(turn)?);
                }
            }
            left -= block;
        }
        Ok(())
    };
    let warmup_start = Instant::now();
    let (mut discard_raw, mut discard_measured) = (LatencyRecorder::default(), LatencyRecorder::default());
    blocks(opts.pingpong_warmup, &mut discard_raw, &mut discard_measured)?;
    while warmup_start.elapsed() < PINGPONG_WARMUP_TIME {
        blocks(PINGPONG_BLOCK, &mut discard_raw, &mut discard_measured)?;
    }
    let (mut raw, mut measured) = (LatencyRecorder::default(), LatencyRecorder::default());
    blocks(opts.pingpong_iterations, &mut raw, &mut measured)?;
    Ok((raw, measured))
}

/// Round-trip latency of a small request/response, ringflow against raw
/// spinning TCP, for each transport.
pub fn bench_pingpong(opts: &BenchOptions) -> Result<Vec<Figure>> {
    let mut figures = Vec::new();
    let kinds = available(&opts.transports, &mut figures);
    let pin = if opts.pin { Pinning::choose()? } else { None };
    let placement = match pin {
        Some(p) => format!("; client on CPU {}, peers on CPU {}", p.client, p.peer),
        None => String::new(),
    };
    for kind in kinds {
        let name = transport_name(kind);
        let warm_up = format!(
            "same binary, same run, interleaved in blocks of {PINGPONG_BLOCK} (each after a pause that lets the other side sleep, its first round trip untimed) after a warm-up of at least {} ms{placement}",
            PINGPONG_WARMUP_TIME.as_millis()
        );
        if kind != TransportKind::Auto {
            let (raw, rpc) = interleaved_pingpong(kind, opts, opts.message_bytes, pin)?;
            let note = format!(
                "{name}; {} B request+response; baseline: raw TCP spinning ping-pong, {warm_up}",
                opts.message_bytes
            );
            figures.extend(pingpong_figures(name, "", &rpc, &raw, &note, &[50.0, 99.0]));
            continue;
        }
        // Over shared memory the baseline's message is one cache line; a
        // request or response of up to LINE_META_BYTES of metadata crosses
        // in one line too (`shm::ring::DESC_LINE`), a longer one in two.
        let line = crate::net::shm::LINE_META_BYTES;
        let baseline = "raw shared-memory spinning ping-pong between two processes (a 64 B cache line each way carrying a 48 B message, futex after the same spin)";
        let (raw, rpc) = interleaved_pingpong(kind, opts, line, pin)?;
        let note = format!(
            "{name}; {line} B request+response (the most metadata a one-line frame carries); baseline: {baseline}, {warm_up}"
        );
        figures.extend(pingpong_figures(name, "", &rpc, &raw, &note, &[50.0, 99.0]));
        let (raw, ring) = ring_floor(opts, pin)?;
        let note = format!(
            "{name} ring alone; {line} B line frame each way between two threads of one process through a connection's ring layout ({} slots), no call path; baseline: raw one-line spinning ping-pong between the same two threads, same run, interleaved in blocks of {PINGPONG_BLOCK} after a warm-up of at least {} ms{placement}",
            crate::net::shm::ShmOptions::default().slots,
            PINGPONG_WARMUP_TIME.as_millis()
        );
        figures.extend(pingpong_figures(name, "_ring", &ring, &raw, &note, &[50.0, 99.0]));
        let (raw, rpc) = interleaved_pingpong(kind, opts, opts.message_bytes, pin)?;
        let note = format!(
            "{name}; {} B request+response (each frame two cache lines); baseline: {baseline}, {warm_up}",
            opts.message_bytes
        );
        let suffix = format!("_{}B", opts.message_bytes);
        figures.extend(pingpong_figures(name, &suffix, &rpc, &raw, &note, &[50.0]));
    }
    Ok(figures)
}

/// `pingpong` figures `p<P>_<name><suffix>` for each percentile.
fn pingpong_figures(
    name: &str,
    suffix: &str,
    rpc: &LatencyRecorder,
    raw: &LatencyRecorder,
    note: &str,
    percentiles: &[f64],
) -> Vec<Figure> {
    percentiles
        .iter()
        .map(|&p| {
            Figure::new("pingpong", &format!("p{p:.0}_{name}{suffix}"), rpc.percentile_us(p), "us", 1)
                .with_baseline(raw.percentile_us(p))
                .with_note(note.to_string())
        })
        .collect()
}

/// Raw TCP bandwidth (GB/s) sending `payload` to a peer process; `cycle_bytes`
/// 0: the peer reads each payload whole into one reused buffer.
pub fn raw_bulk(opts: &BenchOptions, payload: &[u8], cycle_bytes: usize) -> Result<f64> {
    let peer = Peer::spawn("raw-sink", &[format!("--msg-bytes={cycle_bytes}")])?;
    let mut stream = TcpStream::connect(&peer.addr)?;
    stream.set_nodelay(true)?;
    let mut ack = [0u8; 1];
    let mut total = Duration::ZERO;
    for i in 0..opts.bulk_iterations + 1 {
        let start = Instant::now();
        stream.write_all(&(payload.len() as u64).to_le_bytes())?;
        stream.write_all(payload)?;
        stream.read_exact(&mut ack)?;
        if i > 0 {
            total += start.elapsed(); // iteration 0 warms up
        }
    }
    Ok(opts.bulk_iterations as f64 * payload.len() as f64 / total.as_secs_f64() / 1e9)
}

struct BulkResult {
    gbps: f64,
    idle_rss_bytes: u64,
    peak_rss_bytes: u64,
}

/// Bulk over shared memory against memcpy: each timed transfer is followed
/// by one timed memcpy of the same bytes, so both see the same machine.
fn shm_bulk(opts: &BenchOptions, tensor: &Tensor, size_note: &str) -> Result<Vec<Figure>> {
    let peer = Peer::spawn("rpc", &peer_rpc_args(TransportKind::Auto, opts.spin_us))?;
    let client = Client::connect(&peer.addr, bench_transport_options(TransportKind::Auto, opts.spin_us))?;
    if !client.is_shared_memory() {
        return Err(Status::unavailable("bulk shm: the connection fell back to TCP (see the log)"));
    }
    let far = || Instant::now() + Duration::from_secs(600);
    client.call(Method::Ping, b"rss-reset", &[], far())?;
    let mut dst = vec![0u8; tensor.byte_len()];
    dst.copy_from_slice(tensor.as_bytes()); // every page touched before timing
    // A second baseline: the same memcpy into a shared memfd mapping, the
    // kind of page the ring is made of.
    let mut shared = SharedScratch::new(tensor.byte_len())?;
    shared.bytes().copy_from_slice(tensor.as_bytes());
    let mut shared_copies = Duration::ZERO;
    let (mut transfers, mut copies) = (Duration::ZERO, Duration::ZERO);
    // The order alternates, so neither always finds the source in cache.
    for i in 0..opts.bulk_iterations + 1 {
        let transfer = || -> Result<Duration> {
            let start = Instant::now();
            client.call(Method::Ping, b"bulk", std::slice::from_ref(tensor), far())?;
            Ok(start.elapsed())
        };
        let mut copy = || {
            let start = Instant::now();
            dst.copy_from_slice(std::hint::black_box(tensor.as_bytes()));
            std::hint::black_box(&mut dst);
            start.elapsed()
        };
        let (sent, copied) = if i % 2 == 0 {
            let sent = transfer()?;
            (sent, copy())
        } else {
            let copied = copy();
            (transfer()?, copied)
        };
        let start = Instant::now();
        shared.bytes().copy_from_slice(std::hint::black_box(tensor.as_bytes()));
        let shared_copied = start.elapsed();
        if i > 0 {
            transfers += sent; // iteration 0 warms up
            copies += copied;
            shared_copies += shared_copied;
        }
    }
    let (resident, huge) = crate::net::shm::region::region_pages();
    let policy = crate::net::shm::region::shmem_huge_policy().unwrap_or_else(|| "unknown".into());
    let stats = client.call(Method::Ping, b"rss", &[], far())?;
    let sum = client.call(Method::Ping, b"bulk-sum", std::slice::from_ref(tensor), far())?;
    let got = std::str::from_utf8(sum.meta_bytes()).ok().and_then(|s| s.parse::<u64>().ok());
    if got != Some(checksum(tensor.as_bytes())) {
        return Err(Status::data_loss(format!(
            "bulk over shm: the receiver's checksum {got:?} differs from the sender's"
        )));
    }
    let text = std::str::from_utf8(stats.meta_bytes()).unwrap_or("");
    let mut fields = text.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
    let (idle, peak) = (fields.next().unwrap_or(0), fields.next().unwrap_or(0));
    let total_bytes = opts.bulk_iterations as f64 * tensor.byte_len() as f64;
    let gbps = |d: Duration| total_bytes / d.as_secs_f64() / 1e9;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    Ok(vec![
        Figure::new("bulk", "bandwidth_shm", gbps(transfers), "GB/s", 1).with_baseline(gbps(copies)).with_note(format!(
            "shm; {size_note}, {} transfers (checksum verified by the receiver), each written once by the sender into the receiver's ring and read there in place; ring pages: {:.0}% of {:.0} MiB resident mapped as 2 MiB pages (shmem_enabled: {policy}); baseline: memcpy of the same bytes into one warm buffer in this process, one after each transfer; the same memcpy into a warm shared memfd mapping with the ring's page advice: {:.2} GB/s",
            opts.bulk_iterations,
            100.0 * huge as f64 / resident.max(1) as f64,
            mib(resident),
            gbps(shared_copies),
        )),
        Figure::new("bulk", "rx_rss_peak_over_idle_shm", mib(peak.saturating_sub(idle)), "MiB", 1)
            .with_baseline(mib(tensor.byte_len() as u64))
            .with_note("shm; receiver VmHWM - idle VmRSS (ring pages it touched); baseline = one payload"),
    ])
}

/// A warm shared memfd mapping of `len` bytes, for a baseline copy.
struct SharedScratch {
    mapping: crate::alloc::Mapping,
    _fd: std::os::fd::OwnedFd,
}

impl SharedScratch {
    fn new(len: usize) -> Result<SharedScratch> {
        use std::os::fd::AsFd;
        let fd = crate::alloc::memfd(c"ringflow-bench-scratch", len as u64, false)
            .map_err(|e| Status::unavailable(format!("bench scratch: {e}")))?;
        let mapping =
            crate::alloc::Mapping::new(len, crate::alloc::Backing::Shared(fd.as_fd()), crate::alloc::LockPolicy::Never)
                .map_err(|e| Status::unavailable(e.to_string()))?;
        // The ring's advice, so both get the same kind of page.
        // SAFETY: MADV_HUGEPAGE leaves the contents as they are.
        unsafe { mapping.advise(0, len, libc::MADV_HUGEPAGE) };
        Ok(SharedScratch { mapping, _fd: fd })
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` writable bytes, alive while `self`
        // is, and nothing else maps the file; `&mut self` makes the slice
        // the only one.
        unsafe { std::slice::from_raw_parts_mut(self.mapping.base().as_ptr(), self.mapping.len()) }
    }
}

fn rpc_bulk(kind: TransportKind, opts: &BenchOptions, tensor: &Tensor) -> Result<BulkResult> {
    let peer = Peer::spawn("rpc", &peer_rpc_args(kind, opts.spin_us))?;
    let client = Client::connect(
        &peer.addr,
        TransportOptions {
            zerocopy_send_min_bytes: opts.zerocopy_send_min_bytes,
            ..bench_transport_options(kind, opts.spin_us)
        },
    )?;
    if kind == TransportKind::Auto && !client.is_shared_memory() {
        return Err(Status::unavailable("bulk shm: the connection fell back to TCP (see the log)"));
    }
    let far = || Instant::now() + Duration::from_secs(600);
    client.call(Method::Ping, b"rss-reset", &[], far())?;
    let mut total = Duration::ZERO;
    for i in 0..opts.bulk_iterations + 1 {
        let start = Instant::now();
        client.call(Method::Ping, b"bulk", std::slice::from_ref(tensor), far())?;
        if i > 0 {
            total += start.elapsed();
        }
    }
    let stats = client.call(Method::Ping, b"rss", &[], far())?;
    // One more transfer, untimed, whose bytes the receiver sums: the tensor
    // arrived bit-exact.
    let sum = client.call(Method::Ping, b"bulk-sum", std::slice::from_ref(tensor), far())?;
    let got = std::str::from_utf8(sum.meta_bytes()).ok().and_then(|s| s.parse::<u64>().ok());
    if got != Some(checksum(tensor.as_bytes())) {
        return Err(Status::data_loss(format!(
            "bulk over {}: the receiver's checksum {got:?} differs from the sender's",
            transport_name(kind)
        )));
    }
    let text = std::str::from_utf8(stats.meta_bytes()).unwrap_or("");
    let mut fields = text.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
    let idle_rss_bytes = fields.next().unwrap_or(0);
    let peak_rss_bytes = fields.next().unwrap_or(0);
    Ok(BulkResult {
        gbps: opts.bulk_iterations as f64 * tensor.byte_len() as f64 / total.as_secs_f64() / 1e9,
        idle_rss_bytes,
        peak_rss_bytes,
    })
}

/// One large tensor one way: bandwidth against raw TCP, and the receiver's
/// peak RSS above idle against one payload.
pub fn bench_bulk(opts: &BenchOptions) -> Result<Vec<Figure>> {
    let mut figures = Vec::new();
    let kinds = available(&opts.transports, &mut figures);
    let bytes = opts.bulk_bytes.next_multiple_of(4);
    let elements =
        usize::try_from(bytes / 4).map_err(|_| Status::invalid_argument(format!("{bytes} bytes do not fit memory")))?;
    let tensor =
        Tensor::build::<f32>([elements], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = (i % 1021) as f32))?;
    debug_assert_eq!(tensor.dtype(), DType::F32);
    let size_note = format!("{:.1} MiB tensor", bytes as f64 / (1 << 20) as f64);
    for kind in kinds {
        if kind == TransportKind::Auto {
            figures.extend(shm_bulk(opts, &tensor, &size_note)?);
            continue;
        }
        let raw_gbps = raw_bulk(opts, tensor.as_bytes(), 0)?;
        let raw_small_gbps = raw_bulk(opts, tensor.as_bytes(), 4 << 20)?;
        let result = rpc_bulk(kind, opts, &tensor)?;
        let name = transport_name(kind);
        figures.push(
            Figure::new("bulk", &format!("bandwidth_{name}"), result.gbps, "GB/s", 1)
                .with_baseline(raw_gbps)
                .with_note(format!(
                    "{name}; {size_note}, {} transfers (checksum verified by the receiver); baseline: raw TCP, receiver reads each payload whole into one reused payload-sized buffer, same run",
                    opts.bulk_iterations
                )),
        );
        figures.push(
            Figure::new("bulk", &format!("bandwidth_{name}"), result.gbps, "GB/s", 1)
                .with_baseline(raw_small_gbps)
                .with_note(format!(
                    "{name}; same transfers; baseline: raw TCP whose receiver cycles one 4 MiB cache-warm buffer (keeps no payload)"
                )),
        );
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        figures.push(
            Figure::new("bulk", &format!("rx_rss_idle_{name}"), mib(result.idle_rss_bytes), "MiB", 1)
                .with_note(format!("{name}; receiver VmRSS before the transfers")),
        );
        figures.push(
            Figure::new(
                "bulk",
                &format!("rx_rss_peak_over_idle_{name}"),
                mib(result.peak_rss_bytes.saturating_sub(result.idle_rss_bytes)),
                "MiB",
                1,
            )
            .with_baseline(mib(bytes))
            .with_note(format!("{name}; receiver VmHWM - idle VmRSS; baseline = one payload")),
        );
    }
    Ok(figures)
}

// ---------------------------------------------------------------------------
// The raw shared-memory ping-pong (the pingpong shm baseline)

/// Polls of a line between two looks at the clock in the raw ping-pong.
const RAW_POLL_BURST: u32 = 8;

/// One direction of the raw ping-pong: a sequence number, the message, and
/// a doorbell for a side that stopped spinning; one cache line.
#[repr(C, align(64))]
struct RawLine {
    seq: std::sync::atomic::AtomicU64,
    sleeping: std::sync::atomic::AtomicU32,
    bell: std::sync::atomic::AtomicU32,
    /// Six words, each moved with one plain store and one plain load (a
    /// byte-wise copy would cost the baseline, not the transport).
    payload: [std::sync::atomic::AtomicU64; 6],
}

const _: () = assert!(std::mem::size_of::<RawLine>() == 64);

impl RawLine {
    fn new() -> RawLine {
        use std::sync::atomic::{AtomicU32, AtomicU64};
        RawLine {
            seq: AtomicU64::new(0),
            sleeping: AtomicU32::new(0),
            bell: AtomicU32::new(0),
            payload: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Publishes `payload` as message `seq`; says whether the reader said
    /// it sleeps (the `SeqCst` fence pairs with its own before it sleeps).
    fn publish(&self, seq: u64, payload: &[u64; 6]) -> bool {
        use std::sync::atomic::Ordering;
        for (word, &value) in self.payload.iter().zip(payload) {
            word.store(value, Ordering::Relaxed);
        }
        self.seq.store(seq, Ordering::Release);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.sleeping.load(Ordering::Relaxed) != 0
    }

    /// The message on this line if it is not `last`.
    fn take(&self, last: u64) -> Option<(u64, [u64; 6])> {
        use std::sync::atomic::Ordering;
        let seq = self.seq.load(Ordering::Acquire);
        // Stored by the writer before `seq` (Acquire above).
        (seq != last).then(|| (seq, std::array::from_fn(|i| self.payload[i].load(Ordering::Relaxed))))
    }
}

/// Two `RawLine`s (to the peer, back) in a shared file mapping.
struct RawShmLines {
    base: std::ptr::NonNull<RawLine>,
    _file: std::fs::File,
}

// SAFETY: the lines are accessed through atomics and by one writer each
// (the payload of a line only by its writer before publishing `seq`, and by
// its reader after).
unsafe impl Send for RawShmLines {}

impl RawShmLines {
    fn map(file: std::fs::File) -> Result<RawShmLines> {
        use std::os::fd::AsRawFd;
        file.set_len(128)?;
        // SAFETY: a fresh shared mapping of 128 bytes of a file we hold.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                128,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(Status::internal(format!(
                "mapping the raw ping-pong lines: {}",
                std::io::Error::last_os_error()
            )));
        }
        let base = std::ptr::NonNull::new(raw.cast::<RawLine>()).expect("mmap never returns null");
        Ok(RawShmLines { base, _file: file })
    }

    fn line(&self, which: usize) -> &RawLine {
        // SAFETY: two aligned lines lie in the 128-byte mapping, alive while `self` is.
        unsafe { &*self.base.as_ptr().add(which) }
    }

    /// Publishes `payload` as message `seq` on line `which`, ringing its
    /// doorbell if the reader sleeps.
    fn send(&self, which: usize, seq: u64, payload: &[u64; 6]) {
        let line = self.line(which);
        if line.publish(seq, payload) {
            crate::net::shm::doorbell::ring(&line.bell);
        }
    }

    /// Waits for a message other than `last` on line `which` (spinning for
    /// `spin`, then on the futex in slices, until `give_up` says so).
    fn recv(
        &self,
        which: usize,
        last: u64,
        spin: Duration,
        style: SpinStyle,
        give_up: &dyn Fn() -> bool,
    ) -> Option<(u64, [u64; 6])> {
        use std::sync::atomic::Ordering;
        let line = self.line(which);
        let start = Instant::now();
        loop {
            // Polls in bursts between looks at the clock, as ringflow's own
            // waits do (`net::io::spin_until`): a clock read per poll would
            // slow the baseline's reaction, not the transport's.
            for _ in 0..RAW_POLL_BURST {
                if let Some(message) = line.take(last) {
                    return Some(message);
                }
                std::hint::spin_loop();
            }
            if start.elapsed() < spin {
                if let SpinStyle::Yielding = style {
                    style.pause(start);
                }
                continue;
            }
            if give_up() {
                return None;
            }
            let bell = line.bell.load(Ordering::Acquire);
            line.sleeping.store(1, Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::SeqCst);
            if line.seq.load(Ordering::Acquire) == last {
                crate::net::shm::doorbell::wait(&line.bell, bell, Some(Duration::from_millis(10)));
            }
            line.sleeping.store(0, Ordering::Relaxed);
        }
    }
}

impl Drop for RawShmLines {
    fn drop(&mut self) {
        // SAFETY: our 128-byte mapping; nothing refers to it after drop.
        unsafe { libc::munmap(self.base.as_ptr().cast(), 128) };
    }
}

/// The client end of the raw shared-memory ping-pong: it spins purely for
/// the answer, as the raw TCP client does.
pub struct RawShmEcho {
    lines: RawShmLines,
    seq: u64,
    _peer: Peer,
}

impl RawShmEcho {
    fn start(spin_us: u64, pin: Option<Pinning>) -> Result<RawShmEcho> {
        let mut args = vec![format!("--spin-us={spin_us}")];
        args.extend(pin.map(|p| format!("--cpu={}", p.peer)));
        let peer = Peer::spawn("raw-shm-echo", &args)?;
        // The peer names its memfd as /proc/PID/fd/N; opening that path
        // opens the same file.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&peer.addr)
            .map_err(|e| Status::internal(format!("opening the raw ping-pong lines at {}: {e}", peer.addr)))?;
        Ok(RawShmEcho { lines: RawShmLines::map(file)?, seq: 0, _peer: peer })
    }
}

impl crate::bench::Timed<Status> for RawShmEcho {
    fn run_once(&mut self) -> Result<Duration> {
        let start = Instant::now();
        self.seq += 1;
        let payload = [self.seq; 6];
        self.lines.send(0, self.seq, &payload);
        let never = || false;
        let (seq, back) = self
            .lines
            .recv(1, self.seq - 1, Duration::MAX, SpinStyle::Pure, &never)
            .ok_or_else(|| Status::unavailable("raw shared-memory peer gone"))?;
        let elapsed = start.elapsed();
        if seq != self.seq || back != payload {
            return Err(Status::internal("the raw shared-memory echo came back with other bytes"));
        }
        Ok(elapsed)
    }
}

// ---------------------------------------------------------------------------
// The ring's floor (pingpong `p50_shm_ring`)

/// What the ring floor's echo thread serves: the raw lines, the ring, or
/// nothing more.
const FLOOR_RAW: u8 = 0;
const FLOOR_RING: u8 = 1;
const FLOOR_STOP: u8 = 2;

/// How long either end of the ring floor waits for the other before it
/// calls the measurement broken.
const FLOOR_PATIENCE: Duration = Duration::from_secs(5);

/// Polls between two looks at the clock (and, on the echo side, at what it
/// serves) in the ring floor's spins.
const FLOOR_POLLS: u32 = 64;

/// Two lines of the raw ping-pong, as `RawShmLines` maps them, in this
/// process's memory.
#[repr(C, align(128))]
struct FloorRawLines([RawLine; 2]);

impl FloorRawLines {
    fn new() -> Box<FloorRawLines> {
        Box::new(FloorRawLines([RawLine::new(), RawLine::new()]))
    }

    /// Publishes `payload` as message `seq` on line `which`, as
    /// `RawShmLines::send` does (the doorbell is never rung: nobody sleeps).
    fn send(&self, which: usize, seq: u64, payload: &[u64; 6]) {
        let _ = self.0[which].publish(seq, payload);
    }

    /// The message on line `which` if it is not `last`.
    fn poll(&self, which: usize, last: u64) -> Option<(u64, [u64; 6])> {
        self.0[which].take(last)
    }
}

/// Spins on `poll` until it yields, `patience` passes (an error naming
/// `what`), or it fails; yields the core between bursts of polls when the
/// two ends share one (`shares_core`) or the host has none spare.
fn floor_spin<T>(
    what: &str,
    patience: Duration,
    shares_core: bool,
    mut poll: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let mut since = None;
    loop {
        for _ in 0..FLOOR_POLLS {
            if let Some(found) = poll()? {
                return Ok(found);
            }
            std::hint::spin_loop();
        }
        let now = Instant::now();
        if now.duration_since(*since.get_or_insert(now)) > patience {
            return Err(Status::deadline_exceeded(format!("ring floor: {what} did not come within {patience:?}")));
        }
        // Two spinners on one core would hand it over only when the
        // scheduler preempts one (milliseconds a round trip).
        if shares_core || !crate::host::has_spare_core_at(now) {
            std::thread::yield_now();
        }
    }
}

/// The ring floor's two ends on one thread each: the client's or the echo's
/// producer and consumer of a region of its own.
struct FloorEnds {
    tx: crate::net::shm::ring::Producer,
    rx: crate::net::shm::ring::Consumer,
}

/// The ring floor's echo thread: answers each raw message and each line
/// frame with itself until told to stop (or until the client has been
/// silent for `FLOOR_PATIENCE`).
fn floor_echo(
    mode: &std::sync::atomic::AtomicU8,
    raw: &FloorRawLines,
    mut ends: FloorEnds,
    cpu: Option<usize>,
    shares_core: bool,
) -> Result<()> {
    use std::sync::atomic::Ordering;
    let _on_cpu = cpu.map(ThreadOnCpu::enter).transpose()?;
    let mut last_raw = 0;
    let mut heard = Instant::now();
    loop {
        let mut answered = false;
        match mode.load(Ordering::Acquire) {
            FLOOR_STOP => return Ok(()),
            FLOOR_RAW => {
                for _ in 0..FLOOR_POLLS {
                    if let Some((seq, payload)) = raw.poll(0, last_raw) {
                        raw.send(1, seq, &payload);
                        last_raw = seq;
                        answered = true;
                    }
                    std::hint::spin_loop();
                }
            }
            _ => {
                for _ in 0..FLOOR_POLLS {
                    let taken = ends.rx.take_line().map_err(|e| Status::internal(format!("ring floor echo: {e}")))?;
                    if let Some((words, len)) = taken {
                        if !ends.tx.has_slot() {
                            return Err(Status::internal("ring floor echo: no free slot for the answer"));
                        }
                        ends.tx.publish_line_words(words, len);
                        let _ = ends.tx.consumer_may_sleep();
                        answered = true;
                    }
                    std::hint::spin_loop();
                }
            }
        }
        let now = Instant::now();
        if answered {
            heard = now;
        } else if now.duration_since(heard) > FLOOR_PATIENCE {
            return Err(Status::deadline_exceeded("ring floor echo: the client went silent"));
        }
        if shares_core || !crate::host::has_spare_core_at(now) {
            std::thread::yield_now();
        }
    }
}

/// The client end of the ring floor.
struct FloorClient<'a> {
    raw: &'a FloorRawLines,
    ends: FloorEnds,
    meta: crate::net::shm::LineMeta,
    limits: crate::net::frame::FrameLimits,
    /// Whether both ends run on one CPU (see `floor_spin`).
    shares_core: bool,
    /// Messages sent on the raw lines and frames through the ring.
    raw_sent: u64,
    ring_sent: u64,
}

impl FloorClient<'_> {
    /// One raw round trip: six words out, the same six back.
    fn raw_round_trip(&mut self) -> Result<Duration> {
        let start = Instant::now();
        self.raw_sent += 1;
        let sent = self.raw_sent;
        let payload = [sent; 6];
        self.raw.send(0, sent, &payload);
        let (seq, back) =
            floor_spin("the raw echo", FLOOR_PATIENCE, self.shares_core, || Ok(self.raw.poll(1, sent - 1)))?;
        let elapsed = start.elapsed();
        if seq != sent || back != payload {
            return Err(Status::internal("ring floor: the raw echo came back with other words"));
        }
        Ok(elapsed)
    }

    /// One line frame each way through the ring, encoded and decoded as a
    /// call's are: the ring and the line format, without the call path.
    fn ring_round_trip(&mut self) -> Result<Duration> {
        use crate::net::frame::FrameKind;
        use crate::net::shm::{LINE_HEAD_BYTES, line};
        let start = Instant::now();
        self.ring_sent += 1;
        let (ends, shares_core) = (&mut self.ends, self.shares_core);
        let words = line::line_words(FrameKind::Request, Method::Ping as u16, self.ring_sent, &self.meta);
        floor_spin("a free slot", FLOOR_PATIENCE, shares_core, || Ok(ends.tx.has_slot().then_some(())))?;
        ends.tx.publish_line_words(words, LINE_HEAD_BYTES + self.meta.len());
        let _ = ends.tx.consumer_may_sleep();
        let (back, len) = floor_spin("the ring echo", FLOOR_PATIENCE, shares_core, || {
            ends.rx.take_line().map_err(|e| Status::internal(format!("ring floor: {e}")))
        })?;
        let answer = crate::net::shm::LineFrame::decode(&back, len, &self.limits)
            .map_err(|e| Status::internal(format!("ring floor: {e}")))?;
        let elapsed = start.elapsed();
        if answer.request_id != self.ring_sent || !same_bytes(answer.meta_bytes(), self.meta.as_bytes()) {
            return Err(Status::internal("ring floor: the ring echo came back with another frame"));
        }
        Ok(elapsed)
    }
}

/// The ring's floor: a 40 B line frame each way between two threads of
/// this process through a region laid out as a connection's (its default
/// slot count), with the call's line encoding and the publish's doorbell
/// check but no call path; against the same two threads' raw one-line
/// ping-pong, in turns by blocks (raw first). Returns (raw, ring).
fn ring_floor(opts: &BenchOptions, pin: Option<Pinning>) -> Result<(LatencyRecorder, LatencyRecorder)> {
    use crate::net::shm::region::{Direction, Layout, SharedRegion};
    use crate::net::shm::ring::{Consumer, Producer};
    use std::sync::atomic::{AtomicU8, Ordering};
    let slots = crate::net::shm::ShmOptions::default().slots;
    let layout = Layout::new(slots, 1 << 20).map_err(|e| Status::internal(format!("ring floor: {e}")))?;
    let (region, _fd) =
        SharedRegion::create(layout, [0, 0]).map_err(|e| Status::internal(format!("ring floor region: {e}")))?;
    let (to_echo, back) = (region.ring(Direction::ClientToServer), region.ring(Direction::ServerToClient));
    // SAFETY: a fresh region laid out as `ring` says, zeroed; each of the
    // four ends is driven by one thread alone (the client's two here, the
    // echo's two on its thread), and the region outlives both threads.
    let (client_ends, echo_ends) = unsafe {
        (
            FloorEnds { tx: Producer::new(to_echo), rx: Consumer::new(back) },
            FloorEnds { tx: Producer::new(back), rx: Consumer::new(to_echo) },
        )
    };
    let raw_lines = FloorRawLines::new();
    let meta = crate::net::shm::LineMeta::new(&[0x5a; crate::net::shm::LINE_META_BYTES])
        .ok_or_else(|| Status::internal("ring floor: a line's metadata does not fit a line"))?;
    // Pinned apart, the ends have a core each; unpinned, they share one
    // when this thread (whose CPUs the echo thread inherits) has only one.
    let shares_core = pin.is_none() && allowed_cpus()?.len() < 2;
    let mode = AtomicU8::new(FLOOR_RAW);
    std::thread::scope(|scope| {
        let echo = scope.spawn(|| floor_echo(&mode, &raw_lines, echo_ends, pin.map(|p| p.peer), shares_core));
        let measured = (|| -> Result<(LatencyRecorder, LatencyRecorder)> {
            let _on_cpu = pin.map(|p| ThreadOnCpu::enter(p.client)).transpose()?;
            let mut client = FloorClient {
                raw: &raw_lines,
                ends: client_ends,
                meta,
                limits: crate::net::frame::FrameLimits::default(),
                shares_core,
                raw_sent: 0,
                ring_sent: 0,
            };
            let mode = &mode;
            pingpong_in_turns(
                opts,
                |turn| {
                    let serve = match turn {
                        Turn::Raw => FLOOR_RAW,
                        Turn::Measured => FLOOR_RING,
                    };
                    mode.store(serve, Ordering::Release);
                },
                |turn| match turn {
                    Turn::Raw => client.raw_round_trip(),
                    Turn::Measured => client.ring_round_trip(),
                },
            )
        })();
        mode.store(FLOOR_STOP, Ordering::Release);
        let echoed = echo.join().map_err(|_| Status::internal("ring floor: the echo thread panicked"))?;
        let measured = measured?;
        echoed?;
        Ok(measured)
    })
}

/// The raw shared-memory echo peer: creates the lines, prints their path,
/// echoes until stdin closes.
fn run_raw_shm_echo(spin_us: u64, style: SpinStyle) -> Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: a valid C string; the result is checked.
    let raw = unsafe { libc::memfd_create(c"ringflow-raw-pingpong".as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(Status::unavailable(format!("memfd_create: {}", std::io::Error::last_os_error())));
    }
    // SAFETY: a fresh descriptor we own.
    let file = unsafe { std::fs::File::from_raw_fd(raw) };
    let path = format!("/proc/{}/fd/{}", std::process::id(), file.as_raw_fd());
    let lines = RawShmLines::map(file)?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
            stop.store(true, std::sync::atomic::Ordering::Release);
        });
    }
    println!("READY {path}");
    std::io::stdout().flush()?;
    let spin = Duration::from_micros(spin_us);
    let give_up = || stop.load(std::sync::atomic::Ordering::Acquire);
    let mut last = 0;
    while let Some((seq, payload)) = lines.recv(0, last, spin, style, &give_up) {
        last = seq;
        lines.send(1, seq, &payload);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The peer side (hidden subcommand `__net-peer MODE`)

/// How the peer was asked to run.
#[derive(Debug, Clone)]
pub struct PeerArgs {
    /// `raw-echo`, `raw-sink`, `raw-relay` or `rpc`.
    pub mode: String,
    pub transport: TransportKind,
    pub msg_bytes: usize,
    pub spin_us: u64,
    /// The CPU the whole peer runs on (set before it starts any thread).
    pub cpu: Option<usize>,
    /// `raw-relay`: the raw echo peer each message is passed on to.
    pub next: Option<String>,
    /// Raw modes: yield while spinning (`SpinStyle::Yielding`).
    pub yielding: bool,
}

fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Wrapping sum of little-endian u64 words (a tail shorter than 8 bytes is
/// summed bytewise): cheap, and position-sensitive enough with the rotation.
fn checksum(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let mut sum = 0u64;
    for (i, w) in (&mut words).enumerate() {
        let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        sum = sum.wrapping_add(v.rotate_left((i % 63) as u32));
    }
    for &b in words.remainder() {
        sum = sum.wrapping_add(u64::from(b));
    }
    sum
}

struct BenchService {
    idle_rss_bytes: parking_lot::Mutex<u64>,
}

impl Service for BenchService {
    fn handle(&self, request: Request, reply: Reply) {
        match request.meta_bytes() {
            b"bulk" => {
                drop(request); // frees the receive buffer before answering
                reply.ok(b"", &[]);
            }
            b"bulk-sum" => {
                let sum: u64 = request.payloads.iter().fold(0, |acc, t| acc.wrapping_add(checksum(t.as_bytes())));
                drop(request);
                reply.ok(sum.to_string().as_bytes(), &[]);
            }
            b"rss-reset" => {
                // Writing 5 to clear_refs resets VmHWM to the current RSS.
                let _ = std::fs::write("/proc/self/clear_refs", "5");
                *self.idle_rss_bytes.lock() = proc_status_kib("VmRSS:") * 1024;
                reply.ok(b"", &[]);
            }
            b"rss" => {
                let text = format!("{} {}", *self.idle_rss_bytes.lock(), proc_status_kib("VmHWM:") * 1024);
                reply.ok(text.as_bytes(), &[]);
            }
            _ => reply.ok(request.meta_bytes(), &request.payloads),
        }
    }

    /// Echoes a small call where it lies (the control words above go to
    /// `handle`).
    fn handle_small(&self, call: &SmallCall<'_>) -> Option<SmallReply> {
        match call.meta_bytes() {
            b"bulk" | b"bulk-sum" | b"rss-reset" | b"rss" => None,
            meta => SmallReply::ok(meta),
        }
    }
}

/// Runs the bench peer: prints `READY <addr>` and serves until stdin closes.
pub fn run_peer(args: &PeerArgs) -> Result<()> {
    let style = if args.yielding { SpinStyle::Yielding } else { SpinStyle::Pure };
    if let Some(cpu) = args.cpu {
        // Threads started later inherit the calling thread's mask.
        set_thread_cpus(&cpu_set(&[cpu])?)
            .map_err(|e| Status::invalid_argument(format!("bench peer on CPU {cpu}: {e}")))?;
    }
    let stdin_closed = || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    };
    match args.mode.as_str() {
        "raw-echo" | "raw-sink" => {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            println!("READY {}", listener.local_addr()?);
            std::io::stdout().flush()?;
            let (mut stream, _) = listener.accept()?;
            stream.set_nodelay(true)?;
            if args.mode == "raw-echo" {
                stream.set_nonblocking(true)?;
                let mut buf = vec![0u8; args.msg_bytes];
                let spin = Duration::from_micros(args.spin_us);
                while spin_then_poll_read_exact(&mut stream, &mut buf, spin, style)? {
                    write_all_nonblocking(&mut stream, &buf)?;
                }
            } else {
                // Reads each payload whole into one payload-sized buffer
                // (reused), as a receiver that keeps the bytes must; with
                // `--msg-bytes` > 0 it cycles a buffer of that size instead.
                let mut buf: Vec<u8> = Vec::new();
                let mut len = [0u8; 8];
                while stream.read_exact(&mut len).is_ok() {
                    let total = u64::from_le_bytes(len) as usize;
                    let cycle = if args.msg_bytes > 0 { args.msg_bytes } else { total };
                    if buf.len() < cycle.min(total) {
                        buf.resize(cycle.min(total), 0);
                    }
                    let mut done = 0usize;
                    while done < total {
                        let at = done % cycle.max(1);
                        let want = (total - done).min(cycle - at).min(buf.len() - at);
                        let n = stream.read(&mut buf[at..at + want])?;
                        if n == 0 {
                            return Ok(());
                        }
                        done += n;
                    }
                    stream.write_all(&[1])?;
                }
            }
            Ok(())
        }
        "raw-shm-echo" => run_raw_shm_echo(args.spin_us, style),
        "raw-relay" => {
            let next = args.next.as_deref().ok_or_else(|| Status::invalid_argument("raw-relay needs --next"))?;
            let mut downstream = TcpStream::connect(next)?;
            downstream.set_nodelay(true)?;
            downstream.set_nonblocking(true)?;
            let listener = TcpListener::bind("127.0.0.1:0")?;
            println!("READY {}", listener.local_addr()?);
            std::io::stdout().flush()?;
            let (mut upstream, _) = listener.accept()?;
            upstream.set_nodelay(true)?;
            upstream.set_nonblocking(true)?;
            let mut buf = vec![0u8; args.msg_bytes];
            let spin = Duration::from_micros(args.spin_us);
            while spin_then_poll_read_exact(&mut upstream, &mut buf, spin, style)? {
                write_all_nonblocking(&mut downstream, &buf)?;
                if !spin_then_poll_read_exact(&mut downstream, &mut buf, spin, style)? {
                    return Err(Status::unavailable(format!("the relay's echo peer at {next} closed")));
                }
                write_all_nonblocking(&mut upstream, &buf)?;
            }
            Ok(())
        }
        "rpc" => {
            let service = Arc::new(BenchService { idle_rss_bytes: parking_lot::Mutex::new(0) });
            let options = bench_transport_options(args.transport, args.spin_us);
            let server = Server::bind("127.0.0.1:0", service, options)?;
            println!("READY {}", server.local_addr());
            std::io::stdout().flush()?;
            stdin_closed();
            server.shutdown();
            Ok(())
        }
        other => Err(Status::invalid_argument(format!("unknown peer mode {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus_of_this_thread() -> Vec<usize> {
        crate::host::cpus_in(&this_thread_cpus().unwrap()).collect()
    }

    #[test]
    fn a_pinned_client_runs_on_its_cpu_and_gets_its_cpus_back() {
        // On a thread of its own: the test harness's threads keep their masks.
        std::thread::spawn(|| {
            let before = cpus_of_this_thread();
            let Some(pin) = Pinning::choose().unwrap() else { return };
            assert_ne!(pin.client, pin.peer);
            assert!(before.contains(&pin.client) && before.contains(&pin.peer));
            {
                let _held = ThreadOnCpu::enter(pin.peer).unwrap();
                assert_eq!(cpus_of_this_thread(), vec![pin.peer]);
                // SAFETY: sched_getcpu takes no arguments and only reads.
                assert_eq!(unsafe { libc::sched_getcpu() }, pin.peer as i32);
            }
            assert_eq!(cpus_of_this_thread(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_ring_floor_wait_gives_up_after_its_patience_and_names_what_it_waited_for() {
        let start = Instant::now();
        let err = floor_spin("the ring echo", Duration::from_millis(20), false, || Ok(None::<()>)).unwrap_err();
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(err.message.contains("the ring echo did not come"), "{err}");
        let failing =
            floor_spin("a free slot", FLOOR_PATIENCE, true, || Err::<Option<()>, _>(Status::internal("torn")));
        assert_eq!(failing.unwrap_err().message, "torn");
    }

    #[test]
    fn the_ring_floor_times_both_ping_pongs_through_the_channels_ring_layout() {
        let opts = BenchOptions { pingpong_iterations: 300, pingpong_warmup: 10, ..BenchOptions::default() };
        let (raw, ring) = ring_floor(&opts, None).unwrap();
        for recorder in [&raw, &ring] {
            let p50 = recorder.percentile_us(50.0);
            assert!(p50 > 0.0 && p50 < FLOOR_PATIENCE.as_micros() as f64, "{p50}");
        }
    }

    /// On one CPU the two ends hand it over at every wait: spinning until
    /// the scheduler preempts one costs a time slice (a millisecond or
    /// more) a round trip.
    #[test]
    fn ring_floor_ends_on_one_cpu_hand_it_over_instead_of_spinning_out_their_slice() {
        std::thread::spawn(|| {
            let Some(&cpu) = allowed_cpus().unwrap().first() else { return };
            let _one = ThreadOnCpu::enter(cpu).unwrap();
            let opts = BenchOptions { pingpong_iterations: 300, pingpong_warmup: 10, ..BenchOptions::default() };
            let (raw, ring) = ring_floor(&opts, None).unwrap();
            for recorder in [&raw, &ring] {
                let p50 = recorder.percentile_us(50.0);
                assert!(p50 > 0.0 && p50 < 200.0, "a round trip on one CPU took {p50} us at the median");
            }
        })
        .join()
        .unwrap();
    }
}
