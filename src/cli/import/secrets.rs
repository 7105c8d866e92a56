//! What looks secret in an MCP client's config, and its `${…}`
//! placeholders: the heuristics that keep credentials out of the
//! manifests `skilld import` writes.

/// Parts of a variable or header name that mark its value as secret.
const SECRET_WORDS: [&str; 12] = [
    "TOKEN",
    "KEY",
    "SECRET",
    "PASSWORD",
    "PASS",
    "PASSWD",
    "AUTH",
    "AUTHORIZATION",
    "CREDENTIAL",
    "PAT",
    "APIKEY",
    "COOKIE",
];

/// Endings of a part that glues words together (`ACCESSTOKEN`).
const SECRET_ENDINGS: [&str; 4] = ["TOKEN", "SECRET", "PASSWORD", "APIKEY"];

/// How well-known credentials begin (GitHub, OpenAI, Slack, AWS, GitLab,
/// Google, Hugging Face, npm, PyPI, Stripe, and a JWT).
const CREDENTIAL_PREFIXES: [&str; 17] = [
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "sk-",
    "sk_live_",
    "rk_live_",
    "xox",
    "AKIA",
    "ASIA",
    "glpat-",
    "AIza",
    "hf_",
    "npm_",
    "pypi-",
];

/// Whether a variable or header name says its value is secret: one of
/// its parts (split at `_`, `-`, `.` and lower-to-upper case changes) is
/// a secret word, in any case, singular or plural.
pub fn is_secret_name(name: &str) -> bool {
    name_parts(name).iter().any(|part| {
        let singular = part.strip_suffix('S').unwrap_or(part);
        [part.as_str(), singular].iter().any(|p| {
            SECRET_WORDS.contains(p) || SECRET_ENDINGS.iter().any(|e| p.len() > e.len() && p.ends_with(e))
        })
    })
}

/// `name`'s parts, upper-cased: `githubApiKey` and `GITHUB_API_KEY` both
/// give `GITHUB`, `API`, `KEY`.
fn name_parts(name: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut prev_lower = false;
    for c in name.chars() {
        let boundary = !c.is_ascii_alphanumeric() || (prev_lower && c.is_ascii_uppercase());
        if boundary && parts.last().is_some_and(|p| !p.is_empty()) {
            parts.push(String::new());
        }
        if let Some(last) = parts.last_mut().filter(|_| c.is_ascii_alphanumeric()) {
            last.push(c.to_ascii_uppercase());
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
    }
    parts.retain(|p| !p.is_empty());
    parts
}

/// Whether a literal value looks like a credential: a well-known token
/// prefix, a URL carrying a password, a JWT, or a long random-looking
/// string.
pub fn looks_like_credential(value: &str) -> bool {
    let value = value.trim();
    has_credential_prefix(value) || url_has_password(value) || is_jwt(value) || is_high_entropy(value)
}

fn has_credential_prefix(value: &str) -> bool {
    value.len() >= 12
        && !value.contains(char::is_whitespace)
        && CREDENTIAL_PREFIXES.iter().any(|p| value.starts_with(p))
}

/// `scheme://user:password@host…`.
fn url_has_password(value: &str) -> bool {
    let Some((_, rest)) = value.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.split_once(':').is_some_and(|(_, pw)| !pw.is_empty()))
}

fn is_jwt(value: &str) -> bool {
    value.starts_with("eyJ") && value.split('.').count() == 3 && value.len() > 30
}

/// At least 20 letters and digits (separators aside) that change between
/// letter and digit often and spread over many symbols: an API key, not a
/// path, a URL, a package name or `my-server-2024`.
fn is_high_entropy(value: &str) -> bool {
    if value.contains(char::is_whitespace)
        || value.contains("://")
        || value.starts_with(['/', '~', '.', '@'])
        || value.contains(['/', '\\']) && !value.ends_with('=')
    {
        return false;
    }
    let core: Vec<char> = value.chars().filter(|c| !matches!(c, '-' | '_' | '.')).collect();
    core.len() >= 20
        && core
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
        && letter_digit_changes(&core) >= 4
        && entropy(&core) >= 3.3
}

