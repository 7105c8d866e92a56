//! Cancelling a run, wherever it is in its life.

use super::{Follower, InvokeError};
use crate::store::{RunFilter, RunStatus};
use chrono::Utc;
use uuid::Uuid;

/// What a cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// It runs here: its group gets SIGTERM, then SIGKILL after the grace.
    Cancelling,
    /// It had not started: it ended `cancelled`, and nothing ran.
    Withdrawn,
}

/// Who asks for a cancel.
#[derive(Debug, Clone, Copy)]
pub struct Canceller<'a> {
    /// The token's name; `None` on a server without tokens.
    pub name: Option<&'a str>,
    /// Whether the token may decide approvals, and so stop anyone's run.
    pub approver: bool,
}

impl Follower {
    /// Cancels run `id`: a running one's process group is killed; one that
    /// waits (for a person or a slot) is withdrawn. A run that has ended,
    /// or runs on another instance, is refused; so is a run someone else
    /// asked for, unless the canceller is an approver.
    pub async fn cancel(&self, id: Uuid, by: Canceller<'_>) -> Result<Cancelled, InvokeError> {
        let run = self.run_log.get_run(id).await?;
        if let Some(name) = by.name
            && !by.approver
            && run.requested_by.as_deref() != Some(name)
        {
            return Err(InvokeError::NotRequester {
                id,
                name: name.to_owned(),
            });
        }
        if let Some(live) = self.runs.get(id) {
            live.cancel.cancel();
            return Ok(Cancelled::Cancelling);
        }
        if run.status.is_final() {
            return Err(InvokeError::RunFinished {
                id,
                status: run.status,
            });
        }
        if run.status == RunStatus::Running {
            return Err(InvokeError::RunElsewhere(id));
        }
        // Only a run that has not started: one an approval just started on
        // another instance is that instance's to end.
        match self
            .run_log
            .end_waiting(id, RunStatus::Cancelled, Utc::now())
            .await?
        {
            Some(_) => Ok(Cancelled::Withdrawn),
            None => Err(InvokeError::RunStarted(id)),
        }
    }
}

impl Follower {
    /// The runs of skill `name` (of one version, when given) that are
    /// running or queued, as the run log has them.
    pub async fn live_runs_of(&self, name: &str, version: Option<&str>) -> Result<Vec<Uuid>, InvokeError> {
        let mut ids = Vec::new();
        for status in [RunStatus::Running, RunStatus::Queued] {
            let mut cursor = None;
            loop {
                let page = self
                    .run_log
                    .list_runs(RunFilter {
                        tool: None,
                        skill: Some(name.to_owned()),
                        status: Some(status),
                        session: None,
                        limit: RunFilter::MAX_LIMIT,
                        cursor,
                    })
                    .await?;
                ids.extend(
                    page.runs
                        .iter()
                        .filter(|r| version.is_none_or(|v| r.skill_version.as_deref() == Some(v)))
                        .map(|r| r.id),
                );
                cursor = page.next_cursor;
                if cursor.is_none() {
                    break;
                }
            }
        }
        Ok(ids)
    }

    /// Cancels runs as an admin would and waits, up to the grace and a
    /// second, for each to end.
    pub async fn cancel_and_wait(&self, ids: &[Uuid]) -> Result<(), InvokeError> {
        let admin = Canceller {
            name: None,
            approver: true,
        };
        for &id in ids {
            match self.cancel(id, admin).await {
                Ok(_) | Err(InvokeError::RunFinished { .. } | InvokeError::RunStarted(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let deadline = tokio::time::Instant::now() + self.grace + std::time::Duration::from_secs(1);
        for &id in ids {
            if let Some(live) = self.runs.get(id) {
                let _ = tokio::time::timeout_at(deadline, live.finished()).await;
            }
        }
        Ok(())
    }
}
