//! What a script says it does, for its tool's description: read from the
//! source, never learned by running it (a skill's scripts are untrusted
//! code, and loading must run nothing). The first that says something of
//! a leading comment or docstring, an argparse `description=` (or a
//! commander `.description(…)`), and a `usage:` line. Whatever is found is
//! cut to one plain line: no control or invisible characters, at most
//! [`MAX_CHARS`].

use std::io::Read;
use std::path::Path;

/// The longest description a script gives its tool, in characters.
pub const MAX_CHARS: usize = 500;

/// How much of a script is read: what it says of itself is at the top.
const HEAD_BYTES: u64 = 64 * 1024;

/// The lines a leading comment may span, and a `usage:` line be found in.
const HEAD_LINES: usize = 200;

/// The description of `script`, a file of the skill in `skill_dir`; `None`
/// when it says nothing (or resolves outside the skill, which the loader
/// reports: its text is not the skill's to show).
pub(in crate::skill) fn describe(script: &Path, skill_dir: &Path) -> Option<String> {
    let real = std::fs::canonicalize(script).ok()?;
    if !std::fs::canonicalize(skill_dir).is_ok_and(|d| real.starts_with(d)) {
        return None;
    }
    let mut head = Vec::new();
    std::fs::File::open(&real)
        .ok()?
        .take(HEAD_BYTES)
        .read_to_end(&mut head)
        .ok()?;
    let text = String::from_utf8_lossy(&head);
    let file = script.file_name()?.to_string_lossy();
    let found = leading_comment(&text)
        .or_else(|| declared_description(&text))
        .or_else(|| usage_line(&text, &file))?;
    Some(plain(&found, MAX_CHARS)).filter(|s| !s.is_empty())
}

/// `text` as one line: control characters become spaces, invisible ones
/// (zero-width, bidirectional overrides, soft hyphens) go, runs of space
/// collapse; past `max` characters it is cut between words, with `…`.
pub fn plain(text: &str, max: usize) -> String {
    let visible: String = text
        .chars()
        .filter(|c| !is_invisible(*c))
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let line = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let cut: String = line.chars().take(max.saturating_sub(1)).collect();
    let words = match cut.rfind(' ') {
        Some(at) if at > cut.len() / 2 => &cut[..at],
        _ => cut.as_str(),
    };
    format!("{}…", words.trim_end())
}

/// Format characters that change how text reads without showing.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2069}' | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}')
}

/// The first paragraph of the script's leading comments or docstring that
/// is not a licence notice. Skipped before it: blank lines, the `#!` line,
/// a coding line, `'use strict'`, and a Python inline metadata block
/// (`# /// script` … `# ///`), which says how to run it, not what it does.
fn leading_comment(text: &str) -> Option<String> {
    let mut lines = text.lines().take(HEAD_LINES).map(str::trim).peekable();
    loop {
        skip_preamble(&mut lines);
        let first = lines.next()?;
        let block = comment_block(first, &mut lines)?;
        if let Some(found) = first_paragraph(&block) {
            return Some(found);
        }
    }
}

fn skip_preamble<'a>(lines: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>) {
    let mut in_metadata = false;
    while let Some(&line) = lines.peek() {
        let opens = line.starts_with("# /// ");
        let skip = line.is_empty()
            || line.starts_with("#!")
            || line.contains("-*- coding")
            || matches!(
                line,
                "'use strict';" | "\"use strict\";" | "'use strict'" | "\"use strict\""
            )
            || in_metadata
            || opens;
        if opens {
            in_metadata = true;
        } else if in_metadata && line == "# ///" {
            in_metadata = false;
        }
        if !skip {
            return;
        }
        lines.next();
    }
}

