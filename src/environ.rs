//! Wiping secrets from this process's environment once they are read.
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
    let threads = std::fs::read_dir("/proc/self/task")
        .map_err(|e| format!("cannot count this process's threads: {e}"))?
        .count();
    if threads != 1 {
        return Err(format!("{threads} threads are running"));
    }
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

/// Whether `NAME=value` is an entry of `name`.
fn is_entry_of(entry: &[u8], name: &str) -> bool {
    entry.len() > name.len() && entry.starts_with(name.as_bytes()) && entry[name.len()] == b'='
}

#[cfg(test)]
mod tests {
    use super::is_entry_of;

    #[test]
    fn matches_whole_names_only() {
        assert!(is_entry_of(b"SKILLD_TOKENS=a:b:c", "SKILLD_TOKENS"));
        assert!(is_entry_of(b"SKILLD_TOKENS=", "SKILLD_TOKENS"));
        assert!(!is_entry_of(b"SKILLD_TOKENS_X=a", "SKILLD_TOKENS"));
        assert!(!is_entry_of(b"SKILLD_TOKEN=a", "SKILLD_TOKENS"));
    }
}
