//! Whole-value assertions: a value (an envelope, a problem document, a
//! session view, an export) compared whole with its snapshot under
//! `tests/it/snapshots/`, what differs from run to run and from SQLite
//! to PostgreSQL redacted. Each redaction first checks the shape of what
//! it hides (an id is a UUID, a time is RFC 3339), so a snapshot asserts
//! no less than the field-by-field checks it replaced.
//!
//! ```ignore
//! redacted().bind(|| assert_json_snapshot!("echo_args_envelope", plain(&env)));
//! ```

use insta::dynamic_redaction;
use insta::internals::Content;

/// Fields that hold an id (a UUID, or null where there is none).
const IDS: [&str; 12] = [
    "id",
    "run_id",
    "approval_id",
    "session_id",
    "session",
    "request",
    "grant_id",
    "parent_run",
    "parent_run_id",
    "run",
    "approval",
    "activation_id",
];

/// Fields that hold a time (RFC 3339, or null).
const TIMES: [&str; 13] = [
    "created_at",
    "started_at",
    "finished_at",
    "expires_at",
    "decided_at",
    "updated_at",
    "ended_at",
    "activated_at",
    "last_seen_at",
    "last_active_at",
    "requested_at",
    "queued_at",
    "deadline",
];

/// Fields that hold a duration or a process id (a number).
const NUMBERS: [(&str, &str); 6] = [
    ("duration_ms", "[ms]"),
    ("elapsed_ms", "[ms]"),
    ("queued_ms", "[ms]"),
    ("wall_ms", "[ms]"),
    ("pid", "[pid]"),
    ("pgid", "[pid]"),
];

/// Fields that hold the hash of a skill's files (stable, but changed by
/// any edit of a fixture: other assertions compare it with the catalog's).
const HASHES: [&str; 2] = ["skill_hash", "hash"];

/// Snapshot settings with every id, time, duration, process id and hash
/// redacted wherever it sits, and ids, ports, temporary paths and link
/// signatures inside strings filtered out. Bind them around the
/// assertion (`redacted().bind(|| assert_json_snapshot!(..))`).
pub fn redacted() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_sort_maps(true);
    for key in IDS {
        settings.add_redaction(&format!(".**.{key}"), dynamic_redaction(id));
    }
    for key in TIMES {
        settings.add_redaction(&format!(".**.{key}"), dynamic_redaction(time));
    }
    for (key, shown) in NUMBERS {
        settings.add_redaction(
            &format!(".**.{key}"),
            dynamic_redaction(move |value: Content, path| {
                assert!(
                    value.as_u64().is_some() || value.is_nil(),
                    "{path}: not a whole number: {value:?}"
                );
                if value.is_nil() {
                    value
                } else {
                    Content::from(shown)
                }
            }),
        );
    }
    for key in HASHES {
        settings.add_redaction(&format!(".**.{key}"), dynamic_redaction(hash));
    }
    // A session's secret: a fresh random string each time.
    settings.add_redaction(
        ".**.secret",
        dynamic_redaction(|value: Content, path| {
            let secret = value.as_str().unwrap_or_default();
            assert!(secret.len() >= 16, "{path}: not a secret: {value:?}");
            Content::from("[secret]")
        }),
    );
    // Where the checkout is differs from machine to machine (and its
    // readable copy lies under /tmp: named before temporary paths are).
    let checkout = super::checkout().display().to_string();
    settings.add_filter(&regex::escape(&checkout), "[checkout]");
    settings.add_filter(&regex::escape(env!("CARGO_MANIFEST_DIR")), "[checkout]");
    // A temporary directory, wherever TMPDIR puts them.
    let temp = std::env::temp_dir().display().to_string();
    let temp = regex::escape(temp.trim_end_matches('/'));
    settings.add_filter(&format!("{temp}/[.A-Za-z0-9_-]+"), "[tmp]");
    for (pattern, shown) in FILTERS {
        settings.add_filter(pattern, shown);
    }
    settings
}

/// What differs inside strings: ids in paths and messages, the test
/// server's port, temporary directories, an artifact link's expiry and
/// signature.
const FILTERS: [(&str, &str); 5] = [
    (
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "[id]",
    ),
    (r"(127\.0\.0\.1|localhost):[0-9]+", "$1:[port]"),
    (r"/tmp/[.A-Za-z0-9_-]+", "[tmp]"),
    (r"expires=[0-9]+", "expires=[time]"),
    (r"signature=[0-9A-Za-z_-]+", "signature=[signature]"),
];

fn id(value: Content, path: insta::internals::ContentPath<'_>) -> Content {
    match value.as_str() {
        Some(s) => {
            assert!(uuid::Uuid::parse_str(s).is_ok(), "{path}: not an id: {s}");
            Content::from("[id]")
        }
        // Null where there is none; anything else (a number, an object
        // under the same name) is not an id and stays as it is.
        None => value,
    }
}

fn time(value: Content, path: insta::internals::ContentPath<'_>) -> Content {
    match value.as_str() {
        Some(s) => {
            assert!(
                chrono::DateTime::parse_from_rfc3339(s).is_ok(),
                "{path}: not an RFC 3339 time: {s}"
            );
            Content::from("[time]")
        }
        None => value,
    }
}

fn hash(value: Content, path: insta::internals::ContentPath<'_>) -> Content {
    match value.as_str() {
        Some(s) => {
            assert!(
                s.len() >= 16 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == ':'),
                "{path}: not a hash: {s}"
            );
            Content::from("[hash]")
        }
        None => value,
    }
}

/// `value` as insta should see it: its numbers as plain numbers. (A
/// dependency turns on serde_json's `arbitrary_precision`, under which a
/// number serializes as a private struct holding its text.)
pub fn plain(value: &serde_json::Value) -> Plain<'_> {
    Plain(value)
}

/// See [`plain`].
pub struct Plain<'a>(&'a serde_json::Value);

impl serde::Serialize for Plain<'_> {
    fn serialize<S: serde::Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        use serde_json::Value;
        match self.0 {
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => out.serialize_u64(u),
                (_, Some(i), _) => out.serialize_i64(i),
                (_, _, Some(f)) => out.serialize_f64(f),
                _ => out.serialize_str(&n.to_string()),
            },
            Value::Array(items) => {
                let mut seq = out.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Plain(item))?;
                }
                seq.end()
            }
            Value::Object(fields) => {
                let mut map = out.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k, &Plain(v))?;
                }
                map.end()
            }
            other => other.serialize(out),
        }
    }
}
