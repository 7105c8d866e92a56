//! The egress proxy's core (issue 42), attacked with curl, a real client,
//! through a proxy on loopback: upstreams listen on 127.0.0.2, the one
//! range the tests open, and the attacks aim at the rest. The proxy as a
//! run's only way out, through a real `skilld serve`, is attacked in
//! `egress_runs.rs`.

use skilld::egress::{AllowList, Bounds, Ranges, Resolver, RunGate, RunProxy};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

struct Proxy {
    addr: SocketAddr,
    run: Arc<RunProxy>,
    _stop: tokio_util::sync::DropGuard,
}

/// A proxy allowing `allow`, with `api.test` and `evil.test` pinned to
/// the upstream's address and to 127.0.0.1 (the host) respectively.
async fn proxy(allow: &[&str], bytes: u64) -> Proxy {
    proxy_with(
        allow,
        Bounds {
            bytes,
            ..Bounds::default()
        },
    )
    .await
}

/// As [`proxy`], with every bound given.
async fn proxy_with(allow: &[&str], bounds: Bounds) -> Proxy {
    let pinned: HashMap<String, Vec<IpAddr>> = [
        ("api.test".to_owned(), vec!["127.0.0.2".parse().unwrap()]),
        ("evil.test".to_owned(), vec!["127.0.0.1".parse().unwrap()]),
        ("meta.test".to_owned(), vec!["169.254.169.254".parse().unwrap()]),
    ]
    .into();
    let resolver = Resolver::new(pinned, Ranges::new(vec!["127.0.0.2/32".parse().unwrap()]));
    let gate = Arc::new(RunGate::listed(
        "fetcher",
        AllowList::parse(allow.iter().copied()).unwrap(),
    ));
    let run = RunProxy::new(gate, resolver, bounds);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(run.clone().serve(listener, stop.clone()));
    Proxy {
        addr,
        run,
        _stop: stop.drop_guard(),
    }
}

/// curl through the proxy: (status, body); `--proxytunnel` in `extra`
/// makes it CONNECT even for http://.
async fn curl(proxy: SocketAddr, url: &str, extra: &[&str]) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-s",
        "--max-time",
        "10",
        "-o",
        "-",
        "-w",
        "\n%{http_code} %{http_connect}",
        "-x",
    ])
    .arg(format!("http://{proxy}"))
    .args(extra)
    .arg(url)
    .env_remove("http_proxy")
    .env_remove("HTTPS_PROXY")
    .env_remove("https_proxy")
    .env_remove("ALL_PROXY")
    .env_remove("NO_PROXY")
    .env_remove("no_proxy");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, codes) = text.rsplit_once('\n').unwrap_or(("", &text));
    // A refused CONNECT has no response of its own, only the tunnel's.
    let (code, connect) = codes.split_once(' ').unwrap_or((codes, "0"));
    let code: u16 = code.trim().parse().unwrap_or(0);
    let connect: u16 = connect.trim().parse().unwrap_or(0);
    (
        if code == 0 || connect >= 400 {
            connect
        } else {
            code
        },
        body.to_owned(),
    )
}

#[tokio::test]
async fn an_allowed_name_is_reached_by_plain_http_and_through_connect() {
    let up = crate::common::egress_upstream().await;
    let p = proxy(&[&format!("api.test:{}", up.port())], 1 << 20).await;
    let url = format!("http://api.test:{}/hello", up.port());
    assert_eq!(
        curl(p.addr, &url, &[]).await,
        (200, format!("host=api.test:{}", up.port()))
    );
    assert_eq!(
        curl(p.addr, &url, &["--proxytunnel"]).await,
        (200, format!("host=api.test:{}", up.port()))
    );
    let entries = p.run.ledger.entries();
    let entry = &entries[&("api.test".to_owned(), up.port())];
    assert_eq!((entry.allowed, entry.denied), (2, 0));
    assert!(entry.bytes_in > 0 && entry.bytes_out > 0, "{entry:?}");
}

