//! The globals a skill's script sees (`docs/design.md` §2, the Starlark
//! table). Every function with an effect checks the skill's permissions
//! before it acts.

use super::ctx::ctx;
use crate::skill::backend::DeclaredTool;
use crate::skill::phases::Phase;
use anyhow::{anyhow, bail};
use serde_json::json;
use starlark::environment::{Globals, GlobalsBuilder, LibraryExtension};
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::dict::DictMut;
use starlark::values::float::UnpackFloat;
use starlark::values::list_or_tuple::UnpackListOrTuple;
use starlark::values::none::{NoneOr, NoneType};
use starlark::values::{Heap, Value};

pub(super) fn tool_key(name: &str) -> String {
    format!("tool:{name}")
}

pub(super) fn hook_key(phase: &str) -> String {
    format!("hook:{phase}")
}

pub(super) fn workflow_key(name: &str) -> String {
    format!("workflow:{name}")
}

pub(super) fn scanner_key(name: &str) -> String {
    format!("scanner:{name}")
}

/// `parameters` as a JSON Schema of an object's: a dict, or an open
/// object when `None`.
fn schema_of(function: &str, name: &str, parameters: Option<Value<'_>>) -> anyhow::Result<serde_json::Value> {
    let Some(parameters) = parameters.filter(|p| !p.is_none()) else {
        return Ok(json!({"type": "object"}));
    };
    let schema = parameters
        .to_json_value()
        .ok()
        .filter(serde_json::Value::is_object);
    schema.ok_or_else(|| {
        anyhow!(
            "{function}: parameters of '{name}' must be a dict (a JSON Schema), not a {}",
            parameters.get_type()
        )
    })
}

/// Keeps `handler` under `key` in the module's registry, so that it is
/// frozen with the module.
fn keep<'v>(eval: &Evaluator<'v, '_, '_>, key: &str, handler: Value<'v>) -> anyhow::Result<()> {
    let registry = eval
        .module()
        .extra_value()
        .ok_or_else(|| anyhow!("the module has no registry"))?;
    let key = eval
        .heap()
        .alloc_str(key)
        .to_value()
        .get_hashed()
        .map_err(starlark::Error::into_anyhow)?;
    DictMut::from_value(registry)?.aref.insert_hashed(key, handler);
    Ok(())
}

fn check_handler(function: &str, handler: Value<'_>) -> anyhow::Result<()> {
    if handler.get_type() == "function" {
        Ok(())
    } else {
        bail!(
            "{function}: handler must be a function, not a {}",
            handler.get_type()
        )
    }
}

/// A tool or workflow a script declares.
struct Callable<'a> {
    /// The SDK function declaring it, for messages.
    function: &'static str,
    kind: &'static str,
    key: String,
    name: &'a str,
    description: &'a str,
}

/// Declares `callable` into the list `list` picks, keeping its handler:
/// what `register_tool` and `register_workflow` share.
fn declare<'v>(
    eval: &mut Evaluator<'v, '_, '_>,
    callable: Callable<'_>,
    parameters: Option<Value<'v>>,
    handler: Value<'v>,
    list: impl Fn(&mut super::ctx::Declared) -> &mut Vec<DeclaredTool>,
) -> anyhow::Result<NoneType> {
    let Callable {
        function,
        kind,
        key,
        name,
        description,
    } = callable;
    let ctx = ctx()?;
    let declared = ctx.registering(function)?;
    if name.is_empty() {
        bail!("{function}: name must not be empty");
    }
    let input_schema = schema_of(function, name, parameters)?;
    check_handler(function, handler)?;
    if list(&mut declared.borrow_mut()).iter().any(|t| t.name == name) {
        bail!("{function}: {kind} '{name}' is already registered");
    }
    keep(eval, &key, handler)?;
    list(&mut declared.borrow_mut()).push(DeclaredTool {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema,
        output_schema: None,
        hints: Default::default(),
    });
    Ok(NoneType)
}

/// The standard library, `print`, and the SDK.
pub(super) fn globals() -> Globals {
    GlobalsBuilder::extended_by(&[LibraryExtension::Print])
        .with(sdk)
        .build()
}

