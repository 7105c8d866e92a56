//! A fronted MCP server as the attacker (issue 40, points 4, 5 and 11),
//! performed against a real server: `tests/python/hostile_upstream.py`, on
//! the official Python SDK, started on stdio in skilld's sandbox.
//! - It lists `skill://victim/SKILL.md`, and the URI skilld serves another
//!   gateway's resource under, answering attacker text: skilld's own
//!   `skill://` resources still answer the skill's files, the other
//!   gateway's its server's, and whatever it sends (listed, read, in a
//!   tool's result or a prompt) lies in its own `upstream://` namespace.
//! - It answers `tools/list` with endless pages, too many tools or too
//!   many bytes: skilld stops at the bound, keeps none of it, drops the
//!   session and says why in `/diagnostics`; the next call starts it again.
//! - Its stderr, meant to forge the log, reaches the log escaped.

use crate::common::{
    Area, Gate, Served, area, eventually, kit, logged, manifest, mcp_exchange, moved_skills, write_file,
};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const VICTIM_TEXT: &str = "The victim's real instructions.";
/// What skilld serves `other`'s own resource `other://notes` as.
const OTHERS: &str = "upstream://other/other%3A%2F%2Fnotes";
/// What skilld serves `hostile`'s claim of `skill://victim/SKILL.md` as.
const HOSTILE_VICTIM: &str = "upstream://hostile/skill%3A%2F%2Fvictim%2FSKILL.md";

/// A gateway skill `name` running the hostile server, logging to the
/// area's log, listing `claims` beside its own resource.
fn hostile_skill(kit: &Path, a: &Area, name: &str, claims: &[&str]) {
    let dir = a.dir.path().join("skills").join(name);
    // In the area, which the sandbox reads: the skills directory moves.
    let script = a.dir.path().join("hostile_upstream.py");
    std::fs::copy(
        crate::common::checkout().join("tests/python/hostile_upstream.py"),
        &script,
    )
    .unwrap();
    let mut command = vec![
        kit.join("venv/bin/python").display().to_string(),
        script.display().to_string(),
        "--name".into(),
        name.into(),
        "--log".into(),
        a.log.display().to_string(),
    ];
    for claim in claims {
        command.extend(["--claim".to_owned(), (*claim).to_owned()]);
    }
    let quoted: Vec<String> = command.iter().map(|c| format!("'{c}'")).collect();
    let implementation = format!("  command: [{}]\n", quoted.join(", "));
    write_file(&dir.join("SKILL.yaml"), &manifest(name, &implementation, ""));
}

fn victim_skill(a: &Area) {
    write_file(
        &a.dir.path().join("skills/victim/SKILL.md"),
        &format!("---\nname: victim\ndescription: A local skill.\n---\n\n{VICTIM_TEXT}\n"),
    );
}

/// The result of one MCP request on `/mcp`.
async fn mcp(gate: &Gate, method: &str, params: Value) -> Value {
    let (status, messages) = mcp_exchange(gate, method, params).await;
    let last = messages.last().cloned().unwrap_or_default();
    assert_eq!(status, 200, "{method}: {messages:?}");
    assert!(last.get("result").is_some(), "{method}: {last}");
    last["result"].clone()
}

async fn read(gate: &Gate, uri: &str) -> Vec<Value> {
    let result = mcp(gate, "resources/read", json!({ "uri": uri })).await;
    result["contents"].as_array().unwrap().clone()
}

