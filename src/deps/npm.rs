//! `package.json` and `package-lock.json` as npm reads them, held to
//! registry packages: every dependency a package name with a semver range
//! (or a dist-tag such as `latest`), never `file:`, `link:`, `git…`,
//! `github:`, `workspace:`, an `npm:` alias, a URL, a path or a GitHub
//! `owner/repo`; no `workspaces`; and a lockfile whose every package comes
//! from the configured registry with an integrity hash.
//!
//! The lockfile is checked rather than ignored: it pins each package to
//! one tarball and hash, which is worth keeping, and a check of its
//! `resolved` URLs is exact, since npm fetches just those.

use super::{PACKAGE, PACKAGE_LOCK, Refusal, line_of};
use serde_json::{Map, Value};

/// The maps of `package.json` whose values are version specs.
const DEPENDENCY_MAPS: [&str; 4] = [
    "dependencies",
    "optionalDependencies",
    "peerDependencies",
    "devDependencies",
];

/// The lists of `package.json` that name packages.
const NAME_LISTS: [&str; 2] = ["bundleDependencies", "bundledDependencies"];

/// How deep `overrides` may nest.
const MAX_NESTING: usize = 16;

/// The longest package name npm publishes.
const MAX_NAME: usize = 214;

/// Every dependency of `package.json` that is not a registry package.
pub(super) fn check_package(text: &str) -> Vec<Refusal> {
    let refuse = |needle: &str, why: String| Refusal::new(PACKAGE, text, line_of(text, needle), why);
    let root = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(root)) => root,
        Ok(_) => return vec![refuse("", "it is not a JSON object".to_owned())],
        Err(e) => {
            return vec![Refusal::new(
                PACKAGE,
                text,
                line(e.line()),
                format!("it is not JSON: {e}"),
            )];
        }
    };
    let mut refused = Vec::new();
    if root.contains_key("workspaces") {
        let why = "`workspaces` installs local folders as packages: only registry packages are installed";
        refused.push(refuse("\"workspaces\"", why.to_owned()));
    }
    for map in DEPENDENCY_MAPS {
        match root.get(map) {
            None => {}
            Some(Value::Object(deps)) => {
                for (name, spec) in deps {
                    if let Some(why) = dependency(name, spec) {
                        refused.push(refuse(&format!("\"{name}\""), format!("{map}.{name}: {why}")));
                    }
                }
            }
            Some(_) => refused.push(refuse(&format!("\"{map}\""), format!("`{map}` is not an object"))),
        }
    }
    for list in NAME_LISTS {
        if let Some(why) = root.get(list).and_then(name_list) {
            refused.push(refuse(&format!("\"{list}\""), format!("{list}: {why}")));
        }
    }
    if let Some(overrides) = root.get("overrides") {
        let mut found = Vec::new();
        overriding(overrides, "overrides", 0, &mut found);
        refused.extend(
            found
                .into_iter()
                .map(|(at, why)| refuse(&at.needle, format!("{}: {why}", at.path))),
        );
    }
    refused
}

fn line(n: usize) -> u32 {
    u32::try_from(n.max(1)).unwrap_or(u32::MAX)
}

/// Why `name: spec` is not a registry package, if it is not.
fn dependency(name: &str, spec: &Value) -> Option<String> {
    if !is_package_name(name) {
        return Some(format!("`{name}` is not a package name"));
    }
    match spec {
        Value::String(spec) => registry_spec(spec).err(),
        _ => Some("its version is not a string".to_owned()),
    }
}

/// `true`, `false`, or a list of package names.
fn name_list(value: &Value) -> Option<String> {
    match value {
        Value::Bool(_) => None,
        Value::Array(names) => names
            .iter()
            .find(|n| !n.as_str().is_some_and(is_package_name))
            .map(|n| format!("{n} is not a package name")),
        _ => Some("it is not a list of package names".to_owned()),
    }
}

/// Where in `package.json` an override is.
struct At {
    path: String,
    needle: String,
}

