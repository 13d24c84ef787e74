//! A live server's counters, as the `GetStats` answer (`ringflow stats`)
//! and as Prometheus text (`/metrics`).
//!
//! Owns: [`StatsSource`] (what a snapshot reads: the process counters in
//! `crate::counters`, this server's master and worker for live sessions)
//! and the two renderings. Must not record anything: handlers record into
//! `crate::counters`.

use crate::counters;
use crate::error::Result;
use crate::master::Master;
use crate::net::message::{self as msg, GetStatsResponse, LatencySummary};
use crate::net::{Reply, Request};
use crate::worker::Worker;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Instant;

/// What a server's counters are read from.
pub struct StatsSource {
    pub task_name: String,
    pub started: Instant,
    pub master: Option<Arc<Master>>,
    pub worker: Option<Arc<Worker>>,
}

impl StatsSource {
    pub fn snapshot(&self) -> GetStatsResponse {
        let c = counters::snapshot();
        GetStatsResponse {
            task: self.task_name.clone(),
            uptime_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            steps: c.steps,
            step_errors: c.step_errors,
            graph_runs: c.graph_runs,
            graph_run_errors: c.graph_run_errors,
            bytes_sent: c.bytes_sent,
            bytes_received: c.bytes_received,
            shm_frames: c.shm_frames,
            shm_socket_frames: c.shm_socket_frames,
            shm_space_stalls: c.shm_space_stalls,
            shm_frames_in_place: c.shm_frames_in_place,
            shm_bytes_in_place: c.shm_bytes_in_place,
            shm_bytes_copied: c.shm_bytes_copied,
            shm_bytes_copied_out: c.shm_bytes_copied_out,
            master_sessions: self.master.as_ref().map_or(0, |m| m.num_sessions() as u64),
            worker_sessions: self.worker.as_ref().map_or(0, |w| w.num_sessions() as u64),
            sessions_created: c.sessions_created,
            step_latency: c.step_latency,
            graph_run_latency: c.graph_run_latency,
        }
    }

    /// Answers a `GetStats` request.
    pub fn handle(&self, request: &Request, reply: Reply) {
        let answer = || -> Result<rkyv::util::AlignedVec> {
            request.meta::<msg::GetStatsRequest>()?;
            msg::encode(&self.snapshot())
        };
        match answer() {
            Ok(meta) => reply.ok(&meta, &[]),
            Err(e) => reply.err(e),
        }
    }
}

/// Escapes a Prometheus label value.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The snapshot in Prometheus text exposition format (version 0.0.4).
pub fn prometheus_text(s: &GetStatsResponse) -> String {
    let task = format!("task=\"{}\"", label(&s.task));
    let mut out = String::with_capacity(2048);
    let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{task}}} {value}");
    };
    metric("ringflow_uptime_seconds", "gauge", "Seconds since the server started.", s.uptime_ms / 1000);
    metric("ringflow_steps_total", "counter", "Client steps the master ran (RunStep, RunCallable).", s.steps);
    metric("ringflow_step_errors_total", "counter", "Client steps that failed.", s.step_errors);
    metric("ringflow_graph_runs_total", "counter", "Graph partitions the worker ran (RunGraph).", s.graph_runs);
    metric("ringflow_graph_run_errors_total", "counter", "Graph partition runs that failed.", s.graph_run_errors);
    metric("ringflow_sent_bytes_total", "counter", "Bytes sent on native connections.", s.bytes_sent);
    metric("ringflow_received_bytes_total", "counter", "Bytes received on native connections.", s.bytes_received);
    metric("ringflow_shm_frames_total", "counter", "Frames sent through shared-memory rings.", s.shm_frames);
    metric(
        "ringflow_shm_socket_frames_total",
        "counter",
        "Frames of shared-memory channels sent over the socket (too large for the ring, or no room).",
        s.shm_socket_frames,
    );
    metric(
        "ringflow_shm_space_stalls_total",
        "counter",
        "Waits for shared-memory ring space that ran out.",
        s.shm_space_stalls,
    );
    metric(
        "ringflow_shm_frames_in_place_total",
        "counter",
        "Frames through shared-memory rings whose tensor its kernel wrote in the ring (no copy when sent).",
        s.shm_frames_in_place,
    );
    metric(
        "ringflow_shm_bytes_in_place_total",
        "counter",
        "Bytes through shared-memory rings where their kernels wrote them (never copied).",
        s.shm_bytes_in_place,
    );
    metric(
        "ringflow_shm_bytes_copied_total",
        "counter",
        "Bytes senders copied into shared-memory rings.",
        s.shm_bytes_copied,
    );
    metric(
        "ringflow_shm_bytes_copied_out_total",
        "counter",
        "Payload bytes readers copied out of shared-memory rings on arrival (what they already lent filled the ring's list of ranges or most of its bytes).",
        s.shm_bytes_copied_out,
    );
    metric("ringflow_master_sessions", "gauge", "Live master sessions.", s.master_sessions);
    metric("ringflow_worker_sessions", "gauge", "Live worker sessions.", s.worker_sessions);
    metric("ringflow_sessions_created_total", "counter", "Master sessions created.", s.sessions_created);
    for (name, help, l) in [
        ("ringflow_step_latency_seconds", "Client step latency since start.", &s.step_latency),
        ("ringflow_graph_run_latency_seconds", "RunGraph latency since start.", &s.graph_run_latency),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} summary");
        for (q, ns) in [("0.5", l.p50_ns), ("0.9", l.p90_ns), ("0.99", l.p99_ns), ("0.999", l.p999_ns)] {
            let _ = writeln!(out, "{name}{{{task},quantile=\"{q}\"}} {}", seconds(ns));
        }
        let _ = writeln!(out, "{name}_sum{{{task}}} {}\n{name}_count{{{task}}} {}", seconds(l.sum_ns), l.count);
    }
    out
}

