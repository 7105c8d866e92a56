//! One server of a client's config, as the `SKILL.yaml` of an `mcp`
//! backend (`docs/gateway.md`): its command or URL, and its environment
//! and headers as references wherever a secret could be.

use super::secrets::{
    Placeholder, Template, is_credential_arg, is_secret_name, looks_like_credential, parse_template,
    reference_name, upper_snake,
};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};

/// The `SKILL.yaml` of one imported server, fields in the order written.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub name: String,
    pub version: &'static str,
    pub description: String,
    pub types: [&'static str; 1],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    pub implementation: Implementation,
}

/// `network:` as written: `true`, `false`, or `{allow: [hosts]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Network {
    On(bool),
    Allow { allow: Vec<String> },
}

/// `implementation:` of an `mcp` backend: a command or a URL.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Implementation {
    pub backend: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, EnvValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, Reference>,
}

/// A stdio child's variable: a literal, or a reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EnvValue {
    Literal(String),
    Reference(Reference),
}

/// `{env: NAME}`, or `{env: NAME, prefix: "Bearer "}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reference {
    pub env: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// A variable the user must set in skilld's environment, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub name: String,
    pub why: String,
}

/// A server made into a skill: its manifest, the comment above it, the
/// variables to set and what else the user should read.
#[derive(Debug, Clone)]
pub struct Converted {
    pub manifest: Manifest,
    pub comments: Vec<String>,
    pub needs: Vec<Need>,
    pub notes: Vec<String>,
}

/// Why a server was not made into a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not an error: skilld does not speak this transport.
    Skipped(String),
    /// The entry is wrong, or importing it would copy a secret.
    Invalid(String),
}

/// What the conversion knows besides the entry: the skill's name, where
/// it came from, and the config's `inputs` (id → description).
pub struct Context<'a> {
    pub server: &'a str,
    pub skill: &'a str,
    pub origin: &'a str,
    pub inputs: &'a HashMap<String, String>,
    /// The hosts a package runner's server may fetch from.
    pub registries: &'a crate::egress::settings::Registries,
}

/// Programs that fetch the package they run when they start.
const PACKAGE_RUNNERS: [&str; 6] = ["npx", "uvx", "pipx", "bunx", "pnpx", "docker"];

/// Servers known to need no network: `network: false` suits them.
const OFFLINE_SERVERS: [&str; 6] = [
    "server-filesystem",
    "server-memory",
    "server-everything",
    "server-sequential-thinking",
    "mcp-server-time",
    "mcp-server-git",
];

/// Converts one entry of `mcpServers` / `servers`.
pub fn convert(entry: &Value, cx: &Context<'_>) -> Result<Converted, Refusal> {
    let Some(entry) = entry.as_object() else {
        return Err(Refusal::Invalid("its entry is not a JSON object".to_owned()));
    };
    if entry.get("disabled").and_then(Value::as_bool) == Some(true) {
        return Err(Refusal::Skipped("it is disabled in the config".to_owned()));
    }
    let kind = entry.get("type").and_then(Value::as_str);
    let mut out = Builder::new(cx);
    out.note_dropped(entry);
    let implementation = match (string(entry, "command"), string(entry, "url")) {
        (Some(command), _) if kind != Some("http") && kind != Some("sse") => out.stdio(command, entry)?,
        (_, Some(url)) => out.remote(url, kind, entry)?,
        _ => {
            return Err(Refusal::Invalid(
                "it has neither a \"command\" (a local server) nor a \"url\" (a remote one)".to_owned(),
            ));
        }
    };
    Ok(out.finish(implementation))
}

fn string<'a>(entry: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    entry
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// Gathers what one conversion finds on its way.
struct Builder<'a> {
    cx: &'a Context<'a>,
    comments: Vec<String>,
    needs: Vec<Need>,
    notes: Vec<String>,
    network: Option<Network>,
    permissions: Vec<&'static str>,
}

impl<'a> Builder<'a> {
    fn new(cx: &'a Context<'a>) -> Self {
        Self {
            cx,
            comments: Vec::new(),
            needs: Vec::new(),
            notes: Vec::new(),
            network: None,
            permissions: Vec::new(),
        }
    }

    /// Says what of the entry the manifest cannot carry.
    fn note_dropped(&mut self, entry: &Map<String, Value>) {
        if let Some(cwd) = string(entry, "cwd") {
            self.notes.push(format!(
                "its working directory ({cwd:?}) is not carried over: the server starts in the sandbox's"
            ));
        }
        if let Some(file) = string(entry, "envFile") {
            self.notes.push(format!(
                "its envFile ({file:?}) is not read: set what the server needs from it in \"env\""
            ));
        }
    }

