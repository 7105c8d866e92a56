//! `skilld new`: a new skill directory of one dialect, from a small
//! template that passes `skilld check` cleanly and whose tool runs, with
//! comments telling its author what to edit next.

use crate::skill::names::{NameCheck, check_name, fit_name};
use std::path::{Path, PathBuf};

/// The dialect of a new skill (`docs/skills.md`, "Which dialect?").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ScaffoldDialect {
    /// `SKILL.md` with a tool block: a parameter table and a command.
    #[default]
    Markdown,
    /// `SKILL.md` and `scripts/main.py`, which takes a JSON object.
    Entrypoint,
    /// `SKILL.md` and `scripts/greet.py`, which takes a list of arguments.
    Scripts,
    /// `SKILL.md` with instructions for agents and no tool.
    Prompt,
    /// `SKILL.yaml` and `main.py`, a process backend speaking JSON-RPC.
    Manifest,
}

/// Why no skill was made. Nothing is left behind in any case.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("'{name}' is not a valid skill name: {why}")]
    InvalidName { name: String, why: String },
    #[error("{} already exists; nothing was written", .0.display())]
    Exists(PathBuf),
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ScaffoldError {
    /// Whether the request itself was wrong (a bad name, a taken
    /// directory), as opposed to the disk refusing it.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::InvalidName { .. } | Self::Exists(_))
    }
}

/// One file of a template: its path in the skill, its text, and whether it
/// is a program an author may want to run by hand.
struct File {
    path: &'static str,
    text: &'static str,
    executable: bool,
}

/// Makes the skill `parent/name` of `dialect` and returns its path.
///
/// The files are written to a hidden temporary directory beside the
/// target, which is then renamed into place without replacing anything:
/// an existing target is refused, and a failure leaves nothing behind.
pub fn scaffold(parent: &Path, name: &str, dialect: ScaffoldDialect) -> Result<PathBuf, ScaffoldError> {
    validate(name)?;
    if !parent.is_dir() {
        return Err(ScaffoldError::Io {
            path: parent.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        });
    }
    let target = parent.join(name);
    if target.symlink_metadata().is_ok() {
        return Err(ScaffoldError::Exists(target));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ScaffoldError::Io { path, source }
    };
    let staged = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".new")
        .tempdir_in(parent)
        .map_err(io(&target))?;
    for file in files(dialect) {
        let path = staged.path().join(file.path);
        write_file(&path, &render(file.text, name), file.executable).map_err(io(&target))?;
    }
    // A sandboxed tool runs as another user, who must read the skill.
    set_mode(staged.path(), 0o755).map_err(io(&target))?;
    rename_new(staged.path(), &target).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::DirectoryNotEmpty => {
            ScaffoldError::Exists(target.clone())
        }
        _ => ScaffoldError::Io {
            path: target.clone(),
            source: e,
        },
    })?;
    // Renamed away: nothing is left for the guard to remove.
    let _ = staged.keep();
    Ok(target)
}

/// The tool a new skill of `dialect` named `name` offers, and arguments
/// that run it; `None` for a prompt skill, which has no tool.
pub fn example_call(name: &str, dialect: ScaffoldDialect) -> Option<(String, &'static str)> {
    let args = match dialect {
        ScaffoldDialect::Prompt => return None,
        ScaffoldDialect::Scripts => r#"{"args": ["World"]}"#,
        _ => r#"{"name": "World"}"#,
    };
    Some((tool_name(name, dialect)?, args))
}

/// A valid skill name, and one that loads without a `name_style` warning.
fn validate(name: &str) -> Result<(), ScaffoldError> {
    let why = match check_name(name) {
        NameCheck::Valid => return Ok(()),
        NameCheck::Underscore => format!(
            "it loads with a name_style warning; use '{}' instead",
            name.replace('_', "-")
        ),
        NameCheck::Invalid => {
            "use 1-64 lowercase letters and digits, with single hyphens between words (csv-stats)".to_owned()
        }
    };
    Err(ScaffoldError::InvalidName {
        name: name.to_owned(),
        why,
    })
}

