//! Text a child wrote, made safe to log: one line that shows what was
//! sent, with nothing the terminal or a log reader would act on.
//!
//! The log formatter escapes `ESC` only in an event's message, not in its
//! fields, and nothing escapes a line break. So a child's `\x1b[2J` would
//! clear the operator's screen, and its `\r` or `\u{2028}` would start what
//! reads as a line of the server's own.

use std::fmt::Write;

/// `text` on one line, cut to `max_chars` characters (then `…`): every
/// control character and every character that hides or reorders text is
/// written as an escape (`\n`, `\r`, `\t`, `\x1b`, `\u{202e}`), and `\` as
/// `\\`, so an escape in the log always stands for what the child sent.
pub fn escape(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 2));
    for (i, c) in text.chars().enumerate() {
        if i == max_chars {
            out.push('…');
            break;
        }
        match c {
            '\\' => out.push_str(r"\\"),
            '\n' => out.push_str(r"\n"),
            '\r' => out.push_str(r"\r"),
            '\t' => out.push_str(r"\t"),
            c if u32::from(c) < 0x80 && c.is_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if hidden(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// What does not show as itself: C1 controls, line and paragraph
/// separators, and the format characters that reorder or hide text.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_hiding_characters_are_escaped_on_one_line() {
        assert_eq!(
            escape("\x1b[2J\nFORGED line\r\x07\u{85}\u{2028}a\\b\u{202e}c", 100),
            r"\x1b[2J\nFORGED line\r\x07\u{85}\u{2028}a\\b\u{202e}c"
        );
        assert_eq!(escape("plain text, ünïcode", 100), "plain text, ünïcode");
        assert_eq!(escape("abcdef", 3), "abc…");
        assert_eq!(escape("abc", 3), "abc");
    }
}
