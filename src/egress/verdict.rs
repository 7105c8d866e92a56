//! What decides a destination answers: let through, or refused with
//! words for the program.

/// A decision on one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused: `by` whom (the list, a person), and why, both said to the
    /// program.
    Deny {
        by: String,
        why: String,
    },
}
