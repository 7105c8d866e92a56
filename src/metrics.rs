//! Prometheus metrics: one process-wide recorder and the few typed calls
//! that feed it, rendered by `GET /metrics` (`http::metrics`).
//!
//! Callers go through the functions here rather than the `metrics` macros,
//! so every metric's name, labels and unit are spelled in one place and a
//! label can only take values this module lets through: a label value that
//! a client controls (a raw path, a made-up method) would let anyone grow
//! the series without bound.
//!
//! The recorder is installed on first use. `metrics` allows one global
//! recorder per process, so the servers of one test process share it;
//! tests therefore compare counts before and after, or use names of their
//! own.

use hyper::http::Method;
use metrics::{Gauge, Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::Duration;

/// Runs that ended, by tool and final status.
pub const RUNS_TOTAL: &str = "skilld_runs_total";
/// How long runs took, by tool.
pub const RUN_DURATION_SECONDS: &str = "skilld_run_duration_seconds";
/// Runs started and not yet ended, by tool.
pub const RUNS_IN_FLIGHT: &str = "skilld_runs_in_flight";
/// Approval requests waiting for a decision.
pub const APPROVALS_PENDING: &str = "skilld_approvals_pending";
/// HTTP requests answered, by method, route template and status.
pub const HTTP_REQUESTS_TOTAL: &str = "skilld_http_requests_total";
/// Time to each HTTP response's head, by method and route template.
pub const HTTP_REQUEST_DURATION_SECONDS: &str = "skilld_http_request_duration_seconds";

/// Connections and requests asked of runs' egress proxies, by skill and
/// verdict (`allowed`, `denied`).
pub const EGRESS_TOTAL: &str = "skilld_egress_requests_total";
/// Bytes through runs' egress proxies, by skill and direction (`out`,
/// `in`).
pub const EGRESS_BYTES_TOTAL: &str = "skilld_egress_bytes_total";

/// The `route` of requests no route matched. Their raw paths are the
/// client's to choose, so they all share this one value.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Upper bounds of the run-duration buckets: from a quick `uname` to the
/// longest timeout a skill may set (600 s).
const RUN_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Upper bounds of the HTTP-duration buckets: catalog reads take
/// milliseconds, while an invoke with `wait` lasts as long as its run.
const HTTP_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0,
];

/// Histogram samples wait in the recorder until a scrape or an upkeep
/// folds them into buckets; without a scraper they would pile up, so a
/// thread folds them this often.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The installed recorder, installing it on the first call. `None` when
/// another recorder was installed first (an embedding program's): then
/// nothing is recorded here and `/metrics` is empty, which beats failing
/// requests over it.
fn recorder() -> Option<&'static PrometheusHandle> {
    RECORDER.get_or_init(install).as_ref()
}

fn install() -> Option<PrometheusHandle> {
    let installed = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(RUN_DURATION_SECONDS.to_owned()), RUN_BUCKETS)
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full(HTTP_REQUEST_DURATION_SECONDS.to_owned()),
                HTTP_BUCKETS,
            )
        })
        .and_then(PrometheusBuilder::install_recorder);
    let handle = match installed {
        Ok(handle) => handle,
        Err(e) => {
            tracing::warn!(error = %e, "no Prometheus recorder: /metrics will be empty");
            return None;
        }
    };
    describe();
    let upkeep = handle.clone();
    let spawned = std::thread::Builder::new()
        .name("skilld-metrics".to_owned())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_EVERY);
                upkeep.run_upkeep();
            }
        });
    if let Err(e) = spawned {
        // Scrapes still fold the samples; only an unscraped server grows.
        tracing::warn!(error = %e, "no metrics upkeep thread");
    }
    Some(handle)
}

/// The `# HELP` lines.
fn describe() {
    describe_counter!(RUNS_TOTAL, "Tool runs that ended, by tool and final status.");
    describe_histogram!(
        RUN_DURATION_SECONDS,
        Unit::Seconds,
        "Wall time of tool runs from start to end, by tool."
    );
    describe_gauge!(RUNS_IN_FLIGHT, "Tool runs started and not yet ended, by tool.");
    describe_gauge!(APPROVALS_PENDING, "Approval requests waiting for a decision.");
    describe_counter!(
        HTTP_REQUESTS_TOTAL,
        "HTTP requests answered, by method, route template (\"unmatched\" when no route matched) and status."
    );
    describe_counter!(
        EGRESS_TOTAL,
        "Connections and requests network.allow runs asked of their proxies, by skill and verdict."
    );
    describe_counter!(
        EGRESS_BYTES_TOTAL,
        Unit::Bytes,
        "Bytes through network.allow runs' proxies, by skill and direction (out, in)."
    );
    describe_histogram!(
        HTTP_REQUEST_DURATION_SECONDS,
        Unit::Seconds,
        "Time from an HTTP request to its response head, by method and route template."
    );
}

