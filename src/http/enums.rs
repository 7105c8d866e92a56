//! The document's schemas of the plain enums the store defines and the API
//! shows: run and approval statuses, decision scopes, grant decisions and
//! delivery statuses. The store knows nothing of OpenAPI; each schema lists
//! the enum's own wire spelling (`as_str` over `ALL`), so the two cannot
//! drift apart.

use crate::store::{ApprovalStatus, GrantDecision, NotificationStatus, RunStatus, Scope};
use std::borrow::Cow;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// A string schema, one of `values`.
fn string_enum<const N: usize>(description: &str, values: [&'static str; N]) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .enum_values(Some(values))
        .into()
}

/// Names `$enum` in the document as `$name`, described by `$description`.
macro_rules! string_enum_schema {
    ($enum:ty, $name:literal, $description:literal) => {
        impl PartialSchema for $enum {
            fn schema() -> RefOr<Schema> {
                string_enum($description, <$enum>::ALL.map(<$enum>::as_str))
            }
        }

        impl ToSchema for $enum {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }
        }
    };
}

string_enum_schema!(
    RunStatus,
    "RunStatus",
    "Where a run is in its life. The first three are live; the rest are final
and never change again (see [`RunStatus::is_final`])."
);

string_enum_schema!(
    ApprovalStatus,
    "ApprovalStatus",
    "Where an approval request is. Only `pending` ever changes, once."
);

string_enum_schema!(
    Scope,
    "Scope",
    "How far a decision reaches: this run, or every later call of the same
tool of the same skill version (a grant)."
);

string_enum_schema!(GrantDecision, "GrantDecision", "A standing decision.");

string_enum_schema!(NotificationStatus, "NotificationStatus", "Where a delivery is.");
