//! Process-wide counters of the work a server does: client steps, graph
//! runs, sessions created, step latencies, and the bytes its native
//! connections move. A server process serves one task, so these are that
//! task's counters; `crate::server::stats` reads them (`ringflow stats`,
//! `/metrics`).
//!
//! Owns: the counters and their recording. Recorded by the MasterService
//! and WorkerService handlers (steps, graph runs, sessions) and the byte
//! movers in `net::io` (bytes). Must not depend on anything above it, and
//! must stay cheap where it is called: a relaxed add per send or receive,
//! and per step a relaxed add and one uncontended lock to record a
//! latency into its histogram (the only other holder is a stats reader,
//! for a copy).

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static BYTES_SENT: AtomicU64 = AtomicU64::new(0);
static BYTES_RECEIVED: AtomicU64 = AtomicU64::new(0);
static STEPS: AtomicU64 = AtomicU64::new(0);
static STEP_ERRORS: AtomicU64 = AtomicU64::new(0);
static GRAPH_RUNS: AtomicU64 = AtomicU64::new(0);
static GRAPH_RUN_ERRORS: AtomicU64 = AtomicU64::new(0);
static SESSIONS_CREATED: AtomicU64 = AtomicU64::new(0);
static SHM_SOCKET_FRAMES: AtomicU64 = AtomicU64::new(0);
static SHM_SPACE_STALLS: AtomicU64 = AtomicU64::new(0);
static SHM_FRAMES_IN_PLACE: AtomicU64 = AtomicU64::new(0);
static SHM_BYTES_IN_PLACE: AtomicU64 = AtomicU64::new(0);
static SHM_BYTES_COPIED_OUT: AtomicU64 = AtomicU64::new(0);

/// Longest latency a histogram holds (longer ones are recorded as this).
const LATENCY_MAX_NS: u64 = 3_600 * 1_000_000_000;

/// Two significant digits: 1% resolution at every scale, in a few KiB.
const LATENCY_DIGITS: u8 = 2;

fn latency_histogram() -> Mutex<Histogram<u64>> {
    // The bounds are constants that hdrhistogram accepts; a failure here is
    // a broken invariant, caught by the tests below.
    Mutex::new(Histogram::new_with_max(LATENCY_MAX_NS, LATENCY_DIGITS).expect("valid histogram bounds"))
}

fn step_latency() -> &'static Mutex<Histogram<u64>> {
    static HISTOGRAM: OnceLock<Mutex<Histogram<u64>>> = OnceLock::new();
    HISTOGRAM.get_or_init(latency_histogram)
}

fn graph_run_latency() -> &'static Mutex<Histogram<u64>> {
    static HISTOGRAM: OnceLock<Mutex<Histogram<u64>>> = OnceLock::new();
    HISTOGRAM.get_or_init(latency_histogram)
}

fn nanos(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX).min(LATENCY_MAX_NS)
}

#[inline]
pub fn count_sent(bytes: usize) {
    BYTES_SENT.fetch_add(bytes as u64, Ordering::Relaxed);
}

#[inline]
pub fn count_received(bytes: usize) {
    BYTES_RECEIVED.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// A client step (RunStep, RunCallable) that began at `started` ended.
pub fn record_step(started: Instant, ok: bool) {
    STEPS.fetch_add(1, Ordering::Relaxed);
    if !ok {
        STEP_ERRORS.fetch_add(1, Ordering::Relaxed);
    }
    step_latency().lock().saturating_record(nanos(started.elapsed()));
}

/// A partition run (RunGraph) that began at `started` ended.
pub fn record_graph_run(started: Instant, ok: bool) {
    GRAPH_RUNS.fetch_add(1, Ordering::Relaxed);
    if !ok {
        GRAPH_RUN_ERRORS.fetch_add(1, Ordering::Relaxed);
    }
    graph_run_latency().lock().saturating_record(nanos(started.elapsed()));
}

pub fn record_session_created() {
    SESSIONS_CREATED.fetch_add(1, Ordering::Relaxed);
}

/// Frames a shared-memory channel sent through its ring and the bytes
/// copied into it, added to by whoever holds the channel's producer lock
/// with a load and a store, read by anyone. No locked instruction: one
/// costs about 12.5 TSC ticks on the 2 vCPU EPYC VM and drains the store
/// buffer of a sender whose next move is to wait for its answer. The process's figures are the
/// live channels' sums plus those of the channels already gone.
#[derive(Debug, Default)]
pub struct ShmSent {
    frames: AtomicU64,
    bytes_copied: AtomicU64,
}

impl ShmSent {
    /// Counts `frames` frames and `bytes_copied` bytes. The caller holds
    /// the one lock every adder to these counts holds (a channel's
    /// producer lock), so the load and the store cannot interleave with
    /// another add.
    #[inline]
    pub fn add_exclusive(&self, frames: u64, bytes_copied: u64) {
        let add = |c: &AtomicU64, n: u64| c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        add(&self.frames, frames);
        add(&self.bytes_copied, bytes_copied);
    }

    pub fn frames(&self) -> u64 {
        self.frames.load(Ordering::Relaxed)
    }

    pub fn bytes_copied(&self) -> u64 {
        self.bytes_copied.load(Ordering::Relaxed)
    }
}

/// Every live channel's counts, and the sums of those that are gone.
struct ShmSentRegistry {
    live: Vec<std::sync::Weak<ShmSent>>,
    gone_frames: u64,
    gone_bytes_copied: u64,
}

fn shm_sent_registry() -> &'static Mutex<ShmSentRegistry> {
    static REGISTRY: OnceLock<Mutex<ShmSentRegistry>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(ShmSentRegistry { live: Vec::new(), gone_frames: 0, gone_bytes_copied: 0 }))
}