#[starlark_module]
fn sdk(builder: &mut GlobalsBuilder) {
    /// Declares a tool: `handler(args)` gets its validated arguments.
    fn register_tool<'v>(
        name: &str,
        description: &str,
        parameters: Value<'v>,
        handler: Value<'v>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<NoneType> {
        let callable = Callable {
            function: "register_tool",
            kind: "tool",
            key: tool_key(name),
            name,
            description,
        };
        declare(eval, callable, Some(parameters), handler, |d| &mut d.tools)
    }

    /// Declares a hook: `handler(payload)` answers like `hook/handle`.
    fn register_hook<'v>(
        phase: &str,
        handler: Value<'v>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<NoneType> {
        let ctx = ctx()?;
        let declared = ctx.registering("register_hook")?;
        let Some(phase) = Phase::parse(phase) else {
            bail!(
                "register_hook: unknown phase '{phase}'; the phases are {}",
                Phase::names()
            );
        };
        let phase = phase.as_str();
        check_handler("register_hook", handler)?;
        if declared.borrow().hooks.iter().any(|h| h == phase) {
            bail!("register_hook: a {phase} hook is already registered");
        }
        keep(eval, &hook_key(phase), handler)?;
        declared.borrow_mut().hooks.push(phase.to_owned());
        Ok(NoneType)
    }

    /// Declares a workflow: called by name like a tool, `handler(input)`
    /// gets its validated input and may use the whole SDK.
    fn register_workflow<'v>(
        name: &str,
        handler: Value<'v>,
        #[starlark(default = "")] description: &str,
        #[starlark(default = NoneOr::None)] parameters: NoneOr<Value<'v>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<NoneType> {
        let callable = Callable {
            function: "register_workflow",
            kind: "workflow",
            key: workflow_key(name),
            name,
            description,
        };
        declare(eval, callable, parameters.into_option(), handler, |d| {
            &mut d.workflows
        })
    }

    /// Declares a scanner: `handler(files)` gets a list of `{"path",
    /// "text"}` and returns a list of findings.
    fn register_scanner<'v>(
        name: &str,
        handler: Value<'v>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<NoneType> {
        let ctx = ctx()?;
        let declared = ctx.registering("register_scanner")?;
        if name.is_empty() {
            bail!("register_scanner: name must not be empty");
        }
        check_handler("register_scanner", handler)?;
        if declared.borrow().scanners.iter().any(|s| s == name) {
            bail!("register_scanner: scanner '{name}' is already registered");
        }
        keep(eval, &scanner_key(name), handler)?;
        declared.borrow_mut().scanners.push(name.to_owned());
        Ok(NoneType)
    }

    /// Runs a program with arguments (never a shell) in the run sandbox:
    /// `{"exit_code", "output", "success"}`.
    fn exec<'v>(
        program: &str,
        #[starlark(default = UnpackListOrTuple::default())] args: UnpackListOrTuple<String>,
        #[starlark(default = NoneOr::None)] timeout: NoneOr<UnpackFloat>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let timeout = timeout.into_option().map(|t| t.0);
        let answer = effect(
            "exec",
            json!({"program": program, "args": args.items, "timeout": timeout}),
        )?;
        Ok(heap.alloc(answer))
    }

    /// Runs git (never a shell) in the run sandbox, in `cwd` (a directory
    /// of the workspace): `{"exit_code", "output", "success"}`. Reading
    /// subcommands need `git:read`, the rest `git:write`.
    fn git<'v>(
        #[starlark(require = pos)] args: UnpackListOrTuple<String>,
        #[starlark(default = NoneOr::None)] cwd: NoneOr<&str>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let answer = effect("git", json!({"args": args.items, "cwd": cwd.into_option()}))?;
        Ok(heap.alloc(answer))
    }

    /// Sets a variable for this evaluation's later `exec` and `git`
    /// children (`env:write`).
    fn set_env(name: &str, value: &str) -> anyhow::Result<NoneType> {
        effect("set_env", json!({"name": name, "value": value}))?;
        Ok(NoneType)
    }

    /// Asks the model through the session's client (`llm:call`): the
    /// answer's text.
    fn llm(
        prompt: &str,
        #[starlark(default = NoneOr::None)] system: NoneOr<&str>,
        #[starlark(default = NoneOr::None)] max_tokens: NoneOr<i32>,
    ) -> anyhow::Result<String> {
        let max_tokens = match max_tokens.into_option() {
            Some(n) if n < 1 => bail!("llm: max_tokens must be at least 1"),
            other => other,
        };
        let params = json!({"prompt": prompt, "system": system.into_option(), "max_tokens": max_tokens});
        match effect("llm", params)? {
            serde_json::Value::String(text) => Ok(text),
            other => bail!("llm: the server answered {other}"),
        }
    }

    /// Calls another tool through skilld's pipeline (`skill:invoke`),
    /// decided and recorded like any call: its envelope.
    fn invoke_tool<'v>(name: &str, args: Value<'v>, heap: Heap<'v>) -> anyhow::Result<Value<'v>> {
        super::bounds::check_json(args).map_err(|why| anyhow!("invoke_tool: args {why}"))?;
        let args = args
            .to_json_value()
            .ok()
            .filter(serde_json::Value::is_object)
            .ok_or_else(|| anyhow!("invoke_tool: args must be a dict, not a {}", args.get_type()))?;
        let answer = effect("invoke_tool", json!({"name": name, "args": args}))?;
        Ok(heap.alloc(answer))
    }

    /// A text file of the skill's directory or of the evaluation's own.
    fn read_file(path: &str) -> anyhow::Result<String> {
        match effect("read_file", json!({"path": path}))? {
            serde_json::Value::String(text) => Ok(text),
            other => bail!("read_file: the server answered {other}"),
        }
    }

    /// Writes a text file in the evaluation's own directory.
    fn write_file(path: &str, text: &str) -> anyhow::Result<NoneType> {
        effect("write_file", json!({"path": path, "text": text}))?;
        Ok(NoneType)
    }

    /// A variable of the environment a child of the skill would get.
    fn env<'v>(
        name: &str,
        #[starlark(default = NoneOr::None)] default: NoneOr<Value<'v>>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Ok(match effect("env", json!({"name": name}))? {
            serde_json::Value::Null => default.into_option().unwrap_or_else(Value::new_none),
            value => heap.alloc(value),
        })
    }

    /// An HTTP(S) GET: `{"status", "body", "success"}`.
    fn fetch<'v>(url: &str, heap: Heap<'v>) -> anyhow::Result<Value<'v>> {
        let answer = effect("fetch", json!({"url": url}))?;
        Ok(heap.alloc(answer))
    }

    /// A value as JSON text.
    fn json_encode(#[starlark(require = pos)] value: Value<'_>) -> anyhow::Result<String> {
        super::bounds::check_json(value).map_err(|why| anyhow!("json_encode: the value {why}"))?;
        value.to_json()
    }

    /// JSON text as a value.
    fn json_decode<'v>(#[starlark(require = pos)] text: &str, heap: Heap<'v>) -> anyhow::Result<Value<'v>> {
        let json: serde_json::Value = serde_json::from_str(text).map_err(|e| anyhow!("json_decode: {e}"))?;
        Ok(heap.alloc(json))
    }
}

/// Has the server perform `function` for the current evaluation.
fn effect(function: &str, args: serde_json::Value) -> anyhow::Result<serde_json::Value> {
    let serde_json::Value::Object(args) = args else {
        bail!("{function}: its arguments are not an object");
    };
    ctx()?.effect(function, args)
}

/// The most lines one evaluation's `print` sends to the log.
const MAX_PRINTS: u32 = 100;

/// Sends a script's `print` to the host's stderr, which the server logs
/// (its first [`MAX_PRINTS`] lines); stdout carries the protocol alone.
#[derive(Default)]
pub(super) struct Printer {
    printed: std::cell::Cell<u32>,
}

impl starlark::PrintHandler for Printer {
    fn println(&self, text: &str) -> starlark::Result<()> {
        let printed = self.printed.get();
        self.printed.set(printed.saturating_add(1));
        if printed < MAX_PRINTS {
            let text: String = text.chars().take(2000).collect();
            eprintln!("print: {text}");
        } else if printed == MAX_PRINTS {
            eprintln!("print: further lines of this evaluation are dropped");
        }
        Ok(())
    }
}