fn letter_digit_changes(chars: &[char]) -> usize {
    chars
        .windows(2)
        .filter(|w| w[0].is_ascii_digit() != w[1].is_ascii_digit())
        .count()
}

/// Shannon entropy, in bits per character.
fn entropy(chars: &[char]) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for c in chars {
        *counts.entry(c).or_insert(0_u32) += 1;
    }
    let len = chars.len() as f64;
    counts
        .values()
        .map(|&n| {
            let p = f64::from(n) / len;
            -p * p.log2()
        })
        .sum()
}

/// An argument that carries a credential: one that looks like one, or
/// `--token=VALUE` / `--api-key VALUE` after a secret-named flag.
pub fn is_credential_arg(arg: &str, previous: Option<&str>) -> bool {
    if arg.contains("${") {
        return false;
    }
    if looks_like_credential(arg) {
        return true;
    }
    if let Some((flag, value)) = arg.split_once('=').filter(|(f, _)| f.starts_with('-')) {
        return is_secret_name(flag) && !value.is_empty();
    }
    previous.is_some_and(|p| p.starts_with('-') && !p.contains('=') && is_secret_name(p))
        && !arg.starts_with('-')
}

/// A `${…}` placeholder of a client's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placeholder {
    /// `${VAR}`, `${VAR:-default}` (Claude Code) or `${env:VAR}` (VS Code,
    /// Cursor).
    Env { name: String, default: Option<String> },
    /// `${input:ID}`: VS Code prompts for it.
    Input(String),
}

/// A config value: plain text, text then one placeholder (what a
/// reference with a `prefix` can say), or something else with
/// placeholders, which skilld cannot express.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Template {
    Plain(String),
    Prefixed {
        prefix: String,
        placeholder: Placeholder,
    },
    Other,
}

/// The variables VS Code and Cursor define themselves: not environment.
const EDITOR_VARIABLES: [&str; 8] = [
    "workspaceFolder",
    "workspaceFolderBasename",
    "workspaceRoot",
    "userHome",
    "pathSeparator",
    "/",
    "cwd",
    "file",
];

/// Reads `value` as a [`Template`].
pub fn parse_template(value: &str) -> Template {
    let Some(start) = value.find("${") else {
        return Template::Plain(value.to_owned());
    };
    let inner_start = start + 2;
    let Some(len) = value[inner_start..].find('}') else {
        return Template::Other;
    };
    let end = inner_start + len;
    if end + 1 != value.len() {
        return Template::Other;
    }
    match placeholder(&value[inner_start..end]) {
        Some(placeholder) => Template::Prefixed {
            prefix: value[..start].to_owned(),
            placeholder,
        },
        None => Template::Other,
    }
}

/// The inside of `${…}`.
fn placeholder(inner: &str) -> Option<Placeholder> {
    if let Some(id) = inner.strip_prefix("input:") {
        return (!id.is_empty()).then(|| Placeholder::Input(id.to_owned()));
    }
    let (name, default) = match inner.strip_prefix("env:") {
        Some(name) => (name, None),
        None => match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default.to_owned())),
            None => (inner, None),
        },
    };
    (is_env_name(name) && !EDITOR_VARIABLES.contains(&name)).then(|| Placeholder::Env {
        name: name.to_owned(),
        default,
    })
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `text` as an environment variable's name: upper case, runs of other
/// characters as one `_` (`github-token` → `GITHUB_TOKEN`).
pub fn upper_snake(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_uppercase());
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_end_matches('_').to_owned();
    match out.chars().next() {
        None => "VALUE".to_owned(),
        Some(c) if c.is_ascii_digit() => format!("V_{out}"),
        Some(_) => out,
    }
}

