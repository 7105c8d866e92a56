//! This process's CPU time from `/proc/self/stat`, user and system apart,
//! and the order statistics the benches print (`#[path]`-included: each
//! bench is a crate of its own).

use std::time::Duration;

/// CPU time so far: this process's own threads (user, system) and its
/// children that have been reaped (user and system together).
#[derive(Debug, Default, Clone, Copy)]
pub struct Cpu {
    pub user: Duration,
    pub system: Duration,
    pub children: Duration,
}

impl Cpu {
    /// Fields 14 to 17 of `/proc/self/stat` (utime, stime, cutime,
    /// cstime), read after the command's closing parenthesis, which a
    /// command name may itself contain.
    pub fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
        let after = stat.rsplit_once(')').expect("comm in /proc/self/stat").1;
        let fields: Vec<u64> = after
            .split_whitespace()
            .skip(11)
            .take(4)
            .map(|f| f.parse().expect("a tick count"))
            .collect();
        let tick = |n: u64| Duration::from_secs_f64(n as f64 / ticks_per_second());
        Self {
            user: tick(fields[0]),
            system: tick(fields[1]),
            children: tick(fields[2] + fields[3]),
        }
    }

    /// What was spent between `before` and now.
    pub fn since(before: Self) -> Self {
        let now = Self::now();
        Self {
            user: now.user.saturating_sub(before.user),
            system: now.system.saturating_sub(before.system),
            children: now.children.saturating_sub(before.children),
        }
    }

    pub fn add(&mut self, other: Self) {
        self.user += other.user;
        self.system += other.system;
        self.children += other.children;
    }

    pub fn total(&self) -> Duration {
        self.user + self.system + self.children
    }

    /// `user / system / children` per call, in milliseconds.
    pub fn per_call(&self, calls: usize) -> String {
        let per = |d: Duration| d.as_secs_f64() * 1e3 / calls.max(1) as f64;
        format!(
            "{:.3} ms (user {:.3}, sys {:.3}, children {:.3})",
            per(self.total()),
            per(self.user),
            per(self.system),
            per(self.children)
        )
    }
}

fn ticks_per_second() -> f64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(n)) if n > 0 => n as f64,
        _ => 100.0,
    }
}

/// The median and 99th percentile of some timings.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub median: Duration,
    pub p99: Duration,
}

impl Stats {
    pub fn of(times: &[Duration]) -> Self {
        let mut v = times.to_vec();
        v.sort();
        let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
        Self {
            median: at(0.5),
            p99: at(0.99),
        }
    }

    /// `median x ms  p99 y ms`.
    pub fn shown(&self) -> String {
        format!(
            "median {:>8.3} ms  p99 {:>8.3} ms",
            self.median.as_secs_f64() * 1e3,
            self.p99.as_secs_f64() * 1e3
        )
    }
}

/// `a - b` in milliseconds, signed.
pub fn added_ms(a: Duration, b: Duration) -> f64 {
    (a.as_secs_f64() - b.as_secs_f64()) * 1e3
}