/// The text lines of the comment or docstring that starts at `first`;
/// `None` when `first` is code.
fn comment_block<'a>(first: &'a str, rest: &mut impl Iterator<Item = &'a str>) -> Option<Vec<String>> {
    let unprefixed = first.trim_start_matches(['r', 'R', 'u', 'U']);
    if let Some(quote) = ["\"\"\"", "'''"].into_iter().find(|q| unprefixed.starts_with(q)) {
        return Some(docstring(&unprefixed[3..], quote, rest));
    }
    if let Some(marker) = ["//", "#"].into_iter().find(|m| first.starts_with(m)) {
        let mut block = vec![uncomment(first, marker)];
        let mut rest = rest.peekable();
        while let Some(line) = rest.next_if(|l| l.starts_with(marker)) {
            block.push(uncomment(line, marker));
        }
        return Some(block);
    }
    let body = first.strip_prefix("/*")?;
    let mut block = Vec::new();
    let mut line = body;
    loop {
        let done = line.contains("*/");
        let text = line.split("*/").next().unwrap_or("");
        block.push(text.trim().trim_start_matches('*').trim().to_owned());
        match rest.next() {
            Some(next) if !done => line = next,
            _ => return Some(block),
        }
    }
}

/// A comment line's text; a line of only `#`, `/`, `=`, `-` or `*` (a
/// rule drawn across) reads as blank.
fn uncomment(line: &str, marker: &str) -> String {
    let text = line.trim_start_matches(marker);
    if text
        .chars()
        .all(|c| matches!(c, '#' | '/' | '=' | '-' | '*' | ' '))
    {
        return String::new();
    }
    text.trim().to_owned()
}

/// A docstring's lines; `first` follows its opening quotes.
fn docstring<'a>(first: &'a str, quote: &str, rest: &mut impl Iterator<Item = &'a str>) -> Vec<String> {
    if let Some((inside, _)) = first.split_once(quote) {
        return vec![inside.trim().to_owned()];
    }
    let mut block = vec![first.trim().to_owned()];
    for line in rest {
        if let Some((inside, _)) = line.split_once(quote) {
            block.push(inside.trim().to_owned());
            break;
        }
        block.push(line.trim().to_owned());
    }
    block
}

/// The first paragraph of `block` that is not a licence notice, as one
/// line. JSDoc: `@file`, `@fileoverview`, `@description` and `@summary`
/// introduce text; any other tag ends a paragraph.
fn first_paragraph(block: &[String]) -> Option<String> {
    let mut paragraphs = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in block {
        let text = ["@fileoverview", "@file", "@description", "@summary"]
            .into_iter()
            .find_map(|tag| line.strip_prefix(tag))
            .unwrap_or(line)
            .trim();
        if text.is_empty() || text.starts_with('@') {
            if !current.is_empty() {
                paragraphs.push(current.join(" "));
                current.clear();
            }
        } else {
            current.push(text);
        }
    }
    if !current.is_empty() {
        paragraphs.push(current.join(" "));
    }
    paragraphs.into_iter().find(|p| !is_licence(p))
}

fn is_licence(paragraph: &str) -> bool {
    let lower = paragraph.to_ascii_lowercase();
    lower.starts_with("copyright")
        || lower.starts_with("(c)")
        || lower.starts_with("©")
        || ["spdx-license-identifier", "licensed under", "all rights reserved"]
            .iter()
            .any(|w| lower.contains(w))
}

/// argparse's `ArgumentParser(description="…")`, or commander's
/// `.description("…")`: a string literal, read as text (a name such as
/// `__doc__` is not followed: the docstring was read first).
fn declared_description(text: &str) -> Option<String> {
    if let Some(at) = text.find("ArgumentParser(") {
        let call = &text[at..];
        let call = &call[..call.len().min(2048)];
        if let Some(arg) = call.find("description=") {
            return string_literal(&call[arg + "description=".len()..]);
        }
    }
    let at = text.find(".description(")?;
    string_literal(&text[at + ".description(".len()..])
}

/// The string at the start of `code` (after spaces and an opening
/// parenthesis): adjacent literals joined, as Python joins them. An
/// f-string or a name is not a literal.
fn string_literal(code: &str) -> Option<String> {
    let mut rest = code.trim_start().trim_start_matches('(');
    let mut out = String::new();
    loop {
        rest = rest.trim_start();
        let quote = ["\"\"\"", "'''", "\"", "'", "`"]
            .into_iter()
            .find(|q| rest.starts_with(q))?;
        let body = &rest[quote.len()..];
        let end = body.find(quote)?;
        out.push_str(&body[..end].replace("\\n", " "));
        rest = &body[end + quote.len()..];
        if !rest.trim_start().starts_with(['"', '\'']) {
            break;
        }
    }
    Some(out).filter(|s| !s.trim().is_empty())
}

