//! Bounded capture of a child's output: the first `HEAD_BYTES` and the last
//! `TAIL_BYTES` of the merged stream, a count of everything, and stdout
//! alone (also bounded) for the structured-output check.
//!
//! Memory is fixed no matter how much the child writes (`docs/design.md` §3): the
//! middle is counted and thrown away.

use super::{HEAD_BYTES, TAIL_BYTES};
use std::collections::VecDeque;

/// How much of stdout is kept for `stdout_json`. A document larger than
/// what `output` could show untruncated is not returned as `parsed`: it
/// would defeat the truncation that protects the caller's prompt.
pub(super) const STDOUT_KEEP: usize = HEAD_BYTES + TAIL_BYTES;

/// Which pipe a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    Stdout,
    Stderr,
}

/// What has been kept of the output so far.
#[derive(Debug)]
pub(super) struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    stdout: Vec<u8>,
    stdout_total: u64,
}

/// The rendered result of a capture.
#[derive(Debug)]
pub(super) struct Captured {
    pub output: String,
    pub truncated: bool,
    pub output_bytes: u64,
    pub stdout_json: Option<serde_json::Value>,
}

impl Capture {
    pub(super) fn new() -> Self {
        Self {
            head: Vec::with_capacity(HEAD_BYTES),
            tail: VecDeque::with_capacity(TAIL_BYTES),
            total: 0,
            stdout: Vec::new(),
            stdout_total: 0,
        }
    }

    /// Appends a chunk in arrival order. Never grows past the fixed bounds.
    pub(super) fn push(&mut self, stream: Stream, chunk: &[u8]) {
        let len = chunk.len() as u64;
        self.total += len;
        if stream == Stream::Stdout {
            self.stdout_total += len;
            let room = STDOUT_KEEP.saturating_sub(self.stdout.len()).min(chunk.len());
            self.stdout.extend_from_slice(&chunk[..room]);
        }

        let room = HEAD_BYTES.saturating_sub(self.head.len()).min(chunk.len());
        self.head.extend_from_slice(&chunk[..room]);
        let rest = &chunk[room..];

        // Until HEAD_BYTES + TAIL_BYTES have arrived nothing is dropped, so
        // head followed by tail is then exactly the whole stream.
        if rest.len() >= TAIL_BYTES {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - TAIL_BYTES..]);
        } else {
            let excess = (self.tail.len() + rest.len()).saturating_sub(TAIL_BYTES);
            self.tail.drain(..excess);
            self.tail.extend(rest);
        }
    }

    /// Renders `output` as head + marker + tail, cut on UTF-8 boundaries,
    /// and parses stdout when it was kept whole.
    pub(super) fn finish(self) -> Captured {
        let truncated = self.total > (HEAD_BYTES + TAIL_BYTES) as u64;
        let tail = Vec::from(self.tail);
        let output = if truncated {
            let head_end = head_cut(&self.head);
            let tail_start = tail_cut(&tail);
            let shown = (head_end + tail.len() - tail_start) as u64;
            format!(
                "{}\n... [truncated {} bytes] ...\n{}",
                String::from_utf8_lossy(&self.head[..head_end]),
                self.total.saturating_sub(shown),
                String::from_utf8_lossy(&tail[tail_start..]),
            )
        } else {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            String::from_utf8_lossy(&all).into_owned()
        };
        let stdout_json = if self.stdout_total <= STDOUT_KEEP as u64 && !self.stdout.is_empty() {
            serde_json::from_slice(&self.stdout).ok()
        } else {
            None
        };
        Captured {
            output,
            truncated,
            output_bytes: self.total,
            stdout_json,
        }
    }
}

/// Where to end the head so that it does not stop inside a character: a
/// character cut by the limit is left out (and counted as truncated), rather
/// than shown as U+FFFD.
fn head_cut(head: &[u8]) -> usize {
    let len = head.len();
    // The last character starts at most 3 bytes before the end.
    for back in 1..=len.min(4) {
        let i = len - back;
        let byte = head[i];
        if is_continuation(byte) {
            continue;
        }
        return if sequence_len(byte) > back { i } else { len };
    }
    len
}