/// The name a reference may use: skilld keeps `SKILLD_*` to itself, so
/// such a name gets `UPSTREAM_` in front.
pub fn reference_name(name: &str) -> String {
    if name.to_ascii_uppercase().starts_with("SKILLD_") {
        format!("UPSTREAM_{name}")
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for name in [
            "GITHUB_PERSONAL_ACCESS_TOKEN",
            "API_KEY",
            "apiKey",
            "OPENAI_APIKEY",
            "SLACK_BOT_TOKEN",
            "DB_PASSWORD",
            "db-pass",
            "BRAVE_API_KEYS",
            "CLIENT_SECRET",
            "GITHUB_PAT",
            "X-Auth",
            "Authorization",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "ACCESSTOKEN",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "MONKEY",
            "AUTHOR",
            "PASSAGE",
            "LOG_LEVEL",
            "PWD",
            "TOKENIZER",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn credential_values() {
        for value in [
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "sk-proj-abc123def456ghi789",
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKl",
            "AKIAIOSFODNN7EXAMPLE",
            "postgresql://user:s3cret@localhost:5432/db",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "a8Fk2Lq9ZxP0w7Rt3Yu6Io1Pm4",
            "123e4567-e89b-12d3-a456-426614174000",
        ] {
            assert!(looks_like_credential(value), "{value}");
        }
        for value in [
            "debug",
            "/Users/me/Projects/my-app-2024",
            "@modelcontextprotocol/server-filesystem",
            "https://api.example.com/mcp",
            "postgresql://localhost:5432/db",
            "my-server-2024-production-db",
            "sk-x",
            "true",
            "Quick brown fox 1 2 3 4 5 6 7",
        ] {
            assert!(!looks_like_credential(value), "{value}");
        }
    }

    #[test]
    fn credential_args() {
        assert!(is_credential_arg("--api-key=abc", None));
        assert!(is_credential_arg("hunter2", Some("--password")));
        assert!(is_credential_arg(
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            None
        ));
        assert!(!is_credential_arg("--token=${TOKEN}", None));
        assert!(!is_credential_arg("/data", Some("--root")));
        assert!(!is_credential_arg("--verbose", Some("--token-file")));
        assert!(!is_credential_arg("-y", None));
    }

    #[test]
    fn templates() {
        let env = |name: &str, default: Option<&str>| Placeholder::Env {
            name: name.to_owned(),
            default: default.map(str::to_owned),
        };
        let prefixed = |prefix: &str, placeholder| Template::Prefixed {
            prefix: prefix.to_owned(),
            placeholder,
        };
        assert_eq!(parse_template("plain"), Template::Plain("plain".to_owned()));
        assert_eq!(parse_template("${TOKEN}"), prefixed("", env("TOKEN", None)));
        assert_eq!(
            parse_template("Bearer ${TOKEN}"),
            prefixed("Bearer ", env("TOKEN", None))
        );
        assert_eq!(parse_template("${env:GH}"), prefixed("", env("GH", None)));
        assert_eq!(
            parse_template("${HOST:-localhost}"),
            prefixed("", env("HOST", Some("localhost")))
        );
        assert_eq!(
            parse_template("${input:github-token}"),
            prefixed("", Placeholder::Input("github-token".to_owned()))
        );
        for other in [
            "${HOME}/data",
            "${workspaceFolder}",
            "${A}${B}",
            "${unclosed",
            "${}",
            "${env:}",
        ] {
            assert_eq!(parse_template(other), Template::Other, "{other}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(upper_snake("github-token"), "GITHUB_TOKEN");
        assert_eq!(upper_snake("my server / X-Api-Key"), "MY_SERVER_X_API_KEY");
        assert_eq!(upper_snake("2fa"), "V_2FA");
        assert_eq!(upper_snake("--"), "VALUE");
        assert_eq!(reference_name("SKILLD_TOKEN"), "UPSTREAM_SKILLD_TOKEN");
        assert_eq!(reference_name("skilld_x"), "UPSTREAM_skilld_x");
        assert_eq!(reference_name("GITHUB_TOKEN"), "GITHUB_TOKEN");
    }
}
