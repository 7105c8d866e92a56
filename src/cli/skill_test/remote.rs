//! `skilld test --to URL`: the examples of a skill's directory, run
//! against the skill of the same name on a running server, through its
//! API: calls by `POST /skills/{skill}/tools/{tool}/invoke`, trigger
//! contexts by `POST /skills/match`. Judged and reported as a run here is,
//! so the same examples say whether the served copy behaves.

use super::judge::{Report, call_outcome, fired_words, trigger_outcome, trigger_sides};
use crate::cli::failure::Failure;
use crate::cli::install::local_secret;
use crate::config::{Config, LocalArgs, ServeArgs};
use crate::install::client::{self, ClientError, encoded};
use crate::invoke::Envelope;
use crate::skill::Skill;
use crate::skill::examples::{CallExample, TriggerExample};
use hyper::Method;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// The server `--to` names, and where its token comes from.
pub(super) struct Target {
    pub server: String,
    /// `--to-token`; without it, a loopback server gets the local secret
    /// of the data directory, as `skilld install --to` sends it.
    pub token: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub config: Option<PathBuf>,
}

/// Runs every example of `skill` on the server, trigger examples first as
/// here. `Err` when the server does not serve the skill, refuses the
/// token, or cannot be reached: the examples cannot be run there.
pub(super) async fn run(target: &Target, skill: &Skill, report: &mut Report) -> Result<(), Failure> {
    let server = Server::open(target)?;
    server.compare(skill).await?;
    for (kind, examples, must) in trigger_sides(skill) {
        for example in examples {
            let fired = server.fired(&skill.name, example).await?;
            report.record(trigger_outcome(skill, kind, example, must, fired));
        }
    }
    for example in &skill.examples.calls {
        let result = server.call(&skill.name, example).await?;
        report.record(call_outcome(example, result));
    }
    Ok(())
}

struct Server {
    url: String,
    token: Option<String>,
}

impl Server {
    fn open(target: &Target) -> Result<Self, Failure> {
        let token = match &target.token {
            Some(token) => Some(token.clone()),
            None if client::is_loopback_url(&target.server) => {
                local_secret(&target.server, &target.config()?)?
            }
            None => None,
        };
        Ok(Self {
            url: target.server.trim_end_matches('/').to_owned(),
            token,
        })
    }

    async fn api(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), ClientError> {
        client::call(&self.url, method, path, self.token.as_deref(), body).await
    }

    /// Whether the server serves the skill, saying on stderr when its copy
    /// is not this directory's: the examples then test what it serves.
    async fn compare(&self, skill: &Skill) -> Result<(), Failure> {
        let path = format!("/skills/{}", encoded(&skill.name));
        let served = match self.api(Method::GET, &path, None).await {
            Ok((_, detail)) => detail,
            Err(ClientError::Refused { status: 404, .. }) => {
                return Err(Failure::Refused(format!(
                    "{} serves no skill named {}, so no example was run; install it there first \
                     (skilld install DIR --to {})",
                    self.url, skill.name, self.url
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let hash = served["hash"].as_str().unwrap_or_default();
        if hash != skill.hash {
            eprintln!(
                "skilld: {} serves {} {} with hash {}, not this directory's {} ({}); \
                 the examples run against the server's",
                self.url,
                skill.name,
                served["version"].as_str().unwrap_or("(no version)"),
                short(hash),
                short(&skill.hash),
                skill.version.as_deref().unwrap_or("no version"),
            );
        }
        Ok(())
    }

    /// What fired for the example's context, in the words a run here
    /// uses. A skill the server's tool policy leaves out still had a
    /// trigger fire, as here, where no policy applies; the words say so.
    async fn fired(&self, name: &str, example: &TriggerExample) -> Result<Option<String>, Failure> {
        let mut context = json!({
            "files": example.files,
            "message": example.message,
            "languages": example.languages,
        });
        if !example.mode.is_empty() {
            context["mode"] = json!(example.mode);
        }
        let (_, answer) = self.api(Method::POST, "/skills/match", Some(&context)).await?;
        let entry = |list: &str| {
            answer[list]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["skill"] == name)
                .cloned()
        };
        if let Some(found) = entry("matches") {
            let trigger = &found["trigger"];
            let word = |k: &str| trigger[k].as_str().unwrap_or_default().to_owned();
            return Ok(Some(fired_words(&word("kind"), &word("value"))));
        }
        Ok(entry("excluded").map(|left_out| {
            format!(
                "a trigger fired, but the server's tool policy leaves the skill out: {}",
                left_out["message"].as_str().unwrap_or_default()
            )
        }))
    }

    /// One call example on the server: its envelope, or why it did not
    /// run. `Err` only when the server cannot be reached or answers
    /// something that is not the API's.
    async fn call(
        &self,
        name: &str,
        example: &CallExample,
    ) -> Result<Result<Arc<Envelope>, String>, Failure> {
        let path = format!(
            "/skills/{}/tools/{}/invoke",
            encoded(name),
            encoded(&example.tool)
        );
        let body = json!({"arguments": example.arguments});
        match self.api(Method::POST, &path, Some(&body)).await {
            Ok((200, answer)) => serde_json::from_value::<Envelope>(answer)
                .map(|envelope| Ok(Arc::new(envelope)))
                .map_err(|e| {
                    Failure::Unreachable(format!(
                        "{}{path} answered something not an envelope: {e}",
                        self.url
                    ))
                }),
            Ok((202, held)) => Ok(Err(self.withdraw(&held).await)),
            Ok((status, _)) => Ok(Err(format!("the server answered {status}"))),
            Err(ClientError::Refused { status, detail, .. }) => {
                Ok(Err(format!("the server refused it ({status}): {detail}")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Why a call held for a person's approval did not run, its request
    /// withdrawn first: nobody waits for its result, so approving it
    /// later would run the tool for no one.
    async fn withdraw(&self, held: &Value) -> String {
        let run = held["run_id"].as_str().unwrap_or_default();
        let path = format!("/runs/{}/cancel", encoded(run));
        let withdrawn = match self.api(Method::POST, &path, None).await {
            Ok(_) => "; its request was withdrawn",
            Err(_) => "",
        };
        format!(
            "held for a person's approval{withdrawn}; grant the tool ahead \
             (POST /grants) for the server to run it without asking"
        )
    }
}

impl Target {
    /// The configuration whose data directory holds the local secret.
    fn config(&self) -> Result<Config, Failure> {
        Config::resolve(&ServeArgs {
            local: LocalArgs {
                config: self.config.clone(),
                data_dir: self.data_dir.clone(),
                no_watch: Some(true),
                ..LocalArgs::default()
            },
            ..ServeArgs::default()
        })
        .map_err(Failure::from)
    }
}

/// The start of a hash, as `skilld info` shows grants'.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
