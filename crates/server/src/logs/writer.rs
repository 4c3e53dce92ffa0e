//! Log lines written off the path of whoever logs them: a line is copied into a buffer, and a
//! thread of its own writes everything gathered since its last write in one call. Writing each
//! line to stderr as it was made cost a system call, under the stream's lock, on every request.
//!
//! Nothing is dropped in normal operation: the buffer holds [`CAPACITY`] bytes (some seconds of
//! lines at the highest request rates measured), and a caller finding it full waits up to
//! [`WAIT_FOR_ROOM`] for the thread to take it. Only a destination that takes nothing for that
//! long (a reader of the pipe that stopped reading) has lines dropped, each counted in
//! `genjobs_log_lines_dropped_total`, rather than every request stopped behind it.

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// Bytes of lines held for the thread before a caller waits for room.
pub const CAPACITY: usize = 4 << 20;

/// How long a caller waits for room in a full buffer before its line is dropped.
pub const WAIT_FOR_ROOM: Duration = Duration::from_millis(100);

/// Bytes of lines that wake the thread before its time: waking it for every line cost a system
/// call on each request (a seventh of a GET's time under load, more than writing the line).
const BATCH: usize = 64 << 10;

/// How long lines may wait for the thread when fewer than [`BATCH`] bytes of them gather.
const EVERY: Duration = Duration::from_millis(50);

/// Where the process's log lines go: cloned into every layer that writes lines.
#[derive(Clone)]
pub struct LogWriter {
    shared: Arc<Shared>,
}

/// Ends the writing thread once everything handed to it is written; dropped at the end of
/// `main`, so that the lines of a graceful shutdown are all out before the process is.
pub struct LogFlush {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<Pending>,
    /// Signalled when lines arrive for an idle thread, and at the end.
    arrived: Condvar,
    /// Signalled when the thread has taken the lines, making room.
    taken: Condvar,
    /// The destination; the thread's while it runs, then each caller's in turn.
    out: Mutex<Box<dyn Write + Send>>,
    capacity: usize,
    wait_for_room: Duration,
}

#[derive(Default)]
struct Pending {
    lines: Vec<u8>,
    /// The thread waits for its time: a [`BATCH`] of lines wakes it sooner.
    idle: bool,
    /// The thread has ended (or is ending): lines are written by their callers.
    closed: bool,
}

impl LogWriter {
    /// Lines written to `out` by a thread of their own, which [`LogFlush`] ends.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub fn spawn(out: Box<dyn Write + Send>) -> io::Result<(Self, LogFlush)> {
        Self::with_limits(out, CAPACITY, WAIT_FOR_ROOM)
    }

    fn with_limits(
        out: Box<dyn Write + Send>,
        capacity: usize,
        wait_for_room: Duration,
    ) -> io::Result<(Self, LogFlush)> {
        let shared = Arc::new(Shared {
            state: Mutex::new(Pending::default()),
            arrived: Condvar::new(),
            taken: Condvar::new(),
            out: Mutex::new(out),
            capacity,
            wait_for_room,
        });
        let writing = Arc::clone(&shared);
        let thread =
            std::thread::Builder::new().name("log-writer".into()).spawn(move || writing.write_until_closed())?;
        Ok((Self { shared: Arc::clone(&shared) }, LogFlush { shared, thread: Some(thread) }))
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, Pending> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The thread: every [`EVERY`] (or sooner, for a [`BATCH`] or the end) takes whatever was
    /// gathered and writes it in one call, until closed with nothing left.
    fn write_until_closed(&self) {
        let mut taken = Vec::with_capacity(self.capacity.min(BATCH));
        loop {
            let mut state = self.state();
            if state.lines.len() < BATCH.min(self.capacity) && !state.closed {
                state.idle = true;
                state = self.arrived.wait_timeout(state, EVERY).unwrap_or_else(PoisonError::into_inner).0;
                state.idle = false;
            }
            if state.lines.is_empty() {
                if state.closed {
                    return;
                }
                continue;
            }
            std::mem::swap(&mut state.lines, &mut taken);
            drop(state);
            self.taken.notify_all();
            self.write_out(&taken);
            taken.clear();
        }
    }

    /// Writes to the destination; a destination that fails loses what it failed, as stderr
    /// written directly would.
    fn write_out(&self, bytes: &[u8]) {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = out.write_all(bytes).and_then(|()| out.flush());
    }

    /// Hands `line` to the thread, waiting a little for room when the buffer is full.
    fn append(&self, line: &[u8]) {
        let mut state = self.state();
        let full = |pending: &Pending| !pending.lines.is_empty() && pending.lines.len() + line.len() > self.capacity;
        if full(&state) && !state.closed {
            let (waited, _) = self
                .taken
                .wait_timeout_while(state, self.wait_for_room, |pending| !pending.closed && full(pending))
                .unwrap_or_else(PoisonError::into_inner);
            state = waited;
            if !state.closed && full(&state) {
                drop(state);
                metrics::counter!("genjobs_log_lines_dropped_total").increment(1);
                return;
            }
        }
        if state.closed {
            drop(state);
            self.write_out(line);
            return;
        }
        state.lines.extend_from_slice(line);
        let wake = state.idle && state.lines.len() >= BATCH.min(self.capacity);
        if wake {
            state.idle = false;
        }
        drop(state);
        if wake {
            self.arrived.notify_one();
        }
    }
}

