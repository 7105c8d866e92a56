//! skilld: serves directories of skills as an HTTP API.

pub mod skill;
