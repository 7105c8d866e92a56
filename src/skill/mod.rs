//! Reading skills: the unified model, the dialects that parse a skill
//! directory into it, and the diagnostics they produce. Packaging,
//! reviewing and installing skills live in `install`, the installed root's
//! layout in `catalog`, the `skilld new` templates in `cli`.

pub mod backend;
pub mod context;
mod definition;
pub mod diag;
pub mod dialect;
pub mod examples;
pub mod fields;
pub mod files;
pub mod frontmatter;
pub mod hash;
pub mod listing;
pub mod load;
pub mod manifest;
pub mod model;
pub mod names;
mod parse;
pub mod phases;
pub mod prepared;
pub mod rules;
pub mod security_rule;
pub mod template;
pub mod triggers;
pub mod upstream;

pub use definition::{LoadOptions, MAX_DEFINITION_BYTES};
pub use diag::{Code, Diagnostic, Severity};
pub use dialect::scripts::Runtimes;
pub use files::PathCache;
pub use load::{Loaded, load_skill};
pub use model::*;
pub use rules::{EntrypointDefaults, SkillRules};

/// The default ceiling on any skill's timeout (`docs/design.md` §3): what
/// a skill is checked against where no configuration sets another.
pub const DEFAULT_MAX_TIMEOUT_SECS: u64 = 600;
