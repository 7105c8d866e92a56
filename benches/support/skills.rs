//! Bench skills and the catalog that serves them, shared by the benches
//! that call tools (`#[path]`-included: each bench is a crate of its own).

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot set up should stop and say why"
)]

use skilld::catalog::{CatalogOptions, Root};
use skilld::skill::backend::Launch;
use skilld::skill::{Runtimes, Trust};
use std::path::Path;
use std::sync::Arc;

/// A Starlark tool, `bench_value`, that only returns a value.
const STAR: &str = r#"
def value(args):
    return "ok"

register_tool(name = "bench_value", description = "Returns a value.",
              parameters = {"type": "object", "properties": {}}, handler = value)
"#;

/// Writes the `bench-star` skill (tool `bench_value`) under `root`.
pub fn write_star(root: &Path) {
    let dir = root.join("bench-star");
    std::fs::create_dir_all(&dir).expect("skill dir");
    std::fs::write(
        dir.join("SKILL.yaml"),
        "name: bench-star\nversion: 1.0.0\ndescription: Bench script.\ntypes: [tool]\n\
         read_only: true\nimplementation:\n  backend: starlark\n  entrypoint: skill.star\n",
    )
    .expect("manifest");
    std::fs::write(dir.join("skill.star"), STAR).expect("script");
}

/// One bundled root at `root`, with `launcher` for manifest backends.
pub fn options(root: &Path, launcher: Option<Arc<dyn Launch>>) -> CatalogOptions {
    CatalogOptions {
        roots: vec![Root {
            name: "bench".to_owned(),
            path: root.to_path_buf(),
            trust: Trust::Bundled,
            explicit: true,
            installed: false,
        }],
        max_timeout_secs: 600,
        runtimes: Runtimes::default(),
        launcher,
        rules: Default::default(),
    }
}