/// The name of the template's tool, as each dialect derives or limits it.
fn tool_name(name: &str, dialect: ScaffoldDialect) -> Option<String> {
    let snake = name.replace('-', "_");
    match dialect {
        ScaffoldDialect::Prompt => None,
        // A tool block's name has at most 32 characters.
        ScaffoldDialect::Markdown => Some(
            snake
                .chars()
                .take(32)
                .collect::<String>()
                .trim_end_matches('_')
                .to_owned(),
        ),
        ScaffoldDialect::Entrypoint | ScaffoldDialect::Manifest => Some(snake),
        ScaffoldDialect::Scripts => Some(fit_name(format!("{snake}_greet"))),
    }
}

/// `name` in words, capitalised, for a heading: `csv-stats` → `Csv stats`.
fn title(name: &str) -> String {
    let words = name.replace('-', " ");
    let mut chars = words.chars();
    chars
        .next()
        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// A template's text for the skill `name`. Markers are `@…@` so that they
/// never meet a command's `{{placeholder}}` or Python's braces.
fn render(template: &str, name: &str) -> String {
    let tool = |dialect| tool_name(name, dialect).unwrap_or_default();
    template
        .replace("@NAME@", name)
        .replace("@TITLE@", &title(name))
        .replace("@MD_TOOL@", &tool(ScaffoldDialect::Markdown))
        .replace("@SCRIPT_TOOL@", &tool(ScaffoldDialect::Scripts))
        .replace("@TOOL@", &tool(ScaffoldDialect::Entrypoint))
}

fn write_file(path: &Path, text: &str, executable: bool) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
        set_mode(dir, 0o755)?;
    }
    std::fs::write(path, text)?;
    set_mode(path, if executable { 0o755 } else { 0o644 })
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Renames `from` to `to` unless `to` exists, even as an empty directory
/// (which a plain `rename` would replace).
fn rename_new(from: &Path, to: &Path) -> std::io::Result<()> {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    match renameat2(AT_FDCWD, from, AT_FDCWD, to, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        // A file system without RENAME_NOREPLACE: look, then rename.
        Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOSYS) => {
            if to.symlink_metadata().is_ok() {
                return Err(std::io::ErrorKind::AlreadyExists.into());
            }
            std::fs::rename(from, to)
        }
        Err(e) => Err(e.into()),
    }
}

fn files(dialect: ScaffoldDialect) -> &'static [File] {
    match dialect {
        ScaffoldDialect::Markdown => &[File {
            path: "SKILL.md",
            text: MARKDOWN_SKILL,
            executable: false,
        }],
        ScaffoldDialect::Entrypoint => &[
            File {
                path: "SKILL.md",
                text: ENTRYPOINT_SKILL,
                executable: false,
            },
            File {
                path: "scripts/main.py",
                text: ENTRYPOINT_MAIN,
                executable: true,
            },
        ],
        ScaffoldDialect::Scripts => &[
            File {
                path: "SKILL.md",
                text: SCRIPTS_SKILL,
                executable: false,
            },
            File {
                path: "scripts/greet.py",
                text: SCRIPTS_GREET,
                executable: true,
            },
        ],
        ScaffoldDialect::Prompt => &[File {
            path: "SKILL.md",
            text: PROMPT_SKILL,
            executable: false,
        }],
        ScaffoldDialect::Manifest => &[
            File {
                path: "SKILL.yaml",
                text: MANIFEST_SKILL,
                executable: false,
            },
            File {
                path: "main.py",
                text: MANIFEST_MAIN,
                executable: true,
            },
        ],
    }
}

const MARKDOWN_SKILL: &str = r#"---
# Made by `skilld new`. Next: say what the skill is for in `description`,
# then rename the tool below and change its parameters and command.
# Lint with `skilld check DIR`; the guide is docs/skills.md, "Markdown tools".
name: @NAME@
version: 0.1.0
description: Greets someone by name. Replace this sentence with what the skill does and when an agent should use it.
# The tool only prints: nothing changes, so calls need no approval after
# the first. Remove this line for a tool that writes or deletes.
read_only: true
timeout: 10s
# What `skilld test DIR` runs: calls with what they must give (and, beside
# `triggers`, messages that must or must not match); docs/skills.md,
# "Examples: testing a skill".
examples:
  calls:
    - tool: @MD_TOOL@
      arguments: {name: Ada}
      expect: {output: "Hello, Ada!\n"}