/// Where to start the tail so that it does not begin inside a character:
/// the continuation bytes of a character whose start was dropped are
/// skipped (at most 3; a longer run is invalid data and left to be replaced).
fn tail_cut(tail: &[u8]) -> usize {
    let run = tail.iter().take(4).take_while(|b| is_continuation(**b)).count();
    if run <= 3 { run } else { 0 }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The length a UTF-8 sequence announces in its lead byte (1 for bytes that
/// cannot start one, which the lossy conversion replaces anyway).
fn sequence_len(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(chunks: &[(Stream, &[u8])]) -> Captured {
        let mut c = Capture::new();
        for (stream, chunk) in chunks {
            c.push(*stream, chunk);
        }
        c.finish()
    }

    #[test]
    fn short_output_is_kept_whole_in_arrival_order() {
        let got = capture(&[
            (Stream::Stdout, b"one\n"),
            (Stream::Stderr, b"two\n"),
            (Stream::Stdout, b"three\n"),
        ]);
        assert_eq!(got.output, "one\ntwo\nthree\n");
        assert!(!got.truncated);
        assert_eq!(got.output_bytes, 14);
        assert_eq!(got.stdout_json, None);
    }

    #[test]
    fn exactly_the_limit_is_not_truncated() {
        let data = vec![b'x'; HEAD_BYTES + TAIL_BYTES];
        let got = capture(&[(Stream::Stdout, &data[..1000]), (Stream::Stderr, &data[1000..])]);
        assert!(!got.truncated);
        assert_eq!(got.output.len(), HEAD_BYTES + TAIL_BYTES);
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_counts_the_rest() {
        let mut data = Vec::new();
        for i in 0..10_000u32 {
            data.extend_from_slice(format!("{i}\n").as_bytes());
        }
        let mut c = Capture::new();
        // Uneven chunks, so both the small-chunk and big-chunk paths run.
        for (i, chunk) in data.chunks(777).enumerate() {
            c.push(
                if i % 2 == 0 {
                    Stream::Stdout
                } else {
                    Stream::Stderr
                },
                chunk,
            );
        }
        let got = c.finish();
        let total = data.len();
        let expected = format!(
            "{}\n... [truncated {} bytes] ...\n{}",
            String::from_utf8_lossy(&data[..HEAD_BYTES]),
            total - HEAD_BYTES - TAIL_BYTES,
            String::from_utf8_lossy(&data[total - TAIL_BYTES..]),
        );
        assert!(got.truncated);
        assert_eq!(got.output_bytes, total as u64);
        assert_eq!(got.output, expected);
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        // 'é' is 2 bytes, '€' is 3: put one across each cut.
        let mut data = vec![b'a'; HEAD_BYTES - 1];
        data.extend_from_slice("é".as_bytes());
        data.extend_from_slice(&[b'm'; 5000]);
        let tail_text = format!("€{}", "z".repeat(TAIL_BYTES - 2));
        data.extend_from_slice(tail_text.as_bytes());
        let got = capture(&[(Stream::Stdout, &data)]);
        assert!(got.truncated);
        assert!(
            !got.output.contains('\u{FFFD}'),
            "no replacement char at the cuts"
        );
        let (head, rest) = got.output.split_once('\n').unwrap_or_default();
        assert_eq!(head, "a".repeat(HEAD_BYTES - 1));
        let tail = rest.rsplit_once('\n').map(|(_, t)| t).unwrap_or_default();
        assert_eq!(tail, "z".repeat(TAIL_BYTES - 2));
        // Everything but the 2047 'a' and the 2046 'z' shown: 'é', the 'm's and '€' whole.
        let omitted = data.len() - (HEAD_BYTES - 1) - (TAIL_BYTES - 2);
        assert!(
            got.output.contains(&format!("[truncated {omitted} bytes]")),
            "{}",
            &got.output[..2100]
        );
    }

    #[test]
    fn invalid_bytes_are_replaced() {
        let got = capture(&[(Stream::Stdout, b"ok \xff\xfe done")]);
        assert_eq!(got.output, "ok \u{FFFD}\u{FFFD} done");
    }

    #[test]
    fn stdout_json_comes_from_stdout_alone() {
        let got = capture(&[
            (Stream::Stderr, b"warming up\n"),
            (Stream::Stdout, b"{\"a\": 1}\n"),
        ]);
        assert_eq!(got.stdout_json, Some(serde_json::json!({"a": 1})));

        let got = capture(&[(Stream::Stderr, b"{\"a\": 1}")]);
        assert_eq!(got.stdout_json, None);
    }

    #[test]
    fn stdout_json_needs_all_of_stdout() {
        let doc = format!("\"{}\"", "a".repeat(STDOUT_KEEP));
        let got = capture(&[(Stream::Stdout, doc.as_bytes())]);
        assert_eq!(got.stdout_json, None);

        let doc = format!("\"{}\"", "a".repeat(STDOUT_KEEP - 2));
        let got = capture(&[(Stream::Stdout, doc.as_bytes())]);
        assert!(got.stdout_json.is_some());
    }
}
