//! Results of tools that declare their output (`outputSchema`): MCP
//! requires their `structuredContent` to conform, so a run that succeeded
//! answers its JSON output there, checked against the schema; output that
//! does not conform (or is not JSON) makes the result an error that says
//! so, since a client validates what it gets and would only fail.

use crate::catalog::Catalog;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

/// `result` of a call of a tool that declares an output schema, with the
/// run's JSON output as its `structuredContent`; any other result as it
/// is. The envelope in a successful result's `structuredContent` names
/// the skill and tool that ran.
pub(super) fn conform(mut result: CallToolResult, catalog: &Catalog) -> CallToolResult {
    if result.is_error == Some(true) {
        return result;
    }
    let Some(envelope) = result.structured_content.as_ref() else {
        return result;
    };
    let names = (envelope["skill"].as_str(), envelope["tool"].as_str());
    let (Some(skill), Some(tool)) = names else {
        return result;
    };
    let Some(schema) = catalog.skill(skill).and_then(|s| s.output_schema(tool)) else {
        return result;
    };
    match structured(envelope, &schema.validator) {
        Ok(output) => result.structured_content = Some(output),
        Err(why) => {
            let why = format!("[skilld: tool {tool} declares an outputSchema, but {why}]");
            result.content.push(ContentBlock::text(why));
            result.is_error = Some(true);
        }
    }
    result
}

/// The run's JSON output (the envelope's `parsed`) if it conforms; else
/// why not, in words.
fn structured(envelope: &Value, validator: &jsonschema::Validator) -> Result<Value, String> {
    let Some(output) = envelope.get("parsed").filter(|p| !p.is_null()) else {
        return Err("its output is not JSON".to_owned());
    };
    if let Some(error) = validator.iter_errors(output).next() {
        let at = error.instance_path().to_string();
        let at = if at.is_empty() { "/".to_owned() } else { at };
        return Err(format!("its output does not match it at {at}: {error}"));
    }
    Ok(output.clone())
}