---

# @TITLE@

What an agent should know before calling the tools of this skill: when to
use them and how to read what they print.

### @MD_TOOL@

Print a greeting for a name.

#### Parameters

| Name | Type | Required | Description |
|------|------|----------|-------------|
| name | string | yes | Who to greet. |
| greeting | string | no | The word to greet with (default: Hello) |

#### Command

```bash
# One program with arguments, never a shell: each placeholder becomes
# one argument as it is, so a value cannot add options or commands.
printf '%s, %s!\n' {{greeting}} {{name}}
```
"#;

const ENTRYPOINT_SKILL: &str = r#"---
# Made by `skilld new`. The tool is scripts/main.py: it gets the call's
# JSON object and may write a JSON result and files. Edit it, then say what
# the skill is for in `description`. Lint with `skilld check DIR`; the
# guide is docs/skills.md, "Entrypoint skills".
name: @NAME@
version: 0.1.0
description: Greets someone by name and returns the greeting as JSON. Replace this sentence with what the skill does and when an agent should use it.
lang: python
# The tool only reads its input: remove this line for one that writes.
read_only: true
timeout: 30s
# Add `resources: {memory: 256Mi}` to cap the memory a run may use.
# What `skilld test DIR` runs: calls with what they must give (and, beside
# `triggers`, messages that must or must not match); docs/skills.md,
# "Examples: testing a skill".
examples:
  calls:
    - tool: @TOOL@
      arguments: {name: Ada}
      expect: {parsed: {greeting: "Hello, Ada!"}}
---

# @TITLE@

Call `@TOOL@` with a JSON object such as `{"name": "World"}`. The result's
`parsed` holds `{"greeting": "Hello, World!"}`.
"#;

const ENTRYPOINT_MAIN: &str = r#"#!/usr/bin/env python3
"""The @NAME@ skill's tool: one run of this program per call.

skilld passes the call's arguments, a JSON object, in SANDBOX_INPUT. What
is written to SANDBOX_OUTPUT as JSON becomes the result's `parsed`; what is
printed, its `output`; files left in SANDBOX_FILES_DIR are handed back.
"""
import json
import os
import sys

args = json.loads(os.environ.get("SANDBOX_INPUT", "{}"))

# The tool takes any object: checking the input is this program's job.
name = args.get("name", "World")
if not isinstance(name, str):
    print("error: 'name' must be a string", file=sys.stderr)
    sys.exit(1)

greeting = f"Hello, {name}!"
with open(os.environ["SANDBOX_OUTPUT"], "w") as out:
    json.dump({"greeting": greeting}, out)
print(greeting)
"#;

const SCRIPTS_SKILL: &str = r#"---
# Made by `skilld new`. Each script directly under scripts/ is a tool named
# <skill>_<file name>, which takes a list of arguments: add, rename or
# remove scripts there (helpers go in scripts/lib/ or start with `_`).
# Lint with `skilld check DIR`; the guide is docs/skills.md, "Scripts skills".
name: @NAME@
version: 0.1.0
description: Greets people by name. Replace this sentence with what the skill does and when an agent should use it.
# The scripts only print: remove this line for ones that write or delete.
read_only: true
# What `skilld test DIR` runs: calls with what they must give (and, beside
# `triggers`, messages that must or must not match); docs/skills.md,
# "Examples: testing a skill".
examples:
  calls:
    - tool: @SCRIPT_TOOL@
      arguments: {args: [Ada, Grace]}
      expect: {output: "Hello, Ada!\nHello, Grace!\n"}
---

# @TITLE@

- `@SCRIPT_TOOL@ NAME...` prints a greeting for each name.
"#;

const SCRIPTS_GREET: &str = r#"#!/usr/bin/env python3
"""Print a greeting for each name given, or for the world."""
# The docstring's first paragraph above is the tool's description. The
# call's `args` list arrives as sys.argv[1:]: treat it as untrusted input.
import sys

for name in sys.argv[1:] or ["World"]:
    print(f"Hello, {name}!")
"#;

