//! Arrange-block fixtures: skill directories written in a tempdir,
//! tempdirs a sandboxed tool can read or write, and run settings.

use skilld::invoke::RunSettings;
use std::path::{Path, PathBuf};

/// Copies a directory tree (for tests that change skills on disk).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            let mut perms = std::fs::metadata(&target).unwrap().permissions();
            #[expect(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&target, perms).unwrap();
        }
    }
}

/// A temporary directory others can read and enter, as a skill or a
/// workspace must be for a sandboxed tool, which runs as another user.
pub fn tempdir() -> std::io::Result<tempfile::TempDir> {
    Ok(dir_with_mode(0o755))
}

/// A temporary directory anyone can write: where a sandboxed tool that
/// declared `file:write` leaves the marks a test reads.
pub fn writable_tempdir() -> tempfile::TempDir {
    dir_with_mode(0o777)
}

fn dir_with_mode(mode: u32) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

/// Run settings whose tools work in `workspace`.
/// The defaults, with Starlark skills evaluated by the `skilld` binary
/// (this test binary cannot be their host).
pub fn host_settings() -> RunSettings {
    RunSettings {
        starlark_host: Some(PathBuf::from(env!("CARGO_BIN_EXE_skilld"))),
        // Not the default `.`: the checkout holds the Starlark host, and
        // no tool may run what lies in the data directory.
        data_dir: std::env::temp_dir().join(format!("skilld-test-data-{}", std::process::id())),
        ..RunSettings::default()
    }
}

pub fn working_in(workspace: &Path) -> RunSettings {
    RunSettings {
        workspace: workspace.to_path_buf(),
        ..RunSettings::default()
    }
}

/// Where tests' tools leave marks: every test server lets its sandboxed
/// tools write here (`sandbox_write_paths`), as a deployment would a
/// shared output directory.
pub fn marks_root() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let root = std::env::temp_dir().join("skilld-test-marks");
    let _ = std::fs::create_dir(&root);
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o1777)).unwrap();
    root
}

/// A fresh directory under [`marks_root`] that any user can write.
pub fn marks_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir_in(marks_root()).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// Writes `text` to `path`, making its directory.
pub fn write_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `greet` in `dir`: read-only (runs at once), with a reference file and
/// the command `/hi`.
pub fn greet_skill(dir: &Path) {
    write_file(
        &dir.join("greet/SKILL.md"),
        "---\nname: greet\nversion: 1.0.0\ndescription: Greets people.\nread_only: true\ncommand: hi\n\
         triggers:\n  keywords: [hello]\n---\n\n\
         Say hello. See references/notes.md.\n\n### greet\n\nGreets someone.\n\n#### Parameters\n\n\
         | Name | Type | Required | Description |\n|---|---|---|---|\n| name | string | yes | Who. |\n\n\
         #### Command\n\n```\necho hello {{name}}\n```\n",
    );
    write_file(&dir.join("greet/references/notes.md"), "Greet people by name.\n");
}

/// `stamp` in `dir`: not read-only, so a person approves every call; it
/// appends `ran` to the file it is given and prints `stamped`.
pub fn stamp_skill(dir: &Path) {
    write_file(
        &dir.join("stamp/SKILL.md"),
        "---\nname: stamp\nversion: 1.0.0\ndescription: Leaves a stamp.\n---\n\n### stamp\n\n\
         Appends a line to a file.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n\
         |---|---|---|---|\n| path | string | yes | The file. |\n\n#### Command\n\n\
         ```\nsh -c 'echo ran >> \"$0\"; echo stamped' {{path}}\n```\n",
    );
}

/// A read-only skill `name` (dashes for underscores) whose one tool of the
/// same name runs `command` on its one string parameter `param` (say
/// `sh -c {{s}}`), with `front` added to its frontmatter (`network:
/// true`, say): the hostile tool of the sandbox tests.
pub fn one_tool_skill(dir: &Path, name: &str, front: &str, param: &str, command: &str) {
    let skill = name.replace('_', "-");
    write_file(
        &dir.join(&skill).join("SKILL.md"),
        &format!(
            "---\nname: {skill}\nversion: 1.0.0\ndescription: A hostile tool.\nread_only: true\n{front}---\n\n\
             ### {name}\n\nRuns what it is given.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n\
             |---|---|---|---|\n| {param} | string | yes | What to run. |\n\n#### Command\n\n```\n{command}\n```\n"
        ),
    );
}

/// Writes each `(path, text)` below `dir`: a skill's files, or several
/// skills, in one statement.
pub fn write_tree(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        write_file(&dir.join(path), text);
    }
}
