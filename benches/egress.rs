//! Egress proxy benchmark (issue 42; `docs/egress.md`): what a
//! `network: {allow: [...]}` run's proxy adds to a request, against a
//! direct connection measured in the same run, interleaved so that drift
//! hits every side alike.
//!
//! Each request opens a new connection, as a tool's `curl` or a short
//! script does:
//! - **direct**: TCP to the upstream, `GET /`;
//! - **plain HTTP**: TCP to the proxy, `GET http://api.test:PORT/` (the
//!   proxy checks the name, resolves it, connects and forwards);
//! - **CONNECT**: TCP to the proxy, `CONNECT api.test:PORT`, then `GET /`
//!   through the tunnel: the path HTTPS takes. TLS itself runs end to end
//!   through the tunnel, the same bytes as direct, so its handshake adds
//!   nothing the proxy could change; the tunnel carries plain HTTP here.
//!
//! Then memory: 1,000 tunnels held open at once through one proxy, against
//! 1,000 direct connections held open (the resident set of this process,
//! which holds the client, the proxy and the upstream alike).
//!
//! Last, what a run pays before its program starts: making its namespace
//! (a new network namespace, `lo` up, a listener) and starting its proxy,
//! then dropping both, against nothing (the offline namespace is shared).
//!
//! The upstream listens on 127.0.0.2, the range the proxy is told it may
//! reach. Run with `cargo bench --bench egress`; `SKILLD_BENCH_CALLS` sets
//! the requests per side (default 2,000). Nothing here asserts on time.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use skilld::egress::{AllowList, Bounds, Ranges, Resolver, RunGate, RunProxy};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
#[path = "support/stats.rs"]
mod stats;

/// Connections held open at once in the memory figure.
const HELD: usize = 1000;

async fn upstream() -> SocketAddr {
    let app = axum::Router::new().fallback(|| async { "ok" });
    let listener = TcpListener::bind("127.0.0.2:0").await.expect("bind 127.0.0.2");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    addr
}

async fn proxy(up: SocketAddr, stop: &CancellationToken) -> SocketAddr {
    let pinned = [("api.test".to_owned(), vec![up.ip()])].into();
    let resolver = Resolver::new(pinned, Ranges::new(vec!["127.0.0.2/32".parse().expect("range")]));
    let gate = Arc::new(RunGate::listed(
        "bench",
        AllowList::parse([format!("api.test:{}", up.port()).as_str()]).expect("pattern"),
    ));
    let bounds = Bounds {
        connections: 4 * HELD,
        bytes: u64::MAX,
        ..Bounds::default()
    };
    let run = RunProxy::new(gate, resolver, bounds);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(run.serve(listener, stop.clone()));
    addr
}

/// One `GET` of `uri` over `stream`, its body read whole.
async fn get(stream: TcpStream, uri: &str, host: &str) {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let request = hyper::Request::get(uri)
        .header(hyper::header::HOST, host)
        .body(Empty::<Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.expect("body");
}

/// A tunnel to `target` through the proxy at `proxy`.
async fn tunnel(proxy: SocketAddr, target: &str) -> TcpStream {
    let mut stream = TcpStream::connect(proxy).await.expect("connect to the proxy");
    let ask = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    stream.write_all(ask.as_bytes()).await.expect("CONNECT");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).await.expect("the proxy's answer");
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    stream
}

#[derive(Clone, Copy)]
enum Side {
    Direct,
    Plain,
    Connect,
}

async fn once(side: Side, up: SocketAddr, proxy: SocketAddr) -> Duration {
    let name = format!("api.test:{}", up.port());
    let start = Instant::now();
    match side {
        Side::Direct => get(TcpStream::connect(up).await.expect("connect"), "/", &name).await,
        Side::Plain => {
            let stream = TcpStream::connect(proxy).await.expect("connect to the proxy");
            get(stream, &format!("http://{name}/"), &name).await;
        }
        Side::Connect => get(tunnel(proxy, &name).await, "/", &name).await,
    }
    start.elapsed()
}

async fn latency(up: SocketAddr, proxy: SocketAddr, calls: usize) {
    let sides = [Side::Direct, Side::Plain, Side::Connect];
    let mut times: [Vec<Duration>; 3] = Default::default();
    // Warm up: the runtime's threads, the allocator, the listeners.
    for _ in 0..50 {
        for side in sides {
            once(side, up, proxy).await;
        }
    }
    for i in 0..calls {
        // Interleaved, in a rotating order.
        for k in 0..3 {
            let s = (i + k) % 3;
            times[s].push(once(sides[s], up, proxy).await);
        }
    }
    let base = stats::quantile(&mut times[0], 0.5);
    println!("requests on a new connection each, c=1 ({calls} per side, interleaved):");
    for (name, t) in [
        "direct (baseline)",
        "plain HTTP via the proxy",
        "CONNECT via the proxy",
    ]
    .iter()
    .zip(times.iter_mut())
    {
        let median = stats::quantile(t, 0.5);
        let added = median.as_secs_f64() - base.as_secs_f64();
        println!(
            "  {name:<26} {}   added median {:+.3} ms",
            stats::line(t),
            added * 1e3
        );
    }
}

/// Holds `HELD` connections open, made by `open`; the resident set's
/// growth in KiB.
async fn held<F, Fut>(open: F) -> (u64, Vec<TcpStream>)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = TcpStream>,
{
    let before = stats::rss_kib_of(std::process::id()).expect("VmRSS");
    let mut streams = Vec::with_capacity(HELD);
    for _ in 0..HELD {
        streams.push(open().await);
    }
    // Let the far ends take them.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = stats::rss_kib_of(std::process::id()).expect("VmRSS");
    (after.saturating_sub(before), streams)
}

async fn memory(up: SocketAddr, proxy: SocketAddr) {
    let name = format!("api.test:{}", up.port());
    let (direct, streams) = held(|| async { TcpStream::connect(up).await.expect("connect") }).await;
    drop(streams);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (proxied, streams) = held(|| tunnel(proxy, &name)).await;
    drop(streams);
    println!("{HELD} connections held open at once (this process: client, proxy and upstream):");
    println!("  direct (baseline)          +{direct} KiB");
    println!(
        "  CONNECT via the proxy      +{proxied} KiB   the proxy's share: {:.1} KiB a connection",
        proxied.saturating_sub(direct) as f64 / HELD as f64
    );
}

/// Raises the soft limit of open files to the hard one: the memory figure
/// holds four descriptors a connection.
fn enough_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit");
}

/// `Egress::start` and its drop, `n` times (needs root: network
/// namespaces).
fn setup(n: usize) {
    let list = AllowList::parse(["api.test"]).expect("pattern");
    let egress = skilld::egress::Egress::default();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let run = egress
            .start(
                skilld::egress::Asker {
                    skill: "bench".to_owned(),
                    ..Default::default()
                },
                &list,
                None,
            )
            .expect("a run's egress");
        drop(run);
        times.push(start.elapsed());
    }
    println!("a run's namespace and proxy, made and dropped ({n} runs):");
    println!("  {}", stats::line(&mut times));
}

fn main() {
    enough_files();
    let calls = std::env::var("SKILLD_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if stats::quick() { 200 } else { 2000 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let stop = CancellationToken::new();
        let up = upstream().await;
        let proxy = proxy(up, &stop).await;
        latency(up, proxy, calls).await;
        memory(up, proxy).await;
        stop.cancel();
        setup(calls / 4);
    });
}
