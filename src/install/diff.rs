//! What changed between two versions of a skill, shown to the approver who
//! decides whether the new version may run: a git-style unified diff of the
//! text files and a list of the files that changed but cannot be shown as
//! text.
//!
//! Both trees come from uploads, so nothing here trusts them: links are
//! described, never followed; pipes and devices are never opened; names
//! that could forge a diff header are quoted; and the number of files, the
//! bytes read per file, the diff's size and the time spent diffing are
//! all bounded.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use similar::TextDiff;

/// Files past this size are compared by bytes, never diffed: a line diff
/// costs time and memory that grow with the product of the two sizes, and
/// the hunks of such a file would fill most of [`MAX_TEXT_BYTES`] anyway.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// The diff text never grows past this, the truncation note included.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;

/// Files (anything but a directory) on either side.
pub const MAX_FILES: usize = 10_000;

/// Version-control metadata is not part of a skill.
const SKIPPED: [&str; 3] = [".git", ".hg", ".svn"];

const CONTEXT_LINES: usize = 3;

const TRUNCATION_NOTE: &str = "… diff truncated at 1 MiB\n";

/// After this much time the diff algorithm approximates (still a correct
/// diff, only not the shortest) so that a pathological pair of files cannot
/// hold a request for minutes. Honest skills never come near it, so the
/// output stays deterministic in practice.
const DIFF_TIME_BUDGET: Duration = Duration::from_secs(5);

/// The changes between two versions of a skill.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct DirDiff {
    /// A unified diff (git-style headers `--- a/PATH` / `+++ b/PATH`, `/dev/null` for added/removed files) of every text file that differs, files in path order.
    pub text: String,
    /// Files that differ and are not text (not UTF-8, or holding NUL), sorted; added/removed binaries included.
    pub binary_changed: Vec<String>,
    /// True when `text` was cut at the cap (a final line says so).
    pub truncated: bool,
}

/// Compares the skill directory `from` (the old version) with `to` (the
/// new one).
///
/// # Errors
///
/// `InvalidData` when either side holds more than [`MAX_FILES`] files or a
/// name that is not UTF-8; any error reading either tree.
pub fn diff_dirs(from: &Path, to: &Path) -> io::Result<DirDiff> {
    let old = walk(from)?;
    let new = walk(to)?;
    let paths: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut out = Output::new(Instant::now() + DIFF_TIME_BUDGET);
    for path in paths {
        compare(path, old.get(path), new.get(path), &mut out)?;
    }
    Ok(out.finish())
}

/// What a directory entry is, as far as the diff cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File {
        executable: bool,
    },
    Symlink,
    /// A pipe, socket or device: described, never opened (a pipe would
    /// block the read forever).
    Special {
        mode: u32,
        what: &'static str,
    },
}

impl Kind {
    fn of(meta: &Metadata) -> Self {
        let file_type = meta.file_type();
        let mode = meta.permissions().mode();
        if file_type.is_symlink() {
            Kind::Symlink
        } else if file_type.is_file() {
            // Any execute bit: whoever runs the skill's scripts may be
            // the owner, the group or another user.
            Kind::File {
                executable: mode & 0o111 != 0,
            }
        } else {
            Kind::Special {
                mode,
                what: special_name(file_type),
            }
        }
    }

    /// The mode as git writes it, so the approver reads familiar numbers.
    fn git_mode(self) -> String {
        match self {
            Kind::File { executable: false } => "100644".to_owned(),
            Kind::File { executable: true } => "100755".to_owned(),
            Kind::Symlink => "120000".to_owned(),
            Kind::Special { mode, .. } => format!("{mode:06o}"),
        }
    }
}

fn special_name(file_type: fs::FileType) -> &'static str {
    if file_type.is_fifo() {
        "fifo"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_block_device() {
        "block device"
    } else if file_type.is_char_device() {
        "character device"
    } else {
        "unknown file type"
    }
}

#[derive(Debug)]
struct Node {
    path: PathBuf,
    kind: Kind,
}