/// Every override that is not a registry spec (or `$name`, a reference to
/// one of the dependencies), under keys that are package names, `name@range`
/// or `.`.
fn overriding(value: &Value, path: &str, depth: usize, out: &mut Vec<(At, String)>) {
    let at = |key: &str| At {
        path: format!("{path}.{key}"),
        needle: format!("\"{key}\""),
    };
    let here = || At {
        path: path.to_owned(),
        needle: "\"overrides\"".to_owned(),
    };
    let Value::Object(map) = value else {
        out.push((here(), "it is not an object".to_owned()));
        return;
    };
    if depth >= MAX_NESTING {
        out.push((here(), "it nests too deep".to_owned()));
        return;
    }
    for (key, value) in map {
        if let Some(why) = override_key(key) {
            out.push((at(key), why));
            continue;
        }
        match value {
            Value::Object(_) => overriding(value, &format!("{path}.{key}"), depth + 1, out),
            Value::String(spec) => {
                let reference = spec.strip_prefix('$').is_some_and(is_package_name);
                if let (false, Err(why)) = (reference, registry_spec(spec)) {
                    out.push((at(key), why));
                }
            }
            _ => out.push((at(key), "an override is a version or an object".to_owned())),
        }
    }
}

fn override_key(key: &str) -> Option<String> {
    if key == "." || is_package_name(key) {
        return None;
    }
    // `name@range`; a scoped name begins with its own `@`.
    let split = key.get(1..).and_then(|rest| rest.rfind('@')).map(|i| i + 1);
    match split {
        Some(i) if is_package_name(&key[..i]) => registry_spec(&key[i + 1..]).err(),
        _ => Some(format!("`{key}` is not a package name")),
    }
}

/// A package name as npm takes it, `@scope/` included.
fn is_package_name(name: &str) -> bool {
    let part = |p: &str, first_ok: fn(u8) -> bool| {
        let mut bytes = p.bytes();
        bytes.next().is_some_and(first_ok)
            && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
    };
    let first = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'~');
    let bare = match name.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, bare)) if part(scope, first) => bare,
            _ => return false,
        },
        None => name,
    };
    name.len() <= MAX_NAME && part(bare, first)
}

/// A semver range (`^1.2.3`, `~1.2`, `>=1 <2 || 3.x`, `1.2.3 - 2`, `*`,
/// empty) or a dist-tag (`latest`), which npm looks up in the registry;
/// anything else, with why.
fn registry_spec(spec: &str) -> Result<(), String> {
    let spec = spec.trim();
    if is_tag(spec) || spec.split("||").all(|range| is_range(range.trim())) {
        return Ok(());
    }
    let lower = spec.to_ascii_lowercase();
    let source = [
        "file:",
        "link:",
        "workspace:",
        "npm:",
        "git",
        "github:",
        "gitlab:",
        "bitbucket:",
        "gist:",
        "http:",
        "https:",
    ]
    .into_iter()
    .find(|p| lower.starts_with(p));
    let why = match source {
        Some("npm:") => "an `npm:` alias installs another package under this name".to_owned(),
        Some(p @ ("file:" | "link:" | "workspace:")) => format!("`{p}` installs a local folder or file"),
        Some(p @ ("http:" | "https:")) => format!("a tarball URL (`{p}`) is fetched from any host"),
        Some(_) => "a git source is cloned from any host and may run its `prepare` script".to_owned(),
        None if spec.contains('/') || spec.starts_with(['.', '~']) => {
            "a path, or a GitHub `owner/repo`, is not a registry package".to_owned()
        }
        None => "it is not a semver range or a dist-tag".to_owned(),
    };
    Err(format!(
        "`{}`: {why}; only registry packages with a semver range are installed",
        shown(spec)
    ))
}

fn shown(spec: &str) -> String {
    spec.chars().take(80).collect()
}