/// Records a run that ended: `status` is its final status as the API
/// spells it (`succeeded`, `failed`, `timed_out`, …), `duration` its wall
/// time. `tool` is the catalog's name for the tool, a bounded set.
pub fn run_finished(tool: &str, status: &str, duration: Duration) {
    if recorder().is_none() {
        return;
    }
    metrics::counter!(RUNS_TOTAL, "tool" => tool.to_owned(), "status" => status.to_owned()).increment(1);
    metrics::histogram!(RUN_DURATION_SECONDS, "tool" => tool.to_owned()).record(duration.as_secs_f64());
}

/// What one run did through its egress proxy, in all.
#[derive(Debug, Clone, Copy, Default)]
pub struct EgressTotals {
    pub allowed: u64,
    pub denied: u64,
    pub bytes_out: u64,
    pub bytes_in: u64,
}

/// Records a `network.allow` run's egress when it ends. `skill` is the
/// catalog's name, a bounded set; destinations are not labels (a tool
/// chooses them).
pub fn egress(skill: &str, t: EgressTotals) {
    if recorder().is_none() {
        return;
    }
    for (verdict, n) in [("allowed", t.allowed), ("denied", t.denied)] {
        metrics::counter!(EGRESS_TOTAL, "skill" => skill.to_owned(), "verdict" => verdict).increment(n);
    }
    for (direction, n) in [("out", t.bytes_out), ("in", t.bytes_in)] {
        metrics::counter!(EGRESS_BYTES_TOTAL, "skill" => skill.to_owned(), "direction" => direction)
            .increment(n);
    }
}

/// Counts a destination held for a person (`verdict="held"` of
/// `skilld_egress_requests_total`), as it is held.
pub fn egress_held(skill: &str) {
    if recorder().is_some() {
        metrics::counter!(EGRESS_TOTAL, "skill" => skill.to_owned(), "verdict" => "held").increment(1);
    }
}

/// Counts a run in `skilld_runs_in_flight` until the guard is dropped, so
/// every way a run can end (an error, a panic, a cancelled task) takes it
/// out again.
#[must_use = "the run is counted only while the guard lives"]
pub struct InFlight {
    gauge: Option<Gauge>,
}

/// Marks a run of `tool` as started; hold the guard for the run's life.
pub fn run_started(tool: &str) -> InFlight {
    let gauge = recorder().map(|_| metrics::gauge!(RUNS_IN_FLIGHT, "tool" => tool.to_owned()));
    if let Some(gauge) = &gauge {
        gauge.increment(1.0);
    }
    InFlight { gauge }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(gauge) = &self.gauge {
            gauge.decrement(1.0);
        }
    }
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight").finish_non_exhaustive()
    }
}

/// Sets how many approval requests wait for a decision. A level rather
/// than increments, so the value stays right however requests leave the
/// queue (decided, expired, or by another instance on the same store).
pub fn set_approvals_pending(n: u64) {
    if recorder().is_none() {
        return;
    }
    // Exact up to 2^53, far past any queue.
    metrics::gauge!(APPROVALS_PENDING).set(n as f64);
}

/// Records an answered HTTP request. `route` is the matched route's
/// template (`/tools/{tool}/invoke`), `None` when no route matched; the
/// raw path is never a label, nor a method outside HTTP's standard set,
/// since clients choose both.
pub fn http_request_finished(method: &Method, route: Option<&str>, status: u16, duration: Duration) {
    if recorder().is_none() {
        return;
    }
    let method = method_label(method);
    let route = route.unwrap_or(UNMATCHED_ROUTE).to_owned();
    metrics::counter!(HTTP_REQUESTS_TOTAL,
        "method" => method, "route" => route.clone(), "status" => status.to_string())
    .increment(1);
    metrics::histogram!(HTTP_REQUEST_DURATION_SECONDS, "method" => method, "route" => route)
        .record(duration.as_secs_f64());
}

