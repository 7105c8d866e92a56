//! Wiping secrets from this process's environment and command line once
//! they are read.
//!
//! Why by hand: `/proc/<pid>/environ` shows the environment block the
//! kernel laid out at exec, not the one `std::env` edits. Removing a
//! variable only unlinks it from the `environ` array; its bytes stay where
//! a reader of `/proc` (root, or anyone once the process is dumpable) can
//! find them. So the value is overwritten in place first. No crate does
//! this.

#![expect(
    unsafe_code,
    reason = "the environment block is raw memory, and editing the environment is unsafe"
)]

use std::ffi::CStr;

/// Overwrites the values of `names` in the environment block with NUL
/// bytes, then removes the variables. Only while the process has one
/// thread (before any runtime starts), so that nothing reads or changes
/// the environment meanwhile; otherwise it does nothing and says so.
pub fn wipe(names: &[&str]) -> Result<(), String> {
    single_threaded()?;
    // SAFETY: single-threaded (checked above: only this thread could start
    // another, and it does not), so the array and the
    // strings it points to are not read or changed meanwhile; each entry is
    // a NUL-terminated string the process owns and may write, and only the
    // bytes before its NUL are overwritten.
    unsafe {
        let mut entry = libc::environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = CStr::from_ptr(*entry).to_bytes();
            let len = text.len();
            if let Some(name) = names.iter().find(|n| is_entry_of(text, n)) {
                let value = (*entry).add(name.len() + 1);
                std::ptr::write_bytes(value, 0, len - name.len() - 1);
            }
            entry = entry.add(1);
        }
        for name in names {
            std::env::remove_var(name);
        }
    }
    Ok(())
}

/// Overwrites each of `secrets` with `*` wherever it appears in this
/// process's command line, as `/proc/<pid>/cmdline` shows it (a database
/// password given with `--database`). Like [`wipe`], only while the
/// process has one thread.
pub fn mask_arguments(secrets: &[&str]) -> Result<(), String> {
    if secrets.iter().all(|s| s.is_empty()) {
        return Ok(());
    }
    single_threaded()?;
    let shown =
        std::fs::read("/proc/self/cmdline").map_err(|e| format!("cannot read the command line: {e}"))?;
    let (start, end) = argument_area()?;
    if end.saturating_sub(start) < shown.len() {
        return Err("the command line is not where the kernel says".to_owned());
    }
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        for at in occurrences(&shown, secret.as_bytes()) {
            // SAFETY: single-threaded (checked above); `start..end` is the
            // argument area the kernel laid out at exec in this process's
            // own writable stack, which `/proc/self/cmdline` reads, and
            // `at + len` lies within what it read, so within the area.
            unsafe {
                std::ptr::write_bytes((start + at) as *mut u8, b'*', secret.len());
            }
        }
    }
    Ok(())
}

/// Where the kernel keeps this process's arguments: `arg_start` and
/// `arg_end`, fields 48 and 49 of `/proc/self/stat`.
fn argument_area() -> Result<(usize, usize), String> {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .map_err(|e| format!("cannot read /proc/self/stat: {e}"))?;
    // Fields after the command name, which may hold spaces, start at 3.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, r)| r)
        .split_whitespace()
        .collect();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<usize>().ok());
    match (field(48), field(49)) {
        (Some(start), Some(end)) if start > 0 && end > start => Ok((start, end)),
        _ => Err("/proc/self/stat does not say where the arguments are".to_owned()),
    }
}

/// Where `needle` begins in `haystack`, for each time it does.
fn occurrences(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() || needle.len() > haystack.len() {
        return Vec::new();
    }
    (0..=haystack.len() - needle.len())
        .filter(|&i| &haystack[i..i + needle.len()] == needle)
        .collect()
}

fn single_threaded() -> Result<(), String> {
    let threads = std::fs::read_dir("/proc/self/task")
        .map_err(|e| format!("cannot count this process's threads: {e}"))?
        .count();
    if threads == 1 {
        Ok(())
    } else {
        Err(format!("{threads} threads are running"))
    }
}

/// Whether `NAME=value` is an entry of `name`.
fn is_entry_of(entry: &[u8], name: &str) -> bool {
    entry.len() > name.len() && entry.starts_with(name.as_bytes()) && entry[name.len()] == b'='
}

#[cfg(test)]
mod tests {
    use super::{is_entry_of, occurrences};

    #[test]
    fn finds_every_occurrence() {
        assert_eq!(occurrences(b"a:pw@x pw", b"pw"), vec![2, 7]);
        assert_eq!(occurrences(b"short", b"longer than it"), Vec::<usize>::new());
        assert_eq!(occurrences(b"abc", b""), Vec::<usize>::new());
    }

    #[test]
    fn matches_whole_names_only() {
        assert!(is_entry_of(b"SKILLD_TOKENS=a:b:c", "SKILLD_TOKENS"));
        assert!(is_entry_of(b"SKILLD_TOKENS=", "SKILLD_TOKENS"));
        assert!(!is_entry_of(b"SKILLD_TOKENS_X=a", "SKILLD_TOKENS"));
        assert!(!is_entry_of(b"SKILLD_TOKEN=a", "SKILLD_TOKENS"));
    }
}
