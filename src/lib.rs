//! skilld: serves directories of skills as an HTTP API.

pub mod artifacts;
pub mod auth;
pub mod backend;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod deps;
mod environ;
pub mod export;
pub mod fsafe;
pub mod http;
pub mod https;
pub mod install;
pub mod invoke;
pub mod local_secret;
mod logline;
pub mod mcp;
pub mod metrics;
pub mod notify;
pub mod oauth;
pub mod policy;
pub mod program;
pub mod registry;
pub mod retention;
pub mod runner;
pub mod sandbox;
pub mod scan;
pub mod session;
pub mod share;
pub mod skill;
pub mod store;
pub mod trust;
pub mod watch;

pub use http::{AppState, app, openapi, serve};
