//! `GET /metrics` over plain HTTP/1.1 (`ringflow server --metrics-port`),
//! for Prometheus to scrape.
//!
//! Owns: one thread with a std `TcpListener`, answering one connection at
//! a time. Must not touch the serving path: it only reads counters
//! ([`StatsSource::snapshot`]). Bounded: a request head of at most
//! [`MAX_REQUEST_BYTES`], [`IO_TIMEOUT`] per read and write, one
//! connection at a time (a stalled scraper delays the next scrape, never a
//! step).

use super::stats::{StatsSource, prometheus_text};
use crate::error::{Result, Status};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest request head read; longer requests get 431.
pub const MAX_REQUEST_BYTES: usize = 8 << 10;

/// Each read and write on a scrape connection times out after this.
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);

pub struct MetricsEndpoint {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsEndpoint {
    /// Binds `address` (port 0: any) and serves until dropped.
    pub fn start(address: &str, source: Arc<StatsSource>) -> Result<MetricsEndpoint> {
        let listener = TcpListener::bind(address)
            .map_err(|e| Status::unavailable(format!("--metrics-port: cannot listen on {address}: {e}")))?;
        let bound = listener.local_addr().map_err(|e| Status::internal(format!("metrics listener address: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics-http".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::Acquire) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        if let Err(e) = answer(stream, &source) {
                            tracing::debug!("metrics scrape: {e}");
                        }
                    }
                }
            })
            .map_err(|e| Status::resource_exhausted(format!("cannot start the metrics thread: {e}")))?;
        Ok(MetricsEndpoint { address: bound, stop, thread: Some(thread) })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the blocked accept; if that fails the thread is left to
        // die with the process rather than joined forever.
        let woke = TcpStream::connect_timeout(&self.address, IO_TIMEOUT).is_ok();
        if let Some(thread) = self.thread.take() {
            if woke {
                let _ = thread.join();
            }
        }
    }
}

/// Reads one request head and answers it; the connection then closes.
fn answer(mut stream: TcpStream, source: &StatsSource) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    let complete = loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            break true;
        }
        if head.len() >= MAX_REQUEST_BYTES {
            break false;
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break head.contains(&b'\n');
        }
        head.extend_from_slice(&chunk[..n]);
    };
    let (status, content_type, body) = if !complete {
        ("431 Request Header Fields Too Large", "text/plain", "request head too large\n".to_string())
    } else {
        let request_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
        let request_line = String::from_utf8_lossy(request_line);
        let mut parts = request_line.split_whitespace();
        match (parts.next(), parts.next()) {
            (Some("GET"), Some("/metrics")) => {
                ("200 OK", "text/plain; version=0.0.4; charset=utf-8", prometheus_text(&source.snapshot()))
            }
            (Some("GET"), Some(_)) => ("404 Not Found", "text/plain", "only /metrics is served here\n".to_string()),
            _ => ("405 Method Not Allowed", "text/plain", "only GET /metrics is served here\n".to_string()),
        }
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes())?;
    stream.flush()?;
    // Closing with unread bytes would reset the connection and could
    // discard the answer before the client reads it: read what the client
    // still sends, within the same bounds.
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut drained = 0;
    while drained < MAX_REQUEST_BYTES {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn get(address: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(address).unwrap();
        stream.write_all(request).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    #[test]
    fn serves_metrics_and_refuses_the_rest() {
        let source =
            Arc::new(StatsSource { task_name: "t".into(), started: Instant::now(), master: None, worker: None });
        let endpoint = MetricsEndpoint::start("127.0.0.1:0", source).unwrap();
        let address = endpoint.address();
        let ok = get(address, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("ringflow_steps_total{task=\"t\"}"), "{ok}");
        assert!(get(address, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(address, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        let huge = vec![b'a'; MAX_REQUEST_BYTES + 10];
        assert!(get(address, &huge).starts_with("HTTP/1.1 431"));
        // A scraper that connects and says nothing delays the next one by
        // at most IO_TIMEOUT.
        let _silent = TcpStream::connect(address).unwrap();
        let start = Instant::now();
        assert!(get(address, b"GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
        assert!(start.elapsed() < IO_TIMEOUT * 3);
        drop(endpoint);
        assert!(TcpStream::connect(address).is_err(), "the port closes with the endpoint");
    }
}