/// A new channel's counts, summed into the process's figures while the
/// returned handle lives and kept in them after.
pub fn register_shm_sent() -> ShmSentHandle {
    let sent = std::sync::Arc::new(ShmSent::default());
    let mut registry = shm_sent_registry().lock();
    registry.live.retain(|w| w.strong_count() > 0);
    registry.live.push(std::sync::Arc::downgrade(&sent));
    ShmSentHandle(sent)
}

/// A channel's registered [`ShmSent`]; dropped, its counts move to the
/// sums of the channels that are gone.
#[derive(Debug)]
pub struct ShmSentHandle(std::sync::Arc<ShmSent>);

impl Default for ShmSentHandle {
    fn default() -> ShmSentHandle {
        register_shm_sent()
    }
}

impl std::ops::Deref for ShmSentHandle {
    type Target = ShmSent;
    fn deref(&self) -> &ShmSent {
        &self.0
    }
}

impl Drop for ShmSentHandle {
    fn drop(&mut self) {
        let mut registry = shm_sent_registry().lock();
        registry.gone_frames += self.0.frames();
        registry.gone_bytes_copied += self.0.bytes_copied();
        let me = std::sync::Arc::as_ptr(&self.0);
        registry.live.retain(|w| w.as_ptr() != me && w.strong_count() > 0);
    }
}

/// The process's shared-memory frames sent and bytes copied into rings.
fn shm_sent_totals() -> (u64, u64) {
    let registry = shm_sent_registry().lock();
    registry
        .live
        .iter()
        .filter_map(|w| w.upgrade())
        .fold((registry.gone_frames, registry.gone_bytes_copied), |(frames, bytes), sent| {
            (frames + sent.frames(), bytes + sent.bytes_copied())
        })
}

/// A frame of a shared-memory channel went over the socket instead (too
/// large for the ring, or no room in it).
pub fn count_shm_socket_frame() {
    SHM_SOCKET_FRAMES.fetch_add(1, Ordering::Relaxed);
}

/// A frame crossed a shared-memory ring with its tensor written there by
/// the kernel that made it (nothing copied when sent).
pub fn count_shm_frame_in_place() {
    SHM_FRAMES_IN_PLACE.fetch_add(1, Ordering::Relaxed);
}

/// A frame crossed a shared-memory ring with `in_place` bytes of it in
/// spans its kernels wrote there (its copied bytes are its channel's
/// [`ShmSent`]).
pub fn count_shm_bytes_in_place(in_place: u64) {
    SHM_BYTES_IN_PLACE.fetch_add(in_place, Ordering::Relaxed);
}

/// A reader copied `bytes` of a frame's payloads out of a shared-memory
/// ring on arrival instead of lending them: the spans it already lent make
/// as many ranges as the ring lists (`net::shm::ring::HOLDS`) or most of
/// its bytes (`Consumer::should_copy_out`).
pub fn count_shm_copied_out(bytes: u64) {
    SHM_BYTES_COPIED_OUT.fetch_add(bytes, Ordering::Relaxed);
}

/// A sender waited for ring space until it gave up.
pub fn count_shm_space_stall() {
    SHM_SPACE_STALLS.fetch_add(1, Ordering::Relaxed);
}

/// Percentiles of a latency histogram, in nanoseconds: the wire's summary.
pub use crate::net::message::LatencySummary as Latencies;

