//! Egress: a networked run reaches only what a person allowed, through a
//! proxy the server owns (issue 42). This is its core: the patterns of
//! `network.allow` (`allow`), the addresses no name may lead to
//! (`ranges`), the proxy's own resolver (`resolve`), who decides (`gate`),
//! what a run did (`ledger`), the proxy itself (`proxy`), a run's own
//! network namespace (`netns`), the operator's `[egress]` (`settings`)
//! and one run's egress while it lasts (`run`), and the destinations
//! held for a person (`ask`), and what each decision answers (`verdict`).

pub mod allow;
pub mod ask;
pub mod gate;
pub mod ledger;
pub mod netns;
pub mod proxy;
pub mod ranges;
pub mod resolve;
pub mod run;
pub mod settings;
pub mod verdict;

pub use allow::{AllowList, Pattern, PatternError};
pub use ask::{Asker, Asking};
pub use gate::{Gate, RunGate, Verdict};
pub use ledger::{Entry, Ledger, Outcome};
pub use proxy::{Bounds, RunProxy};
pub use ranges::{Ranges, Reserved};
pub use resolve::{ResolveError, Resolver};
pub use run::RunEgress;
pub use settings::{Egress, EgressSettings};
