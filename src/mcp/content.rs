//! The content of a finished run's MCP result (`docs/mcp.md`, "Content"):
//! the run's text, or the MCP content blocks a tool printed as its JSON
//! output; and each artifact it left as a `resource_link`, with small
//! images and audio also inline as `image` and `audio` content.

use crate::artifacts::{Access, Artifact, Served};
use crate::invoke::{Envelope, Invoker};
use base64::Engine;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

/// The largest artifact inlined as `image` or `audio` content; a larger
/// one is only linked. A client puts inline data in the model's context.
pub const MAX_INLINE_BYTES: u64 = 256 * 1024;

/// Artifacts a result links at most; the envelope lists them all.
pub const MAX_LINKS: usize = 64;

/// Resource URIs a tool may not put in its own blocks: `skill://` names
/// the server's files and `upstream://` the resources of the MCP servers
/// skills front, which a tool must not impersonate.
const RESERVED_SCHEMES: [&str; 2] = ["skill:", "upstream:"];

/// The MCP result of a run that ended: its content, and its whole
/// envelope as structured content. `origin` makes artifact links absolute.
pub(super) async fn finished(invoker: &Invoker, envelope: &Envelope, origin: &str) -> CallToolResult {
    let output = envelope.output.clone();
    let error = envelope.error.as_deref();
    let mut blocks = match tool_blocks(envelope.parsed.as_ref()) {
        Given::Blocks(mut blocks) => {
            blocks.extend(error.map(|e| text(noted(String::new(), e))));
            blocks
        }
        Given::Refused(why) => vec![text(noted_error(noted(output, &why), error))],
        Given::Text => vec![text(noted_error(output, error))],
    };
    for file in envelope.files.iter().flatten().take(MAX_LINKS) {
        blocks.extend(artifact(invoker, envelope, file, origin).await);
    }
    blocks.retain(|b| b.get("text").is_none_or(|t| t != ""));
    if blocks.is_empty() {
        blocks.push(text(String::new()));
    }
    let mut body = Map::new();
    body.insert("content".into(), Value::Array(blocks));
    body.insert(
        "structuredContent".into(),
        serde_json::to_value(envelope).unwrap_or_default(),
    );
    body.insert("isError".into(), Value::Bool(!envelope.success));
    super::shaped(Value::Object(body)).unwrap_or_else(|_| CallToolResult::error(Vec::new()))
}

/// `text` with skilld's note after it, on a line of its own.
fn noted(mut text: String, note: &str) -> String {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("[skilld: {note}]"));
    text
}

fn noted_error(text: String, error: Option<&str>) -> String {
    match error {
        Some(error) => noted(text, error),
        None => text,
    }
}

fn text(text: String) -> Value {
    json!({ "type": "text", "text": text })
}

/// What a tool's JSON output gives.
enum Given {
    /// Not a content document: the run's text stands.
    Text,
    Blocks(Vec<Value>),
    /// A content document with a block that cannot be passed on: why.
    Refused(String),
}

/// A tool's JSON output is an MCP content document when it is
/// `{"content": [...]}` and nothing else.
fn tool_blocks(parsed: Option<&Value>) -> Given {
    let Some(fields) = parsed.and_then(Value::as_object) else {
        return Given::Text;
    };
    let (Some(Value::Array(blocks)), 1) = (fields.get("content"), fields.len()) else {
        return Given::Text;
    };
    let checked: Result<Vec<Value>, String> = blocks
        .iter()
        .enumerate()
        .map(|(i, b)| checked(b).map_err(|why| format!("content block {i} refused: {why}")))
        .collect();
    checked.map_or_else(Given::Refused, Given::Blocks)
}

/// One block a tool gave, if MCP reads it and it claims nothing of the
/// server's: a known `type`, base64 data of the kind it names, and no
/// resource URI of a reserved scheme.
fn checked(block: &Value) -> Result<Value, String> {
    serde_json::from_value::<rmcp::model::ContentBlock>(block.clone()).map_err(|e| e.to_string())?;
    let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
    let mime = |b: &Value| {
        b.get("mimeType")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match kind {
        "image" | "audio" => {
            if !mime(block).starts_with(&format!("{kind}/")) {
                return Err(format!("an {kind} block needs an {kind}/* mimeType"));
            }
            let data = block.get("data").and_then(Value::as_str).unwrap_or_default();
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|e| format!("its data is not base64: {e}"))?;
        }
        "resource" | "resource_link" => {
            let uri = block
                .get("resource")
                .unwrap_or(block)
                .get("uri")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let lower = uri.to_ascii_lowercase();
            if RESERVED_SCHEMES.iter().any(|s| lower.starts_with(s)) {
                return Err(format!("{uri} names the server's own files"));
            }
        }
        _ => {}
    }
    Ok(block.clone())
}

/// An artifact's blocks: its link, and before it the file itself when it
/// is a small image or sound whose bytes are what its name says.
async fn artifact(invoker: &Invoker, envelope: &Envelope, file: &Artifact, origin: &str) -> Vec<Value> {
    let kind = media_type(&file.path);
    let mime = kind.map_or_else(
        || crate::skill::files::served_type_of(&file.path).unwrap_or("application/octet-stream"),
        |(mime, _)| mime,
    );
    let uri = if file.url.starts_with('/') {
        format!("{origin}{}", file.url)
    } else {
        file.url.clone()
    };
    let link = json!({
        "type": "resource_link",
        "uri": uri,
        "name": file.path,
        "mimeType": mime,
        "size": file.size,
    });
    let Some((mime, sniff)) = kind.filter(|_| file.size <= MAX_INLINE_BYTES) else {
        return vec![link];
    };
    let bytes = match invoker
        .serve_artifact(envelope.run_id, &file.path, Access::Caller)
        .await
    {
        Ok(Served::Bytes(bytes)) if sniff(&bytes) => bytes,
        // In a bucket, or not what its name says: linked only.
        _ => return vec![link],
    };
    let block_type = mime.split('/').next().unwrap_or_default();
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    vec![
        json!({ "type": block_type, "data": data, "mimeType": mime }),
        link,
    ]
}

type Sniff = fn(&[u8]) -> bool;

/// The media types inlined, by extension, with a check of their first
/// bytes. SVG is left out: it is a document that can carry script.
fn media_type(path: &str) -> Option<(&'static str, Sniff)> {
    let found: (&str, Sniff) = match crate::skill::files::extension(path).as_str() {
        "png" => ("image/png", |b| b.starts_with(b"\x89PNG\r\n\x1a\n")),
        "jpg" | "jpeg" => ("image/jpeg", |b| b.starts_with(b"\xff\xd8\xff")),
        "gif" => ("image/gif", |b| {
            b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a")
        }),
        "webp" => ("image/webp", |b| riff(b, *b"WEBP")),
        "wav" => ("audio/wav", |b| riff(b, *b"WAVE")),
        "mp3" => ("audio/mpeg", |b| {
            b.starts_with(b"ID3") || (b.len() > 1 && b[0] == 0xff && b[1] & 0xe0 == 0xe0)
        }),
        "ogg" | "oga" => ("audio/ogg", |b| b.starts_with(b"OggS")),
        "flac" => ("audio/flac", |b| b.starts_with(b"fLaC")),
        _ => return None,
    };
    Some(found)
}

fn riff(bytes: &[u8], form: [u8; 4]) -> bool {
    bytes.len() >= 12 && bytes.starts_with(b"RIFF") && bytes[8..12] == form
}
