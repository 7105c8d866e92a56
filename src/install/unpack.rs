//! Unpacking an uploaded skill archive, refusing everything a hostile one
//! could do to the machine that unpacks it: names that leave the target
//! (zip-slip, absolute paths), links, device files and pipes, duplicate
//! names, encrypted entries, and bombs (too many entries, too many bytes,
//! too high a compression ratio). The whole central directory is checked
//! before anything is written, and the bytes actually inflated are counted
//! again, since headers can lie. On any refusal the target is removed:
//! nothing is left on disk.

use std::collections::HashSet;
use std::io::{Read, Seek, Write};
use std::path::{Component, Path, PathBuf};
use zip::ZipArchive;
use zip::read::ZipFile;

/// How much an archive may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnpackLimits {
    /// Entries, directories included.
    pub max_entries: usize,
    /// Bytes of all files together, unpacked.
    pub max_bytes: u64,
    /// Unpacked over packed size, for entries past [`RATIO_FLOOR`] bytes
    /// and for the whole archive.
    pub max_ratio: u64,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        Self {
            max_entries: 1_000,
            max_bytes: 64 * 1024 * 1024,
            max_ratio: 100,
        }
    }
}

/// Small files compress well for honest reasons (a page of spaces); the
/// ratio is only a bomb's mark past this size.
pub const RATIO_FLOOR: u64 = 1024 * 1024;

const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFLNK: u32 = 0o120_000;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UnpackError {
    #[error("not a zip archive: {0}")]
    NotZip(String),
    #[error("the archive has more than {max} entries")]
    TooManyEntries { max: usize },
    #[error("the archive unpacks to more than {max} bytes")]
    TooLarge { max: u64 },
    #[error("'{path}' is compressed more than {max}:1, like a zip bomb")]
    Ratio { path: String, max: u64 },
    #[error("'{0}' is not a relative path inside the skill")]
    UnsafePath(String),
    #[error("'{0}' is a symbolic link; archives may hold files and directories only")]
    Link(String),
    #[error("'{0}' is a device, pipe or socket; archives may hold files and directories only")]
    Special(String),
    #[error("'{0}' appears more than once")]
    Duplicate(String),
    #[error("the archive names the same file more than once")]
    DuplicateNames,
    #[error("'{0}' is encrypted")]
    Encrypted(String),
    #[error("'{path}' is corrupt: {why}")]
    Corrupt { path: String, why: String },
    #[error("cannot unpack: {0}")]
    Io(String),
}

/// What was unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    pub files: usize,
    pub bytes: u64,
}

/// One entry, checked.
struct Entry {
    index: usize,
    path: PathBuf,
    dir: bool,
    executable: bool,
    size: u64,
}

/// Unpacks `archive` into `into`, which must not exist yet; on any error
/// `into` is removed again.
pub fn unpack<R: Read + Seek>(
    archive: R,
    into: &Path,
    limits: &UnpackLimits,
) -> Result<Unpacked, UnpackError> {
    let mut zip = ZipArchive::new(archive).map_err(|e| UnpackError::NotZip(e.to_string()))?;
    let entries = check(&mut zip, limits)?;
    std::fs::create_dir(into).map_err(|e| UnpackError::Io(format!("{}: {e}", into.display())))?;
    let written = write_all(&mut zip, &entries, into, limits);
    if written.is_err() {
        let _ = std::fs::remove_dir_all(into);
    }
    written
}

/// Reads the whole central directory and refuses the archive on the first
/// entry that must not be unpacked.
fn check<R: Read + Seek>(zip: &mut ZipArchive<R>, limits: &UnpackLimits) -> Result<Vec<Entry>, UnpackError> {
    if zip.len() > limits.max_entries {
        return Err(UnpackError::TooManyEntries {
            max: limits.max_entries,
        });
    }
    // The reader keeps one entry per name: the others would go unseen.
    if zip.has_duplicate_names() {
        return Err(UnpackError::DuplicateNames);
    }
    let (mut seen, mut entries) = (HashSet::new(), Vec::with_capacity(zip.len()));
    let (mut total, mut packed) = (0u64, 0u64);
    for index in 0..zip.len() {
        let file = zip
            .by_index_raw(index)
            .map_err(|e| UnpackError::NotZip(e.to_string()))?;
        let entry = check_entry(&file, index, limits)?;
        if !seen.insert(entry.path.clone()) {
            return Err(UnpackError::Duplicate(entry.path.display().to_string()));
        }
        total = total.saturating_add(entry.size);
        packed = packed.saturating_add(file.compressed_size());
        if total > limits.max_bytes {
            return Err(UnpackError::TooLarge {
                max: limits.max_bytes,
            });
        }
        entries.push(entry);
    }
    if total > RATIO_FLOOR && total / packed.max(1) > limits.max_ratio {
        return Err(UnpackError::Ratio {
            path: "the archive as a whole".to_owned(),
            max: limits.max_ratio,
        });
    }
    Ok(entries)
}