const PROMPT_SKILL: &str = r#"---
# Made by `skilld new`. A prompt skill has no tools: the text below is the
# instructions agents fetch (GET /skills/@NAME@/prompt) and follow. Say in
# `description` when to use it; put documents it points to in references/;
# add `command: NAME` to offer it as /NAME. Lint with `skilld check DIR`.
name: @NAME@
description: Explains how to greet people in this project. Replace this sentence with what the instructions are for and when an agent should use them.
# When the skill applies (POST /skills/match): words of the user's message,
# project files, languages.
triggers:
  keywords: [greet, greeting]
# What `skilld test DIR` runs: messages that must and must not match;
# docs/skills.md, "Examples: testing a skill".
examples:
  triggers:
    match: [how should I greet the new team member?]
    not_match: [summarize this file]
---

# @TITLE@

When you greet someone:

1. Use their name as they wrote it.
2. Keep it to one short sentence.
3. Do not add a question unless they asked for help.
"#;

const MANIFEST_SKILL: &str = r#"# Made by `skilld new`. main.py is the skill's process: skilld starts it once
# and sends every call of its tools to it, as JSON-RPC on its stdin. Declare
# tools below (or in main.py's TOOLS), then handle them in main.py.
# Lint with `skilld check DIR`; the guide is docs/skills.md, "Manifest skills".
name: @NAME@
version: 0.1.0
description: Greets someone by name. Replace this sentence with what the skill does and when an agent should use it.
types: [tool]
# A process backend runs a program, which must be declared.
permissions: [shell:exec]
# The tool only answers: remove this line for one that writes or deletes.
read_only: true
timeout: 10s
implementation:
  backend: process
  entrypoint: main.py
tools:
  - name: @TOOL@
    description: Greet someone by name.
    input_schema:
      type: object
      properties:
        name:
          type: string
          description: Who to greet.
      additionalProperties: false
# What `skilld test DIR` runs: calls with what they must give (and, beside
# `triggers`, messages that must or must not match); docs/skills.md,
# "Examples: testing a skill".
examples:
  calls:
    - tool: @TOOL@
      arguments: {name: Ada}
      expect: {output: "Hello, Ada!"}
"#;

const MANIFEST_MAIN: &str = r#"#!/usr/bin/env python3
"""The @NAME@ skill's process: JSON-RPC 2.0, one JSON object per line.

skilld asks `initialize` once, then `tool/execute` for every call, and
`shutdown` before it stops the process. Print nothing else on stdout: use
stderr for logs.
"""
import json
import sys

# Tools to add to those SKILL.yaml declares, in the same shape:
# {"name": ..., "description": ..., "input_schema": {...}}.
TOOLS = []


def greet(args):
    return f"Hello, {args.get('name', 'World')}!"


# Each tool's handler takes the call's arguments (already checked against
# its input_schema) and returns a string or any JSON value.
HANDLERS = {"@TOOL@": greet}


def handle(method, params):
    if method == "initialize":
        return {"tools": TOOLS, "hooks": []}
    if method == "tool/execute":
        handler = HANDLERS.get(params["name"])
        if handler is None:
            raise ValueError(f"no tool {params['name']}")
        return {"output": handler(params.get("input") or {}), "success": True}
    if method == "shutdown":
        return None
    raise ValueError(f"no method {method}")


