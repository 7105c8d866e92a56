//! The content hash of a skill (`docs/design.md` §2) and its
//! fingerprint: how the hashed files looked when they were read, so that a
//! run can tell as it starts whether they still hash the same.

use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// SHA-256 over the definition and every other file a tool runs or the
/// skill serves (`files`: the [`Runnable`] ones, the programs commands
/// name and the served files), each as `path NUL length content`, sorted
/// by path; symlinks are read through. With it, how each file looked when
/// it was read ([`Fingerprint`]), and each file's own digest: the digests
/// the Skills extension lists are of the very bytes this hash covers.
pub(super) fn content_hash(
    dir: &Path,
    definition_path: &Path,
    definition: &[u8],
    files: &[String],
) -> (String, Fingerprint, Digests) {
    let paths: BTreeSet<&str> = files
        .iter()
        .map(String::as_str)
        .filter(|p| *p != "SKILL.md")
        .collect();
    let mut stamps = vec![stamp(definition_path)];
    // The definition was read before its stamp was taken: read it again,
    // and if it changed meanwhile, leave a stamp no file matches, so the
    // first run hashes it afresh.
    if std::fs::read(definition_path).ok().as_deref() != Some(definition) {
        stamps[0] = None;
    }
    let mut h = Sha256::new();
    feed(&mut h, "SKILL.md", definition);
    let mut digests = Digests::default();
    for rel in &paths {
        let path = dir.join(rel);
        stamps.push(stamp(&path));
        let content = std::fs::read(&path).unwrap_or_default();
        feed(&mut h, rel, &content);
        digests.0.insert((*rel).to_owned(), FileDigest::of(&content));
    }
    let fingerprint = Fingerprint {
        dir: dir.to_path_buf(),
        definition: definition_path.to_path_buf(),
        files: paths.into_iter().map(str::to_owned).collect(),
        stamps,
        offered: None,
    };
    (hex::encode(h.finalize()), fingerprint, digests)
}

/// One file's `sha256:<hex>` digest and size, as the Skills extension
/// (SEP-2640) lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    pub digest: String,
    pub size: u64,
}

impl FileDigest {
    pub fn of(content: &[u8]) -> Self {
        Self {
            digest: format!("sha256:{}", hex::encode(Sha256::digest(content))),
            size: content.len() as u64,
        }
    }
}

/// The digest of each hashed file but the definition, by relative path.
#[derive(Debug, Clone, Default)]
pub struct Digests(pub std::collections::BTreeMap<String, FileDigest>);

/// What a skill's hash was computed from, and how each of those files
/// looked just before it was read. Checked when a run starts: an edit
/// made any way changes a file's change time, even through a hard link
/// from outside the skill, deeper than a watch reaches, or while an
/// approved call waited for a slot; then the hash is computed again.
#[derive(Debug, Clone, Default)]
pub struct Fingerprint {
    dir: PathBuf,
    definition: PathBuf,
    /// The other files, relative to `dir`, sorted.
    files: Vec<String>,
    /// The definition's stamp, then each file's, in order; `None` for one
    /// that could not be read.
    stamps: Vec<Option<Stamp>>,
    /// The digest of what an MCP server offered, folded into the hash.
    offered: Option<String>,
}

/// The parts of a file's status any change to it touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: ns(m.mtime(), m.mtime_nsec()),
        ctime_ns: ns(m.ctime(), m.ctime_nsec()),
    })
}

impl Fingerprint {
    /// Whether the files still hash to `hash`: at once when none changed
    /// since they were read ([`Self::unchanged`]), else by hashing them
    /// again (blocking).
    pub fn still(&self, hash: &str) -> bool {
        self.unchanged() || self.rehash().is_some_and(|h| h == hash)
    }

    /// Whether no hashed file changed since it was read: a `stat` each.
    pub fn unchanged(&self) -> bool {
        if self.stamps.is_empty() {
            return true;
        }
        let now = std::iter::once(&self.definition)
            .map(|p| stamp(p))
            .chain(self.files.iter().map(|rel| stamp(&self.dir.join(rel))));
        now.eq(self.stamps.iter().copied()) && self.stamps.iter().all(Option::is_some)
    }

    fn rehash(&self) -> Option<String> {
        let definition = std::fs::read(&self.definition).ok()?;
        let mut h = Sha256::new();
        feed(&mut h, "SKILL.md", &definition);
        for rel in &self.files {
            let content = std::fs::read(self.dir.join(rel)).unwrap_or_default();
            feed(&mut h, rel, &content);
        }
        let files = hex::encode(h.finalize());
        Some(match &self.offered {
            Some(offered) => fold(&files, offered),
            None => files,
        })
    }

    /// The hash of the files with `offered`, what an MCP server listed,
    /// folded in: from now on the skill's hash is that.
    pub(super) fn fold_offer(&mut self, files_hash: &str, offered: &str) -> String {
        self.offered = Some(offered.to_owned());
        fold(files_hash, offered)
    }
}

/// A skill's hash over its files' hash and an upstream's offer.
fn fold(files_hash: &str, offered: &str) -> String {
    let mut h = Sha256::new();
    feed(&mut h, "files", files_hash.as_bytes());
    feed(&mut h, "upstream", offered.as_bytes());
    hex::encode(h.finalize())
}

fn feed(h: &mut Sha256, path: &str, content: &[u8]) {
    h.update(path.as_bytes());
    h.update([0]);
    h.update((content.len() as u64).to_le_bytes());
    h.update(content);
}