fn check_entry<R: Read>(
    file: &ZipFile<'_, R>,
    index: usize,
    limits: &UnpackLimits,
) -> Result<Entry, UnpackError> {
    let raw = file
        .name()
        .map(std::borrow::Cow::into_owned)
        .unwrap_or_else(|_| format!("entry {index}"));
    let path = safe_path(&raw).ok_or_else(|| UnpackError::UnsafePath(raw.clone()))?;
    if file.encrypted() {
        return Err(UnpackError::Encrypted(raw));
    }
    let mode = file.unix_mode().unwrap_or(0);
    let dir = file.is_dir() || mode & S_IFMT == S_IFDIR;
    match mode & S_IFMT {
        0 | S_IFREG | S_IFDIR => {}
        S_IFLNK => return Err(UnpackError::Link(raw)),
        _ => return Err(UnpackError::Special(raw)),
    }
    let size = file.size();
    if size > RATIO_FLOOR && size / file.compressed_size().max(1) > limits.max_ratio {
        return Err(UnpackError::Ratio {
            path: raw,
            max: limits.max_ratio,
        });
    }
    Ok(Entry {
        index,
        path,
        dir,
        executable: mode & 0o100 != 0,
        size,
    })
}

/// `name` as a relative path of plain components; `None` for anything
/// else: absolute, `..`, a Windows separator or drive, NUL, or empty.
fn safe_path(name: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains('\\') || name.contains('\0') || name.contains(':') {
        return None;
    }
    let path = Path::new(name.trim_end_matches('/'));
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

fn write_all<R: Read + Seek>(
    zip: &mut ZipArchive<R>,
    entries: &[Entry],
    into: &Path,
    limits: &UnpackLimits,
) -> Result<Unpacked, UnpackError> {
    let mut done = Unpacked { files: 0, bytes: 0 };
    for entry in entries {
        let target = into.join(&entry.path);
        if entry.dir {
            std::fs::create_dir_all(&target).map_err(|e| io(&entry.path, &e))?;
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(&entry.path, &e))?;
        }
        let left = limits.max_bytes.saturating_sub(done.bytes);
        done.bytes += write_file(zip, entry, &target, left, limits.max_bytes)?;
        done.files += 1;
    }
    Ok(done)
}

/// Writes one file, never through a link, counting what it inflates to.
fn write_file<R: Read + Seek>(
    zip: &mut ZipArchive<R>,
    entry: &Entry,
    target: &Path,
    left: u64,
    max: u64,
) -> Result<u64, UnpackError> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = entry.path.display().to_string();
    let mut file = zip.by_index(entry.index).map_err(|e| UnpackError::Corrupt {
        path: shown.clone(),
        why: e.to_string(),
    })?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(if entry.executable { 0o755 } else { 0o644 })
        .open(target)
        .map_err(|e| io(&entry.path, &e))?;
    // Headers can lie about the size: stop one byte past what may come.
    let limit = entry.size.min(left).saturating_add(1);
    let copied = std::io::copy(&mut (&mut file).take(limit), &mut out).map_err(|e| UnpackError::Corrupt {
        path: shown.clone(),
        why: e.to_string(),
    })?;
    if copied > left {
        return Err(UnpackError::TooLarge { max });
    }
    if copied != entry.size {
        return Err(UnpackError::Corrupt {
            path: shown,
            why: format!("it holds more than the {} bytes its header says", entry.size),
        });
    }
    out.flush().map_err(|e| io(&entry.path, &e))?;
    Ok(copied)
}

