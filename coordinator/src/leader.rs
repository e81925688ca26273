//! Leader election: one Lease (kube-lease-manager) per coordinator release. [`campaign`] holds
//! or waits for it and says through a `watch` channel whether this replica leads; the action
//! executor and the ScavengerJob controller each [`follow`] that channel, so both run on the
//! same replica and stop together the moment the Lease is lost.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use telemesh_runtime::cli::parse_duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Leader election flags.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaderArgs {
    /// Name of the Lease the replicas elect their leader with (it runs workload actions and
    /// the ScavengerJob controller).
    #[arg(
        long,
        env = "TELEMESH_LEADER_LEASE",
        default_value = "telemesh-coordinator"
    )]
    pub leader_lease: String,
    /// Namespace of that Lease (the chart sets the release namespace).
    #[arg(
        long,
        env = "TELEMESH_LEADER_LEASE_NAMESPACE",
        default_value = "default"
    )]
    pub leader_lease_namespace: String,
    /// How long the Lease is held without renewal: how soon another replica takes over from a
    /// dead leader.
    #[arg(long, env = "TELEMESH_LEADER_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_lease_duration: Duration,
}

/// Validated leader election settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Lease name.
    pub lease: String,
    /// Lease namespace.
    pub namespace: String,
    /// Lease duration (at least 2 s).
    pub duration: Duration,
}

impl From<LeaderArgs> for Settings {
    fn from(a: LeaderArgs) -> Self {
        Self {
            lease: a.leader_lease,
            namespace: a.leader_lease_namespace,
            duration: a.leader_lease_duration.max(Duration::from_secs(2)),
        }
    }
}

/// Campaigns for the Lease as `identity` until `stop`, telling `leading` whether this replica
/// holds it. On stop it waits (at most one Lease duration) for every follower to let go of the
/// channel, then releases the Lease, so a successor never overlaps a leader still finishing.
pub async fn campaign(
    client: Client,
    settings: Settings,
    identity: String,
    leading: watch::Sender<bool>,
    stop: CancellationToken,
) {
    let secs = settings.duration.as_secs().max(2);
    let manager = loop {
        let built = LeaseManagerBuilder::new(client.clone(), &settings.lease)
            .with_namespace(&settings.namespace)
            .with_identity(&identity)
            .with_duration(secs)
            .with_grace((secs / 3).max(1))
            .build()
            .await;
        match built {
            Ok(m) => break m,
            Err(e) => {
                tracing::warn!(error = %e, lease = %settings.lease, "cannot set up the leader Lease; retrying in 5s");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
            }
        }
    };
    let (mut held, lease_task) = manager.watch().await;
    loop {
        let now = *held.borrow_and_update();
        if *leading.borrow() != now {
            if now {
                tracing::info!(replica = %identity, lease = %settings.lease, "took the leader Lease");
            } else {
                tracing::warn!(replica = %identity, lease = %settings.lease, "lost the leader Lease");
            }
            leading.send_replace(now);
        }
        tokio::select! {
            () = stop.cancelled() => break,
            changed = held.changed() => if changed.is_err() { break },
        }
    }
    leading.send_replace(false);
    if tokio::time::timeout(settings.duration, leading.closed())
        .await
        .is_err()
    {
        tracing::warn!("followers still leading after the Lease duration; releasing anyway");
    }
    // Dropping the receiver makes the lease task release the Lease.
    drop(held);
    match lease_task.await {
        Ok(Ok(_)) => tracing::info!("released the leader Lease"),
        Ok(Err(e)) => tracing::warn!(error = %e, "releasing the leader Lease failed"),
        Err(e) => tracing::warn!(error = %e, "the Lease task failed"),
    }
}

/// Runs `lead` each time `leading` turns true, with a token cancelled when it turns false or
/// at `stop`, and waits for it to return before following again. Returns at `stop` (or when
/// the campaign ends), dropping `leading`.
pub async fn follow<F, Fut>(
    mut leading: watch::Receiver<bool>,
    stop: CancellationToken,
    mut lead: F,
) where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        // Wait to lead.
        while !*leading.borrow_and_update() {
            tokio::select! {
                () = stop.cancelled() => return,
                changed = leading.changed() => if changed.is_err() { return },
            }
        }
        let term = stop.child_token();
        let task = tokio::spawn(lead(term.clone()));
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                changed = leading.changed() => {
                    if changed.is_err() || !*leading.borrow_and_update() { break }
                }
            }
        }
        term.cancel();
        if let Err(e) = task.await {
            tracing::error!(error = %e, "a leader task failed");
        }
        if stop.is_cancelled() {
            return;
        }
    }
}