/// Every non-directory entry under `root`, keyed by its '/'-separated
/// relative path. Iterative, so a deeply nested tree cannot exhaust the
/// stack.
fn walk(root: &Path) -> io::Result<BTreeMap<String, Node>> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = dirs.pop() {
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let name = utf8_name(&entry)?;
            if SKIPPED.contains(&name.as_str()) {
                continue;
            }
            let rel = format!("{prefix}{name}");
            // DirEntry::metadata does not follow symlinks.
            let meta = entry.metadata()?;
            if meta.is_dir() {
                dirs.push((entry.path(), format!("{rel}/")));
                continue;
            }
            if found.len() == MAX_FILES {
                return Err(invalid(format!(
                    "{} holds more than {MAX_FILES} files",
                    root.display()
                )));
            }
            found.insert(
                rel,
                Node {
                    path: entry.path(),
                    kind: Kind::of(&meta),
                },
            );
        }
    }
    Ok(found)
}

/// Names must be UTF-8: a lossy conversion could give two files the same
/// name and hide one of them from the approver.
fn utf8_name(entry: &fs::DirEntry) -> io::Result<String> {
    entry.file_name().into_string().map_err(|name| {
        invalid(format!(
            "{} is not a UTF-8 name",
            entry.path().with_file_name(name).display()
        ))
    })
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// The bytes a node is compared by, or `Big` past [`MAX_FILE_BYTES`].
#[derive(Debug, PartialEq, Eq)]
enum Content {
    Small(Vec<u8>),
    Big,
}

impl Content {
    /// The text to diff; `None` for binaries and big files.
    fn text(&self) -> Option<&str> {
        match self {
            Content::Small(bytes) if !bytes.contains(&0) => std::str::from_utf8(bytes).ok(),
            _ => None,
        }
    }
}

fn read_content(node: &Node) -> io::Result<Content> {
    match node.kind {
        Kind::File { .. } => read_capped(&node.path),
        Kind::Symlink => {
            let target = fs::read_link(&node.path)?;
            let mut bytes = b"symlink -> ".to_vec();
            bytes.extend_from_slice(target.as_os_str().as_bytes());
            bytes.push(b'\n');
            Ok(Content::Small(bytes))
        }
        Kind::Special { what, .. } => Ok(Content::Small(format!("special file: {what}\n").into_bytes())),
    }
}

/// Reads at most one byte past the cap, whatever the metadata said: the
/// file may have grown since the walk.
fn read_capped(path: &Path) -> io::Result<Content> {
    let mut bytes = Vec::new();
    open_regular(path)?
        .take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_FILE_BYTES {
        return Ok(Content::Big);
    }
    Ok(Content::Small(bytes))
}

/// Opens a file the walk saw as regular. Should it have been swapped since
/// for a link or a pipe, the open neither follows the link nor blocks on
/// the pipe, and the type is checked again.
fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(invalid(format!(
            "{} changed while being compared",
            path.display()
        )));
    }
    Ok(file)
}

