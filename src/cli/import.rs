//! `skilld import [FILE]...`: the MCP servers of Claude Desktop's, Claude
//! Code's, Cursor's and VS Code's configs, each written as a skill whose
//! `SKILL.yaml` has an `mcp` backend (`docs/gateway.md`, "Importing your
//! MCP configuration"). Secrets stay out of the manifests: they become
//! environment references the user sets for skilld.

mod convert;
mod secrets;

use clap::Args;
use convert::{Context, Converted, Implementation, Need, Refusal, convert};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Configs to read (default: the known locations that exist).
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Where to write the skills (default: the user's skills directory,
    /// `$XDG_CONFIG_HOME/skilld/skills` or `~/.config/skilld/skills`).
    #[arg(long, value_name = "DIR")]
    into: Option<PathBuf>,
    /// Replace the SKILL.yaml of a skill directory that exists.
    #[arg(long)]
    force: bool,
    /// Print what would be written, and write nothing.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// The server's config, for the registries (`[egress] registries`)
    /// that package runners' servers may reach.
    #[arg(long, env = "SKILLD_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

/// The client whose config a file is, told by its name and place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    VsCode,
    Unknown,
}

impl Client {
    fn of(path: &Path, has_servers_key: bool) -> Self {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parent = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .unwrap_or("");
        match (name, parent) {
            ("claude_desktop_config.json", _) => Self::ClaudeDesktop,
            (".mcp.json", _) => Self::ClaudeCode,
            (_, ".cursor") => Self::Cursor,
            (_, ".vscode") => Self::VsCode,
            _ if has_servers_key => Self::VsCode,
            _ => Self::Unknown,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::ClaudeDesktop => "Claude Desktop's config",
            Self::ClaudeCode => "Claude Code's .mcp.json",
            Self::Cursor => "Cursor's mcp.json",
            Self::VsCode => "VS Code's mcp.json",
            Self::Unknown => "an MCP config",
        }
    }
}

/// One config file, read.
struct Source {
    path: PathBuf,
    client: Client,
    servers: Vec<(String, Value)>,
    /// VS Code's `inputs`: id → description.
    inputs: HashMap<String, String>,
}

/// A server made into a skill, ready to write.
struct Planned {
    key: String,
    skill: String,
    source: PathBuf,
    converted: Converted,
}

/// What went wrong over the run, for the exit code: 1 for bad input, 2
/// when something could not be written.
#[derive(Default)]
struct Outcome {
    bad_input: bool,
    write_failed: bool,
}

impl Outcome {
    fn code(&self) -> ExitCode {
        match (self.write_failed, self.bad_input) {
            (true, _) => ExitCode::from(2),
            (false, true) => ExitCode::from(1),
            _ => ExitCode::SUCCESS,
        }
    }
}

/// Runs `skilld import`.
pub fn run(args: &ImportArgs) -> ExitCode {
    let sources = match read_sources(&args.files) {
        Ok(sources) => sources,
        Err(message) => {
            eprintln!("skilld import: {message}");
            return ExitCode::from(1);
        }
    };
    let Some(into) = args.into.clone().or_else(crate::catalog::user_skills_dir) else {
        eprintln!("skilld import: no HOME to find ~/.config/skilld/skills in; pass --into DIR");
        return ExitCode::from(1);
    };
    let registries = match registries(args.config.as_deref()) {
        Ok(registries) => registries,
        Err(e) => {
            eprintln!("skilld import: {e}");
            return ExitCode::from(1);
        }
    };
    let mut outcome = Outcome::default();
    let planned = plan(&sources, &registries, &mut outcome);
    let mut needs = Vec::new();
    for p in &planned {
        write_one(p, &into, args, &mut outcome, &mut needs);
    }
    print_needs(&needs);
    outcome.code()
}

/// Where the clients keep their configs, user-wide then in this project.
fn known_locations() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if let Some(home) = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
    {
        paths.push(home.join(".config/Claude/claude_desktop_config.json"));
        paths.push(home.join("Library/Application Support/Claude/claude_desktop_config.json"));
        paths.push(home.join(".cursor/mcp.json"));
    }
    for local in [".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json"] {
        paths.push(PathBuf::from(local));
    }
    paths
}