/// Every `uri` of content blocks, embedded resources' included.
fn block_uris(blocks: &[Value]) -> Vec<String> {
    blocks
        .iter()
        .filter_map(|b| b.get("resource").unwrap_or(b)["uri"].as_str())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_gateway_cannot_speak_for_skillds_resources_nor_another_gateways() {
    let Some(kit) = kit() else { return };
    let a = area();
    victim_skill(&a);
    hostile_skill(&kit, &a, "other", &[]);
    hostile_skill(&kit, &a, "hostile", &["skill://victim/SKILL.md", OTHERS]);
    let gate = Gate::start(&kit, moved_skills(&a), a.dir.path()).await;
    let catalog = gate.server.catalog.current();
    assert_eq!(
        gate.tools("hostile"),
        ["echo", "grow", "leak"],
        "{:?}",
        catalog.diagnostics
    );
    assert!(catalog.skill("other").is_some() && catalog.skill("victim").is_some());
    resources_are_namespaced(&gate).await;
    reads_reach_their_own_server(&gate).await;
    results_and_prompts_are_rewritten(&gate).await;
}

/// Listed: the victim's URI is the victim's alone; each server's
/// resources lie in its own namespace, whatever URI it gave.
async fn resources_are_namespaced(gate: &Gate) {
    let listed = mcp(gate, "resources/list", json!({})).await;
    let listed = listed["resources"].as_array().unwrap();
    let victims: Vec<&Value> = listed
        .iter()
        .filter(|r| r["uri"] == "skill://victim/SKILL.md")
        .collect();
    assert_eq!(victims.len(), 1, "{listed:?}");
    assert_eq!(victims[0]["name"], "victim");
    let mut upstream: Vec<&str> = listed
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .filter(|u| !u.starts_with("skill://"))
        .collect();
    upstream.sort_unstable();
    assert_eq!(
        upstream,
        [
            "upstream://hostile/hostile%3A%2F%2Fnotes",
            HOSTILE_VICTIM,
            "upstream://hostile/upstream%3A%2F%2Fother%2Fother%253A%252F%252Fnotes",
            OTHERS,
        ],
        "{listed:?}"
    );
    let hostiles = listed.iter().find(|r| r["uri"] == HOSTILE_VICTIM).unwrap();
    assert_eq!(hostiles["name"], "hostile:SKILL.md", "{hostiles}");
}

/// Read: the victim's file, the other server's notes, and the hostile's
/// claims as its own.
async fn reads_reach_their_own_server(gate: &Gate) {
    let victim = read(gate, "skill://victim/SKILL.md").await;
    assert!(
        victim[0]["text"].as_str().unwrap().contains(VICTIM_TEXT),
        "{victim:?}"
    );
    assert!(!format!("{victim:?}").contains("ATTACKER"));
    let others = read(gate, OTHERS).await;
    assert_eq!(others[0]["text"], "genuine notes of other", "{others:?}");
    assert_eq!(others[0]["uri"], OTHERS);
    // The hostile's claims are served, as its own: under its namespace.
    let claimed = read(gate, HOSTILE_VICTIM).await;
    assert_eq!(block_uris(&claimed), [HOSTILE_VICTIM]);
    assert!(claimed[0]["text"].as_str().unwrap().starts_with("ATTACKER"));
    // Its answer's every URI is put in its namespace, a second content's too.
    let own = read(gate, "upstream://hostile/hostile%3A%2F%2Fnotes").await;
    assert_eq!(
        block_uris(&own),
        ["upstream://hostile/hostile%3A%2F%2Fnotes", HOSTILE_VICTIM],
        "{own:?}"
    );
    // A URI of its namespace that it did not list is not asked of it;
    // nor is one of another spelling.
    for unlisted in [
        "upstream://hostile/file%3A%2F%2F%2Fetc%2Fpasswd",
        "upstream://hostile/skill%3a%2f%2fvictim%2fSKILL.md",
    ] {
        let (_, messages) = mcp_exchange(gate, "resources/read", json!({ "uri": unlisted })).await;
        assert!(
            messages.last().unwrap().get("error").is_some(),
            "{unlisted}: {messages:?}"
        );
    }
}

/// A tool's result and a prompt claim the victim's URI: rewritten.
async fn results_and_prompts_are_rewritten(gate: &Gate) {
    gate.server.allow_every_tool().await;
    let result = mcp(
        gate,
        "tools/call",
        json!({"name": "hostile__leak", "arguments": {}}),
    )
    .await;
    let output = result["structuredContent"]["output"].as_str().unwrap();
    let blocks: Vec<Value> = serde_json::from_str(output).unwrap();
    assert_eq!(
        block_uris(&blocks),
        [
            HOSTILE_VICTIM,
            HOSTILE_VICTIM,
            "upstream://hostile/upstream%3A%2F%2Fother%2Fother%253A%252F%252Fnotes",
            "upstream://hostile/upstream%3A%2F%2Fother%2Fother%253A%252F%252Fnotes",
        ],
        "{result}"
    );
    let prompt = mcp(gate, "prompts/get", json!({"name": "hostile:greet"})).await;
    let contents: Vec<Value> = prompt["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(
        block_uris(&contents)[..2],
        [HOSTILE_VICTIM, HOSTILE_VICTIM],
        "{prompt}"
    );
    assert!(
        block_uris(&contents)
            .iter()
            .all(|u| u.starts_with("upstream://hostile/"))
    );
}

/// A gate over one hostile server, every tool allowed.
async fn hostile_gate(kit: &Path, a: &Area) -> Gate {
    hostile_skill(kit, a, "hostile", &[]);
    let gate = Gate::start(kit, moved_skills(a), a.dir.path()).await;
    assert_eq!(
        gate.tools("hostile"),
        ["echo", "grow", "leak"],
        "{:?}",
        gate.server.catalog.current().diagnostics
    );
    gate.server.allow_every_tool().await;
    gate
}

/// The `upstream_dropped` diagnostics of `/diagnostics`.
async fn dropped(gate: &Gate) -> Vec<Value> {
    let all = gate.server.get_json("/diagnostics").await;
    all["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "upstream_dropped")
        .cloned()
        .collect()
}

/// The pids the hostile server logged at its starts.
fn starts(a: &Area) -> Vec<u64> {
    logged(&a.log)
        .iter()
        .filter(|e| e["event"] == "start")
        .filter_map(|e| e["pid"].as_u64())
        .collect()
}

fn alive(pid: u64) -> bool {
    // A zombie has no command line.
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty())
}

/// `grow` with `arguments` makes the server's next lists hostile; skilld
/// stops at a bound that `said` names, keeps none of the list, drops
/// the session and says why; the next call starts the server again.
async fn a_hostile_list_is_cut_and_its_session_dropped(arguments: Value, said: &str) {
    let Some(kit) = kit() else { return };
    let a = area();
    let gate = hostile_gate(&kit, &a).await;
    let first = starts(&a);
    assert_eq!(first.len(), 1, "{:?}", logged(&a.log));
    assert!(dropped(&gate).await.is_empty());

    let (status, grew) = gate.invoke("grow", arguments).await;
    assert_eq!(
        (status, grew["output"].clone()),
        (200, json!("growing")),
        "{grew}"
    );
    eventually("the session is dropped", || !alive(first[0])).await;
    let diagnostics = dropped(&gate).await;
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let message = diagnostics[0]["message"].as_str().unwrap();
    assert_eq!(diagnostics[0]["skill"], "hostile");
    assert_eq!(diagnostics[0]["severity"], "warning");
    assert!(message.contains(said), "{message}");
    assert!(message.contains("the next call starts it again"), "{message}");
    // Nothing of the hostile list was kept: the tools are those it had.
    let pages = logged(&a.log)
        .iter()
        .filter(|e| e["event"] == "tools/list")
        .count();
    assert!(pages <= 1 + 100, "skilld asked for {pages} pages");
    assert_eq!(gate.tools("hostile"), ["echo", "grow", "leak"]);
    let served = mcp(&gate, "tools/list", json!({})).await;
    assert!(served["tools"].as_array().unwrap().len() < 100, "{served}");

    // A later call starts it again, as usual, and the reason stays.
    let (status, back) = gate.invoke("echo", json!({"text": "back"})).await;
    assert_eq!((status, back["output"].clone()), (200, json!("back")), "{back}");
    let now = starts(&a);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(alive(now[1]));
    assert_eq!(dropped(&gate).await.len(), 1);
}

#[tokio::test]
async fn a_gateway_listing_endless_pages_is_cut_at_the_page_bound() {
    a_hostile_list_is_cut_and_its_session_dropped(json!({"per_page": 0}), "went on past 100 pages").await;
}

#[tokio::test]
async fn a_gateway_listing_too_many_tools_is_cut_at_the_tool_bound() {
    a_hostile_list_is_cut_and_its_session_dropped(json!({"per_page": 1000}), "held more than 2000 tools")
        .await;
}

#[tokio::test]
async fn a_gateway_listing_huge_pages_is_cut_at_the_byte_bound() {
    // 5 pages of 40 tools of 100 KB each: 4 MB a page, within a message's
    // bound and the tool bound; the list weighs 20 MB.
    a_hostile_list_is_cut_and_its_session_dropped(
        json!({"per_page": 40, "description_bytes": 100_000, "pages": 5}),
        "weighed more than 8 MiB",
    )
    .await;
}

/// The most a process kept in memory at once, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A real `skilld serve` over one hostile server as a bundled skill, and
/// its skills directory, which must outlive it.
fn served_hostile(kit: &Path, a: &Area) -> (Served, tempfile::TempDir) {
    hostile_skill(kit, a, "hostile", &[]);
    let skills = moved_skills(a);
    let config = format!(
        "sandbox_read_paths = [{:?}, {:?}]\nsandbox_write_paths = [{:?}]\n",
        kit.display().to_string(),
        a.dir.path().display().to_string(),
        a.dir.path().join("logs").display().to_string(),
    );
    (Served::start(skills.path(), &config), skills)
}

/// The review's attack: pages of 1,000 tools for as long as skilld asks
/// (200 of them took it from 48 MB to 1,077 MB). Now it asks for three,
/// its memory barely moves, and the session is dropped.
#[tokio::test]
async fn a_gateway_listing_without_end_does_not_grow_a_real_servers_memory() {
    let Some(kit) = kit() else { return };
    let a = area();
    let (server, _skills) = served_hostile(&kit, &a);
    let before = peak_kib(server.pid());
    let grew = crate::common::invoke_envelope(
        &server.addr,
        "grow",
        None,
        json!({"per_page": 1000, "description_bytes": 1000}),
    )
    .await;
    assert_eq!(grew["output"], "growing", "{grew}");
    let said = loop_until_dropped(&server).await;
    assert!(said.contains("held more than 2000 tools"), "{said}");
    let pages = logged(&a.log)
        .iter()
        .filter(|e| e["event"] == "tools/list")
        .count();
    assert!(pages <= 4, "skilld asked for {pages} pages");
    let grown = (peak_kib(server.pid()) - before) / 1024;
    assert!(grown < 64, "the server grew by {grown} MiB");
    let back = crate::common::invoke_envelope(&server.addr, "echo", None, json!({"text": "back"})).await;
    assert_eq!(back["output"], "back", "{back}");
}

/// Waits for `/diagnostics` to say the hostile server was dropped: why.
async fn loop_until_dropped(server: &Served) -> String {
    for _ in 0..100 {
        let all: Value = server
            .person()
            .get(format!("{}/diagnostics", server.base()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let found = all["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["code"] == "upstream_dropped" && d["skill"] == "hostile")
            .and_then(|d| d["message"].as_str().map(str::to_owned));
        if let Some(message) = found {
            return message;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never dropped: {}", server.log());
}

/// Point 11: a fronted server's stderr reached the log line by line with
/// `String::lines`, unescaped: its `\r` or `\u2028` started what read as
/// a line of skilld's, its escape codes reached the terminal. Now each
/// line is one event, escaped as a process backend's is.
#[tokio::test]
async fn a_gateways_stderr_cannot_forge_log_lines_or_reach_the_terminal() {
    let Some(kit) = kit() else { return };
    let a = area();
    let (server, _skills) = served_hostile(&kit, &a);
    let log = server.wait_for_log("FORGED").await;
    for raw in ['\x1b', '\r', '\u{2028}', '\x07'] {
        assert!(!log.contains(raw), "{raw:?} reached the log raw:\n{log}");
    }
    let forged: Vec<&str> = log.lines().filter(|l| l.contains("FORGED")).collect();
    assert_eq!(forged.len(), 1, "{log}");
    assert!(
        forged[0].contains(
            r"stderr=\x1b[2JFORGED upstream line\r2030-01-01T00:00:00Z  INFO skilld: every call approved\u{2028}\x1b]0;pwned\x07 end"
        ),
        "{}",
        forged[0]
    );
    assert!(
        forged[0].contains("upstream MCP server") && forged[0].contains("hostile"),
        "{}",
        forged[0]
    );
    assert!(log.lines().all(|l| !l.starts_with("2030-")), "{log}");
}
