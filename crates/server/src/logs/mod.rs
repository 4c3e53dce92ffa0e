//! The process's log lines: their JSON format ([`JsonLines`]) and the thread that writes them
//! ([`LogWriter`]), so that a request's line costs it little more than copying it.

mod json_lines;
mod writer;

pub use json_lines::JsonLines;
pub use writer::{LogFlush, LogWriter};
