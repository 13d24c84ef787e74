//! Aligning the tasks' clocks for step stats. Every task stamps its nodes
//! with its own wall clock (µs since the Unix epoch); before a session's
//! first traced step the master reads each task's clock a few times over a
//! cheap round trip (GetStatus), keeps the sample with the shortest round
//! trip and takes the task's offset as its reading minus the round trip's
//! midpoint (NTP's estimate). The reading happened somewhere inside the
//! round trip, so the offset is off by at most half of it: that half (plus
//! rounding to whole microseconds) is the recorded bound. Every offset in
//! `midpoint ± bound` fits the round trips alike; the one applied is the
//! one nearest 0, so tasks that share a host's clock are not moved by
//! noise (which could turn a transfer's arrow backwards).
//!
//! Owns: the estimate, the [`TaskClock`] record and moving a task's stats
//! onto the master's clock. Must not run steps or decide when to estimate
//! (the MasterSession does).

use crate::error::Result;
use crate::executor::{NodeStats, wall_clock_us};
use crate::net::message as msg;
use crate::worker::WorkerInterface;
use std::time::Instant;

/// Round trips per task: the shortest of a few is near the floor even on a
/// noisy host, and a few cost well under a millisecond on loopback.
pub const CLOCK_SAMPLES: u32 = 8;

/// Whole-microsecond readings at both ends (the master's two, the task's
/// one) each truncate up to 1 µs; this covers their sum.
const ROUNDING_US: u64 = 2;

pub use crate::net::message::TaskClock;

/// Estimates `worker`'s clock offset from `samples` round trips.
pub fn estimate_task_clock(task: &str, worker: &dyn WorkerInterface, samples: u32) -> Result<TaskClock> {
    estimate_offset(task, samples, &mut || worker.wall_clock_us())
}

/// Estimates the offset of the clock `read_remote_us` reads (one round
/// trip per call) from `samples` calls.
pub fn estimate_offset(task: &str, samples: u32, read_remote_us: &mut dyn FnMut() -> Result<u64>) -> Result<TaskClock> {
    // The master's side reads a monotonic clock anchored once to the wall
    // clock, so a wall-clock step during the probes cannot fake a sample.
    let anchor_us = wall_clock_us();
    let anchor = Instant::now();
    let now_us = || anchor_us + anchor.elapsed().as_micros() as u64;
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..samples.max(1) {
        let sent_us = now_us();
        let remote_us = read_remote_us().map_err(|e| e.context(format_args!("reading the clock of {task}")))?;
        let back_us = now_us();
        let rtt_us = back_us - sent_us;
        let midpoint_us = sent_us + rtt_us / 2;
        let offset_us = remote_us as i64 - midpoint_us as i64;
        if best.is_none_or(|(rtt, _)| rtt_us < rtt) {
            best = Some((rtt_us, offset_us));
        }
    }
    let (min_rtt_us, midpoint_offset_us) = best.unwrap_or_default();
    let bound_us = min_rtt_us.div_ceil(2) + ROUNDING_US;
    let bound = bound_us as i64;
    Ok(TaskClock {
        task: task.to_string(),
        offset_us: midpoint_offset_us - midpoint_offset_us.clamp(-bound, bound),
        midpoint_offset_us,
        bound_us,
        min_rtt_us,
        samples: samples.max(1),
    })
}

/// Moves stats a task stamped onto the master's clock.
pub fn align_stats(stats: &mut [NodeStats], clock: &TaskClock) {
    if clock.offset_us == 0 {
        return;
    }
    let shift = |t: u64| (t as i64).saturating_sub(clock.offset_us).max(0) as u64;
    for node in stats {
        node.start_us = shift(node.start_us);
        node.end_us = shift(node.end_us);
    }
}

pub fn clocks_to_wire(clocks: &[TaskClock]) -> Vec<msg::TaskClock> {
    clocks.to_vec()
}

pub fn clocks_from_wire(clocks: &rkyv::vec::ArchivedVec<msg::ArchivedTaskClock>) -> Vec<TaskClock> {
    clocks
        .iter()
        .map(|c| TaskClock {
            task: c.task.to_string(),
            offset_us: c.offset_us.to_native(),
            midpoint_offset_us: c.midpoint_offset_us.to_native(),
            bound_us: c.bound_us.to_native(),
            min_rtt_us: c.min_rtt_us.to_native(),
            samples: c.samples.to_native(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(start_us: u64, end_us: u64) -> NodeStats {
        NodeStats {
            node: "n".into(),
            op: "NoOp".into(),
            device: "/job:worker/replica:0/task:1/device:CPU:0".into(),
            start_us,
            end_us,
            thread: 0,
            frame: String::new(),
            iter: 0,
            rendezvous_key: String::new(),
            bytes: 0,
        }
    }

    #[test]
    fn a_clock_five_seconds_ahead_is_found_within_the_bound() {
        let ahead_us = 5_000_000u64;
        let mut calls = 0;
        let clock = estimate_offset("/job:worker/replica:0/task:1", 6, &mut || {
            calls += 1;
            // The slow first answers must not be the ones kept.
            std::thread::sleep(std::time::Duration::from_micros(if calls <= 2 { 3_000 } else { 0 }));
            Ok(wall_clock_us() + ahead_us)
        })
        .unwrap();
        assert_eq!((calls, clock.samples), (6, 6));
        assert!(clock.min_rtt_us < 3_000, "{clock:?}");
        assert!((clock.offset_us - ahead_us as i64).unsigned_abs() <= clock.bound_us, "{clock:?}");
        assert!((clock.midpoint_offset_us - ahead_us as i64).unsigned_abs() <= clock.bound_us, "{clock:?}");
        assert_eq!(clock.bound_us, clock.min_rtt_us.div_ceil(2) + ROUNDING_US);
        assert_eq!(clock.offset_us, clock.midpoint_offset_us - clock.bound_us as i64, "the edge nearest 0");
    }

    #[test]
    fn an_estimate_within_its_bound_of_zero_moves_nothing() {
        let clock = estimate_offset("t", 4, &mut || Ok(wall_clock_us())).unwrap();
        assert!(clock.midpoint_offset_us.unsigned_abs() <= clock.bound_us, "{clock:?}");
        assert_eq!(clock.offset_us, 0);
    }

    #[test]
    fn a_failed_probe_names_the_task() {
        let e = estimate_offset("/job:ps/replica:0/task:0", 3, &mut || {
            Err(crate::error::Status::unavailable("connection refused"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("/job:ps/replica:0/task:0"), "{e}");
    }

    #[test]
    fn a_task_ahead_of_the_master_is_moved_back_by_its_offset() {
        let clock = TaskClock {
            task: "t".into(),
            offset_us: 250,
            midpoint_offset_us: 260,
            bound_us: 10,
            min_rtt_us: 16,
            samples: 8,
        };
        let mut stats = vec![node(1_000, 1_300)];
        align_stats(&mut stats, &clock);
        assert_eq!((stats[0].start_us, stats[0].end_us), (750, 1_050));
        let behind = TaskClock { offset_us: -40, ..clock };
        align_stats(&mut stats, &behind);
        assert_eq!((stats[0].start_us, stats[0].end_us), (790, 1_090));
    }
}
