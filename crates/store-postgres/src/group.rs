//! Work done in groups: callers that arrive while a group is being written wait for it, then
//! go together in one statement. Under load a round trip and a pooled connection serve many
//! callers, and with no load a caller goes alone at once, so grouping never adds a wait of its
//! own. Behind the group accept (`group_accept`), the group commit of transitions (`group_commit`)
//! and the notifications (`events`).

use std::sync::{Mutex, PoisonError};

use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;

/// Items waiting to be written together, each with where its answer goes.
pub(crate) struct Grouped<T, R> {
    pending: Mutex<Vec<(T, oneshot::Sender<R>)>>,
    turn: tokio::sync::Mutex<()>,
}

impl<T, R> Default for Grouped<T, R> {
    fn default() -> Self {
        Self { pending: Mutex::default(), turn: tokio::sync::Mutex::default() }
    }
}

impl<T, R> Grouped<T, R> {
    /// Adds `item` to the next group and answers it once that group is written. Whoever gets
    /// the turn while items wait writes all of them with `write`, then gives each the answer
    /// `answer` draws from what `write` returned. `None` when the caller writing the item's
    /// group was cancelled before it answered.
    pub(crate) async fn join<W>(
        &self,
        item: T,
        write: impl AsyncFnOnce(&[T]) -> W,
        answer: impl Fn(&W, &T) -> R,
    ) -> Option<R> {
        let (sender, mut answered) = oneshot::channel();
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).push((item, sender));
        // Every caller waits for its answer or the turn, whichever comes first: a caller whose
        // group a cancelled writer took still gets an answer (`None`), and one whose item is
        // still waiting when the turn comes writes it with the rest; so no item waits forever.
        let _turn = tokio::select! {
            biased;
            answer = &mut answered => return answer.ok(),
            turn = self.turn.lock() => turn,
        };
        match answered.try_recv() {
            Ok(answer) => return Some(answer),
            Err(TryRecvError::Closed) => return None,
            Err(TryRecvError::Empty) => {}
        }
        let group = std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        let (items, senders): (Vec<T>, Vec<oneshot::Sender<R>>) = group.into_iter().unzip();
        let written = write(&items).await;
        for (item, sender) in items.iter().zip(senders) {
            // A caller that stopped waiting needs no answer.
            let _ = sender.send(answer(&written, item));
        }
        answered.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_caller_alone_writes_its_item_at_once() {
        let group = Grouped::<u32, u32>::default();
        let answer =
            group.join(7, async |items: &[u32]| items.to_vec(), |written, item| written.len() as u32 * item).await;
        assert_eq!(answer, Some(7));
    }

    #[tokio::test(start_paused = true)]
    async fn callers_arriving_during_a_write_go_together_in_the_next() {
        let group = Arc::new(Grouped::<u32, usize>::default());
        let writes = Arc::new(AtomicUsize::new(0));
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let hold = Arc::new(tokio::sync::Mutex::new(Some(hold)));
        let slow_first = {
            let (group, writes, hold) = (Arc::clone(&group), Arc::clone(&writes), Arc::clone(&hold));
            tokio::spawn(async move {
                group
                    .join(
                        0,
                        async |items: &[u32]| {
                            writes.fetch_add(1, Ordering::SeqCst);
                            if let Some(hold) = hold.lock().await.take() {
                                let _ = hold.await;
                            }
                            items.len()
                        },
                        |size, _| *size,
                    )
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let followers: Vec<_> = (1..=5)
            .map(|i| {
                let (group, writes) = (Arc::clone(&group), Arc::clone(&writes));
                tokio::spawn(async move {
                    group
                        .join(
                            i,
                            async |items: &[u32]| {
                                writes.fetch_add(1, Ordering::SeqCst);
                                items.len()
                            },
                            |size, _| *size,
                        )
                        .await
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        release.send(()).unwrap();
        assert_eq!(slow_first.await.unwrap(), Some(1));
        for follower in followers {
            assert_eq!(follower.await.unwrap(), Some(5), "the five waited together");
        }
        assert_eq!(writes.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_writer_cancelled_mid_write_leaves_no_caller_waiting() {
        let group = Arc::new(Grouped::<u32, u32>::default());
        let writer = {
            let group = Arc::clone(&group);
            tokio::spawn(async move {
                group.join(1, async |_: &[u32]| std::future::pending::<u32>().await, |w, _| *w).await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let follower = {
            let group = Arc::clone(&group);
            tokio::spawn(async move { group.join(2, async |items: &[u32]| items.len() as u32, |w, _| *w).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        writer.abort();
        let follower = tokio::time::timeout(Duration::from_secs(5), follower).await.unwrap().unwrap();
        assert_eq!(follower, Some(1), "the follower wrote its own item once the turn was free");
    }
}