/// The files named, or the known locations that exist. A file named that
/// cannot be read fails the whole import, before anything is written.
fn read_sources(files: &[PathBuf]) -> Result<Vec<Source>, String> {
    if !files.is_empty() {
        let sources: Vec<Source> = files.iter().map(|f| read_source(f)).collect::<Result<_, _>>()?;
        for s in &sources {
            println!(
                "read {} ({}): {} servers",
                s.path.display(),
                s.client.label(),
                s.servers.len()
            );
        }
        return Ok(sources);
    }
    let candidates = known_locations();
    let mut sources = Vec::new();
    let mut seen = HashSet::new();
    // In the home directory, `./.cursor/mcp.json` is `~/.cursor/mcp.json`.
    let first_time = |p: &&PathBuf| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()));
    for path in candidates.iter().filter(|p| p.is_file()).filter(first_time) {
        match read_source(path) {
            Ok(s) => {
                println!(
                    "read {} ({}): {} servers",
                    path.display(),
                    s.client.label(),
                    s.servers.len()
                );
                sources.push(s);
            }
            Err(e) if e.ends_with(NO_SERVERS) => println!("read {}: no MCP servers", path.display()),
            Err(e) => return Err(e),
        }
    }
    if sources.is_empty() {
        let looked: Vec<String> = candidates.iter().map(|p| format!("  {}", p.display())).collect();
        return Err(format!(
            "no MCP servers found; looked in:\n{}\nname a config file: skilld import FILE",
            looked.join("\n")
        ));
    }
    Ok(sources)
}

const NO_SERVERS: &str = "lists no MCP servers";

fn read_source(path: &Path) -> Result<Source, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let json: Value =
        serde_json::from_str(&strip_jsonc(&text)).map_err(|e| format!("{shown} is not JSON: {e}"))?;
    let (servers, has_servers_key) = servers_of(&json).ok_or_else(|| {
        format!("{shown} has no \"mcpServers\" or \"servers\" object: is it an MCP config?")
    })?;
    if servers.is_empty() {
        return Err(format!("{shown} {NO_SERVERS}"));
    }
    Ok(Source {
        path: path.to_path_buf(),
        client: Client::of(path, has_servers_key),
        servers: servers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        inputs: inputs_of(&json),
    })
}

/// `mcpServers` (Claude, Cursor), `servers` (VS Code's mcp.json) or
/// `mcp.servers` (VS Code's settings.json), and whether it was `servers`.
fn servers_of(json: &Value) -> Option<(&serde_json::Map<String, Value>, bool)> {
    if let Some(servers) = json.get("mcpServers").and_then(Value::as_object) {
        return Some((servers, false));
    }
    json.get("servers")
        .or_else(|| json.get("mcp").and_then(|m| m.get("servers")))
        .and_then(Value::as_object)
        .map(|s| (s, true))
}

fn inputs_of(json: &Value) -> HashMap<String, String> {
    let inputs = json
        .get("inputs")
        .or_else(|| json.get("mcp").and_then(|m| m.get("inputs")))
        .and_then(Value::as_array);
    inputs
        .into_iter()
        .flatten()
        .filter_map(|input| {
            let id = input.get("id")?.as_str()?;
            let description = input.get("description").and_then(Value::as_str).unwrap_or("");
            Some((id.to_owned(), description.to_owned()))
        })
        .collect()
}

/// JSON with comments and trailing commas (VS Code writes JSONC) as JSON:
/// both dropped outside strings.
fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => copy_string(&mut chars, &mut out),
            '/' if chars.peek() == Some(&'/') => {
                chars.by_ref().find(|&c| c == '\n');
                out.push('\n');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                chars
                    .by_ref()
                    .find(|&c| std::mem::replace(&mut prev, c) == '*' && c == '/');
            }
            ',' if next_significant(chars.clone()).is_some_and(|n| n == '}' || n == ']') => {}
            c => out.push(c),
        }
    }
    out
}

fn copy_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, out: &mut String) {
    out.push('"');
    while let Some(c) = chars.next() {
        out.push(c);
        match c {
            '\\' => out.extend(chars.next()),
            '"' => return,
            _ => {}
        }
    }
}

