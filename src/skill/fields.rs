//! Frontmatter fields: the values of the YAML mapping read into the model,
//! with a diagnostic (and a default) for each one that is wrong.

use super::diag::Code;
use super::files::PathCache;
use super::model::*;
use super::parse::Parse;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Descriptions are cut to this many characters (the Agent Skills
/// specification's limit), at a word boundary.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Default per-skill timeout (`docs/design.md` §3).
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Commands that skills may not take as their alias.
pub const BUILTIN_COMMANDS: [&str; 3] = ["skills", "skill", "help"];
/// The permissions a skill may declare (seed 002); any other is an error.
pub const PERMISSIONS: [&str; 10] = [
    "file:read",
    "file:write",
    "shell:exec",
    "net:fetch",
    "llm:call",
    "git:read",
    "git:write",
    "env:read",
    "env:write",
    "skill:invoke",
];

/// Frontmatter keys that some dialect defines; anything else is warned about.
const KNOWN_KEYS: &[&str] = &[
    "name",
    "version",
    "description",
    "summary",
    "author",
    "license",
    "tags",
    "modes",
    "read_only",
    "always_ask",
    "timeout",
    "network",
    "lang",
    "image",
    "resources",
    "invocation_mode",
    "command",
    "command_tool",
    "requires_tools",
    "eligibility",
    "triggers",
    // What `skilld test` runs (docs/skills.md, "Examples").
    "examples",
    "permissions",
    "homepage",
    // The Agent Skills specification's own.
    "compatibility",
    "metadata",
    "allowed-tools",
    // Which scripts are tools, overriding the rule (docs/skills.md).
    "script_tools",
    // Whether its calls answer MCP clients with a task (docs/mcp.md).
    "tasks",
];

/// The frontmatter fields every dialect shares, as the skill keeps them.
pub(super) struct Fields {
    pub(super) version: Option<String>,
    pub(super) description: String,
    pub(super) author: Option<String>,
    pub(super) license: Option<String>,
    pub(super) tags: Vec<String>,
    pub(super) modes: Vec<String>,
    pub(super) read_only: bool,
    pub(super) always_ask: bool,
    pub(super) network: bool,
    pub(super) network_allow: Option<crate::egress::AllowList>,
    pub(super) timeout_secs: u64,
    pub(super) task_support: TaskSupport,
    pub(super) resources: Resources,
    pub(super) lang: Option<String>,
    pub(super) invocation_mode: InvocationMode,
    pub(super) command: Option<String>,
    pub(super) command_tool: Option<String>,
    pub(super) requires_tools: Vec<String>,
    pub(super) eligibility: Eligibility,
    pub(super) triggers: Triggers,
    pub(super) examples: super::examples::Examples,
    pub(super) permissions: Vec<String>,
    pub(super) compatibility: Option<String>,
    pub(super) allowed_tools: Vec<String>,
    pub(super) metadata: BTreeMap<String, String>,
    pub(super) script_tools: Option<Vec<String>>,
    /// A manifest's `security_rules`, read with the fields so the skill is
    /// made with them.
    pub(super) security_rules: Vec<super::security_rule::SecurityRule>,
}

/// Where a skill was read from, for [`Fields::into_skill`].
pub(super) struct Origin<'a> {
    pub(super) name: &'a str,
    pub(super) dialect: Dialect,
    pub(super) dir: &'a std::path::Path,
    /// An installed version's dependencies, when it has some.
    pub(super) deps: Option<std::path::PathBuf>,
    pub(super) definition: std::path::PathBuf,
    pub(super) source: &'a str,
    pub(super) trust: Trust,
    /// `network: true` keeps the host's network
    /// ([`SkillRules::network_unrestricted`](crate::skill::SkillRules::network_unrestricted));
    /// otherwise it is an empty list, every destination asked for.
    pub(super) network_unrestricted: bool,
}