impl Drop for LogFlush {
    fn drop(&mut self) {
        let mut state = self.shared.state();
        state.closed = true;
        state.idle = false;
        drop(state);
        self.shared.arrived.notify_one();
        self.shared.taken.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One event's line, as the `fmt` layer writes it (in one `write_all`).
pub struct Line<'a>(&'a Shared);

impl Write for Line<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.append(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        Line(&self.shared)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    /// What reached the destination.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
        }
    }

    /// A destination that says when a write begins, then takes nothing until told to.
    struct Stalled {
        began: mpsc::Sender<()>,
        release: mpsc::Receiver<()>,
        sink: Sink,
    }

    impl Write for Stalled {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            let _ = self.began.send(());
            let _ = self.release.recv();
            self.sink.write(bytes)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn line(thread: usize, i: usize) -> String {
        format!("{{\"thread\":{thread},\"line\":{i}}}\n")
    }

    #[test]
    fn every_line_is_written_in_order_by_the_end_of_the_flush() {
        let sink = Sink::default();
        let (writer, flush) = LogWriter::spawn(Box::new(sink.clone())).expect("thread");
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let writer = writer.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        writer.make_writer().write_all(line(t, i).as_bytes()).expect("write");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("writing thread");
        }
        drop(flush);
        let text = sink.text();
        assert_eq!(text.lines().count(), 8_000);
        for t in 0..4 {
            let own: String = text
                .lines()
                .filter(|l| l.starts_with(&format!("{{\"thread\":{t},")))
                .map(|l| l.to_owned() + "\n")
                .collect();
            let expected: String = (0..2_000).map(|i| line(t, i)).collect();
            assert!(own == expected, "thread {t}'s lines are not whole and in order");
        }
    }

    #[test]
    fn lines_after_the_flush_are_written_directly() {
        let sink = Sink::default();
        let (writer, flush) = LogWriter::spawn(Box::new(sink.clone())).expect("thread");
        writer.make_writer().write_all(b"before\n").expect("write");
        drop(flush);
        writer.make_writer().write_all(b"after\n").expect("write");
        assert_eq!(sink.text(), "before\nafter\n");
    }

    #[test]
    fn a_full_buffer_waits_for_room_then_drops_rather_than_blocking_for_ever() {
        let sink = Sink::default();
        let ((began, writing), (release, stalled)) = (mpsc::channel(), mpsc::channel());
        let out = Box::new(Stalled { began, release: stalled, sink: sink.clone() });
        let (writer, flush) = LogWriter::with_limits(out, 16, Duration::from_millis(10)).expect("thread");
        // The thread takes the first line and stalls writing it; the second fills the buffer.
        writer.make_writer().write_all(b"first 0123456\n").expect("write");
        writing.recv().expect("the first write begins");
        writer.make_writer().write_all(b"second 012345\n").expect("write");
        writer.make_writer().write_all(b"dropped 01234\n").expect("write, though dropped");
        for _ in 0..2 {
            release.send(()).expect("stalled writer");
        }
        drop(flush);
        assert_eq!(sink.text(), "first 0123456\nsecond 012345\n");
    }
}
