//! How each controller runs: the context its reconciles share, per-object retry backoff, the
//! error policy, and the loop that drives a `Controller` stream until shutdown. Kept apart so
//! the controllers differ only in what they reconcile.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt as _};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::error::{Error, Result};

/// First retry delay after a failed reconcile; it doubles per consecutive failure.
const RETRY_BASE: Duration = Duration::from_millis(200);
/// Longest retry delay.
const RETRY_MAX: Duration = Duration::from_secs(30);
/// How often an object is reconciled even when nothing changed (upstream's informer resync).
pub const RESYNC: Duration = Duration::from_secs(300);

/// What a controller's reconciles share.
pub struct Context {
    /// The client every read and write goes through.
    pub client: Client,
    /// Consecutive failures per object (`namespace/name`), for the retry delay.
    failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    /// Returns a context for one controller.
    pub fn new(client: Client) -> Arc<Self> {
        Arc::new(Self {
            client,
            failures: Mutex::new(HashMap::new()),
        })
    }

    /// Passes a reconcile's result on, forgetting the object's failures when it succeeded.
    pub fn record<K: Resource, T>(&self, obj: &K, result: Result<T>) -> Result<T> {
        if result.is_ok() {
            self.failures.lock().remove(&key(obj));
        }
        result
    }

    /// Counts a failure and returns how long to wait before retrying.
    fn failed<K: Resource>(&self, obj: &K) -> Duration {
        let mut failures = self.failures.lock();
        let n = failures.entry(key(obj)).or_insert(0);
        *n = n.saturating_add(1);
        retry_delay(*n)
    }
}

fn key<K: Resource>(obj: &K) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Returns the delay before retry number `failures` (1-based): 200ms doubling, capped at 30s.
pub fn retry_delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    RETRY_BASE.saturating_mul(1 << exp).min(RETRY_MAX)
}

/// The error policy of every controller: log, then retry the object with backoff.
pub fn error_policy<K: Resource>(obj: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.failed(obj.as_ref());
    tracing::warn!(
        object.namespace = %obj.namespace().unwrap_or_default(),
        object.name = %obj.name_any(),
        error.kind = error.kind(),
        error = %error,
        retry_in = ?delay,
        "reconcile failed"
    );
    Action::requeue(delay)
}

/// The items a `Controller::run` stream yields.
type RunItem<K> = Result<(ObjectRef<K>, Action), controller::Error<Error, watcher::Error>>;

/// Drives the stream `start` returns until `stop` is cancelled, logging its errors. Should the
/// stream ever end on its own, it is started again after a pause: a controller never exits
/// before shutdown.
pub async fn drive<K, S>(name: &'static str, stop: CancellationToken, mut start: impl FnMut() -> S)
where
    K: Resource + Debug,
    K::DynamicType: Debug,
    S: Stream<Item = RunItem<K>>,
{
    tracing::info!(controller = name, "controller started");
    loop {
        let mut stream = std::pin::pin!(start());
        loop {
            let item = tokio::select! {
                () = stop.cancelled() => {
                    tracing::info!(controller = name, "controller stopped");
                    return;
                }
                item = stream.next() => item,
            };
            match item {
                Some(Ok(_)) => {}
                // error_policy already logged it.
                Some(Err(controller::Error::ReconcilerFailed(..))) => {}
                Some(Err(controller::Error::ObjectNotFound(obj))) => {
                    tracing::debug!(controller = name, object = %obj, "object gone before its reconcile");
                }
                Some(Err(e)) => {
                    tracing::warn!(controller = name, error = %e, "controller watch failed; it retries with backoff");
                }
                None => break,
            }
        }
        tracing::warn!(
            controller = name,
            "controller stream ended; restarting it in 1s"
        );
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_doubles_then_caps() {
        assert_eq!(retry_delay(1), Duration::from_millis(200));
        assert_eq!(retry_delay(2), Duration::from_millis(400));
        assert_eq!(retry_delay(4), Duration::from_millis(1600));
        assert_eq!(retry_delay(9), RETRY_MAX);
        assert_eq!(retry_delay(u32::MAX), RETRY_MAX);
    }
}