impl Fields {
    /// The skill these fields describe, read from `origin`; its
    /// instructions, tools, files, hash and the manifest's parts are for
    /// the dialect's loader to fill in.
    pub(super) fn into_skill(self, origin: Origin<'_>) -> Skill {
        Skill {
            name: origin.name.to_owned(),
            version: self.version,
            description: self.description,
            author: self.author,
            license: self.license,
            tags: self.tags,
            instructions: String::new(),
            modes: self.modes,
            read_only: self.read_only,
            always_ask: self.always_ask,
            timeout_secs: self.timeout_secs,
            task_support: self.task_support,
            network: self.network,
            network_allow: match self.network_allow {
                None if self.network && !origin.network_unrestricted => {
                    Some(crate::egress::AllowList::default())
                }
                list => list,
            },
            resources: self.resources,
            lang: self.lang,
            invocation_mode: self.invocation_mode,
            command: self.command,
            command_tool: self.command_tool,
            requires_tools: self.requires_tools,
            eligibility: self.eligibility,
            triggers: self.triggers,
            examples: self.examples,
            permissions: self.permissions,
            compatibility: self.compatibility,
            allowed_tools: self.allowed_tools,
            metadata: self.metadata,
            dialect: origin.dialect,
            types: Vec::new(),
            backend: None,
            upstream: None,
            hooks: Vec::new(),
            security_rules: self.security_rules,
            scanners: Vec::new(),
            needs: Vec::new(),
            dependencies: Vec::new(),
            dir: origin.dir.to_path_buf(),
            deps: origin.deps,
            deps_wait: None,
            definition: origin.definition,
            files: Vec::new(),
            source: origin.source.to_owned(),
            trust: origin.trust,
            hash: String::new(),
            fingerprint: std::sync::Arc::default(),
            output_schemas: Default::default(),
            tools: Vec::new(),
            warnings: Vec::new(),
            listing: None,
        }
    }
}

impl Parse<'_, '_> {
    pub(super) fn unknown_keys(&mut self, fm: &Map<String, Value>) {
        self.unknown_keys_beside(fm, &[]);
    }

    /// Warns of keys neither in [`KNOWN_KEYS`] nor in `more`.
    pub(super) fn unknown_keys_beside(&mut self, fm: &Map<String, Value>, more: &[&str]) {
        for key in fm.keys() {
            if !KNOWN_KEYS.contains(&key.as_str()) && !more.contains(&key.as_str()) {
                let pos = self.key_pos(key);
                self.warn(
                    Code::UnknownField,
                    pos,
                    format!("unknown frontmatter field '{key}' is ignored"),
                );
            }
        }
    }

    /// Reads the shared fields; which are required depends on the dialect.
    /// The order of the reads is the order of the diagnostics.
    pub(super) fn fields(
        &mut self,
        fm: &Map<String, Value>,
        name: &str,
        dialect: Dialect,
        max_timeout_secs: u64,
        path: &PathCache,
    ) -> Fields {
        self.identity(fm, name, dialect);
        let metadata = self.metadata(fm);
        let version = self
            .version(fm, dialect)
            .or_else(|| metadata.get("version").cloned());
        let description = self.description(fm, dialect);
        let author = self
            .string(fm, "author")
            .or_else(|| metadata.get("author").cloned());
        let license = self.string(fm, "license");
        let tags = self.list(fm, "tags", true);
        let modes = self.modes(fm);
        let read_only = self.boolean(fm, "read_only");
        let always_ask = self.boolean(fm, "always_ask");
        let (network, network_allow) = self.network(fm);
        let timeout_secs = self.timeout(fm, max_timeout_secs);
        let task_support = self.task_support(fm);
        let resources = self.resources(fm);
        let lang = self.lang(fm);
        // Read only to check their type: the model keeps neither.
        let _image = self.string(fm, "image");
        let _homepage = self.string(fm, "homepage");
        let invocation_mode = self.invocation_mode(fm);
        let command = self.command(fm);
        let command_tool = self.command_tool(fm, invocation_mode);
        let requires_tools = self.list(fm, "requires_tools", false);
        let eligibility = self.eligibility(fm);
        let triggers = self.triggers(fm);
        let examples = self.examples(fm);
        let permissions = self.permissions(fm);
        let compatibility = self.string(fm, "compatibility");
        let allowed_tools = self.allowed_tools(fm);
        let script_tools = fm
            .contains_key("script_tools")
            .then(|| self.list(fm, "script_tools", false));
        self.check_eligible(&eligibility, path);
        let security_rules = if dialect == Dialect::Manifest {
            self.security_rules(fm)
        } else {
            Vec::new()
        };
        Fields {
            version,
            description,
            author,
            license,
            tags,
            modes,
            read_only,
            always_ask,
            network,
            network_allow,
            timeout_secs,
            task_support,
            resources,
            lang,
            invocation_mode,
            command,
            command_tool,
            requires_tools,
            eligibility,
            triggers,
            examples,
            permissions,
            compatibility,
            allowed_tools,
            metadata,
            script_tools,
            security_rules,
        }
    }