fn io(path: &Path, e: &std::io::Error) -> UnpackError {
    UnpackError::Io(format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use zip::ZipWriter;
    use zip::write::SimpleFileOptions;

    fn archive(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in files {
            zip.start_file(*name, options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    /// Unpacks `bytes` into a fresh target; checks nothing was left when
    /// it was refused, and nothing was written beside the target.
    fn try_unpack(bytes: &[u8], limits: &UnpackLimits) -> Result<Unpacked, UnpackError> {
        let parent = tempfile::tempdir().unwrap();
        let into = parent.path().join("skill");
        let got = unpack(Cursor::new(bytes.to_vec()), &into, limits);
        let beside: Vec<_> = std::fs::read_dir(parent.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        match &got {
            Ok(_) => assert_eq!(beside, ["skill"]),
            Err(_) => assert!(beside.is_empty(), "left behind: {beside:?}"),
        }
        got
    }

    /// Replaces every `from` in `bytes` by `to` (the same length).
    fn patch(mut bytes: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let mut i = 0;
        while let Some(at) = bytes[i..].windows(from.len()).position(|w| w == from) {
            bytes[i + at..i + at + to.len()].copy_from_slice(to);
            i += at + to.len();
        }
        bytes
    }

    /// Offsets of every central directory header.
    fn central_headers(bytes: &[u8]) -> Vec<usize> {
        bytes
            .windows(4)
            .enumerate()
            .filter(|(_, w)| *w == [0x50, 0x4b, 0x01, 0x02])
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn an_honest_archive_unpacks_with_its_modes() {
        let bytes = archive(&[
            ("SKILL.md", b"---\nname: a\n---\n"),
            ("scripts/run.sh", b"echo hi\n"),
        ]);
        let got = try_unpack(&bytes, &UnpackLimits::default()).unwrap();
        assert_eq!(got, Unpacked { files: 2, bytes: 24 });
    }

    #[test]
    fn names_that_leave_the_target_are_refused() {
        for name in [
            "../evil",
            "a/../../evil",
            "/etc/evil",
            "..\\evil",
            "C:/evil",
            "a/\0b",
        ] {
            let bytes = archive(&[("SKILL.md", b"x"), (name, b"evil")]);
            let err = try_unpack(&bytes, &UnpackLimits::default()).unwrap_err();
            assert!(
                matches!(err, UnpackError::UnsafePath(_) | UnpackError::NotZip(_)),
                "{name}: {err}"
            );
        }
    }

    #[test]
    fn links_devices_duplicates_and_encryption_are_refused() {
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        zip.add_symlink("passwd", "/etc/passwd", SimpleFileOptions::default())
            .unwrap();
        let link = zip.finish().unwrap().into_inner();
        assert_eq!(
            try_unpack(&link, &UnpackLimits::default()),
            Err(UnpackError::Link("passwd".to_owned()))
        );

        // The external attributes (offset 38 of a central header) say
        // character device.
        let mut device = archive(&[("tty", b"x")]);
        let at = central_headers(&device)[0] + 38;
        device[at..at + 4].copy_from_slice(&((0o020_644u32) << 16).to_le_bytes());
        assert_eq!(
            try_unpack(&device, &UnpackLimits::default()),
            Err(UnpackError::Special("tty".to_owned()))
        );

        let twice = patch(archive(&[("dup_a", b"1"), ("dup_b", b"2")]), b"dup_b", b"dup_a");
        assert_eq!(
            try_unpack(&twice, &UnpackLimits::default()),
            Err(UnpackError::DuplicateNames)
        );
        // Two names for one path.
        let aliased = archive(&[("a/b", b"1"), ("a/./b", b"2")]);
        assert_eq!(
            try_unpack(&aliased, &UnpackLimits::default()),
            Err(UnpackError::Duplicate("a/b".to_owned()))
        );

        // The general purpose flag's bit 0 (offset 8 of a central header).
        let mut secret = archive(&[("secret", b"x")]);
        let at = central_headers(&secret)[0] + 8;
        secret[at] |= 1;
        assert_eq!(
            try_unpack(&secret, &UnpackLimits::default()),
            Err(UnpackError::Encrypted("secret".to_owned()))
        );
    }

    #[test]
    fn bombs_are_refused_before_they_go_off() {
        let limits = UnpackLimits {
            max_entries: 10,
            max_bytes: 4 * 1024 * 1024,
            max_ratio: 100,
        };
        let many: Vec<(String, &[u8])> = (0..11).map(|i| (format!("f{i}"), &b"x"[..])).collect();
        let many: Vec<(&str, &[u8])> = many.iter().map(|(n, b)| (n.as_str(), *b)).collect();
        assert_eq!(
            try_unpack(&archive(&many), &limits),
            Err(UnpackError::TooManyEntries { max: 10 })
        );
        let zeros = vec![0u8; 2 * 1024 * 1024];
        assert!(matches!(
            try_unpack(&archive(&[("zeros", &zeros)]), &limits),
            Err(UnpackError::Ratio { .. })
        ));
        let noise: Vec<u8> = (0..3 * 1024 * 1024u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert_eq!(
            try_unpack(&archive(&[("a", &noise), ("b", &noise)]), &limits),
            Err(UnpackError::TooLarge { max: 4 * 1024 * 1024 })
        );
    }

    #[test]
    fn a_header_that_understates_the_size_is_caught_while_inflating() {
        let noise: Vec<u8> = (0..1000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut bytes = archive(&[("liar", &noise)]);
        // The uncompressed size: offset 24 of a central header.
        let at = central_headers(&bytes)[0] + 24;
        bytes[at..at + 4].copy_from_slice(&10u32.to_le_bytes());
        let err = try_unpack(&bytes, &UnpackLimits::default()).unwrap_err();
        assert!(
            matches!(err, UnpackError::Corrupt { .. } | UnpackError::NotZip(_)),
            "{err}"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any bytes at all: an answer, never a panic, and nothing beside
        /// the target.
        #[test]
        fn any_bytes_unpack_or_are_refused_without_leaving_anything(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048),
        ) {
            let _ = try_unpack(&bytes, &UnpackLimits::default());
        }

        /// An honest archive with random bytes flipped: the same.
        #[test]
        fn a_damaged_archive_unpacks_or_is_refused_cleanly(
            flips in proptest::collection::vec((0usize..400, proptest::prelude::any::<u8>()), 1..8),
        ) {
            let mut bytes = archive(&[("SKILL.md", b"---\nname: a\n---\nbody"), ("scripts/x.sh", b"echo")]);
            for (at, value) in flips {
                let at = at % bytes.len();
                bytes[at] = value;
            }
            let _ = try_unpack(&bytes, &UnpackLimits::default());
        }
    }
}
