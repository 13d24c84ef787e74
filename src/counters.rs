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
static SHM_FRAMES: AtomicU64 = AtomicU64::new(0);
static SHM_SOCKET_FRAMES: AtomicU64 = AtomicU64::new(0);
static SHM_SPACE_STALLS: AtomicU64 = AtomicU64::new(0);
static SHM_FRAMES_IN_PLACE: AtomicU64 = AtomicU64::new(0);
static SHM_BYTES_IN_PLACE: AtomicU64 = AtomicU64::new(0);
static SHM_BYTES_COPIED: AtomicU64 = AtomicU64::new(0);
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

/// A frame crossed a shared-memory ring.
#[inline]
pub fn count_shm_frame() {
    SHM_FRAMES.fetch_add(1, Ordering::Relaxed);
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

/// A frame crossed a shared-memory ring: `in_place` bytes of it in spans
/// its kernels wrote there, `copied` bytes copied in by the sender.
pub fn count_shm_bytes(in_place: u64, copied: u64) {
    if in_place > 0 {
        SHM_BYTES_IN_PLACE.fetch_add(in_place, Ordering::Relaxed);
    }
    SHM_BYTES_COPIED.fetch_add(copied, Ordering::Relaxed);
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
    Snapshot {
        steps: read(&STEPS),
        step_errors: read(&STEP_ERRORS),
        graph_runs: read(&GRAPH_RUNS),
        graph_run_errors: read(&GRAPH_RUN_ERRORS),
        sessions_created: read(&SESSIONS_CREATED),
        bytes_sent: read(&BYTES_SENT),
        bytes_received: read(&BYTES_RECEIVED),
        shm_frames: read(&SHM_FRAMES),
        shm_socket_frames: read(&SHM_SOCKET_FRAMES),
        shm_space_stalls: read(&SHM_SPACE_STALLS),
        shm_frames_in_place: read(&SHM_FRAMES_IN_PLACE),
        shm_bytes_in_place: read(&SHM_BYTES_IN_PLACE),
        shm_bytes_copied: read(&SHM_BYTES_COPIED),
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
}