    /// `metadata`: a map of strings (the Agent Skills specification's);
    /// `version` and `author` there stand in for the top-level fields.
    fn metadata(&mut self, fm: &Map<String, Value>) -> BTreeMap<String, String> {
        let opt_out = super::dialect::scripts::OPT_OUT_KEY;
        if let Some(value) = fm.get("metadata").and_then(|m| m.get(opt_out))
            && !value
                .as_str()
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
        {
            let value = value.clone();
            self.invalid(
                "metadata",
                &format!(
                    "a map whose {opt_out} is 'none' (the only value it takes: the scripts are not tools)"
                ),
                &value,
            );
        }
        match fm.get("metadata") {
            None | Some(Value::Null) => Default::default(),
            Some(Value::Object(m)) => m
                .iter()
                .filter_map(|(k, v)| match v {
                    Value::String(s) => Some((k.clone(), s.clone())),
                    Value::Number(n) => Some((k.clone(), n.to_string())),
                    Value::Bool(b) => Some((k.clone(), b.to_string())),
                    _ => None,
                })
                .collect(),
            Some(other) => {
                let other = other.clone();
                self.invalid("metadata", "a map of strings", &other);
                Default::default()
            }
        }
    }

    /// `allowed-tools`: the tools the skill expects its agent to have, as a
    /// space-separated string (the specification's form) or a list.
    fn allowed_tools(&mut self, fm: &Map<String, Value>) -> Vec<String> {
        match fm.get("allowed-tools") {
            Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            Some(Value::Array(_)) => self.list(fm, "allowed-tools", false),
            None | Some(Value::Null) => Vec::new(),
            Some(other) => {
                let other = other.clone();
                self.invalid("allowed-tools", "a string or a list of strings", &other);
                Vec::new()
            }
        }
    }

    /// The frontmatter's name must be the directory's, which is the name.
    fn identity(&mut self, fm: &Map<String, Value>, name: &str, dialect: Dialect) {
        let fm_name = self.string(fm, "name");
        if let Some(fm_name) = &fm_name {
            if fm_name != name {
                let pos = self.key_pos("name");
                self.error(
                    Code::NameMismatch,
                    pos,
                    format!("frontmatter name '{fm_name}' differs from the directory name '{name}'; rename one to match"),
                );
            }
        } else if matches!(
            dialect,
            Dialect::Markdown | Dialect::Entrypoint | Dialect::Scripts | Dialect::Manifest
        ) && !fm.contains_key("name")
        {
            self.missing("name", dialect);
        }
    }

