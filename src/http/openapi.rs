//! The OpenAPI document: the part no route states for itself (the title,
//! the tags, the wildcard routes' entries) and what is added once every
//! route has given its own (the version, the auth schemes and the answers
//! they imply). The server (`http`) merges the routes into it.

use super::{install, runs, skills};
use utoipa::OpenApi;
use utoipa::openapi::OpenApi as Document;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "skilld",
        description = "Serves skills as an API: the catalog, tool exports for LLM providers, and tool runs.",
        license(name = "MIT OR Apache-2.0", identifier = "MIT OR Apache-2.0"),
    ),
    // Routes axum registers with a wildcard (see `skills::router`, `runs::router`).
    paths(skills::get_skill_file, runs::get_run_file),
    // Types used only in query parameters are not collected on their own.
    components(schemas(crate::export::Format, install::UploadTrust)),
    tags(
        (name = "service", description = "Health, readiness and metrics"),
        (name = "skills", description = "The skill catalog"),
        (name = "tools", description = "Tools and their exports"),
        (name = "invoke", description = "Running tools"),
        (name = "runs", description = "The audit log of every run"),
        (name = "approvals", description = "Calls waiting for a person, decisions and standing grants"),
        (name = "egress", description = "Destinations networked runs asked for beyond their list, held for a person"),
        (name = "security", description = "Scans by security-rule skills"),
        (name = "sessions", description = "Seed 002's runtime: sessions, activation, hooks across skills"),
    )
)]
struct ApiDoc;

/// The document before any route is merged in.
pub(super) fn base() -> Document {
    ApiDoc::openapi()
}

/// Completes the document the routes made: the crate's version, and the
/// auth schemes with the answers they imply.
pub(super) fn finish(mut doc: Document) -> Document {
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    describe_auth(&mut doc);
    doc
}

/// Adds the `bearer` scheme, and the 401 and 403 answers of every
/// operation that names it. Handlers declare only
/// `security(("bearer" = ["<role>"]))` (OpenAPI 3.1 lets a non-OAuth
/// requirement list role names), so these answers read the same everywhere.
fn describe_auth(doc: &mut Document) {
    use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`Authorization: Bearer <token>`, required once the server has tokens configured. \
                     Each operation lists the least role it needs; roles include the ones before them: \
                     read < invoke < approve < admin. A server without tokens lets anyone list and \
                     invoke; the rest (deciding approvals, reading them and the grants, admin) needs \
                     its local secret, as this bearer token (no cookie is ever a credential).",
                    ))
                    .build(),
            ),
        );
    describe_signed_links(doc);
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in operations.into_iter().flatten() {
            answer_auth(op);
        }
    }
}

/// The 401 and 403 answers of one operation, when it names a role.
fn answer_auth(op: &mut utoipa::openapi::path::Operation) {
    use utoipa::openapi::{ContentBuilder, HeaderBuilder, Object, Ref, ResponseBuilder, Type};
    let roles: Vec<String> = op
        .security
        .iter()
        .flatten()
        .filter_map(|req| serde_json::to_value(req).ok())
        .filter_map(|v| serde_json::from_value::<Vec<String>>(v["bearer"].clone()).ok())
        .flatten()
        .collect();
    let Some(role) = roles.first() else { return };
    let problem = || {
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .build()
    };
    let unauthorized = ResponseBuilder::new()
        .description(
            "Tokens are configured, and the request sent none, or an unknown or malformed one; \
             or the server has none, and this needs its local secret (`local_secret_required`)",
        )
        .header(
            "WWW-Authenticate",
            HeaderBuilder::new()
                .schema(Some(Object::with_type(Type::String)))
                .description(Some(
                    r#"`Bearer realm="skilld"`, with `error="invalid_token"` when a token was sent, and `resource_metadata="<URL>"` (RFC 9728) when OAuth issuers are configured"#,
                ))
                .build(),
        )
        .content("application/problem+json", problem());
    let forbidden = ResponseBuilder::new()
        .description(format!("The token's role is below `{role}`"))
        .content("application/problem+json", problem());
    op.responses
        .responses
        .insert("401".to_owned(), unauthorized.into());
    // A handler may document its own 403 (a standing deny); the
    // role reason then joins it rather than replacing it.
    match op.responses.responses.get_mut("403") {
        Some(utoipa::openapi::RefOr::T(own)) => {
            own.description = format!("{}; or the token's role is below `{role}`", own.description);
        }
        Some(_) => {}
        None => {
            op.responses.responses.insert("403".to_owned(), forbidden.into());
        }
    }
}

/// Adds the `signed_link` scheme: an artifact's `url` opens that one file
/// without a token until it expires (`runs::get_run_file`).
fn describe_signed_links(doc: &mut Document) {
    use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            "signed_link",
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
                "signature",
                "The `signature` (with `expires`) of an artifact's `url` in a run's envelope: it opens that one \
                 file of that run, without a token, until `expires` (Unix seconds), when the artifact is \
                 deleted. An HMAC-SHA256 under a key of the instance that ran the run, kept in its data \
                 directory. Altered, it is refused with 403 `bad_signature`; late, 403 `link_expired`.",
            ))),
        );
}
