//! Small figures shared by the scale benches (`#[path]`-included: each
//! bench is a crate of its own): medians and p99 of latencies, and the
//! quick-run switch.

#![allow(dead_code, reason = "each bench uses its own part of this module")]

use std::time::Duration;

/// `SKILLD_BENCH_QUICK=1`: shrink every size for a quick run while
/// developing (the figures then say little about scale).
pub fn quick() -> bool {
    std::env::var("SKILLD_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The value at quantile `q` (0..=1) of `v`, sorted in place; zero when
/// empty.
pub fn quantile(v: &mut [Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// `median … p99 …` of `v`, with its count.
pub fn line(v: &mut [Duration]) -> String {
    format!(
        "median {:>10}  p99 {:>10}  (n={})",
        ms(quantile(v, 0.5)),
        ms(quantile(v, 0.99)),
        v.len()
    )
}

/// Resident set of process `pid` in KiB (VmRSS), `None` if unreadable.
pub fn rss_kib_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// User + system CPU of process `pid` (all its threads) in clock ticks
/// (usually 100 a second), from `/proc/<pid>/stat`.
pub fn cpu_ticks_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// Clock ticks per second of `/proc/*/stat`: USER_HZ, 100 on Linux
/// whatever the kernel's own tick rate.
pub fn ticks_per_sec() -> f64 {
    100.0
}
