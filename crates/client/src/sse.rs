//! Server-sent events: a parser of the `text/event-stream` format, fed bytes as they arrive.

use crate::types::{EventKind, JobEvent};

/// What one block of the stream said.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Block {
    pub(crate) event: Option<String>,
    pub(crate) id: Option<String>,
    pub(crate) data: Vec<String>,
    pub(crate) retry: Option<u64>,
}

/// Splits a byte stream into blocks (separated by a blank line), keeping an unfinished block for
/// the next bytes.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    pending: String,
}

impl Parser {
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<Block> {
        self.pending.push_str(&String::from_utf8_lossy(bytes));
        if self.pending.contains('\r') {
            self.pending = self.pending.replace("\r\n", "\n").replace('\r', "\n");
        }
        let mut blocks = Vec::new();
        while let Some(end) = self.pending.find("\n\n") {
            let text: String = self.pending.drain(..end + 2).collect();
            let mut block = Block::default();
            for line in text.lines().filter(|l| !l.starts_with(':')) {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
                match field {
                    "event" => block.event = Some(value),
                    "id" => block.id = Some(value),
                    "data" => block.data.push(value),
                    "retry" => block.retry = value.parse().ok(),
                    _ => {}
                }
            }
            blocks.push(block);
        }
        blocks
    }
}

impl Block {
    /// The job event this block carries, if it is one.
    pub(crate) fn job_event(&self) -> Option<Result<JobEvent, serde_json::Error>> {
        let kind = match self.event.as_deref()? {
            "progress" => EventKind::Progress,
            "done" => EventKind::Done,
            "error" => EventKind::Error,
            _ => return None,
        };
        Some(serde_json::from_str(&self.data.join("\n")).map(|data| JobEvent { kind, id: self.id.clone(), data }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use super::*;

    #[test]
    fn blocks_split_across_chunks_are_put_back_together() {
        let mut parser = Parser::default();
        assert_eq!(parser.push(b"retry: 1000\n\n")[0].retry, Some(1000));
        assert!(parser.push(b": keep-alive\n\nevent: prog").iter().all(|b| b.event.is_none()));
        let blocks = parser.push(b"ress\nid: 7\ndata: {\"state\":\"running\",\"progress\":40}\n\n");
        let event = blocks[0].job_event().unwrap().unwrap();
        assert_eq!((event.kind, event.id.as_deref(), event.data.progress), (EventKind::Progress, Some("7"), 40));
        let done =
            parser.push(b"event: done\r\ndata: {\"state\":\"succeeded\",\"progress\":100,\"outputs\":[]}\r\n\r\n");
        assert_eq!(done[0].job_event().unwrap().unwrap().kind, EventKind::Done);
    }
}
