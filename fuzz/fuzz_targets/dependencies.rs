//! Fuzzes the dependency-file checks (`skilld::deps`): the input is
//! the text of a `requirements.txt`, a `package.json` or a
//! `package-lock.json`, checked as each. Beyond not panicking, a line the
//! requirements check takes must name nothing pip would read as a path, a
//! URL, a direct reference or an option, and a `package.json` it takes
//! must have no dependency spec with a scheme, a path or a host.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use skilld::deps::{DEFAULT_NPM_REGISTRY, check_lock, check_package, check_requirements};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    requirements(text);
    package(text);
    let _ = check_lock(text, DEFAULT_NPM_REGISTRY);
});

fn requirements(text: &str) {
    let refused: Vec<u32> = check_requirements(text).iter().map(|r| r.line).collect();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (index, line) in text.split('\n').enumerate() {
        let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
        if refused.contains(&number) {
            continue;
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        let body = line.split(" #").next().unwrap_or("").split("\t#").next().unwrap_or("");
        let body = if body.starts_with('#') { "" } else { body };
        assert!(!body.contains(['/', '\\', '@', '$']) && !body.contains("://"), "taken: {line:?}");
        assert!(!body.split([' ', '\t']).any(|w| w.starts_with('-')), "taken: {line:?}");
    }
}

fn package(text: &str) {
    if !check_package(text).is_empty() {
        return;
    }
    let Ok(Value::Object(root)) = serde_json::from_str::<Value>(text) else {
        return;
    };
    assert!(!root.contains_key("workspaces"), "taken: {text:?}");
    for map in ["dependencies", "optionalDependencies", "peerDependencies", "devDependencies"] {
        let Some(Value::Object(deps)) = root.get(map) else {
            continue;
        };
        for spec in deps.values() {
            let spec = spec.as_str().unwrap_or("");
            assert!(!spec.contains([':', '/', '\\', '@', '#']), "taken: {map} {spec:?}");
        }
    }
}