impl Latencies {
    fn of(histogram: &Mutex<Histogram<u64>>) -> Latencies {
        // Copied under the lock, summarised outside it: a recorder waits
        // for a memcpy of a few KiB at most.
        let copy = histogram.lock().clone();
        if copy.is_empty() {
            return Latencies::default();
        }
        let at = |q: f64| copy.value_at_quantile(q);
        Latencies {
            count: copy.len(),
            sum_ns: (copy.mean() * copy.len() as f64) as u64,
            p50_ns: at(0.50),
            p90_ns: at(0.90),
            p99_ns: at(0.99),
            p999_ns: at(0.999),
            max_ns: copy.max(),
        }
    }
}

/// Every counter at one moment (each read on its own: not a transaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub steps: u64,
    pub step_errors: u64,
    pub graph_runs: u64,
    pub graph_run_errors: u64,
    pub sessions_created: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub shm_frames: u64,
    pub shm_socket_frames: u64,
    pub shm_space_stalls: u64,
    pub shm_frames_in_place: u64,
    pub shm_bytes_in_place: u64,
    pub shm_bytes_copied: u64,
    pub shm_bytes_copied_out: u64,
    pub step_latency: Latencies,
    pub graph_run_latency: Latencies,
}

pub fn snapshot() -> Snapshot {
    let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let (shm_frames, shm_bytes_copied) = shm_sent_totals();
    Snapshot {
        steps: read(&STEPS),
        step_errors: read(&STEP_ERRORS),
        graph_runs: read(&GRAPH_RUNS),
        graph_run_errors: read(&GRAPH_RUN_ERRORS),
        sessions_created: read(&SESSIONS_CREATED),
        bytes_sent: read(&BYTES_SENT),
        bytes_received: read(&BYTES_RECEIVED),
        shm_frames,
        shm_socket_frames: read(&SHM_SOCKET_FRAMES),
        shm_space_stalls: read(&SHM_SPACE_STALLS),
        shm_frames_in_place: read(&SHM_FRAMES_IN_PLACE),
        shm_bytes_in_place: read(&SHM_BYTES_IN_PLACE),
        shm_bytes_copied,
        shm_bytes_copied_out: read(&SHM_BYTES_COPIED_OUT),
        step_latency: Latencies::of(step_latency()),
        graph_run_latency: Latencies::of(graph_run_latency()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recording_moves_the_counters() {
        // Other tests in this process count too: compare differences.
        let before = snapshot();
        let started = Instant::now() - Duration::from_micros(250);
        record_step(started, true);
        record_step(started, false);
        record_graph_run(started, true);
        record_session_created();
        count_sent(100);
        count_received(40);
        let after = snapshot();
        assert!(after.steps >= before.steps + 2);
        assert!(after.step_errors > before.step_errors);
        assert!(after.graph_runs > before.graph_runs);
        assert!(after.sessions_created > before.sessions_created);
        assert!(after.bytes_sent >= before.bytes_sent + 100);
        assert!(after.bytes_received >= before.bytes_received + 40);
        assert!(after.step_latency.count >= 2);
        assert!(after.step_latency.max_ns >= 250_000, "{:?}", after.step_latency);
        assert!(after.step_latency.p50_ns <= after.step_latency.p99_ns);
        assert!(after.step_latency.p99_ns <= after.step_latency.max_ns);
    }

    #[test]
    fn an_empty_histogram_summarises_to_zeros() {
        assert_eq!(Latencies::of(&latency_histogram()), Latencies::default());
        let h = latency_histogram();
        h.lock().saturating_record(nanos(Duration::from_secs(7200)));
        assert_eq!(Latencies::of(&h).count, 1);
    }

    #[test]
    fn a_channels_sent_counts_stay_in_the_totals_after_it_is_gone() {
        // Other tests in this process count too: compare differences.
        let before = shm_sent_totals();
        let first = register_shm_sent();
        let second = register_shm_sent();
        first.add_exclusive(1, 100);
        second.add_exclusive(2, 30);
        first.add_exclusive(1, 5);
        assert_eq!((first.frames(), first.bytes_copied()), (2, 105));
        let live = shm_sent_totals();
        assert!(live.0 >= before.0 + 4 && live.1 >= before.1 + 135, "{before:?} then {live:?}");
        drop(first);
        drop(second);
        let after = shm_sent_totals();
        assert!(after.0 >= before.0 + 4 && after.1 >= before.1 + 135, "{before:?} then {after:?}");
        let registry = shm_sent_registry().lock();
        assert!(registry.live.iter().all(|w| w.strong_count() > 0), "a dropped channel's counts stay registered");
    }
}
