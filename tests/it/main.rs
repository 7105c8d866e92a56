//! All integration tests, in one binary (one link, shared helpers).

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test that cannot go on should fail where it stands"
)]

mod agent_tools;
mod approvals;
mod archives;
mod artifacts;
mod attacks;
mod attacks_approve;
mod attacks_files;
mod attacks_hash;
mod attacks_install;
mod attacks_limits;
mod attacks_rundir;
mod attacks_sandbox;
mod auth;
mod cli;
mod cli_manage;
mod common;
mod conformance;
mod consent;
mod corpus;
mod cors;
mod deferred_ends;
mod design_map;
mod docs_mcp;
mod exports;
mod gateway;
mod gateway_servers;
mod grants;
mod http_api;
mod import;
mod inbox;
mod install;
mod install_sources;
mod invoke;
mod manifests;
mod mcp;
mod mcp_results;
mod mcp_skills;
mod metrics;
mod modes;
mod notify;
mod nul_bytes;
mod oauth;
mod openapi;
mod output_schema;
mod papercuts;
mod plain_deps;
mod progress;
mod props;
mod python_client;
mod recovery;
mod registry;
mod reload;
mod resources;
mod retention;
mod retries;
mod robust;
mod runner;
mod sandbox;
mod scaffold;
mod script_tools;
mod seed000_words;
mod seed001;
mod seed002_cli;
mod seed003;
mod seed004;
mod server_process;
mod signatures;
mod skill_match;
mod skill_test;
mod skill_test_to;
mod sources;
mod standalone;
mod starlark;
mod store;
mod toolserver;
mod typescript_client;
mod ui;
mod ui_reviews;
mod usability;
mod workspace;