/// The next character that is neither space nor inside a comment.
fn next_significant(chars: std::iter::Peekable<std::str::Chars<'_>>) -> Option<char> {
    let rest: String = chars.collect();
    let mut rest = rest.as_str();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
        } else {
            return rest.chars().next();
        }
    }
}

/// The registries the config names (checked as the server checks them),
/// else the public ones.
fn registries(config: Option<&Path>) -> anyhow::Result<crate::egress::settings::Registries> {
    let egress = crate::config::FileConfig::load(config)?
        .egress
        .unwrap_or_default();
    egress.compile()?;
    Ok(egress.registries)
}

/// Every server of every source, named and converted; a server that
/// cannot be imported is reported here.
fn plan(
    sources: &[Source],
    registries: &crate::egress::settings::Registries,
    outcome: &mut Outcome,
) -> Vec<Planned> {
    let mut planned: Vec<Planned> = Vec::new();
    let mut taken = HashSet::new();
    for source in sources {
        for (key, entry) in &source.servers {
            let skill = free_name(&skill_name(key), &taken);
            let cx = Context {
                server: key,
                skill: &skill,
                origin: source.client.label(),
                inputs: &source.inputs,
                registries,
            };
            let converted = match convert(entry, &cx) {
                Ok(converted) => converted,
                Err(refusal) => {
                    report_refusal(key, &source.path, &refusal, outcome);
                    continue;
                }
            };
            if let Some(same) = duplicate(&planned, &converted.manifest.implementation) {
                println!(
                    "{key:?}: skipped: the same server as {:?} of {}",
                    same.key,
                    same.source.display()
                );
                continue;
            }
            note_renaming(key, &skill);
            taken.insert(skill.clone());
            planned.push(Planned {
                key: key.clone(),
                skill,
                source: source.path.clone(),
                converted,
            });
        }
    }
    planned
}

fn report_refusal(key: &str, path: &Path, refusal: &Refusal, outcome: &mut Outcome) {
    match refusal {
        Refusal::Skipped(why) => println!("{key:?}: skipped: {why}"),
        Refusal::Invalid(why) => {
            eprintln!("skilld import: server {key:?} of {}: {why}", path.display());
            outcome.bad_input = true;
        }
    }
}

fn duplicate<'a>(planned: &'a [Planned], implementation: &Implementation) -> Option<&'a Planned> {
    planned
        .iter()
        .find(|p| &p.converted.manifest.implementation == implementation)
}

fn note_renaming(key: &str, skill: &str) {
    let plain = skill_name(key);
    if plain != skill {
        println!("{key:?}: {plain} is taken by another server of this import; this one is {skill}");
    } else if plain != key {
        println!("{key:?}: named {skill} (skill names are lowercase letters, digits and hyphens)");
    }
}

/// A server's key as a skill name: lowercase letters and digits, other
/// runs as one hyphen, at most 64 characters.
fn skill_name(key: &str) -> String {
    let mut name = String::new();
    for c in key.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.is_empty() && !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = fit(&name, 64);
    if name.is_empty() {
        "server".to_owned()
    } else {
        name
    }
}

/// `name` cut to `max` characters, with no hyphen at its end.
fn fit(name: &str, max: usize) -> String {
    name.chars()
        .take(max)
        .collect::<String>()
        .trim_end_matches('-')
        .to_owned()
}

/// `name`, or `name-2`, `name-3`… when it is taken.
fn free_name(name: &str, taken: &HashSet<String>) -> String {
    if !taken.contains(name) {
        return name.to_owned();
    }
    (2..)
        .map(|n| {
            let suffix = format!("-{n}");
            format!("{}{suffix}", fit(name, 64 - suffix.len()))
        })
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or_else(|| name.to_owned())
}

/// The manifest's text: the comment saying where it came from, then the
/// YAML.
fn manifest_text(p: &Planned) -> Result<String, String> {
    let yaml = serde_norway::to_string(&p.converted.manifest).map_err(|e| e.to_string())?;
    let source = std::fs::canonicalize(&p.source).unwrap_or_else(|_| p.source.clone());
    let mut text = format!(
        "# Imported by `skilld import` from server {:?} of {}.\n",
        p.key,
        source.display()
    );
    for comment in &p.converted.comments {
        text.push_str(&format!("# {comment}\n"));
    }
    text.push_str(&yaml);
    Ok(text)
}

