//! Wake-ups from a watch: what the scheduler and the kubelets wait on instead of acting on each
//! event.

use std::sync::Arc;

use futures::StreamExt as _;
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Drives a reflector's watch stream (re-watching with backoff after errors) and wakes `changed`
/// on every object it applies, until `stop`: the scheduler and kubelets act on a wake-up rather
/// than on each event.
pub(crate) async fn notify_on_change<S, T>(stream: S, changed: Arc<Notify>, stop: CancellationToken)
where
    S: futures::Stream<Item = Result<watcher::Event<T>, watcher::Error>> + Send,
{
    let stream = stream.default_backoff().touched_objects();
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            item = stream.next() => match item {
                Some(Ok(_)) => changed.notify_one(),
                Some(Err(e)) => tracing::debug!(error = %e, "watch error; re-watching"),
                None => return,
            },
        }
    }
}
