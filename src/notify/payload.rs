//! The bodies posted: the JSON event (Standard Webhooks' `type`,
//! `timestamp`, `data`) or Slack's `text` and `blocks`.

use super::target::{Event, Format};
use crate::session::PendingActivation;
use crate::store::{Approval, EgressRequest};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// The longest command line shown; a longer one is cut with `…`.
const MAX_PREVIEW_CHARS: usize = 500;
/// The longest arguments shown; longer ones are cut with `…`.
const MAX_ARGUMENTS_CHARS: usize = 1000;

/// The body for `event` of `approval`, in `format`; links start at
/// `public_url`.
pub fn body(format: Format, event: Event, approval: &Approval, public_url: &str, at: DateTime<Utc>) -> Value {
    let facts = Facts::of(approval, public_url);
    match format {
        Format::Json => json_body(event, approval, &facts, at),
        Format::Slack => slack_body(event, approval, &facts),
    }
}

/// What both shapes say beyond the request itself.
struct Facts {
    preview: String,
    /// An entrypoint's or a manifest tool's command line is the same for
    /// every call: what differs is here, so it is always shown.
    arguments: String,
    approval_url: String,
    inbox_url: String,
}

impl Facts {
    fn of(a: &Approval, public_url: &str) -> Self {
        let base = public_url.trim_end_matches('/');
        Self {
            preview: preview(&a.argv),
            arguments: arguments_preview(&a.arguments),
            approval_url: format!("{base}/approvals/{}", a.id),
            inbox_url: format!("{base}/ui"),
        }
    }
}

fn json_body(event: Event, a: &Approval, f: &Facts, at: DateTime<Utc>) -> Value {
    json!({
        "type": event.name(),
        "timestamp": at,
        "data": {
            "approval_id": a.id,
            "run_id": a.run_id,
            "skill": a.skill,
            "tool": a.tool,
            "description": a.description,
            "argv_preview": f.preview,
            "arguments_preview": f.arguments,
            "trust": a.trust,
            "warning": a.warning,
            "permissions": a.permissions,
            "requested_by": a.requested_by,
            "status": a.status,
            "scope": a.scope,
            "decided_by": a.decided_by,
            "note": a.note,
            "created_at": a.created_at,
            "expires_at": a.expires_at,
            "decided_at": a.decided_at,
            "approval_url": f.approval_url,
            "inbox_url": f.inbox_url,
        },
    })
}

fn slack_body(event: Event, a: &Approval, f: &Facts) -> Value {
    let who = a.requested_by.as_deref().unwrap_or("a caller without a token");
    let headline = match event {
        Event::Requested | Event::ActivationRequested | Event::EgressRequested => {
            format!("{} wants to run {} / {}", who, a.skill, a.tool)
        }
        Event::Decided => format!(
            "{} {} {} / {}",
            a.decided_by.as_deref().unwrap_or("someone"),
            a.status.as_str(),
            a.skill,
            a.tool
        ),
    };
    let mut lines = vec![format!("*{}*", mrkdwn(&headline))];
    lines.push(code_block(&f.preview));
    lines.push("Arguments:".to_owned());
    lines.push(code_block(&f.arguments));
    if let Some(w) = &a.warning {
        lines.push(format!(":warning: {}", mrkdwn(w)));
    }
    if let Some(n) = a.note.as_deref().filter(|n| !n.is_empty()) {
        lines.push(format!("Note: {}", mrkdwn(n)));
    }
    let context = format!("trust: {} · request {}", a.trust, a.id);
    json!({
        "text": headline,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": lines.join("\n")}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn(&context)}]},
            {"type": "section", "text": {"type": "mrkdwn",
                "text": format!("<{}|Open the inbox> · <{}|this request>", f.inbox_url, f.approval_url)}},
        ],
    })
}

/// The body for a skill waiting in a session to be allowed, in `format`.
pub fn activation_body(format: Format, p: &PendingActivation, public_url: &str, at: DateTime<Utc>) -> Value {
    let base = public_url.trim_end_matches('/');
    let inbox_url = format!("{base}/ui");
    let decide_url = format!("{base}/sessions/{}/activations/{}", p.session, p.skill);
    match format {
        Format::Json => json!({
            "type": Event::ActivationRequested.name(),
            "timestamp": at,
            "data": {
                "request_id": p.id,
                "session": p.session,
                "caller": p.caller,
                "skill": p.skill,
                "permissions": p.permissions,
                // A decision names the request and this hash.
                "hash": p.hash,
                "trust": p.trust,
                "trigger": p.trigger,
                "network": p.network,
                "requested_at": p.requested_at,
                "decide_url": decide_url,
                "inbox_url": inbox_url,
            },
        }),
        Format::Slack => {
            let who = p.caller.as_deref().unwrap_or("a caller without a token");
            let headline = format!("{who}'s session wants to activate {}", p.skill);
            let mut permissions = if p.permissions.is_empty() {
                "none declared".to_owned()
            } else {
                p.permissions.join(", ")
            };
            if let Some(network) = &p.network {
                permissions.push_str(&format!("\n:warning: {network}"));
            }
            let context = format!(
                "trust: {} · session {} · request {}",
                p.trust.as_str(),
                p.session,
                p.id
            );
            json!({
                "text": headline,
                "blocks": [
                    {"type": "section", "text": {"type": "mrkdwn",
                        "text": format!("*{}*\nPermissions: {}", mrkdwn(&headline), mrkdwn(&permissions))}},
                    {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn(&context)}]},
                    {"type": "section", "text": {"type": "mrkdwn", "text": format!("<{inbox_url}|Open the inbox>")}},
                ],
            })
        }
    }
}