    /// `network:` for a stdio server, and the comment that says why: none
    /// for one known to work offline, its registry's hosts for a package
    /// runner's (`[egress] registries`), and asking a person for each
    /// destination otherwise.
    fn reach(&mut self, offline: Option<&str>, runner: Option<&str>) {
        let registry = runner.and_then(|r| self.cx.registries.of_runner(r));
        let (network, comment) = match (offline, runner, registry) {
            (Some(known), _, _) => (
                Network::On(false),
                format!("network: false, since {known} is known to work offline."),
            ),
            (None, Some(runner), Some(hosts)) => (
                Network::Allow {
                    allow: hosts.to_vec(),
                },
                format!(
                    "network.allow: the registry {runner} downloads the server from at each start (the \
                     sandbox's home is fresh); add the hosts the server itself calls, or allow them when \
                     it asks (docs/egress.md)."
                ),
            ),
            _ => (
                Network::On(true),
                "network: true, so each destination it asks for is held for a person (docs/egress.md); \
                 list the hosts it calls (network: {allow: [...]}), or set it to false (and drop net:fetch) \
                 if it needs none."
                    .to_owned(),
            ),
        };
        self.network = Some(network);
        self.comments.push(comment);
    }

    fn stdio(&mut self, program: &str, entry: &Map<String, Value>) -> Result<Implementation, Refusal> {
        let command = command_line(program, entry.get("args"))?;
        self.check_command(&command)?;
        let env = self.env(entry.get("env"))?;
        let offline = offline_server(&command);
        self.permissions = if offline.is_some() {
            vec!["shell:exec"]
        } else {
            vec!["shell:exec", "net:fetch"]
        };
        let runner = command
            .first()
            .map(|p| p.rsplit('/').next().unwrap_or(p))
            .filter(|p| PACKAGE_RUNNERS.contains(p));
        self.reach(offline, runner);
        Ok(Implementation {
            backend: "mcp",
            command: Some(command),
            env,
            url: None,
            headers: BTreeMap::new(),
        })
    }

    /// Refuses a command carrying a credential; warns of placeholders,
    /// which skilld passes as written.
    fn check_command(&mut self, command: &[String]) -> Result<(), Refusal> {
        let mut previous = None;
        for (i, arg) in command.iter().enumerate() {
            if is_credential_arg(arg, previous) {
                return Err(Refusal::Invalid(format!(
                    "argument {i} of its command looks like a credential; move it into \"env\" \
                     (as a ${{VAR}}) and import again"
                )));
            }
            if arg.contains("${") {
                self.notes.push(format!(
                    "its command holds {arg:?}, which skilld passes as written (it expands no \
                     variables in a command): edit the SKILL.yaml"
                ));
            }
            previous = Some(arg.as_str());
        }
        Ok(())
    }

    fn env(&mut self, env: Option<&Value>) -> Result<BTreeMap<String, EnvValue>, Refusal> {
        let Some(env) = env.filter(|v| !v.is_null()) else {
            return Ok(BTreeMap::new());
        };
        let env = env
            .as_object()
            .ok_or_else(|| Refusal::Invalid("its \"env\" is not an object".to_owned()))?;
        let mut out = BTreeMap::new();
        for (key, value) in env {
            let text = scalar(value)
                .ok_or_else(|| Refusal::Invalid(format!("its \"env\" entry {key} is not a string")))?;
            out.insert(key.clone(), self.env_value(key, &text));
        }
        Ok(out)
    }

    fn env_value(&mut self, key: &str, value: &str) -> EnvValue {
        match parse_template(value) {
            Template::Plain(text) if !is_secret_name(key) && !looks_like_credential(&text) => {
                EnvValue::Literal(text)
            }
            Template::Plain(_) => EnvValue::Reference(self.need(
                key,
                None,
                "the config held its value, which looks secret and was not copied".to_owned(),
            )),
            Template::Prefixed { prefix, placeholder } if !looks_like_credential(&prefix) => {
                EnvValue::Reference(self.placeholder(&prefix, &placeholder))
            }
            _ => EnvValue::Reference(self.need(key, None, self.inexpressible(key, value))),
        }
    }