    fn version(&mut self, fm: &Map<String, Value>, dialect: Dialect) -> Option<String> {
        match fm.get("version") {
            None | Some(Value::Null) => {
                if matches!(
                    dialect,
                    Dialect::Markdown | Dialect::Entrypoint | Dialect::Manifest
                ) {
                    self.missing("version", dialect);
                }
                None
            }
            Some(v) => {
                let s = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    other => other.to_string(),
                };
                if semver::Version::parse(s.trim()).is_err() {
                    let pos = self.key_pos("version");
                    self.error(
                        Code::InvalidVersion,
                        pos,
                        format!("version '{s}' is not a semantic version such as 1.0.0"),
                    );
                }
                Some(s.trim().to_owned())
            }
        }
    }

    /// `description`, or for a prompt skill `summary`; cut to
    /// [`MAX_DESCRIPTION_CHARS`].
    fn description(&mut self, fm: &Map<String, Value>, dialect: Dialect) -> String {
        let mut description = self.string(fm, "description");
        if description.is_none() && dialect == Dialect::Prompt {
            description = self.string(fm, "summary");
        }
        match description.filter(|d| !d.trim().is_empty()) {
            Some(d) => self.truncate_description(d.trim()),
            None => {
                if dialect == Dialect::Prompt {
                    self.warn(
                        Code::MissingField,
                        None,
                        "no description: agents choose skills by their descriptions, and will not find this one"
                            .to_owned(),
                    );
                } else {
                    self.missing("description", dialect);
                }
                String::new()
            }
        }
    }

    fn truncate_description(&mut self, d: &str) -> String {
        if d.chars().count() <= MAX_DESCRIPTION_CHARS {
            return d.to_owned();
        }
        let pos = self.key_pos("description").or_else(|| self.key_pos("summary"));
        let cut = cut_at_word(d, MAX_DESCRIPTION_CHARS);
        self.warn(
            Code::DescriptionTruncated,
            pos,
            format!(
                "description is longer than {MAX_DESCRIPTION_CHARS} characters and was cut after '{}'",
                cut.split_whitespace().last().unwrap_or("")
            ),
        );
        cut
    }

    /// The modes the skill serves in; none (or an empty list) is `Global`.
    fn modes(&mut self, fm: &Map<String, Value>) -> Vec<String> {
        match fm.get("modes") {
            None | Some(Value::Null) => vec!["Global".to_owned()],
            Some(_) => {
                let m = self.list(fm, "modes", false);
                if m.is_empty() {
                    vec!["Global".to_owned()]
                } else {
                    m
                }
            }
        }
    }

    fn lang(&mut self, fm: &Map<String, Value>) -> Option<String> {
        let lang = self.string(fm, "lang");
        if let Some(l) = &lang
            && !["python", "node", "bash"].contains(&l.as_str())
        {
            let pos = self.key_pos("lang");
            self.error(
                Code::InvalidField,
                pos,
                format!("lang '{l}' is not one of python, node, bash"),
            );
        }
        lang
    }

    /// `tasks`: whether a call answers an MCP client that has tasks with
    /// one (`optional`), must (`required`), or never does (`forbidden`,
    /// the default).
    fn task_support(&mut self, fm: &Map<String, Value>) -> TaskSupport {
        match self.string(fm, "tasks").as_deref() {
            None | Some("forbidden") => TaskSupport::Forbidden,
            Some("optional") => TaskSupport::Optional,
            Some("required") => TaskSupport::Required,
            Some(other) => {
                let pos = self.key_pos("tasks");
                self.error(
                    Code::InvalidField,
                    pos,
                    format!("tasks '{other}' is not one of forbidden, optional, required"),
                );
                TaskSupport::Forbidden
            }
        }
    }

    fn invocation_mode(&mut self, fm: &Map<String, Value>) -> InvocationMode {
        match self.string(fm, "invocation_mode").as_deref() {
            None | Some("prompt_rewrite") => InvocationMode::PromptRewrite,
            Some("tool_dispatch") => InvocationMode::ToolDispatch,
            Some(other) => {
                let pos = self.key_pos("invocation_mode");
                self.error(
                    Code::InvalidField,
                    pos,
                    format!("invocation_mode '{other}' is not one of prompt_rewrite, tool_dispatch"),
                );
                InvocationMode::PromptRewrite
            }
        }
    }

    /// The skill's slash-command alias, which must not shadow a built-in.
    fn command(&mut self, fm: &Map<String, Value>) -> Option<String> {
        let command = self.string(fm, "command");
        if let Some(c) = &command {
            let pos = self.key_pos("command");
            if c.is_empty()
                || !c
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            {
                self.error(
                    Code::InvalidField,
                    pos,
                    format!("command '{c}' must match ^[a-z0-9_-]+$"),
                );
            } else if BUILTIN_COMMANDS.contains(&c.as_str()) {
                self.error(
                    Code::CommandCollision,
                    pos,
                    format!("command '/{c}' collides with the built-in command of that name; choose another"),
                );
            }
        }
        command
    }

    fn command_tool(&mut self, fm: &Map<String, Value>, mode: InvocationMode) -> Option<String> {
        let command_tool = self.string(fm, "command_tool");
        if mode == InvocationMode::ToolDispatch && command_tool.is_none() {
            let pos = self.key_pos("invocation_mode");
            self.error(
                Code::MissingCommandTool,
                pos,
                "invocation_mode tool_dispatch needs a command_tool naming the tool to invoke",
            );
        }
        command_tool
    }

    fn string(&mut self, fm: &Map<String, Value>, key: &str) -> Option<String> {
        match fm.get(key)? {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            other => {
                let other = other.clone();
                self.invalid(key, "a string", &other);
                None
            }
        }
    }

    fn boolean(&mut self, fm: &Map<String, Value>, key: &str) -> bool {
        match fm.get(key) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                let other = other.clone();
                self.invalid(key, "true or false", &other);
                false
            }
        }
    }

    /// `network`: `true`, `false`, or `{allow: [patterns]}` (issue 42),
    /// whose runs reach only those destinations, through the egress proxy.
    fn network(&mut self, fm: &Map<String, Value>) -> (bool, Option<crate::egress::AllowList>) {
        let Some(Value::Object(map)) = fm.get("network") else {
            return (self.boolean(fm, "network"), None);
        };
        let expected = "true, false, or {allow: [host patterns]}";
        let texts = match (map.get("allow"), map.len()) {
            (Some(Value::Array(items)), 1) => items.iter().map(Value::as_str).collect::<Option<Vec<_>>>(),
            _ => None,
        };
        let Some(texts) = texts else {
            let got = Value::Object(map.clone());
            self.invalid("network", expected, &got);
            return (false, None);
        };
        match crate::egress::AllowList::parse(texts) {
            Ok(list) => (true, Some(list)),
            Err(errors) => {
                let pos = self.key_pos("network");
                for e in errors {
                    self.error(Code::InvalidField, pos, format!("'network.allow': {e}"));
                }
                (false, None)
            }
        }
    }

    /// `permissions`: each one of [`PERMISSIONS`].
    fn permissions(&mut self, fm: &Map<String, Value>) -> Vec<String> {
        let permissions = self.list(fm, "permissions", false);
        for unknown in permissions.iter().filter(|p| !PERMISSIONS.contains(&p.as_str())) {
            let pos = self.key_pos("permissions");
            self.error(
                Code::InvalidPermission,
                pos,
                format!(
                    "unknown permission '{unknown}'; a skill may ask for {}",
                    PERMISSIONS.join(", ")
                ),
            );
        }
        permissions
    }

    /// A list of strings; `comma` also accepts one comma-separated string.
    fn list(&mut self, fm: &Map<String, Value>, key: &str, comma: bool) -> Vec<String> {
        self.list_in(fm.get(key), key, comma)
    }

    pub(super) fn list_in(&mut self, value: Option<&Value>, key: &str, comma: bool) -> Vec<String> {
        match value {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) if comma => s
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        Value::Number(n) => out.push(n.to_string()),
                        other => {
                            let other = other.clone();
                            self.invalid(key, "a list of strings", &other);
                            return Vec::new();
                        }
                    }
                }
                out
            }
            Some(other) => {
                let other = other.clone();
                self.invalid(key, "a list of strings", &other);
                Vec::new()
            }
        }
    }

    fn timeout(&mut self, fm: &Map<String, Value>, max: u64) -> u64 {
        let secs = match fm.get("timeout") {
            None | Some(Value::Null) => return DEFAULT_TIMEOUT_SECS.min(max),
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(s)) => parse_duration_secs(s),
            Some(_) => None,
        };
        match secs {
            Some(s) if s > 0 => s.min(max),
            _ => {
                let got = fm.get("timeout").cloned().unwrap_or(Value::Null);
                self.invalid(
                    "timeout",
                    "a positive number of seconds or a duration such as 60s or 2m",
                    &got,
                );
                DEFAULT_TIMEOUT_SECS.min(max)
            }
        }
    }

    fn resources(&mut self, fm: &Map<String, Value>) -> Resources {
        let mut r = Resources::default();
        match fm.get("resources") {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                if let Some(m) = map.get("memory").filter(|v| !v.is_null()) {
                    r.memory_bytes = match m {
                        Value::String(s) => parse_bytes(s),
                        Value::Number(n) => n.as_u64(),
                        _ => None,
                    };
                    if r.memory_bytes.is_none_or(|b| b == 0) {
                        let m = m.clone();
                        self.invalid(
                            "resources",
                            "a memory size such as 256Mi or 1Gi in resources.memory",
                            &m,
                        );
                    }
                }
                if let Some(c) = map.get("cpu").filter(|v| !v.is_null()) {
                    r.cpu = match c {
                        Value::String(s) => s.trim().parse::<f64>().ok(),
                        Value::Number(n) => n.as_f64(),
                        _ => None,
                    }
                    .filter(|c| c.is_finite() && *c > 0.0);
                    if r.cpu.is_none() {
                        let c = c.clone();
                        self.invalid("resources", "a positive number of cores in resources.cpu", &c);
                    }
                }
            }
            Some(other) => {
                let other = other.clone();
                self.invalid("resources", "a mapping with memory and cpu", &other);
            }
        }
        r
    }

    fn eligibility(&mut self, fm: &Map<String, Value>) -> Eligibility {
        match fm.get("eligibility") {
            None | Some(Value::Null) => Eligibility::default(),
            Some(Value::Object(map)) => Eligibility {
                os: self.list_in(map.get("os"), "eligibility", false),
                env: self.list_in(map.get("env"), "eligibility", false),
                binaries: self.list_in(map.get("binaries"), "eligibility", false),
            },
            Some(other) => {
                let other = other.clone();
                self.invalid("eligibility", "a mapping with os, env and binaries", &other);
                Eligibility::default()
            }
        }
    }

    /// `triggers.files`: globs, each checked now so that a bad one is
    /// said at load, not silently never matching.
    fn file_globs(&mut self, value: Option<&Value>) -> Vec<String> {
        let globs = self.list_in(value, "triggers", false);
        for glob in &globs {
            if let Err(e) = globset::Glob::new(glob) {
                let pos = self.key_pos("triggers");
                self.warn(
                    Code::InvalidTrigger,
                    pos,
                    format!(
                        "the file trigger '{glob}' is not a glob ({}); it never matches",
                        e.kind()
                    ),
                );
            }
        }
        globs
    }

    fn triggers(&mut self, fm: &Map<String, Value>) -> Triggers {
        match fm.get("triggers") {
            None | Some(Value::Null) => Triggers::default(),
            Some(Value::Object(map)) => Triggers {
                files: self.file_globs(map.get("files")),
                keywords: self.list_in(map.get("keywords"), "triggers", false),
                languages: self.list_in(map.get("languages"), "triggers", false),
                modes: self.list_in(map.get("modes"), "triggers", false),
            },
            Some(other) => {
                let other = other.clone();
                self.invalid(
                    "triggers",
                    "a mapping with files, keywords, languages and modes",
                    &other,
                );
                Triggers::default()
            }
        }
    }

    /// The skill is excluded when a condition fails here.
    fn check_eligible(&mut self, e: &Eligibility, path: &PathCache) {
        let pos = self.key_pos("eligibility");
        let os = current_os();
        if !e.os.is_empty() && !e.os.iter().any(|o| o == os) {
            self.error(
                Code::Ineligible,
                pos,
                format!(
                    "eligibility.os is [{}] and this server runs on {os}",
                    e.os.join(", ")
                ),
            );
        }
        let missing_env: Vec<&str> = e
            .env
            .iter()
            .filter(|v| std::env::var_os(v.as_str()).is_none())
            .map(String::as_str)
            .collect();
        if !missing_env.is_empty() {
            self.error(
                Code::Ineligible,
                pos,
                format!(
                    "eligibility.env needs {} set in the server's environment",
                    missing_env.join(", ")
                ),
            );
        }
        let missing_bin: Vec<&str> = e
            .binaries
            .iter()
            .filter(|b| !path.has(b))
            .map(String::as_str)
            .collect();
        if !missing_bin.is_empty() {
            self.error(
                Code::Ineligible,
                pos,
                format!("eligibility.binaries needs {} on PATH", missing_bin.join(", ")),
            );
        }
    }
}