/// `text` as a Slack code block that nothing inside can close.
fn code_block(text: &str) -> String {
    format!("```{}```", mrkdwn(&text.replace("```", "`\u{200b}``")))
}

/// Slack's three control characters, escaped as it asks.
fn mrkdwn(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The command line as a shell would read it, every word quoted as needed
/// and anything invisible or misleading (control characters, bidi
/// overrides, zero-width characters) escaped, so it reads as what runs.
pub fn preview(argv: &[String]) -> String {
    let line = argv.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
    if line.chars().count() <= MAX_PREVIEW_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(MAX_PREVIEW_CHARS).collect();
    cut.push('…');
    cut
}

/// The call's arguments as compact JSON, keys sorted, with every
/// character [`preview`] escapes written as a `\u` escape (still JSON, and
/// what the inbox shows), cut with `…` past [`MAX_ARGUMENTS_CHARS`].
pub fn arguments_preview(arguments: &Value) -> String {
    let text = serde_json::to_string(arguments).unwrap_or_default();
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == MAX_ARGUMENTS_CHARS {
            out.push('…');
            break;
        }
        if hidden(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=:,@+%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_owned();
    }
    if !word.chars().any(hidden) {
        return format!("'{}'", word.replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for c in word.chars() {
        match c {
            '\'' => out.push_str(r"\'"),
            '\\' => out.push_str(r"\\"),
            '\n' => out.push_str(r"\n"),
            '\t' => out.push_str(r"\t"),
            c if hidden(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Characters that do not show as themselves: controls, and the format
/// characters that reorder or hide text.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// The body for a destination held for a person, in `format`.
pub fn egress_body(format: Format, r: &EgressRequest, public_url: &str, at: DateTime<Utc>) -> Value {
    let base = public_url.trim_end_matches('/');
    let inbox_url = format!("{base}/ui");
    let decide_url = format!("{base}/egress/{}", r.id);
    let version = r
        .skill_version
        .as_deref()
        .map(|v| format!(" {v}"))
        .unwrap_or_default();
    let headline = format!("{}{version} wants to reach {}:{}", r.skill, r.host, r.port);
    match format {
        Format::Json => json!({
            "type": Event::EgressRequested.name(),
            "timestamp": at,
            "data": {
                "request_id": r.id,
                "summary": headline,
                "run_id": r.run_id,
                "skill": r.skill,
                "skill_version": r.skill_version,
                "skill_hash": r.skill_hash,
                "tool": r.tool,
                "requested_by": r.requested_by,
                "host": r.host,
                "port": r.port,
                "requested_at": r.created_at,
                "expires_at": r.expires_at,
                "allow_url": format!("{decide_url}/allow"),
                "deny_url": format!("{decide_url}/deny"),
                "inbox_url": inbox_url,
            },
        }),
        Format::Slack => {
            let context = format!(
                "call {} · by {} · request {} · waits until {}",
                r.run_id
                    .map_or_else(|| "none (a long-lived process)".to_owned(), |id| id.to_string()),
                r.requested_by.as_deref().unwrap_or("a caller without a token"),
                r.id,
                r.expires_at.format("%H:%M:%S UTC"),
            );
            json!({
                "text": headline,
                "blocks": [
                    {"type": "section", "text": {"type": "mrkdwn", "text": format!("*{}*", mrkdwn(&headline))}},
                    {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn(&context)}]},
                    {"type": "section", "text": {"type": "mrkdwn", "text": format!("<{inbox_url}|Open the inbox>")}},
                ],
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_read_as_what_runs() {
        let argv = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        assert_eq!(preview(&argv(&["echo", "a b", "it's"])), r"echo 'a b' 'it'\''s'");
        assert_eq!(
            preview(&argv(&["cat", "x\u{202e}txt.exe", "a\nb"])),
            r"cat $'x\u202etxt.exe' $'a\nb'"
        );
        assert_eq!(preview(&argv(&["true", ""])), "true ''");
        let long = preview(&argv(&[&"x".repeat(600)]));
        assert_eq!(long.chars().count(), MAX_PREVIEW_CHARS + 1);
    }

    #[test]
    fn arguments_read_as_sent_and_stay_json() {
        let args = serde_json::json!({"b": "x\u{202e}y\u{85}", "a": [1, "q\n"]});
        let shown = arguments_preview(&args);
        assert_eq!(shown, r#"{"a":[1,"q\n"],"b":"x\u202ey\u0085"}"#);
        assert_eq!(serde_json::from_str::<Value>(&shown).unwrap(), args);
        let long = arguments_preview(&serde_json::json!({"x": "y".repeat(2000)}));
        assert_eq!(long.chars().count(), MAX_ARGUMENTS_CHARS + 1);
    }

    #[test]
    fn slack_text_cannot_inject_links() {
        assert_eq!(
            mrkdwn("<!channel> & <http://x|y>"),
            "&lt;!channel&gt; &amp; &lt;http://x|y&gt;"
        );
    }
}