for line in sys.stdin:
    request = json.loads(line)
    try:
        result = handle(request["method"], request.get("params") or {})
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    except Exception as e:
        reply = {"jsonrpc": "2.0", "id": request["id"],
                 "error": {"code": -32000, "message": str(e)}}
    print(json.dumps(reply), flush=True)
    if request["method"] == "shutdown":
        break
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skill::backend::Unreviewed;
    use crate::skill::{Code, LoadOptions, PathCache, Runtimes, Trust, load_skill};

    const ALL: [ScaffoldDialect; 5] = [
        ScaffoldDialect::Markdown,
        ScaffoldDialect::Entrypoint,
        ScaffoldDialect::Scripts,
        ScaffoldDialect::Prompt,
        ScaffoldDialect::Manifest,
    ];

    fn dialect_of(d: ScaffoldDialect) -> crate::skill::Dialect {
        use crate::skill::Dialect;
        match d {
            ScaffoldDialect::Markdown => Dialect::Markdown,
            ScaffoldDialect::Entrypoint => Dialect::Entrypoint,
            ScaffoldDialect::Scripts => Dialect::Scripts,
            ScaffoldDialect::Prompt => Dialect::Prompt,
            ScaffoldDialect::Manifest => Dialect::Manifest,
        }
    }

    /// Each template loads in its own dialect, with its one tool and no
    /// finding (a manifest's backend is held back here: only that).
    #[test]
    fn every_template_loads_cleanly() {
        let (runtimes, path) = (Runtimes::default(), PathCache::new(std::env::var_os("PATH")));
        let opts = LoadOptions {
            source: "test",
            trust: Trust::User,
            max_timeout_secs: 600,
            runtimes: &runtimes,
            installed: false,
            path: &path,
            launcher: Some(&Unreviewed),
            rules: &crate::skill::SkillRules::default(),
        };
        for dialect in ALL {
            let parent = tempfile::tempdir().unwrap();
            let dir = scaffold(parent.path(), "hello-world", dialect).unwrap();
            assert_eq!(dir, parent.path().join("hello-world"));
            let loaded = load_skill(&dir, &opts);
            let findings: Vec<_> = loaded
                .diagnostics
                .iter()
                .filter(|d| !(dialect == ScaffoldDialect::Manifest && d.code == Code::BackendFailed))
                .collect();
            assert!(findings.is_empty(), "{dialect:?}: {findings:?}");
            let skill = loaded.skill.unwrap();
            assert_eq!(skill.dialect, dialect_of(dialect), "{dialect:?}");
            let tools: Vec<_> = skill.tools.iter().map(|t| t.name.clone()).collect();
            let expected: Vec<_> = example_call("hello-world", dialect)
                .map(|(t, _)| t)
                .into_iter()
                .collect();
            assert_eq!(tools, expected, "{dialect:?}");
            // Nothing staged is left beside it.
            let entries: Vec<_> = std::fs::read_dir(parent.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(entries, ["hello-world"], "{dialect:?}");
        }
    }

    #[test]
    fn refuses_bad_names_and_existing_targets() {
        let parent = tempfile::tempdir().unwrap();
        for bad in ["", "Hello", "a--b", "-a", "a/b", "..", "plan_compiler"] {
            let err = scaffold(parent.path(), bad, ScaffoldDialect::Markdown).unwrap_err();
            assert!(matches!(err, ScaffoldError::InvalidName { .. }), "{bad}: {err}");
        }
        let taken = parent.path().join("taken");
        std::fs::create_dir(&taken).unwrap();
        let err = scaffold(parent.path(), "taken", ScaffoldDialect::Scripts).unwrap_err();
        assert!(matches!(err, ScaffoldError::Exists(_)) && err.is_refusal());
        assert_eq!(std::fs::read_dir(&taken).unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_rename_onto_an_empty_directory_is_refused() {
        let parent = tempfile::tempdir().unwrap();
        let (from, to) = (parent.path().join("from"), parent.path().join("to"));
        std::fs::create_dir(&from).unwrap();
        std::fs::create_dir(&to).unwrap();
        assert!(rename_new(&from, &to).is_err());
        assert!(from.is_dir() && to.is_dir());
    }

    #[test]
    fn a_parent_that_cannot_be_written_is_an_io_error() {
        let err = scaffold(
            Path::new("/definitely/not/here"),
            "hello",
            ScaffoldDialect::Prompt,
        )
        .unwrap_err();
        assert!(
            matches!(err, ScaffoldError::Io { .. }) && !err.is_refusal(),
            "{err}"
        );
    }

    #[test]
    fn long_names_give_tool_names_within_the_limits() {
        let name = "a".repeat(31) + "-" + &"b".repeat(32);
        assert_eq!(name.len(), 64);
        let md = tool_name(&name, ScaffoldDialect::Markdown).unwrap();
        assert_eq!(md.len(), 31);
        assert!(crate::skill::names::is_tool_name(&md));
        let script = tool_name(&name, ScaffoldDialect::Scripts).unwrap();
        assert!(crate::skill::names::is_generated_tool_name(&script));
        assert_eq!(title("csv-stats"), "Csv stats");
    }
}