/// The first `usage:` line: what follows it on the line, inside the
/// string it is printed from if any, with the script's own name for
/// `$0`, `${0##*/}`, `$(basename "$0")` and `%(prog)s`.
fn usage_line(text: &str, file: &str) -> Option<String> {
    let line = text
        .lines()
        .take(HEAD_LINES)
        .find(|l| l.to_ascii_lowercase().contains("usage:"))?;
    let shown = format!("scripts/{file}");
    let line = [
        "$(basename \"$0\")",
        "$(basename $0)",
        "${0##*/}",
        "${0}",
        "$0",
        "%(prog)s",
        "{sys.argv[0]}",
    ]
    .iter()
    .fold(line.to_owned(), |l, name| l.replace(name, &shown));
    let at = line.to_ascii_lowercase().find("usage:")?;
    let (before, mut usage) = line.split_at(at);
    if let Some(quote) = before.chars().rev().find(|c| matches!(c, '"' | '\'' | '`')) {
        usage = usage.split(quote).next().unwrap_or(usage);
    }
    let words = usage["usage:".len()..].trim();
    (!words.is_empty()).then(|| format!("Usage: {words}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Option<String> {
        leading_comment(text)
            .or_else(|| declared_description(text))
            .or_else(|| usage_line(text, "x.sh"))
            .map(|s| plain(&s, MAX_CHARS))
    }

    #[test]
    fn docstrings_and_comments() {
        assert_eq!(
            found("#!/usr/bin/env python3\n\"\"\"Count words.\n\nMore.\"\"\"\n").as_deref(),
            Some("Count words.")
        );
        assert_eq!(
            found("r'''\n  Two\n  lines.\n'''\n").as_deref(),
            Some("Two lines.")
        );
        assert_eq!(
            found("#!/bin/sh\n# Print it.\n# Twice.\n\necho").as_deref(),
            Some("Print it. Twice.")
        );
        assert_eq!(
            found("'use strict';\n/**\n * @fileoverview Fetch a page.\n * @param x\n */\n").as_deref(),
            Some("Fetch a page.")
        );
        assert_eq!(
            found("// Copyright 2024 A\n// SPDX-License-Identifier: MIT\n\n// Does it.\nx()").as_deref(),
            Some("Does it.")
        );
        assert_eq!(found("########\n# Banner\n########\n").as_deref(), Some("Banner"));
    }

    #[test]
    fn declared_and_usage() {
        let argparse = "import argparse\np = argparse.ArgumentParser(\n    description=\"Merge two \"\n    'PDF files.')\n";
        assert_eq!(found(argparse).as_deref(), Some("Merge two PDF files."));
        assert_eq!(
            found("import argparse\np = argparse.ArgumentParser(description=__doc__)\n"),
            None
        );
        let shell = "set -e\nif [ $# -lt 1 ]; then\n  echo \"usage: $0 FILE [N]\" >&2\nfi\n";
        assert_eq!(found(shell).as_deref(), Some("Usage: scripts/x.sh FILE [N]"));
        assert_eq!(
            found("program.description('List the files.');\n").as_deref(),
            Some("List the files.")
        );
        assert_eq!(found("print('hi')\n"), None);
    }

    #[test]
    fn plain_is_one_bounded_line() {
        assert_eq!(
            plain("a\u{1b}[31mb\u{202e}c\u{200b}d\tx\r\ny", 100),
            "a [31mbcd x y"
        );
        let long = "word ".repeat(300);
        let cut = plain(&long, MAX_CHARS);
        assert!(
            cut.chars().count() <= MAX_CHARS && cut.ends_with("word…"),
            "{cut}"
        );
    }
}
