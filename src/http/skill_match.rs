//! `POST /skills/match`: which skills apply to a context, by their
//! triggers (seed 002's trigger engine; [`crate::skill::triggers`]).

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Problem, Result};
use super::kit::extract::{AgentPolicy, AgentToolsQuery, JsonBody};
use super::responses::{BodyProblems, empty_bodies_allowed};
use crate::invoke::FieldError;
use crate::skill::triggers::{self, Context, FiredTrigger};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoResponses, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new().routes(routes!(match_skills));
    empty_bodies_allowed(router.get_openapi_mut());
    router
}

/// The most entries any list of the context may have.
const MAX_ENTRIES: usize = 10_000;

/// What the triggers are matched against; every field is optional.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MatchRequest {
    /// Project files, as paths relative to the project (`src/main.rs`).
    #[serde(default)]
    #[schema(max_items = 10000)]
    pub files: Vec<String>,
    /// The user's message; keywords match it as whole words, ignoring case.
    #[serde(default)]
    pub message: String,
    /// Languages detected in the project (`rust`, `go`).
    #[serde(default)]
    #[schema(max_items = 10000)]
    pub languages: Vec<String>,
    /// The current mode (`interactive`, `headless`).
    #[serde(default)]
    pub mode: String,
    /// Skills asked for by name: they always apply.
    #[serde(default)]
    #[schema(max_items = 10000)]
    pub explicit: Vec<String>,
}

/// A skill that applies, and the trigger that made it.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillMatch {
    pub skill: String,
    pub trigger: FiredTrigger,
}

/// The skills that apply, by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct MatchList {
    pub matches: Vec<SkillMatch>,
    /// Skills whose triggers fired but that the caller's tool policy
    /// (`agent_tools`) leaves out, each with why.
    pub excluded: Vec<crate::catalog::Exclusion>,
}

/// What matching can answer besides its match list (and [`BodyProblems`]).
#[derive(IntoResponses)]
pub enum MatchProblems {
    #[response(
        status = 400,
        description = "The body is not a match request, or the query names a parameter this operation does not take",
        content_type = "application/problem+json"
    )]
    BadRequest(Problem),
    #[response(
        status = 422,
        description = "`explicit` names a skill that is not loaded (`unknown_skill`), or a list has more than 10,000 entries",
        content_type = "application/problem+json"
    )]
    Unprocessable(Problem),
}

/// The skills whose triggers fire for a context, each with the first
/// trigger that fired, tried in this order: a project file matching one of
/// its globs (by path, or by file name alone), a keyword in the message, a
/// language, the mode, then a request by name. Under a tool policy, the
/// skills it leaves out are not matches: they are listed in `excluded`.
#[utoipa::path(post, path = "/skills/match", tag = "skills", security(("bearer" = ["read"])), params(AgentToolsQuery),
    request_body(content = MatchRequest, description = "The context; an empty body matches only what needs no context"),
    responses((status = 200, description = "The skills that apply, by name", body = MatchList), MatchProblems, BodyProblems))]
async fn match_skills(
    _: Require<need::Read>,
    State(state): State<AppState>,
    AgentPolicy(policy): AgentPolicy,
    JsonBody(body): JsonBody<MatchRequest>,
) -> Result<Json<MatchList>> {
    let catalog = state.catalog.current();
    check(&body, |name| catalog.skill(name).is_some())?;
    let ctx = Context {
        files: &body.files,
        message: &body.message,
        languages: &body.languages,
        mode: &body.mode,
        explicit: &body.explicit,
    };
    let mut list = MatchList {
        matches: Vec::new(),
        excluded: Vec::new(),
    };
    for s in &catalog.skills {
        let Some(trigger) = triggers::fired(s, &ctx) else {
            continue;
        };
        match catalog.exclusion(s, &policy) {
            Some(why) => list.excluded.push(why),
            None => list.matches.push(SkillMatch {
                skill: s.name.clone(),
                trigger,
            }),
        }
    }
    Ok(Json(list))
}

/// Refuses lists over [`MAX_ENTRIES`] and explicit names of no loaded
/// skill, each as a field error.
fn check(body: &MatchRequest, loaded: impl Fn(&str) -> bool) -> Result<()> {
    let mut errors: Vec<FieldError> = [
        ("files", &body.files),
        ("languages", &body.languages),
        ("explicit", &body.explicit),
    ]
    .into_iter()
    .filter(|(_, list)| list.len() > MAX_ENTRIES)
    .map(|(field, _)| FieldError {
        field: field.to_owned(),
        message: format!("at most {MAX_ENTRIES} entries"),
    })
    .collect();
    let unknown = body.explicit.iter().enumerate().filter(|(_, n)| !loaded(n));
    errors.extend(unknown.map(|(i, name)| FieldError {
        field: format!("explicit[{i}]"),
        message: format!("no loaded skill is named '{}'", name.escape_debug()),
    }));
    if errors.is_empty() {
        return Ok(());
    }
    let code = if body.explicit.iter().any(|n| !loaded(n)) {
        "unknown_skill"
    } else {
        "too_many_entries"
    };
    Err(ApiError::Unprocessable {
        code,
        detail: format!("{} field(s) of the match request are invalid", errors.len()),
        errors,
    })
}
