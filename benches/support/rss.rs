//! Sampling this process's resident set while a bench runs, shared by the
//! benches that hold memory to a goal (`#[path]`-included: each bench is a
//! crate of its own).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// This process's resident set, in KiB.
pub fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Samples VmRSS every `SAMPLE_EVERY` on a thread of its own, keeping the
/// highest value seen since the last [`RssSampler::reset`].
pub struct RssSampler {
    peak: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub const SAMPLE_EVERY: Duration = Duration::from_millis(2);

impl RssSampler {
    pub fn start() -> Self {
        let peak = Arc::new(AtomicU64::new(0));
        let samples = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, samples, stop) = (peak.clone(), samples.clone(), stop.clone());
            std::thread::Builder::new()
                .name("rss-sampler".to_owned())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        peak.fetch_max(vm_rss_kib(), Ordering::Relaxed);
                        samples.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(SAMPLE_EVERY);
                    }
                })
                .expect("sampler thread")
        };
        Self {
            peak,
            samples,
            stop,
            thread: Some(thread),
        }
    }

    /// Starts a new window at `now` KiB.
    pub fn reset(&self, now: u64) {
        self.peak.store(now, Ordering::Relaxed);
        self.samples.store(0, Ordering::Relaxed);
    }

    /// The peak and the number of samples since the last reset.
    pub fn read(&self) -> (u64, u64) {
        (
            self.peak.load(Ordering::Relaxed).max(vm_rss_kib()),
            self.samples.load(Ordering::Relaxed),
        )
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
