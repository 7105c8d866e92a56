//! Diagnostics: what the loader says about a skill, in a form both a person
//! (compiler-style lines) and a program (stable codes, JSON) can act on.

use serde::Serialize;
use std::fmt;
use utoipa::ToSchema;

/// An error excludes the skill; a warning leaves it loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// Stable, machine-readable diagnostic codes. Clients match on these, so a
/// variant is never renamed once shipped; new ones may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    MissingField,
    InvalidName,
    NameMismatch,
    InvalidVersion,
    InvalidYaml,
    InvalidFrontmatter,
    InvalidField,
    InvalidEncoding,
    TooLarge,
    DuplicateTool,
    InvalidToolName,
    InvalidType,
    InvalidParameter,
    InvalidDefault,
    InvalidCommand,
    UnknownParameter,
    MissingProgram,
    ProgramOutsideSkill,
    MissingEntrypoint,
    UnsupportedBackend,
    BackendFailed,
    MissingCommandTool,
    UnknownCommandTool,
    CommandCollision,
    Ineligible,
    MissingRequiredTool,
    Unreadable,
    NameStyle,
    UnknownField,
    DescriptionTruncated,
    ProgramNotFound,
    Shadowed,
    AmbiguousToolName,
    InvalidTrigger,
    InvalidPermission,
    PermissionNotDeclared,
    ContextOverBudget,
    MissingDependency,
    NotASkill,
    RootMissing,
    ImageNotAllowed,
    DependenciesNotReady,
    InvalidExample,
    UnknownExampleTool,
    InvalidExampleArguments,
    InvalidSecurityRule,
    UpstreamDropped,
}

impl Code {
    /// The wire name, as serialised (`missing_field`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Code::MissingField => "missing_field",
            Code::InvalidName => "invalid_name",
            Code::NameMismatch => "name_mismatch",
            Code::InvalidVersion => "invalid_version",
            Code::InvalidYaml => "invalid_yaml",
            Code::InvalidFrontmatter => "invalid_frontmatter",
            Code::InvalidField => "invalid_field",
            Code::InvalidEncoding => "invalid_encoding",
            Code::TooLarge => "too_large",
            Code::DuplicateTool => "duplicate_tool",
            Code::InvalidToolName => "invalid_tool_name",
            Code::InvalidType => "invalid_type",
            Code::InvalidParameter => "invalid_parameter",
            Code::InvalidDefault => "invalid_default",
            Code::InvalidCommand => "invalid_command",
            Code::UnknownParameter => "unknown_parameter",
            Code::MissingProgram => "missing_program",
            Code::ProgramOutsideSkill => "program_outside_skill",
            Code::MissingEntrypoint => "missing_entrypoint",
            Code::UnsupportedBackend => "unsupported_backend",
            Code::BackendFailed => "backend_failed",
            Code::MissingCommandTool => "missing_command_tool",
            Code::UnknownCommandTool => "unknown_command_tool",
            Code::CommandCollision => "command_collision",
            Code::Ineligible => "ineligible",
            Code::MissingRequiredTool => "missing_required_tool",
            Code::Unreadable => "unreadable",
            Code::NameStyle => "name_style",
            Code::UnknownField => "unknown_field",
            Code::DescriptionTruncated => "description_truncated",
            Code::ProgramNotFound => "program_not_found",
            Code::Shadowed => "shadowed",
            Code::AmbiguousToolName => "ambiguous_tool_name",
            Code::InvalidTrigger => "invalid_trigger",
            Code::InvalidPermission => "invalid_permission",
            Code::PermissionNotDeclared => "permission_not_declared",
            Code::ContextOverBudget => "context_over_budget",
            Code::MissingDependency => "missing_dependency",
            Code::NotASkill => "not_a_skill",
            Code::RootMissing => "root_missing",
            Code::ImageNotAllowed => "image_not_allowed",
            Code::DependenciesNotReady => "dependencies_not_ready",
            Code::InvalidExample => "invalid_example",
            Code::UnknownExampleTool => "unknown_example_tool",
            Code::InvalidExampleArguments => "invalid_example_arguments",
            Code::InvalidSecurityRule => "invalid_security_rule",
            Code::UpstreamDropped => "upstream_dropped",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding of the loader about one skill (or one root).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Diagnostic {
    pub severity: Severity,
    #[schema(value_type = String, example = "missing_field")]
    pub code: Code,
    /// The skill's directory name; absent for a finding about a whole root.
    pub skill: Option<String>,
    /// The file the finding is about, as reached from its root.
    pub path: String,
    /// 1-based line, when known.
    pub line: Option<u32>,
    /// 1-based column, when known.
    pub column: Option<u32>,
    pub message: String,
}

impl Diagnostic {
    pub fn error(code: Code, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, code, path, message)
    }

    pub fn warning(code: Code, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, code, path, message)
    }

    fn new(severity: Severity, code: Code, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity,
            code,
            skill: None,
            path: path.into(),
            line: None,
            column: None,
            message: message.into(),
        }
    }

    pub fn at(mut self, pos: Option<Pos>) -> Self {
        if let Some(pos) = pos {
            self.line = Some(pos.line);
            self.column = Some(pos.column);
        }
        self
    }

    pub fn for_skill(mut self, skill: &str) -> Self {
        self.skill = Some(skill.to_owned());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Compiler style: `path:line:col: error[code]: message`.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, ": {severity}[{}]: {}", self.code, self.message)
    }
}

/// A 1-based line and column in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

/// Maps byte offsets of one file to line and column, built once per file.
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { text, starts }
    }

    /// Line and column (in characters) of a byte offset.
    pub fn pos(&self, offset: usize) -> Pos {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset).saturating_sub(1);
        let start = self.starts[line];
        let column = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        Pos {
            line: to_u32(line + 1),
            column: to_u32(column + 1),
        }
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