/// The names `eligibility.os` takes for operating systems.
pub fn current_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

/// `60`, `60s`, `2m`, `1h`, `1m30s` → seconds.
pub fn parse_duration_secs(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Some(n);
    }
    let mut total: u64 = 0;
    let mut num = String::new();
    let mut any = false;
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num.parse().ok()?;
        num.clear();
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
        any = true;
    }
    (num.is_empty() && any).then_some(total)
}

/// At most `max` characters of `text`, ending at a word boundary when
/// there is one (a word is not cut in half), without trailing punctuation
/// that would read as a finished sentence's.
fn cut_at_word(text: &str, max: usize) -> String {
    let end = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
    let head = &text[..end];
    let next_is_space = text[end..].chars().next().is_none_or(char::is_whitespace);
    let cut = if next_is_space {
        head
    } else {
        head.rfind(char::is_whitespace).map_or(head, |i| &head[..i])
    };
    cut.trim_end_matches(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == ':')
        .to_owned()
}

/// `256Mi`, `1Gi`, `512M`, `1024` → bytes.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult: f64 = match unit.trim() {
        "" => 1.0,
        "K" | "k" | "KB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "Ki" | "KiB" => 1024.0,
        "Mi" | "MiB" => 1024.0 * 1024.0,
        "Gi" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = n * mult;
    (bytes.is_finite() && (1.0..1.8e19).contains(&bytes)).then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration_secs("60s"), Some(60));
        assert_eq!(parse_duration_secs("2m"), Some(120));
        assert_eq!(parse_duration_secs("1m30s"), Some(90));
        assert_eq!(parse_duration_secs("5x"), None);
        assert_eq!(parse_duration_secs("s"), None);
        assert_eq!(parse_bytes("256Mi"), Some(256 * 1024 * 1024));
        assert_eq!(parse_bytes("1G"), Some(1_000_000_000));
        assert_eq!(parse_bytes("lots"), None);
    }
}