fn seconds(ns: u64) -> String {
    format!("{:.9}", ns as f64 / 1e9)
}

/// `ringflow stats`' table.
pub fn format_table(s: &GetStatsResponse) -> String {
    let us = |ns: u64| format!("{:.1} us", ns as f64 / 1e3);
    let latency = |l: &LatencySummary| {
        if l.count == 0 {
            "none yet".to_string()
        } else {
            format!(
                "p50 {}, p90 {}, p99 {}, p99.9 {}, max {} (n = {})",
                us(l.p50_ns),
                us(l.p90_ns),
                us(l.p99_ns),
                us(l.p999_ns),
                us(l.max_ns),
                l.count
            )
        }
    };
    format!(
        "task              {}\n\
         uptime            {:.1} s\n\
         steps             {} ({} failed)\n\
         graph runs        {} ({} failed)\n\
         sessions          {} master, {} worker live; {} created\n\
         bytes             {} sent, {} received\n\
         shared memory     {} frames in rings ({} written in place), {} over sockets, {} space stalls\n\
         ring bytes        {} written in place, {} copied in, {} copied out on arrival\n\
         step latency      {}\n\
         graph run latency {}\n",
        s.task,
        s.uptime_ms as f64 / 1e3,
        s.steps,
        s.step_errors,
        s.graph_runs,
        s.graph_run_errors,
        s.master_sessions,
        s.worker_sessions,
        s.sessions_created,
        s.bytes_sent,
        s.bytes_received,
        s.shm_frames,
        s.shm_frames_in_place,
        s.shm_socket_frames,
        s.shm_space_stalls,
        s.shm_bytes_in_place,
        s.shm_bytes_copied,
        s.shm_bytes_copied_out,
        latency(&s.step_latency),
        latency(&s.graph_run_latency),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_text_has_one_sample_per_line_with_help_and_type() {
        let s = GetStatsResponse {
            task: "/job:worker/replica:0/task:0".into(),
            steps: 7,
            shm_bytes_copied_out: 4096,
            step_latency: LatencySummary { count: 7, sum_ns: 7_000, p50_ns: 1_000, ..Default::default() },
            ..Default::default()
        };
        let text = prometheus_text(&s);
        assert!(text.contains("ringflow_steps_total{task=\"/job:worker/replica:0/task:0\"} 7\n"), "{text}");
        assert!(text.contains("ringflow_shm_bytes_copied_out_total{task=\"/job:worker/replica:0/task:0\"} 4096\n"));
        assert!(format_table(&s).contains("4096 copied out on arrival"), "{}", format_table(&s));
        assert!(text.contains(
            "ringflow_step_latency_seconds{task=\"/job:worker/replica:0/task:0\",quantile=\"0.5\"} 0.000001000\n"
        ));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            let name = series.split('{').next().unwrap();
            let base = name.trim_end_matches("_sum").trim_end_matches("_count");
            assert!(text.contains(&format!("# TYPE {base} ")), "{name} has no TYPE line");
        }
        assert_eq!(label("a\"b\\c"), "a\\\"b\\\\c");
    }
}