/// Keeps a reflector store of every `K` filled until `term`, as the leader's loops read them:
/// returns the store and the task that polls the watch, which wakes `changed` (if given) after
/// each change and logs failed watches with `what`.
pub fn reflect<K>(
    api: kube::Api<K>,
    what: &'static str,
    changed: Option<std::sync::Arc<tokio::sync::Notify>>,
    term: CancellationToken,
) -> (
    kube::runtime::reflector::Store<K>,
    tokio::task::JoinHandle<()>,
)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, reflector, watcher};

    let (store, writer) = reflector::store::<K>();
    let task = tokio::spawn(async move {
        let mut changes = telemesh_runtime::watch_backoff::backoff(reflector::reflector(
            writer,
            telemesh_runtime::store_watch::watcher_for_store(api, watcher::Config::default()),
        ))
        .touched_objects()
        .boxed();
        loop {
            tokio::select! {
                () = term.cancelled() => return,
                change = changes.next() => match change {
                    None => return,
                    Some(Err(e)) => tracing::warn!(error = %e, watch = what, "a watch failed; retrying"),
                    Some(Ok(_)) => {
                        if let Some(changed) = &changed {
                            changed.notify_one();
                        }
                    }
                },
            }
        }
    });
    (store, task)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn followers_lead_only_while_the_lease_is_held() {
        let (tx, rx) = watch::channel(false);
        let stop = CancellationToken::new();
        let starts = Arc::new(AtomicUsize::new(0));
        let active = Arc::new(AtomicUsize::new(0));
        let follower = tokio::spawn(follow(rx, stop.clone(), {
            let (starts, active) = (starts.clone(), active.clone());
            move |term: CancellationToken| {
                let (starts, active) = (starts.clone(), active.clone());
                async move {
                    starts.fetch_add(1, Ordering::SeqCst);
                    active.fetch_add(1, Ordering::SeqCst);
                    term.cancelled().await;
                    active.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }));
        let settle = || tokio::time::sleep(Duration::from_millis(10));
        settle().await;
        assert_eq!(starts.load(Ordering::SeqCst), 0, "not leading yet");
        tx.send_replace(true);
        settle().await;
        assert_eq!(active.load(Ordering::SeqCst), 1);
        tx.send_replace(false);
        settle().await;
        assert_eq!(
            active.load(Ordering::SeqCst),
            0,
            "stops when the Lease is lost"
        );
        tx.send_replace(true);
        settle().await;
        assert_eq!(
            (starts.load(Ordering::SeqCst), active.load(Ordering::SeqCst)),
            (2, 1),
            "leads again when it comes back"
        );
        stop.cancel();
        follower.await.unwrap_or_default();
        assert_eq!(active.load(Ordering::SeqCst), 0);
        // The follower let go of the channel: the campaign may release the Lease.
        assert!(tx.is_closed());
    }

    #[test]
    fn the_lease_lasts_at_least_two_seconds() {
        let s = Settings::from(LeaderArgs {
            leader_lease: "l".into(),
            leader_lease_namespace: "ns".into(),
            leader_lease_duration: Duration::from_millis(100),
        });
        assert_eq!(s.duration, Duration::from_secs(2));
    }

    /// The leader's stores hold every pod and node of the cluster: without the managed fields
    /// the API server records on each.
    #[tokio::test]
    async fn reflected_stores_keep_no_managed_fields() {
        use k8s_openapi::api::core::v1::Pod;
        use kube::api::PostParams;

        let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
        let client = sim.client().await.unwrap();
        let pods = kube::Api::<Pod>::default_namespaced(client.clone());
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let written = pods.get("p").await.unwrap();
        assert!(
            written
                .metadata
                .managed_fields
                .is_some_and(|m| !m.is_empty()),
            "the API server records who wrote the pod"
        );
        let term = CancellationToken::new();
        let (store, task) = reflect(pods, "pods", None, term.clone());
        store.wait_until_ready().await.unwrap();
        let held = store.state();
        assert_eq!(held.len(), 1);
        assert!(held[0].metadata.managed_fields.is_none());
        term.cancel();
        task.await.unwrap();
    }
}
