//! Progress of long commands (`bench`, `verify`) on stderr: drawn only when
//! stderr is a terminal and only once the work has taken a second, so
//! short runs and piped output see nothing.
//!
//! Owns: the bar's look and when it appears. Must not print results: they
//! go to stdout through [`Progress::println`], which keeps the bar off the
//! lines.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use parking_lot::Mutex;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

/// How long work runs before its progress shows.
const SHOW_AFTER: Duration = Duration::from_secs(1);

pub struct Progress {
    bar: ProgressBar,
    /// Set once finished: the timer that reveals the bar must not draw it
    /// after that (taken under the same lock as the reveal).
    finished: Arc<Mutex<bool>>,
}

impl Progress {
    /// Progress over `len` units of `what` (e.g. "steps", "cases").
    pub fn new(len: u64, what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        let template = format!("{{spinner}} {{pos}}/{{len}} {what} [{{bar:30}}] {{elapsed}} (eta {{eta}}) {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        let finished = Arc::new(Mutex::new(false));
        if std::io::stderr().is_terminal() {
            let (bar, finished) = (bar.clone(), finished.clone());
            std::thread::spawn(move || {
                std::thread::sleep(SHOW_AFTER);
                let finished = finished.lock();
                if !*finished {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                    bar.enable_steady_tick(Duration::from_millis(120));
                }
            });
        }
        Progress { bar, finished }
    }

    /// Counts `n` more units, stopping at the length: a caller whose count
    /// is an estimate (untimed settling steps) never shows more than all.
    pub fn inc(&self, n: u64) {
        let left = self.bar.length().map_or(n, |len| len.saturating_sub(self.bar.position()));
        self.bar.inc(n.min(left));
    }

    pub fn set_message(&self, message: impl Into<String>) {
        self.bar.set_message(message.into());
    }

    /// Prints a result line to stdout without tearing the bar.
    pub fn println(&self, line: &str) {
        self.bar.suspend(|| println!("{line}"));
    }

    /// Runs `print` (which writes to stdout) with the bar out of the way.
    pub fn suspend<R>(&self, print: impl FnOnce() -> R) -> R {
        self.bar.suspend(print)
    }

    /// Removes the bar.
    pub fn finish(&self) {
        let mut finished = self.finished.lock();
        *finished = true;
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