/// A dist-tag: a letter, then letters, digits and hyphens. No dot, so it
/// is never read as a tarball file name.
fn is_tag(spec: &str) -> bool {
    let mut bytes = spec.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// One range of a range set: empty, `a - b`, or comparators apart.
fn is_range(range: &str) -> bool {
    let words: Vec<&str> = range.split_ascii_whitespace().collect();
    if let [low, "-", high] = words[..] {
        return is_partial(low) && is_partial(high);
    }
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        // `>= 1.2`: an operator apart from its version.
        let comparator = if is_operator(word) {
            match words.next() {
                Some(version) => format!("{word}{version}"),
                None => return false,
            }
        } else {
            word.to_owned()
        };
        if !is_comparator(&comparator) {
            return false;
        }
    }
    true
}

const OPERATORS: [&str; 8] = ["<=", ">=", "~>", "<", ">", "=", "~", "^"];

fn is_operator(word: &str) -> bool {
    OPERATORS.contains(&word)
}

fn is_comparator(word: &str) -> bool {
    let version = OPERATORS
        .iter()
        .find_map(|op| word.strip_prefix(op))
        .unwrap_or(word);
    let version = version.strip_prefix(['v', '=']).unwrap_or(version);
    is_partial(version)
}

/// `1`, `1.x`, `1.2.*`, `1.2.3-beta.1+build.5`.
fn is_partial(version: &str) -> bool {
    let (core, qualifier) = match version.find(['-', '+']) {
        Some(i) => version.split_at(i),
        None => (version, ""),
    };
    let parts: Vec<&str> = core.split('.').collect();
    let numbers = (1..=3).contains(&parts.len())
        && parts.iter().all(|p| {
            matches!(*p, "x" | "X" | "*") || (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        });
    let qualified = qualifier.is_empty()
        || (parts.len() == 3
            && qualifier[1..]
                .split(['.', '+'])
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')));
    numbers && qualified
}

/// Every package of a lockfile that does not come from `registry` with an
/// integrity hash, and every link or workspace in it.
pub(super) fn check_lock(text: &str, registry: &str) -> Vec<Refusal> {
    let registry = if registry.ends_with('/') {
        registry.to_owned()
    } else {
        format!("{registry}/")
    };
    let refuse = |needle: &str, why: String| Refusal::new(PACKAGE_LOCK, text, line_of(text, needle), why);
    let root = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(root)) => root,
        Ok(_) => return vec![refuse("", "it is not a JSON object".to_owned())],
        Err(e) => {
            return vec![Refusal::new(
                PACKAGE_LOCK,
                text,
                line(e.line()),
                format!("it is not JSON: {e}"),
            )];
        }
    };
    let version = root.get("lockfileVersion").and_then(Value::as_u64);
    let packages = root.get("packages").and_then(Value::as_object);
    let (Some(2 | 3), Some(packages)) = (version, packages) else {
        let why = "only lockfiles of npm 7 or later (`lockfileVersion` 2 or 3, with `packages`) are taken: \
                   each names where its packages come from; regenerate it with a current npm";
        return vec![refuse("\"lockfileVersion\"", why.to_owned())];
    };
    packages
        .iter()
        .filter(|(key, _)| !key.is_empty())
        .filter_map(|(key, entry)| {
            locked(key, entry, &registry).map(|why| refuse(&format!("\"{key}\""), format!("{key}: {why}")))
        })
        .collect()
}

/// Why one locked package is refused, if it is.
fn locked(key: &str, entry: &Value, registry: &str) -> Option<String> {
    if !is_modules_path(key) {
        return Some("not under node_modules: a workspace or a local folder".to_owned());
    }
    let Some(entry) = entry.as_object() else {
        return Some("its entry is not an object".to_owned());
    };
    let flag = |name: &str| entry.get(name).and_then(Value::as_bool) == Some(true);
    if flag("link") {
        return Some("a link to a local folder".to_owned());
    }
    if flag("inBundle") {
        // It comes inside its parent's tarball, which is checked.
        return None;
    }
    from_registry(entry, registry)
}