    fn remote(
        &mut self,
        url: &str,
        kind: Option<&str>,
        entry: &Map<String, Value>,
    ) -> Result<Implementation, Refusal> {
        check_url(url, kind)?;
        let headers = self.headers(entry.get("headers"))?;
        self.permissions = vec!["net:fetch"];
        Ok(Implementation {
            backend: "mcp",
            command: None,
            env: BTreeMap::new(),
            url: Some(url.to_owned()),
            headers,
        })
    }

    fn headers(&mut self, headers: Option<&Value>) -> Result<BTreeMap<String, Reference>, Refusal> {
        let Some(headers) = headers.filter(|v| !v.is_null()) else {
            return Ok(BTreeMap::new());
        };
        let headers = headers
            .as_object()
            .ok_or_else(|| Refusal::Invalid("its \"headers\" is not an object".to_owned()))?;
        let mut out = BTreeMap::new();
        for (name, value) in headers {
            let text = scalar(value)
                .ok_or_else(|| Refusal::Invalid(format!("its header {name} is not a string")))?;
            out.insert(name.clone(), self.header(name, &text));
        }
        Ok(out)
    }

    /// A header's value, always a reference: from its placeholder, else
    /// a variable named after the server and the header.
    fn header(&mut self, name: &str, value: &str) -> Reference {
        let own = upper_snake(&format!("{}_{name}", self.cx.skill));
        match parse_template(value) {
            Template::Prefixed { prefix, placeholder } if !looks_like_credential(&prefix) => {
                self.placeholder(&prefix, &placeholder)
            }
            Template::Plain(text) => {
                let (scheme, rest) = split_scheme(&text);
                let why = if is_secret_name(name) || scheme.is_some() || looks_like_credential(rest) {
                    format!("the config held the {name} header's value literally; it was not copied")
                } else {
                    format!("the config's {name} header: set it to {rest:?}")
                };
                self.need(&own, scheme, why)
            }
            _ => {
                let why = self.inexpressible(name, value);
                self.need(&own, None, why)
            }
        }
    }

    /// A reference to the variable a placeholder names.
    fn placeholder(&mut self, prefix: &str, placeholder: &Placeholder) -> Reference {
        let prefix = (!prefix.is_empty()).then(|| prefix.to_owned());
        match placeholder {
            Placeholder::Env { name, default: None } => {
                self.need(name, prefix, format!("the config's ${{{name}}}"))
            }
            Placeholder::Env {
                name,
                default: Some(default),
            } => {
                let why = format!("the config's ${{{name}}}; its default ({default:?}) is not carried over");
                self.need(name, prefix, why)
            }
            Placeholder::Input(id) => {
                let described = self
                    .cx
                    .inputs
                    .get(id)
                    .map_or_else(String::new, |d| format!(": {d}"));
                let why = format!("the config's input {id:?}{described}");
                self.need(&upper_snake(id), prefix, why)
            }
        }
    }

    fn inexpressible(&self, key: &str, value: &str) -> String {
        if looks_like_credential(value) || is_secret_name(key) {
            "the config built its value from variables skilld cannot expand; set it to what \
             the client computed"
                .to_owned()
        } else {
            format!("the config set it to {value:?}, which skilld cannot expand: set it to what that gives")
        }
    }

    /// Records that `name` (renamed off `SKILLD_`) must be set, and
    /// returns the reference to it.
    fn need(&mut self, name: &str, prefix: Option<String>, why: String) -> Reference {
        let env = reference_name(name);
        let why = if env == name {
            why
        } else {
            format!("{why} (renamed from {name}: skilld keeps SKILLD_* to itself)")
        };
        self.needs.push(Need {
            name: env.clone(),
            why,
        });
        Reference { env, prefix }
    }

    fn finish(self, implementation: Implementation) -> Converted {
        let manifest = Manifest {
            name: self.cx.skill.to_owned(),
            version: "0.1.0",
            description: format!(
                "The {} MCP server (imported from {})",
                self.cx.server, self.cx.origin
            ),
            types: ["tool"],
            permissions: self.permissions,
            network: self.network,
            implementation,
        };
        Converted {
            manifest,
            comments: self.comments,
            needs: self.needs,
            notes: self.notes,
        }
    }
}

/// `[command, ...args]`; a command written with its arguments in one
/// string (as some configs do) is split the way a shell would.
fn command_line(program: &str, args: Option<&Value>) -> Result<Vec<String>, Refusal> {
    let mut command = vec![program.to_owned()];
    match args {
        None | Some(Value::Null) => {}
        Some(Value::Array(args)) => {
            for arg in args {
                command.push(scalar(arg).ok_or_else(|| {
                    Refusal::Invalid("its \"args\" holds something that is not a string".to_owned())
                })?);
            }
        }
        Some(_) => return Err(Refusal::Invalid("its \"args\" is not a list".to_owned())),
    }
    Ok(command)
}