/// The standard methods by name, anything else as `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Every metric in the Prometheus text format (version 0.0.4).
pub fn render() -> String {
    recorder().map(PrometheusHandle::render).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The value of the one sample `name{labels}` (label order aside).
    fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<&str, &str> = labels.iter().copied().collect();
        text.lines().find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
            if n != name {
                return None;
            }
            let inner = rest.strip_suffix('}')?;
            let got: BTreeMap<&str, &str> = inner
                .split(',')
                .filter(|kv| !kv.is_empty())
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k, v.trim_matches('"')))
                })
                .collect();
            (got == want).then(|| value.parse().unwrap())
        })
    }

    #[test]
    fn a_finished_run_is_counted_and_timed() {
        let tool = "unit.finished";
        run_finished(tool, "succeeded", Duration::from_millis(30));
        run_finished(tool, "succeeded", Duration::from_millis(700));
        run_finished(tool, "failed", Duration::from_secs(2));
        let text = render();
        let runs = |status| sample(&text, RUNS_TOTAL, &[("tool", tool), ("status", status)]);
        assert_eq!(runs("succeeded"), Some(2.0));
        assert_eq!(runs("failed"), Some(1.0));
        let bucket = |le| {
            sample(
                &text,
                "skilld_run_duration_seconds_bucket",
                &[("tool", tool), ("le", le)],
            )
        };
        assert_eq!(bucket("0.005"), Some(0.0));
        assert_eq!(bucket("0.05"), Some(1.0));
        assert_eq!(bucket("1"), Some(2.0));
        assert_eq!(bucket("2.5"), Some(3.0));
        assert_eq!(bucket("600"), Some(3.0));
        assert_eq!(bucket("+Inf"), Some(3.0));
        let count = sample(&text, "skilld_run_duration_seconds_count", &[("tool", tool)]);
        assert_eq!(count, Some(3.0));
        let sum = sample(&text, "skilld_run_duration_seconds_sum", &[("tool", tool)]).unwrap();
        assert!((sum - 2.73).abs() < 1e-9, "{sum}");
        assert!(
            text.contains("# TYPE skilld_run_duration_seconds histogram"),
            "{text}"
        );
        assert!(text.contains("# TYPE skilld_runs_total counter"), "{text}");
        assert!(
            text.contains("# HELP skilld_runs_total Tool runs that ended"),
            "{text}"
        );
    }

    #[test]
    fn in_flight_counts_while_the_guard_lives() {
        let tool = "unit.in_flight";
        let in_flight = || sample(&render(), RUNS_IN_FLIGHT, &[("tool", tool)]);
        let first = run_started(tool);
        assert_eq!(in_flight(), Some(1.0));
        let second = run_started(tool);
        assert_eq!(in_flight(), Some(2.0));
        drop(first);
        assert_eq!(in_flight(), Some(1.0));
        // A run whose task panics still leaves the gauge.
        let panicked = std::thread::spawn(move || {
            let _second = second;
            panic!("the run's task died");
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!(in_flight(), Some(0.0));
        assert!(render().contains("# TYPE skilld_runs_in_flight gauge"));
    }

    #[test]
    fn approvals_pending_is_a_level() {
        // The only test that touches this process-wide gauge.
        set_approvals_pending(3);
        assert_eq!(sample(&render(), APPROVALS_PENDING, &[]), Some(3.0));
        set_approvals_pending(0);
        let text = render();
        assert_eq!(sample(&text, APPROVALS_PENDING, &[]), Some(0.0));
        assert!(text.contains("# HELP skilld_approvals_pending "), "{text}");
    }

    #[test]
    fn http_requests_are_labelled_by_template_never_by_path() {
        let route = "/unit/{thing}";
        http_request_finished(&Method::GET, Some(route), 200, Duration::from_millis(2));
        http_request_finished(&Method::GET, Some(route), 404, Duration::from_millis(1));
        http_request_finished(&Method::GET, None, 404, Duration::from_millis(1));
        let odd = Method::from_bytes(b"UNITBREW").unwrap();
        http_request_finished(&odd, Some(route), 405, Duration::from_millis(1));
        let text = render();
        let requests = |method, route, status| {
            sample(
                &text,
                HTTP_REQUESTS_TOTAL,
                &[("method", method), ("route", route), ("status", status)],
            )
        };
        assert_eq!(requests("GET", route, "200"), Some(1.0));
        assert_eq!(requests("GET", route, "404"), Some(1.0));
        assert_eq!(requests("other", route, "405"), Some(1.0));
        // Other tests' unmatched requests may share the series.
        assert!(requests("GET", "unmatched", "404").unwrap() >= 1.0);
        assert!(!text.contains("UNITBREW"));
        let count = sample(
            &text,
            "skilld_http_request_duration_seconds_count",
            &[("method", "GET"), ("route", route)],
        );
        assert_eq!(count, Some(2.0));
        assert!(text.contains("# TYPE skilld_http_request_duration_seconds histogram"));
    }
}