#[tokio::test]
async fn a_name_off_the_list_is_refused_with_text_for_a_model() {
    let up = crate::common::egress_upstream().await;
    let p = proxy(&["other.test"], 1 << 20).await;
    let url = format!("http://api.test:{}/", up.port());
    let (status, body) = curl(p.addr, &url, &[]).await;
    assert_eq!(status, 403);
    assert_eq!(
        body,
        format!(
            "skilld refused the connection to api.test:{port}: it is not listed \
             (decided by skill fetcher's network.allow). This run reaches the network \
             only through this proxy, so retrying another way (another port, an IP address, \
             another tool) will not help. Tell the user what you needed api.test:{port} for; \
             they can allow it.\n",
            port = up.port()
        )
    );
    // Through CONNECT, curl sees the refusal as the tunnel's failure.
    let (status, _) = curl(p.addr, &url, &["--proxytunnel"]).await;
    assert_eq!(status, 403);
    assert_eq!(
        p.run.ledger.entries()[&("api.test".to_owned(), up.port())].denied,
        2
    );
}

#[tokio::test]
async fn an_allowed_name_that_leads_to_the_host_or_the_metadata_service_is_refused() {
    // A listener on the host's own loopback, which no run may reach.
    let host_side = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = host_side.local_addr().unwrap().port();
    let p = proxy(&[&format!("evil.test:{port}"), "meta.test"], 1 << 20).await;
    let (status, body) = curl(p.addr, &format!("http://evil.test:{port}/"), &[]).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("evil.test resolves to 127.0.0.1, a loopback address"),
        "{body}"
    );
    let (status, body) = curl(p.addr, "http://meta.test/latest/meta-data/", &[]).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("169.254.169.254, a link-local (metadata) address"),
        "{body}"
    );
}

#[tokio::test]
async fn an_address_asked_for_directly_is_refused() {
    let up = crate::common::egress_upstream().await;
    let p = proxy(&[&format!("api.test:{}", up.port())], 1 << 20).await;
    for url in [
        format!("http://127.0.0.2:{}/", up.port()),
        format!("http://127.0.0.1:{}/", p.addr.port()),
        format!("http://[::1]:{}/", p.addr.port()),
    ] {
        for extra in [&[][..], &["--proxytunnel"][..]] {
            let (status, body) = curl(p.addr, &url, extra).await;
            assert_eq!(status, 403, "{url} {extra:?}: {body}");
        }
    }
}

#[tokio::test]
async fn a_host_header_naming_another_host_is_refused() {
    let up = crate::common::egress_upstream().await;
    let p = proxy(&[&format!("api.test:{}", up.port())], 1 << 20).await;
    let url = format!("http://api.test:{}/", up.port());
    let (status, body) = curl(p.addr, &url, &["-H", "Host: other.test"]).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("does not name api.test"), "{body}");
}

#[tokio::test]
async fn a_run_gets_no_more_bytes_than_its_budget() {
    let up = crate::common::egress_upstream().await;
    let p = proxy(&[&format!("api.test:{}", up.port())], 64 * 1024).await;
    let url = format!("http://api.test:{}/size/1000000", up.port());
    let (_, body) = curl(p.addr, &url, &["--proxytunnel"]).await;
    assert!(body.len() < 64 * 1024, "got {} bytes", body.len());
    let (_, body) = curl(p.addr, &url, &[]).await;
    assert!(body.len() < 64 * 1024, "got {} bytes", body.len());
}

#[test]
fn the_patterns_are_linted() {
    let errors = AllowList::parse(["https://api.github.com", "*", "10.0.0.1"]).unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "`https://api.github.com` names a scheme or a path; write the host alone (`api.example.com`)",
            "`*` would allow everywhere; name the hosts (or `*.example.com`)",
            "`10.0.0.1` is an IP address; name the host, so that the proxy checks what it resolves to",
        ]
    );
}

