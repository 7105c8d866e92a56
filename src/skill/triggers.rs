//! Whether a skill's triggers fire for a context (seed 002's trigger
//! engine, `POST /skills/match`): a project file matching one of its
//! globs, one of its keywords in the message, one of its languages, its
//! mode, or a request by name.

use super::model::{Skill, Triggers};
use globset::{Glob, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What the triggers are evaluated against.
#[derive(Debug, Clone, Default)]
pub struct Context<'a> {
    /// Project files, as paths relative to the project.
    pub files: &'a [String],
    /// The user's last message.
    pub message: &'a str,
    pub languages: &'a [String],
    pub mode: &'a str,
    /// Skills asked for by name: they always fire.
    pub explicit: &'a [String],
}

/// A kind of trigger, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    File,
    Keyword,
    Language,
    Mode,
    Explicit,
}

/// The trigger that fired: its kind and the value the skill declared (or,
/// for `explicit`, the skill's name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FiredTrigger {
    pub kind: TriggerKind,
    pub value: String,
}

/// The first trigger of `skill` that fires in `ctx`, trying file globs,
/// keywords, languages, modes and then an explicit request.
pub fn fired(skill: &Skill, ctx: &Context<'_>) -> Option<FiredTrigger> {
    let t = &skill.triggers;
    let hit = |kind, value: &String| {
        Some(FiredTrigger {
            kind,
            value: value.clone(),
        })
    };
    if let Some(glob) = file_glob(t, ctx.files) {
        return hit(TriggerKind::File, glob);
    }
    if let Some(word) = t.keywords.iter().find(|k| has_phrase(ctx.message, k)) {
        return hit(TriggerKind::Keyword, word);
    }
    let same = |a: &String, b: &String| a.trim().eq_ignore_ascii_case(b.trim());
    if let Some(lang) = t
        .languages
        .iter()
        .find(|l| ctx.languages.iter().any(|g| same(l, g)))
    {
        return hit(TriggerKind::Language, lang);
    }
    let mode = ctx.mode.to_owned();
    if let Some(m) = t.modes.iter().find(|m| !mode.is_empty() && same(m, &mode)) {
        return hit(TriggerKind::Mode, m);
    }
    if ctx.explicit.contains(&skill.name) {
        return hit(TriggerKind::Explicit, &skill.name);
    }
    None
}

/// The first of the skill's file globs that matches a file, by its whole
/// path or by its name alone (`NOTES.md` matches `docs/NOTES.md`). A glob
/// that does not parse never matches (the load warned of it).
fn file_glob<'t>(t: &'t Triggers, files: &[String]) -> Option<&'t String> {
    if t.files.is_empty() || files.is_empty() {
        return None;
    }
    let mut set = GlobSetBuilder::new();
    let mut kept = Vec::new();
    for pattern in &t.files {
        if let Ok(glob) = Glob::new(pattern) {
            set.add(glob);
            kept.push(pattern);
        }
    }
    let set = set.build().ok()?;
    let first = files
        .iter()
        .flat_map(|f| {
            let name = f.rsplit('/').next().unwrap_or(f);
            set.matches(f).into_iter().chain(set.matches(name))
        })
        .min()?;
    kept.get(first).copied()
}

/// Whether `phrase` occurs in `text` as whole words, ignoring case: a
/// keyword `note` matches "a note." but not "notebook".
pub fn has_phrase(text: &str, phrase: &str) -> bool {
    let phrase = phrase.trim().to_lowercase();
    if phrase.is_empty() {
        return false;
    }
    let text = text.to_lowercase();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(&phrase).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + phrase.len()..].chars().next();
        !word(before) && !word(after)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_match_whole_words_ignoring_case() {
        assert!(has_phrase("Please add a NOTE.", "note"));
        assert!(!has_phrase("open the notebook", "note"));
        assert!(!has_phrase("footnote", "note"));
        assert!(has_phrase("our Bounded  Context here", "bounded  context"));
        assert!(has_phrase("the bounded context, again", "Bounded Context"));
        assert!(!has_phrase("unbounded context", "bounded context"));
        assert!(has_phrase("über alles", "über"));
        assert!(!has_phrase("anything", " "));
    }
}
