//! Any bytes as an uploaded archive: `unpack` answers (unpacked or
//! refused) without a panic, writes nothing outside its target, and on a
//! refusal leaves nothing at all.
//!
//! `cargo +nightly fuzz run unpack` (from the repository's root).

#![no_main]

use libfuzzer_sys::fuzz_target;
use skilld::install::unpack::{UnpackLimits, unpack};
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let parent = tempfile::tempdir().expect("a temporary directory");
    let into = parent.path().join("skill");
    let limits = UnpackLimits {
        max_entries: 64,
        max_bytes: 1024 * 1024,
        max_ratio: 100,
    };
    let outcome = unpack(Cursor::new(data), &into, &limits);
    let beside: Vec<_> = std::fs::read_dir(parent.path())
        .expect("the parent")
        .map(|e| e.expect("an entry").file_name())
        .collect();
    match outcome {
        Ok(_) => assert_eq!(beside, ["skill"], "written beside the target"),
        Err(_) => assert!(beside.is_empty(), "left behind after a refusal: {beside:?}"),
    }
});