/// Runs `curl ARGS` inside `ns` (a descriptor of this process), with the
/// proxy variables set to `proxy`: (curl's exit code, http code).
async fn curl_inside(ns: i32, proxy: &str, args: &[&str]) -> (i32, String) {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/proc/{}/fd/{ns}", std::process::id()))
        .args([
            "curl",
            "-s",
            "--max-time",
            "5",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(args)
        .env("http_proxy", proxy)
        .env("HTTPS_PROXY", proxy)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Inside a run's namespace the proxy is the one way out: an allowed
/// name is reached through it; a program that ignores the proxy
/// variables reaches no address (not the upstream, not the host's own
/// services) and resolves no name.
#[tokio::test]
async fn in_a_runs_namespace_the_proxy_is_the_only_way_out() {
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        eprintln!("skipped: needs root");
        return;
    }
    use std::os::fd::AsRawFd;
    let up = crate::common::egress_upstream().await;
    let host_side = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let net = skilld::egress::netns::make(None).unwrap();
    let url = net.proxy_url().unwrap();
    let resolver = Resolver::new(
        [("api.test".to_owned(), vec!["127.0.0.2".parse().unwrap()])].into(),
        Ranges::new(vec!["127.0.0.2/32".parse().unwrap()]),
    );
    let gate = Arc::new(RunGate::listed(
        "fetcher",
        AllowList::parse([format!("api.test:{}", up.port()).as_str()]).unwrap(),
    ));
    let run = RunProxy::new(gate, resolver, Bounds::default());
    let stop = CancellationToken::new();
    let listener = TcpListener::from_std(net.listener.try_clone().unwrap()).unwrap();
    tokio::spawn(run.serve(listener, stop.clone()));
    let ns = net.namespace.as_raw_fd();
    let allowed = format!("http://api.test:{}/", up.port());
    assert_eq!(curl_inside(ns, &url, &[&allowed]).await, (0, "200".to_owned()));
    assert_eq!(
        curl_inside(ns, &url, &["-p", &allowed]).await,
        (0, "200".to_owned())
    );
    // Around the proxy: curl's 7 is "could not connect", 6 "could not
    // resolve".
    let direct = format!("http://127.0.0.2:{}/", up.port());
    assert_eq!(curl_inside(ns, &url, &["--noproxy", "*", &direct]).await.0, 7);
    let host = format!("http://127.0.0.1:{}/", host_side.local_addr().unwrap().port());
    assert_eq!(curl_inside(ns, &url, &["--noproxy", "*", &host]).await.0, 7);
    assert_eq!(
        curl_inside(ns, &url, &["--noproxy", "*", "http://[::1]:5432/"])
            .await
            .0,
        7
    );
    assert_eq!(
        curl_inside(ns, &url, &["--noproxy", "*", "http://example.com/"])
            .await
            .0,
        6
    );
    stop.cancel();
}

/// Sends `CONNECT target` on a new connection to the proxy: the stream
/// and the head of the answer.
async fn connect_raw(proxy: SocketAddr, target: &str) -> (tokio::net::TcpStream, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let ask = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    stream.write_all(ask.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    (stream, String::from_utf8_lossy(&head).into_owned())
}

/// A tunnel outlives the HTTP connection it was asked on: it still holds
/// that connection's place among the run's, so a run cannot open more
/// tunnels than its bound by letting each request end.
#[tokio::test]
async fn open_tunnels_count_against_the_runs_connections() {
    let up = crate::common::egress_upstream().await;
    let target = format!("api.test:{}", up.port());
    let bounds = Bounds {
        connections: 2,
        ..Bounds::default()
    };
    let p = proxy_with(&[&target], bounds).await;
    let (first, head) = connect_raw(p.addr, &target).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (second, head) = connect_raw(p.addr, &target).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_, head) = connect_raw(p.addr, &target).await;
    assert!(head.starts_with("HTTP/1.1 429"), "a third tunnel opened: {head}");
    // A tunnel that ends gives its place back.
    drop(first);
    let mut head = String::new();
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        head = connect_raw(p.addr, &target).await.1;
        if head.starts_with("HTTP/1.1 200") {
            break;
        }
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop(second);
}

/// A tunnel ends at the connection's deadline, however busy it is kept.
#[tokio::test]
async fn a_tunnel_ends_at_its_deadline() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let up = crate::common::egress_upstream().await;
    let target = format!("api.test:{}", up.port());
    let bounds = Bounds {
        connection_time: std::time::Duration::from_secs(1),
        ..Bounds::default()
    };
    let p = proxy_with(&[&target], bounds).await;
    let (mut tunnel, head) = connect_raw(p.addr, &target).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let ask = format!("GET / HTTP/1.1\r\nHost: {target}\r\n\r\n");
    let _ = tunnel.write_all(ask.as_bytes()).await;
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), tunnel.read(&mut buf))
        .await
        .expect("the tunnel neither answered nor closed");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "the tunnel outlived its deadline: {read:?}"
    );
}