fn from_registry(entry: &Map<String, Value>, registry: &str) -> Option<String> {
    let text = |name: &str| entry.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    match (text("resolved"), text("integrity")) {
        (Some(url), Some(_)) if url.starts_with(registry) => None,
        (Some(url), _) if !url.starts_with(registry) => Some(format!(
            "it comes from `{}`, not the registry {registry}",
            shown(url)
        )),
        (None, _) => Some("it names no `resolved` tarball of the registry".to_owned()),
        _ => Some("it has no `integrity` hash".to_owned()),
    }
}

/// `node_modules/a`, `node_modules/@s/a/node_modules/b`, …
fn is_modules_path(key: &str) -> bool {
    let mut parts = key.split('/');
    let mut named = false;
    while let Some(part) = parts.next() {
        let Some(first) = parts.next().filter(|_| part == "node_modules") else {
            return false;
        };
        let name = match (first.starts_with('@'), first) {
            (true, scope) => match parts.next() {
                Some(bare) => format!("{scope}/{bare}"),
                None => return false,
            },
            (false, bare) => bare.to_owned(),
        };
        if !is_package_name(&name) {
            return false;
        }
        named = true;
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn whys(package: &Value) -> Vec<String> {
        check_package(&serde_json::to_string_pretty(package).unwrap())
            .into_iter()
            .map(|r| r.why)
            .collect()
    }

    #[test]
    fn registry_names_with_ranges_and_tags_are_taken() {
        let good = json!({
            "name": "x", "version": "1.0.0",
            "scripts": {"postinstall": "never runs: --ignore-scripts"},
            "dependencies": {
                "is-number": "7.0.0", "@scope/pkg": "^1.2.3", "a": "~1.2", "b": ">=1.0.0 <2.0.0 || 3.x",
                "c": "1.2.3 - 2.3.4", "d": "*", "e": "", "f": "latest", "g": ">= 1.2", "h": "1.2.3-beta.1+b5",
                "i": "=v1.0.0", "JSONStream": "1"
            },
            "optionalDependencies": {"j": "^2"},
            "peerDependencies": {"k": "1.x"},
            "devDependencies": {"l": "next"},
            "bundleDependencies": ["is-number"],
            "bundledDependencies": true,
            "overrides": {"m": "1.0.0", "n": {".": "2.0.0", "o": "^3"}, "p@^1": "1.0.1", "@s/q": "$is-number"}
        });
        assert_eq!(whys(&good), Vec::<String>::new());
    }

    #[test]
    fn local_git_url_and_alias_sources_are_refused() {
        let cases = [
            ("file:../pkg", "local folder"),
            ("link:../pkg", "local folder"),
            ("workspace:*", "local folder"),
            ("git+https://github.com/x/y.git", "git source"),
            ("git://github.com/x/y.git", "git source"),
            ("github:x/y", "git source"),
            ("gitlab:x/y", "git source"),
            ("npm:other-package@1", "alias"),
            ("https://evil.example/pkg.tgz", "tarball URL"),
            ("http://127.0.0.1:9/pkg.tgz", "tarball URL"),
            ("x/y", "owner/repo"),
            ("./pkg", "path"),
            ("../pkg.tgz", "path"),
            ("/abs/pkg", "path"),
            ("~/pkg", "path"),
            ("pkg.tgz", "not a semver range"),
            ("1.0.0.tgz", "not a semver range"),
            ("latest.tar", "not a semver range"),
        ];
        for map in DEPENDENCY_MAPS {
            for (spec, why) in cases {
                let got = whys(&json!({ map: {"victim": spec} }));
                assert_eq!(got.len(), 1, "{map} {spec}: {got:?}");
                assert!(
                    got[0].contains(why) && got[0].starts_with(&format!("{map}.victim")),
                    "{spec}: {got:?}"
                );
            }
        }
    }

    #[test]
    fn workspaces_bad_names_lists_and_overrides_are_refused() {
        for package in [
            json!({"workspaces": ["packages/*"]}),
            json!({"dependencies": {"../escape": "1"}}),
            json!({"dependencies": {"a": 1}}),
            json!({"dependencies": ["a"]}),
            json!({"bundleDependencies": ["../x"]}),
            json!({"bundledDependencies": "x"}),
            json!({"overrides": {"a": "file:../a"}}),
            json!({"overrides": {"a": {"b": "git+https://x/y"}}}),
            json!({"overrides": {"a@file:x": "1"}}),
            json!({"overrides": {"a": "$../x"}}),
            json!([]),
        ] {
            assert_eq!(whys(&package).len(), 1, "{package}");
        }
        assert_eq!(check_package("{not json").len(), 1);
    }

    proptest::proptest! {
        /// A spec that passes has no scheme, path or host in it, and is
        /// no tarball's file name.
        #[test]
        fn a_taken_spec_names_no_other_source(spec in "[0-9a-z .*^~<>=|:/@#\\\\-]{0,20}") {
            if registry_spec(&spec).is_ok() {
                proptest::prop_assert!(!spec.contains([':', '/', '\\', '@', '#']), "{spec:?}");
                let lower = spec.trim().to_ascii_lowercase();
                proptest::prop_assert!(![".tgz", ".tar", ".gz"].iter().any(|e| lower.ends_with(e)), "{spec:?}");
            }
        }

        #[test]
        fn any_text_is_checked_without_panicking(text in "\\PC{0,200}") {
            let _ = check_package(&text);
            let _ = check_lock(&text, REGISTRY);
        }
    }

    fn lock(packages: Value) -> String {
        serde_json::to_string_pretty(&json!({"name": "x", "lockfileVersion": 3, "packages": packages}))
            .unwrap()
    }

    const REGISTRY: &str = "https://registry.npmjs.org";

    #[test]
    fn a_lock_of_registry_tarballs_with_integrity_is_taken() {
        let good = lock(json!({
            "": {"name": "x", "dependencies": {"is-number": "7.0.0"}},
            "node_modules/is-number": {
                "version": "7.0.0",
                "resolved": "https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz",
                "integrity": "sha512-abc"
            },
            "node_modules/@s/a/node_modules/b": {
                "resolved": "https://registry.npmjs.org/b/-/b-1.0.0.tgz", "integrity": "sha512-def"
            },
            "node_modules/c/node_modules/d": {"inBundle": true}
        }));
        assert_eq!(check_lock(&good, REGISTRY), Vec::new());
    }

    #[test]
    fn a_lock_naming_other_sources_is_refused() {
        let tarball = |url: &str| json!({"resolved": url, "integrity": "sha512-x"});
        for (key, entry, why) in [
            (
                "node_modules/a",
                tarball("https://evil.example/a.tgz"),
                "not the registry",
            ),
            (
                "node_modules/a",
                tarball("https://registry.npmjs.org.evil.example/a.tgz"),
                "not the registry",
            ),
            (
                "node_modules/a",
                tarball("git+ssh://git@github.com/x/y.git#abc"),
                "not the registry",
            ),
            ("node_modules/a", tarball("file:../a"), "not the registry"),
            (
                "node_modules/a",
                json!({"resolved": "https://registry.npmjs.org/a/-/a-1.tgz"}),
                "integrity",
            ),
            ("node_modules/a", json!({"version": "1.0.0"}), "no `resolved`"),
            (
                "node_modules/a",
                json!({"resolved": "../a", "link": true}),
                "link",
            ),
            (
                "packages/a",
                tarball("https://registry.npmjs.org/a/-/a-1.tgz"),
                "workspace",
            ),
            (
                "node_modules/../../etc",
                tarball("https://registry.npmjs.org/a/-/a-1.tgz"),
                "workspace",
            ),
        ] {
            let refused = check_lock(&lock(json!({ key: entry })), REGISTRY);
            assert_eq!(refused.len(), 1, "{key} {entry}");
            assert!(refused[0].why.contains(why), "{}", refused[0].why);
            assert!(refused[0].line > 1, "the line of the package");
        }
        for old in [
            json!({"lockfileVersion": 1, "dependencies": {}}),
            json!({"lockfileVersion": 3}),
        ] {
            assert_eq!(check_lock(&old.to_string(), REGISTRY).len(), 1, "{old}");
        }
    }
}
