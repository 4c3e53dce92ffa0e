//! End-to-end tests over real HTTP; one binary, one module per area, to link once.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

mod admin;
mod auth;
mod concurrency;
mod errors;
mod jobs;
mod models;
mod streams;
mod submit;
mod upstream;