/// A string, or a number or boolean written without quotes.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The known offline server a command starts (`npx -y
/// @modelcontextprotocol/server-filesystem@1.0 /data`, `uvx
/// mcp-server-time`), by its package's bare name.
/// Not when a package runner starts it: `npx -y` and the like download
/// the package at each start (the sandbox's home is fresh each time), so
/// the server needs the network whatever it does then.
fn offline_server(command: &[String]) -> Option<&'static str> {
    let program = command.first().map(|p| p.rsplit('/').next().unwrap_or(p));
    if program.is_some_and(|p| PACKAGE_RUNNERS.contains(&p)) {
        return None;
    }
    // Any segment of a path: `…/server-filesystem/dist/index.js` too.
    command.iter().flat_map(|arg| arg.split('/')).find_map(|segment| {
        let base = segment.split(['@', '=']).next().unwrap_or(segment);
        OFFLINE_SERVERS.iter().copied().find(|known| *known == base)
    })
}

/// Refuses an SSE server (skilld speaks Streamable HTTP), a URL with
/// variables, and one carrying a credential.
fn check_url(url: &str, kind: Option<&str>) -> Result<(), Refusal> {
    if url.contains("${") {
        return Err(Refusal::Invalid(
            "its url uses variables, which skilld cannot expand: write the URL out".to_owned(),
        ));
    }
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(Refusal::Invalid(format!("its url {url:?} is not http(s)")));
    }
    if looks_like_credential(url) || query_has_secret(url) {
        return Err(Refusal::Invalid(
            "its url carries a credential; put it in a header (as a ${VAR}) and import again".to_owned(),
        ));
    }
    let path = url.split(['?', '#']).next().unwrap_or(url).trim_end_matches('/');
    let sse = kind == Some("sse") || (kind.is_none() && path.ends_with("/sse"));
    if sse && !path.ends_with("/mcp") {
        return Err(Refusal::Skipped(
            "it uses the SSE transport; skilld speaks only Streamable HTTP (a server that \
             offers both usually serves it at /mcp)"
                .to_owned(),
        ));
    }
    Ok(())
}

fn query_has_secret(url: &str) -> bool {
    url.split_once('?').is_some_and(|(_, query)| {
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .any(|(k, v)| !v.is_empty() && (is_secret_name(k) || looks_like_credential(v)))
    })
}