/// Compares two big files in chunks, never holding either whole.
fn same_bytes(a: &Path, b: &Path) -> io::Result<bool> {
    let (mut a, mut b) = (open_regular(a)?, open_regular(b)?);
    if a.metadata()?.len() != b.metadata()?.len() {
        return Ok(false);
    }
    let (mut buf_a, mut buf_b) = (vec![0; 64 * 1024], vec![0; 64 * 1024]);
    loop {
        let n = read_full(&mut a, &mut buf_a)?;
        if n != read_full(&mut b, &mut buf_b)? || buf_a[..n] != buf_b[..n] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Fills `buf` unless the end comes first; `read` alone may stop short,
/// which would misalign the two files being compared.
fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// One path present on either side or both.
fn compare(path: &str, old: Option<&Node>, new: Option<&Node>, out: &mut Output) -> io::Result<()> {
    let old_content = old.map(read_content).transpose()?;
    let new_content = new.map(read_content).transpose()?;
    let same = match (&old_content, &new_content, old, new) {
        (Some(Content::Big), Some(Content::Big), Some(a), Some(b)) => same_bytes(&a.path, &b.path)?,
        (Some(a), Some(b), ..) => a == b,
        _ => false,
    };
    let modes = (old.map(|n| n.kind), new.map(|n| n.kind));
    let mode_changed = matches!(modes, (Some(a), Some(b)) if a.git_mode() != b.git_mode());
    if same && !mode_changed {
        return Ok(());
    }
    // An absent side diffs as empty text, against /dev/null.
    let old_text = old_content.as_ref().map_or(Some(""), Content::text);
    let new_text = new_content.as_ref().map_or(Some(""), Content::text);
    match (old_text, new_text) {
        _ if same => out.push_section(path, modes, None),
        (Some(a), Some(b)) => out.push_section(path, modes, Some((a, b))),
        _ => {
            out.binary_changed.push(path.to_owned());
            if mode_changed {
                out.push_section(path, modes, None);
            }
        }
    }
    Ok(())
}

type Modes = (Option<Kind>, Option<Kind>);

/// `diff --git` and the mode lines, as git writes them. The first line
/// names the file even when no `---`/`+++` pair follows (a mode-only
/// change, an empty file added).
fn file_header(path: &str, modes: Modes) -> String {
    let mut header = format!("diff --git {} {}\n", quote("a/", path), quote("b/", path));
    match modes {
        (None, Some(new)) => header.push_str(&format!("new file mode {}\n", new.git_mode())),
        (Some(old), None) => header.push_str(&format!("deleted file mode {}\n", old.git_mode())),
        (Some(old), Some(new)) if old.git_mode() != new.git_mode() => {
            header.push_str(&format!(
                "old mode {}\nnew mode {}\n",
                old.git_mode(),
                new.git_mode()
            ));
        }
        _ => {}
    }
    header
}

/// The hunks with their `---`/`+++` pair, empty when the texts are equal.
fn unified(path: &str, old: &str, new: &str, modes: Modes, deadline: Instant) -> String {
    let a = if modes.0.is_some() {
        quote("a/", path)
    } else {
        "/dev/null".to_owned()
    };
    let b = if modes.1.is_some() {
        quote("b/", path)
    } else {
        "/dev/null".to_owned()
    };
    TextDiff::configure()
        .deadline(deadline)
        .diff_lines(old, new)
        .unified_diff()
        .context_radius(CONTEXT_LINES)
        .missing_newline_hint(true)
        .header(&a, &b)
        .to_string()
}

/// Git's quoting of unusual names: a newline in a name could otherwise
/// forge a header line and show the approver a diff that is not the real
/// one.
fn quote(prefix: &str, path: &str) -> String {
    let needs = |c: char| c.is_control() || c == '"' || c == '\\';
    if !path.chars().any(needs) {
        return format!("{prefix}{path}");
    }
    let mut quoted = format!("\"{prefix}");
    for c in path.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_control() => push_octal(&mut quoted, c),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

fn push_octal(out: &mut String, c: char) {
    let mut utf8 = [0; 4];
    for byte in c.encode_utf8(&mut utf8).bytes() {
        out.push_str(&format!("\\{byte:03o}"));
    }
}

/// The diff being built, and its budget.
struct Output {
    text: String,
    binary_changed: Vec<String>,
    truncated: bool,
    deadline: Instant,
}

impl Output {
    fn new(deadline: Instant) -> Self {
        Self {
            text: String::new(),
            binary_changed: Vec::new(),
            truncated: false,
            deadline,
        }
    }

    /// Appends a file's header and, given both texts, its hunks. Once the
    /// text is cut, later files are not diffed at all: their hunks would
    /// be thrown away.
    fn push_section(&mut self, path: &str, modes: Modes, texts: Option<(&str, &str)>) {
        if self.truncated {
            return;
        }
        let mut section = file_header(path, modes);
        if let Some((old, new)) = texts {
            section.push_str(&unified(path, old, new, modes, self.deadline));
        }
        self.append(&section);
    }

    /// Appends whole lines while they fit, then the truncation note. The
    /// note's room is kept free so the text never passes the cap.
    fn append(&mut self, section: &str) {
        let budget = MAX_TEXT_BYTES - TRUNCATION_NOTE.len();
        if self.text.len() + section.len() <= budget {
            self.text.push_str(section);
            return;
        }
        let room = budget.saturating_sub(self.text.len());
        // A newline is ASCII, so cutting just after one is a char boundary.
        if let Some(end) = section.as_bytes()[..room].iter().rposition(|&b| b == b'\n') {
            self.text.push_str(&section[..=end]);
        }
        self.text.push_str(TRUNCATION_NOTE);
        self.truncated = true;
    }

    fn finish(self) -> DirDiff {
        DirDiff {
            text: self.text,
            binary_changed: self.binary_changed,
            truncated: self.truncated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use tempfile::TempDir;

    fn tree(files: &[(&str, &[u8])]) -> TempDir {
        let dir = TempDir::new().unwrap();
        for (path, bytes) in files {
            let path = dir.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, bytes).unwrap();
        }
        dir
    }

    fn diff(from: &TempDir, to: &TempDir) -> DirDiff {
        diff_dirs(from.path(), to.path()).unwrap()
    }

    fn text_only(text: &str) -> DirDiff {
        DirDiff {
            text: text.to_owned(),
            binary_changed: vec![],
            truncated: false,
        }
    }

    fn set_mode(dir: &TempDir, path: &str, mode: u32) {
        fs::set_permissions(dir.path().join(path), fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn identical_trees_give_nothing() {
        let files: &[(&str, &[u8])] = &[
            ("SKILL.md", b"hello\n"),
            ("scripts/run.sh", b"echo\n"),
            ("b.bin", &[0, 1]),
        ];
        let (from, to) = (tree(files), tree(files));
        // Version-control metadata differs but is skipped.
        fs::create_dir(to.path().join(".git")).unwrap();
        fs::write(to.path().join(".git/HEAD"), "ref\n").unwrap();
        fs::write(to.path().join("scripts/.hg"), "x").unwrap();
        assert_eq!(diff(&from, &to), text_only(""));
    }

    #[test]
    fn a_changed_line_shows_with_context() {
        let from = tree(&[("SKILL.md", b"1\n2\n3\n4\n5\n6\n7\n8\n9\n")]);
        let to = tree(&[("SKILL.md", b"1\n2\n3\n4\nfive\n6\n7\n8\n9\n")]);
        let expected = "diff --git a/SKILL.md b/SKILL.md\n--- a/SKILL.md\n+++ b/SKILL.md\n\
                        @@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n";
        assert_eq!(diff(&from, &to), text_only(expected));
    }

    #[test]
    fn added_and_removed_files_diff_against_dev_null() {
        let from = tree(&[("old.txt", b"x\n"), ("same", b"s\n")]);
        let to = tree(&[("new/file.txt", b"y"), ("same", b"s\n"), ("empty", b"")]);
        let expected = "diff --git a/empty b/empty\nnew file mode 100644\n\
                        diff --git a/new/file.txt b/new/file.txt\nnew file mode 100644\n\
                        --- /dev/null\n+++ b/new/file.txt\n@@ -0,0 +1 @@\n+y\n\\ No newline at end of file\n\
                        diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n\
                        --- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n";
        assert_eq!(diff(&from, &to), text_only(expected));
    }

    #[test]
    fn binaries_are_listed_not_diffed() {
        let from = tree(&[
            ("changed.bin", &[0, 1, 2]),
            ("gone.bin", &[0xff]),
            ("was-text", b"t\n"),
        ]);
        let to = tree(&[
            ("changed.bin", &[0, 1, 3]),
            ("added.bin", b"a\0b"),
            ("was-text", &[0xc3]),
        ]);
        let got = diff(&from, &to);
        let expected = DirDiff {
            text: String::new(),
            binary_changed: vec![
                "added.bin".into(),
                "changed.bin".into(),
                "gone.bin".into(),
                "was-text".into(),
            ],
            truncated: false,
        };
        assert_eq!(got, expected);
    }

    #[test]
    fn executable_bit_changes_show_git_mode_lines() {
        let from = tree(&[("run.sh", b"echo 1\n"), ("tool.sh", b"a\n")]);
        let to = tree(&[("run.sh", b"echo 1\n"), ("tool.sh", b"b\n")]);
        set_mode(&to, "run.sh", 0o755);
        set_mode(&from, "tool.sh", 0o755);
        set_mode(&to, "tool.sh", 0o644);
        let expected = "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n\
                        diff --git a/tool.sh b/tool.sh\nold mode 100755\nnew mode 100644\n\
                        --- a/tool.sh\n+++ b/tool.sh\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(diff(&from, &to), text_only(expected));
    }

    #[test]
    fn files_over_a_mib_are_compared_by_bytes() {
        let big = "line\n".repeat(MAX_FILE_BYTES / 5 + 1).into_bytes();
        let mut changed = big.clone();
        *changed.last_mut().unwrap() = b'!';
        let from = tree(&[
            ("same.txt", &big),
            ("changed.txt", &big),
            ("grown.txt", b"line\n"),
        ]);
        let to = tree(&[("same.txt", &big), ("changed.txt", &changed), ("grown.txt", &big)]);
        let got = diff(&from, &to);
        assert_eq!(got.binary_changed, ["changed.txt", "grown.txt"]);
        assert_eq!(got.text, "");
    }

    #[test]
    fn many_big_changes_are_truncated_at_the_cap() {
        // Every seventh line changed: the hunks merge and show the whole
        // file, yet the edit distance stays small, so the diff is quick
        // and never near the time budget. 40 files of ~94 KiB of hunks.
        let line = |i: usize, word: &str| format!("{word} {i:>6} ........................\n");
        let old: String = (0..2_000).map(|i| line(i, "line")).collect();
        let new: String = (0..2_000)
            .map(|i| line(i, if i % 7 == 0 { "LINE" } else { "line" }))
            .collect();
        let names: Vec<String> = (0..40).map(|i| format!("f{i:02}")).collect();
        let from = tree(
            &names
                .iter()
                .map(|n| (n.as_str(), old.as_bytes()))
                .collect::<Vec<_>>(),
        );
        let to = tree(
            &names
                .iter()
                .map(|n| (n.as_str(), new.as_bytes()))
                .collect::<Vec<_>>(),
        );
        let started = Instant::now();
        let got = diff(&from, &to);
        assert!(
            started.elapsed() < DIFF_TIME_BUDGET / 2,
            "{:?}",
            started.elapsed()
        );
        assert!(got.truncated);
        assert!(got.text.len() <= MAX_TEXT_BYTES, "{}", got.text.len());
        assert!(got.text.len() > MAX_TEXT_BYTES - 100, "{}", got.text.len());
        let body = got.text.strip_suffix(TRUNCATION_NOTE).unwrap();
        assert!(body.ends_with(".\n"), "cut inside a line");
        assert!(body.starts_with(
            "diff --git a/f00 b/f00\n--- a/f00\n+++ b/f00\n@@ -1,1999 +1,1999 @@\n-line      0 ."
        ));
        assert!(body.contains("diff --git a/f10 b/f10\n"));
        assert!(!body.contains("a/f39"), "files past the cap are not shown");
        assert_eq!(got.binary_changed, Vec::<String>::new());
    }

    #[test]
    fn symlinks_compare_by_target_and_are_not_followed() {
        let (from, to) = (tree(&[("a", b"A\n")]), tree(&[("a", b"A\n")]));
        symlink("a", from.path().join("link")).unwrap();
        symlink("b", to.path().join("link")).unwrap();
        // Followed, these would loop or leave the tree.
        symlink("..", from.path().join("up")).unwrap();
        symlink("..", to.path().join("up")).unwrap();
        fs::write(to.path().join("was-file"), "symlink -> x\n").unwrap();
        symlink("x", from.path().join("was-file")).unwrap();
        let expected = "diff --git a/link b/link\n--- a/link\n+++ b/link\n@@ -1 +1 @@\n\
                        -symlink -> a\n+symlink -> b\n\
                        diff --git a/was-file b/was-file\nold mode 120000\nnew mode 100644\n";
        assert_eq!(diff(&from, &to), text_only(expected));
    }

    #[test]
    fn names_that_could_forge_headers_are_quoted() {
        let from = tree(&[]);
        let to = tree(&[("x\n+++ b/evil", b"y\n")]);
        let expected = "diff --git \"a/x\\n+++ b/evil\" \"b/x\\n+++ b/evil\"\nnew file mode 100644\n\
                        --- /dev/null\n+++ \"b/x\\n+++ b/evil\"\n@@ -0,0 +1 @@\n+y\n";
        assert_eq!(diff(&from, &to), text_only(expected));
    }

    #[test]
    fn too_many_files_is_invalid_data() {
        let from = tree(&[]);
        for i in 0..=MAX_FILES {
            fs::write(from.path().join(i.to_string()), "").unwrap();
        }
        let err = diff_dirs(from.path(), tree(&[]).path()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn the_same_trees_give_the_same_diff() {
        let from = tree(&[
            ("z/1", b"a\nb\n"),
            ("m", &[0]),
            ("a/deep/f", b"x\n"),
            ("k", b"k\n"),
        ]);
        let to = tree(&[
            ("z/1", b"a\nc\n"),
            ("m", &[1]),
            ("a/deep/g", b"x\n"),
            ("k", b"k\n"),
        ]);
        let first = diff(&from, &to);
        assert_eq!(first, diff(&from, &to));
        assert_eq!(first.binary_changed, ["m"]);
        let headers: Vec<&str> = first
            .text
            .lines()
            .filter(|l| l.starts_with("diff --git"))
            .collect();
        assert_eq!(
            headers,
            [
                "diff --git a/a/deep/f b/a/deep/f",
                "diff --git a/a/deep/g b/a/deep/g",
                "diff --git a/z/1 b/z/1"
            ]
        );
    }
}
