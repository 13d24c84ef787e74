//! `ringflow stats --target URL`: a live server's counters over the native
//! protocol's `GetStats` call.
//!
//! Owns: the call and the output (a table, or JSON). Must not compute
//! counters: the server's `crate::server::stats` does.

use crate::error::Result;
use crate::net::message as msg;
use crate::net::{Client, TransportOptions};
use std::time::{Duration, Instant};

/// How long the server may take to answer.
const STATS_TIMEOUT: Duration = Duration::from_secs(10);

/// Fetches the counters of the server at `target` (ringflow://host:port).
pub fn fetch(target: &str) -> Result<msg::GetStatsResponse> {
    let address = crate::session::parse_target(target)?;
    let client = Client::connect(address, TransportOptions { name: "ringflow stats".into(), ..Default::default() })
        .map_err(|e| e.context(format_args!("ringflow stats: {target}")))?;
    let response = client.call_rpc(&msg::GetStatsRequest {}, &[], Instant::now() + STATS_TIMEOUT)?;
    msg::decode::<msg::GetStatsResponse>(response.meta_bytes())
}

/// The counters as `ringflow stats` prints them.
pub fn stats(target: &str, json: bool) -> Result<String> {
    let stats = fetch(target)?;
    if json {
        let text = serde_json::to_string(&stats)
            .map_err(|e| crate::error::Status::internal(format!("encoding stats as JSON: {e}")))?;
        return Ok(text + "\n");
    }
    Ok(crate::server::stats::format_table(&stats))
}
