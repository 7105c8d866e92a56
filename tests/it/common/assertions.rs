//! Assertions that many tests make alike, written once.

/// Asserts that a finished command exited with `code`; when it did not,
/// the message is `context` followed by what the command said on stderr.
#[track_caller]
pub fn assert_exit(out: &std::process::Output, code: i32, context: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{context}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