/// Writes (or with `--dry-run` prints) one skill, and reports it.
fn write_one(p: &Planned, into: &Path, args: &ImportArgs, outcome: &mut Outcome, needs: &mut Vec<Need>) {
    let dir = into.join(&p.skill);
    let file = dir.join("SKILL.yaml");
    if dir.exists() && !args.force {
        println!(
            "{:?}: skipped: {} exists; left alone (--force replaces its SKILL.yaml)",
            p.key,
            dir.display()
        );
        return;
    }
    let text = match manifest_text(p) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("skilld import: cannot write the manifest of {:?}: {e}", p.key);
            outcome.write_failed = true;
            return;
        }
    };
    if args.dry_run {
        println!(
            "{:?} -> {}: would write {}:\n{text}",
            p.key,
            p.skill,
            file.display()
        );
    } else if let Err(e) = write_file(&dir, &file, &text) {
        eprintln!("skilld import: cannot write {}: {e}", file.display());
        outcome.write_failed = true;
        return;
    } else {
        println!("{:?} -> {}: wrote {}", p.key, p.skill, file.display());
    }
    report_details(&p.converted, needs);
}

/// Writes beside the target, then renames: a reader never sees half a
/// manifest.
fn write_file(dir: &Path, file: &Path, text: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let partial = dir.join(".SKILL.yaml.partial");
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, file)
}

fn report_details(converted: &Converted, needs: &mut Vec<Need>) {
    for need in &converted.needs {
        println!("  needs {} in skilld's environment: {}", need.name, need.why);
        needs.push(need.clone());
    }
    for note in &converted.notes {
        println!("  note: {note}");
    }
}

/// Every variable to set, once each.
fn print_needs(needs: &[Need]) {
    let names: BTreeMap<&str, ()> = needs.iter().map(|n| (n.name.as_str(), ())).collect();
    if names.is_empty() {
        return;
    }
    println!("\nSet these in the environment of `skilld serve` (or `skilld mcp`) before it starts:");
    for name in names.keys() {
        println!("  {name}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_names() {
        assert_eq!(skill_name("GitHub"), "github");
        assert_eq!(skill_name("my_server (prod)"), "my-server-prod");
        assert_eq!(skill_name("@scope/pkg"), "scope-pkg");
        assert_eq!(skill_name("~~~"), "server");
        assert_eq!(skill_name("Ünïcode"), "n-code");
        assert_eq!(skill_name(&"a".repeat(70)).len(), 64);
        assert_eq!(skill_name(&format!("{}-b", "a".repeat(63))), "a".repeat(63));
    }

    #[test]
    fn free_names() {
        let taken: HashSet<String> = ["github", "github-2", &"a".repeat(64)]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(free_name("git", &taken), "git");
        assert_eq!(free_name("github", &taken), "github-3");
        assert_eq!(
            free_name(&"a".repeat(64), &taken),
            format!("{}-2", "a".repeat(62))
        );
    }

    #[test]
    fn jsonc() {
        let text = "{\n  // a comment\n  \"servers\": {\"a\": {\"url\": \"http://x/*y*/\",},}, /* end */\n}";
        let json: Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"servers": {"a": {"url": "http://x/*y*/"}}})
        );
        let escaped = r#"{"a": "say \"//\", ok"}"#;
        assert_eq!(strip_jsonc(escaped), escaped);
    }

    #[test]
    fn clients() {
        let of = |p: &str, servers| Client::of(Path::new(p), servers);
        assert_eq!(
            of("/h/.config/Claude/claude_desktop_config.json", false),
            Client::ClaudeDesktop
        );
        assert_eq!(of("/p/.mcp.json", false), Client::ClaudeCode);
        assert_eq!(of("/h/.cursor/mcp.json", false), Client::Cursor);
        assert_eq!(of("/p/.vscode/mcp.json", true), Client::VsCode);
        assert_eq!(of("/tmp/x.json", true), Client::VsCode);
        assert_eq!(of("/tmp/x.json", false), Client::Unknown);
    }
}
