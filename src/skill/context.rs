//! What a backend's call or hook knows of where it was made: the session
//! it belongs to, what the session's turn may still spend, and the ways
//! back into skilld that its SDK may use (the model, through the session
//! client's MCP sampling; other tools, through the one pipeline).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use uuid::Uuid;

/// A boxed future, for the trait objects of backends and their contexts.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Seed 002's per-turn rate limits (`[limits]` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TurnLimits {
    /// `MaxLLMCallsPerTurn`: calls of the model (`llm:call`).
    pub llm_calls_per_turn: u32,
    /// `MaxShellExecPerTurn`: programs run (`shell:exec`).
    pub shell_execs_per_turn: u32,
    /// `MaxNetFetchPerTurn`: network fetches (`net:fetch`).
    pub net_fetches_per_turn: u32,
}

impl Default for TurnLimits {
    fn default() -> Self {
        Self {
            llm_calls_per_turn: 10,
            shell_execs_per_turn: 20,
            net_fetches_per_turn: 20,
        }
    }
}

/// What an SDK operation spends of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spend {
    LlmCall,
    ShellExec,
    NetFetch,
}

impl Spend {
    fn name(self) -> &'static str {
        match self {
            Spend::LlmCall => "llm_calls_per_turn",
            Spend::ShellExec => "shell_execs_per_turn",
            Spend::NetFetch => "net_fetches_per_turn",
        }
    }
}

/// One turn's counters, shared by every skill the turn reaches. A call
/// made outside a session is a turn of its own. Its default has
/// [`TurnLimits::default`]'s limits (not zero).
#[derive(Debug, Default)]
pub struct TurnBudget {
    limits: TurnLimits,
    llm_calls: AtomicU32,
    shell_execs: AtomicU32,
    net_fetches: AtomicU32,
}

impl TurnBudget {
    pub fn new(limits: TurnLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    fn counter(&self, spend: Spend) -> (&AtomicU32, u32) {
        match spend {
            Spend::LlmCall => (&self.llm_calls, self.limits.llm_calls_per_turn),
            Spend::ShellExec => (&self.shell_execs, self.limits.shell_execs_per_turn),
            Spend::NetFetch => (&self.net_fetches, self.limits.net_fetches_per_turn),
        }
    }

    /// Counts one `spend`, or says why the turn has none left (nothing is
    /// counted then).
    pub fn spend(&self, spend: Spend) -> Result<(), String> {
        let (counter, limit) = self.counter(spend);
        counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then(|| n + 1)
            })
            .map(|_| ())
            .map_err(|_| {
                format!(
                    "the turn's limit of {limit} is spent ({}); it resets with the session's next turn",
                    spend.name()
                )
            })
    }

    /// How many of `spend` the turn used.
    pub fn used(&self, spend: Spend) -> u32 {
        self.counter(spend).0.load(Ordering::Acquire)
    }

    pub fn limits(&self) -> TurnLimits {
        self.limits
    }
}

/// The model, reached through the session client's MCP sampling.
pub trait Sampler: Send + Sync + Debug {
    /// Sends an MCP `sampling/createMessage` request's params and answers
    /// its result, or why there is none.
    fn sample(&self, params: Value) -> BoxFuture<'_, Result<Value, String>>;
}

/// Other tools, called through skilld's own pipeline (`skill:invoke`):
/// decided, held and recorded like any call.
pub trait ToolCaller: Send + Sync + Debug {
    /// Calls `tool` with `input` on behalf of skill `from`, waiting for a
    /// held call at most until the caller's own call must end; answers
    /// the call's envelope as JSON, or why it did not run.
    /// `budget` is the calling call's turn, which the inner call spends.
    fn call_tool(
        &self,
        from: &str,
        tool: &str,
        input: Value,
        budget: Arc<TurnBudget>,
    ) -> BoxFuture<'_, Result<Value, String>>;
}

/// Where a backend's call or hook was made.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// The session it belongs to, if any.
    pub session: Option<Uuid>,
    /// What the turn may still spend.
    pub budget: Arc<TurnBudget>,
    /// The model, when the session's client offers sampling.
    pub sampler: Option<Arc<dyn Sampler>>,
    /// Other tools, for a workflow's `invoke_tool`.
    pub tools: Option<Arc<dyn ToolCaller>>,
}

impl CallContext {
    /// A context of its own, outside any session: one turn's budget.
    pub fn alone(limits: TurnLimits) -> Self {
        Self {
            budget: Arc::new(TurnBudget::new(limits)),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_refuses_past_its_limit_and_counts_nothing_then() {
        let budget = TurnBudget::new(TurnLimits {
            llm_calls_per_turn: 0,
            shell_execs_per_turn: 2,
            net_fetches_per_turn: 1,
        });
        assert!(budget.spend(Spend::ShellExec).is_ok());
        assert!(budget.spend(Spend::ShellExec).is_ok());
        let why = budget.spend(Spend::ShellExec).unwrap_err();
        assert!(why.contains("shell_execs_per_turn"), "{why}");
        assert_eq!(budget.used(Spend::ShellExec), 2);
        assert!(budget.spend(Spend::LlmCall).is_err());
        assert!(budget.spend(Spend::NetFetch).is_ok());
        assert!(budget.spend(Spend::NetFetch).is_err());
    }

    #[test]
    fn a_default_budget_has_the_default_limits() {
        assert_eq!(TurnBudget::default().limits(), TurnLimits::default());
        assert!(CallContext::default().budget.spend(Spend::ShellExec).is_ok());
    }
}