/// `Bearer abc` → (`Some("Bearer ")`, `abc`).
fn split_scheme(value: &str) -> (Option<String>, &str) {
    for scheme in ["Bearer ", "Basic ", "Token "] {
        if value.len() > scheme.len() && value[..scheme.len()].eq_ignore_ascii_case(scheme) {
            return (Some(value[..scheme.len()].to_owned()), &value[scheme.len()..]);
        }
    }
    (None, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(entry: Value) -> Result<Converted, Refusal> {
        let inputs = HashMap::from([("gh-token".to_owned(), "GitHub token".to_owned())]);
        let registries = crate::egress::settings::Registries::default();
        let cx = Context {
            server: "GitHub",
            skill: "github",
            origin: "a test",
            inputs: &inputs,
            registries: &registries,
        };
        convert(&entry, &cx)
    }

    fn reference(env: &str, prefix: Option<&str>) -> Reference {
        Reference {
            env: env.to_owned(),
            prefix: prefix.map(str::to_owned),
        }
    }

    #[test]
    fn offline_servers_by_package() {
        let names = |c: &[&str]| offline_server(&c.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        let installed = "/opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js";
        assert_eq!(names(&["node", installed, "/d"]), Some("server-filesystem"));
        assert_eq!(names(&["/opt/venv/bin/mcp-server-git"]), Some("mcp-server-git"));
        // A package runner downloads at each start: never offline.
        let npx = [
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem@2025.1.1",
            "/d",
        ];
        assert_eq!(names(&npx), None);
        assert_eq!(names(&["uvx", "mcp-server-git==0.6.2"]), None);
        assert_eq!(names(&["npx", "-y", "@modelcontextprotocol/server-github"]), None);
        assert_eq!(names(&["uvx", "mcp-server-github"]), None);
    }

    #[test]
    fn env_values_become_references() {
        let c = run(json!({"command": "npx", "env": {
            "GITHUB_TOKEN": "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "LOG_LEVEL": "debug",
            "HOST": "${GH_HOST:-github.com}",
            "OTHER": "${input:gh-token}",
            "SKILLD_TOKEN": "x",
            "DATA": "${HOME}/data",
        }}))
        .unwrap();
        let env = &c.manifest.implementation.env;
        assert_eq!(
            env["GITHUB_TOKEN"],
            EnvValue::Reference(reference("GITHUB_TOKEN", None))
        );
        assert_eq!(env["LOG_LEVEL"], EnvValue::Literal("debug".to_owned()));
        assert_eq!(env["HOST"], EnvValue::Reference(reference("GH_HOST", None)));
        assert_eq!(env["OTHER"], EnvValue::Reference(reference("GH_TOKEN", None)));
        assert_eq!(
            env["SKILLD_TOKEN"],
            EnvValue::Reference(reference("UPSTREAM_SKILLD_TOKEN", None))
        );
        assert_eq!(env["DATA"], EnvValue::Reference(reference("DATA", None)));
        assert_eq!(c.needs.len(), 5);
        assert!(c.needs.iter().any(|n| n.why.contains("GitHub token")));
        // npx fetches the server from the npm registry, and only there.
        assert_eq!(
            c.manifest.network,
            Some(Network::Allow {
                allow: vec!["registry.npmjs.org".to_owned()]
            })
        );
        assert_eq!(c.manifest.permissions, ["shell:exec", "net:fetch"]);
        let unknown = run(json!({"command": "/opt/bin/some-server"})).unwrap();
        assert_eq!(unknown.manifest.network, Some(Network::On(true)));
        let uvx = run(json!({"command": "uvx", "args": ["mcp-server-fetch"]})).unwrap();
        assert_eq!(
            uvx.manifest.network,
            Some(Network::Allow {
                allow: vec!["pypi.org".to_owned(), "files.pythonhosted.org".to_owned()]
            })
        );
    }

    #[test]
    fn headers_are_always_references() {
        let c = run(
            json!({"type": "http", "url": "https://api.example.com/mcp", "headers": {
                "Authorization": "Bearer ${GITHUB_TOKEN}",
                "X-Api-Key": "sk-live-abcdefghijklmnop",
                "Cookie": "Bearer ghp_16C7e42F292c6912E7710c838347Ae178B4a",
                "X-Region": "eu",
            }}),
        )
        .unwrap();
        let headers = &c.manifest.implementation.headers;
        assert_eq!(
            headers["Authorization"],
            reference("GITHUB_TOKEN", Some("Bearer "))
        );
        assert_eq!(headers["X-Api-Key"], reference("GITHUB_X_API_KEY", None));
        assert_eq!(headers["Cookie"], reference("GITHUB_COOKIE", Some("Bearer ")));
        assert_eq!(headers["X-Region"], reference("GITHUB_X_REGION", None));
        assert!(c.needs.iter().any(|n| n.why.contains("\"eu\"")));
        assert!(!c.needs.iter().any(|n| n.why.contains("sk-live")));
        assert_eq!(c.manifest.network, None);
        assert_eq!(c.manifest.permissions, ["net:fetch"]);
    }

    #[test]
    fn refusals() {
        let invalid = |e: Value| matches!(run(e), Err(Refusal::Invalid(_)));
        assert!(invalid(json!({"args": ["x"]})));
        assert!(invalid(json!("npx")));
        assert!(invalid(json!({"command": "npx", "args": "x"})));
        assert!(invalid(
            json!({"command": "npx", "args": ["--api-key", "hunter2"]})
        ));
        assert!(invalid(json!({"url": "https://x.example/mcp?api_key=abc"})));
        assert!(invalid(json!({"url": "${BASE}/mcp"})));
        assert!(matches!(
            run(json!({"type": "sse", "url": "https://x.example/sse"})),
            Err(Refusal::Skipped(_))
        ));
        assert!(matches!(
            run(json!({"url": "https://x.example/sse"})),
            Err(Refusal::Skipped(_))
        ));
        assert!(run(json!({"type": "sse", "url": "https://x.example/mcp"})).is_ok());
        assert!(matches!(
            run(json!({"command": "npx", "disabled": true})),
            Err(Refusal::Skipped(_))
        ));
        let c = run(json!({"command": "npx", "cwd": "/w", "envFile": "/w/.env"})).unwrap();
        assert_eq!(c.notes.len(), 2);
    }
}
