//! The collection loop: sample the node every interval, import local Prometheus endpoints,
//! publish what changed to gossip (and push it to the coordinators at once when it flips a
//! dontschedule verdict or removes a metric: [`verdict_push`]), hand the figures to the
//! policy, reward and QUIC readers, and keep the gossip gauges and the readiness flag current.

pub mod collect;
pub mod publish;
pub mod verdict_push;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use http_body_util::{BodyExt as _, Empty};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use parking_lot::RwLock;
use telemesh_core::gossip::ObserverCheck;
use telemesh_core::gossip::cells;
use telemesh_core::metric::{MetricName, Sample};
use telemesh_core::pod::PodFigures;
use telemesh_core::policy::{TASPolicy, Unknown};
use telemesh_runtime::gossip::{DropReason, GossipMember, TransportCounters};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::collection::collect::prom::{ImportRule, parse_exposition};
use crate::collection::collect::{Collection, Collector, CollectorConfig, PodRef};
use crate::collection::publish::{Deadband, Publisher};
use crate::collection::verdict_push::VerdictWatch;
use crate::http::HttpState;
use crate::metrics::{
    AgentMetrics, Direction, DirectionLabels, DropLabels, Liveness as PeerLiveness, MetricLabel,
    PeerLabels,
};
use crate::shared::LatestSamples;
use crate::shared::SharedGossip;

type HttpClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Empty<bytes::Bytes>,
>;

/// What the loop reads and feeds.
pub struct Inputs {
    /// This node.
    pub node_name: String,
    /// Where and what to sample.
    pub collector: CollectorConfig,
    /// Sampling period.
    pub interval: Duration,
    /// When a changed metric is republished.
    pub deadband: Deadband,
    /// Local Prometheus endpoints to import.
    pub prometheus_endpoints: Vec<http::Uri>,
    /// This node's pods.
    pub pods: Store<Pod>,
    /// All TASPolicies: a publication that flips one's dontschedule verdict is pushed to the
    /// coordinator replicas at once.
    pub policies: Store<TASPolicy>,
    /// What a rule whose metric is missing counts as (the policy loop's `--unknown-metrics`).
    pub unknown: Unknown,
    /// Whether the pod watch has synced (readiness waits for it).
    pub pods_synced: Arc<AtomicBool>,
    /// The gossip member (None once shut down: the loop ends).
    pub gossip: SharedGossip,
    /// The gossip transport's counters, exported as metrics.
    pub counters: Arc<TransportCounters>,
    /// Per-pod figures for the reward loop and the QUIC server.
    pub latest_pods: Arc<RwLock<Vec<PodFigures>>>,
    /// Node samples for the policy loop.
    pub latest_samples: LatestSamples,
    /// Metrics.
    pub metrics: AgentMetrics,
    /// Readiness flag.
    pub http: Arc<HttpState>,
}

/// Runs the loop until `stop` (or until gossip is shut down).
pub async fn run(inputs: Inputs, stop: CancellationToken) {
    let mut collector = Some(Collector::new(inputs.collector.clone()));
    let mut publisher = Publisher::new(inputs.deadband);
    let mut verdicts = VerdictWatch::default();
    let http_client: HttpClient =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let rule = ImportRule::default();
    let mut tick = tokio::time::interval(inputs.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut ready = false;
    let mut correction_ms = 0;
    let mut observers = ObserversSeen::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        // One span per tick; false: the collector or gossip is gone, and the loop ends.
        let go_on = async {
        let started = std::time::Instant::now();
        let Some(c) = collector.take() else {
            return false;
        };
        let (c, mut collection) = sample(c, &inputs).await;
        collector = Some(c);
        if !inputs.prometheus_endpoints.is_empty() {
            // Built-in metrics win a name clash (node-exporter also has `node_load1`).
            let imported = scrape(&http_client, &inputs.prometheus_endpoints, &rule).await;
            crate::collection::collect::prom::merge_imported(&mut collection.samples, imported);
        }
        let metrics = &inputs.metrics;
        metrics
            .collection_seconds
            .observe(started.elapsed().as_secs_f64());
        for (source, err) in &collection.errors {
            tracing::debug!(node.name = %inputs.node_name, source = %source, error = %err, "source unreadable");
        }
        for s in &collection.samples {
            metrics
                .node_metric
                .get_or_create(&MetricLabel {
                    metric: s.name.to_string(),
                })
                .set(s.value);
        }
        *inputs.latest_pods.write() = collection.pods;
        verdicts.refresh(&inputs.policies);
        let selection = publisher.select(
            &collection.samples,
            tokio::time::Instant::now(),
            verdicts.targets(),
        );
        let flipped = verdicts.flipped(&publisher.published(), inputs.unknown);
        // Handed over, not copied: the policy loop is the last reader of this collection.
        *inputs.latest_samples.write() =
            Some((SystemTime::now(), std::mem::take(&mut collection.samples)));
        let guard = inputs.gossip.lock().await;
        let Some(member) = guard.as_ref() else {
            return false; // gossip shut down
        };
        let clock = member.clock();
        publish(
            member,
            &selection.publish,
            &selection.gone,
            clock.now(),
            metrics,
        )
        .await;
        if flipped || !selection.gone.is_empty() {
            let pushed = member.push_to_observers().await;
            metrics.verdict_pushes.inc_by(pushed as u64);
            tracing::debug!(
                node.name = %inputs.node_name,
                observers = pushed,
                verdict_flipped = flipped,
                metrics_removed = selection.gone.len(),
                "pushed to the coordinators"
            );
        }
        // Counts only: parsing every member's state each tick would cost more than collecting.
        let (alive, dead) = member.liveness_counts().await;
        observers.check(member, metrics).await;
        drop(guard);
        if clock.correction_ms() != correction_ms {
            // Values stamped before the correction carry the wrong time: restamp them all.
            correction_ms = clock.correction_ms();
            publisher.republish_all();
        }
        export_gossip(metrics, &inputs.counters, alive, dead, correction_ms);
        // Ready once a collection went out and the pod watch has synced.
        if !ready && inputs.pods_synced.load(Ordering::Relaxed) {
            ready = true;
            inputs.http.ready.store(true, Ordering::Relaxed);
            tracing::info!(node.name = %inputs.node_name, "agent ready");
        }
            true
        }
        .instrument(tracing::info_span!("collection_tick", node.name = %inputs.node_name))
        .await;
        if !go_on {
            break;
        }
    }
}

/// One pass over the node's files, off the async workers (many cgroup and resctrl files
/// block). A panicking pass restarts the collector.
async fn sample(mut collector: Collector, inputs: &Inputs) -> (Collector, Collection) {
    let refs: Vec<PodRef> = crate::watch::pods::pod_refs(&inputs.pods)
        .into_iter()
        .map(|(namespace, name, uid)| PodRef {
            namespace,
            name,
            uid,
        })
        .collect();
    let joined = tokio::task::spawn_blocking(move || {
        let collection = collector.sample(std::time::Instant::now(), &refs);
        (collector, collection)
    })
    .await;
    match joined {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "collection panicked; restarting the collector");
            (Collector::new(inputs.collector.clone()), Default::default())
        }
    }
}

/// The coordinator replicas in this agent's gossip, checked every [`ObserversSeen::EVERY`]: a
/// replica with another cell count, or none for [`ObserversSeen::PATIENCE`], is logged when it
/// begins ([`cells::observer_warning`]).
struct ObserversSeen {
    last: ObserverCheck,
    since: tokio::time::Instant,
    next: tokio::time::Instant,
}

impl ObserversSeen {
    const EVERY: Duration = Duration::from_secs(5);
    const PATIENCE: Duration = Duration::from_secs(60);

    fn new() -> Self {
        let now = tokio::time::Instant::now();
        Self {
            last: ObserverCheck::NoneLive,
            since: now,
            next: now + Self::EVERY,
        }
    }

    async fn check(&mut self, member: &GossipMember, metrics: &AgentMetrics) {
        let now = tokio::time::Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + Self::EVERY;
        let check = member.check_observers().await;
        let cell = member.cell();
        if cells::observer_warning(
            cell.cells(),
            self.last,
            now - self.since,
            check,
            Self::PATIENCE,
        ) {
            match check {
                ObserverCheck::CountDiffers { theirs, ours } => tracing::warn!(
                    gossip.cell = %cell,
                    agent.cells = %ours,
                    coordinator.cells = %theirs,
                    "a coordinator replica runs with another --gossip-cells than this agent; \
                     give both the same count (the chart's gossip.cells)"
                ),
                ObserverCheck::NoneLive => tracing::warn!(
                    gossip.cell = %cell,
                    patience = ?Self::PATIENCE,
                    "no coordinator replica in this agent's gossip: nothing reads this node; \
                     check --gossip-cell-seeds, and that the coordinators run with the same \
                     --gossip-cells"
                ),
                ObserverCheck::Agrees => {}
            }
        }
        metrics.gossip_cell_count_mismatch.set(i64::from(matches!(
            check,
            ObserverCheck::CountDiffers { .. }
        )));
        if check != self.last {
            self.since = now;
            self.last = check;
        }
    }
}

/// Publishes changed metrics and deletes the ones no longer measured.
async fn publish(
    member: &GossipMember,
    changed: &[Sample],
    gone: &[MetricName],
    measured_at: SystemTime,
    metrics: &AgentMetrics,
) {
    if !changed.is_empty() {
        match member.publish_metrics(changed, measured_at).await {
            Ok(()) => {
                metrics.published.inc_by(changed.len() as u64);
            }
            Err(e) => tracing::warn!(error = %e, "publishing to gossip failed"),
        }
    }
    if !gone.is_empty()
        && let Err(e) = member.remove_metrics(gone).await
    {
        tracing::warn!(error = %e, "removing metrics from gossip failed");
    }
}

/// Peer counts, dropped datagrams, traffic by direction and the clock correction.
fn export_gossip(
    metrics: &AgentMetrics,
    counters: &TransportCounters,
    alive: usize,
    dead: usize,
    correction_ms: i64,
) {
    for (state, count) in [(PeerLiveness::Alive, alive), (PeerLiveness::Dead, dead)] {
        metrics
            .gossip_peers
            .get_or_create(&PeerLabels { state })
            .set(count as i64);
    }
    metrics
        .gossip_clock_correction
        .set(correction_ms as f64 / 1_000.0);
    let stats = counters.snapshot();
    catch_up(&metrics.gossip_v1_frames, stats.v1_frames);
    for (reason, count) in DropReason::ALL.iter().zip(stats.dropped) {
        let labels = DropLabels {
            reason: reason.as_str().into(),
        };
        catch_up(&metrics.gossip_dropped.get_or_create(&labels), count);
    }
    for (direction, bytes, datagrams) in [
        (Direction::In, stats.bytes_in, stats.datagrams_in),
        (Direction::Out, stats.bytes_out, stats.datagrams_out),
    ] {
        let labels = DirectionLabels { direction };
        catch_up(&metrics.gossip_bytes.get_or_create(&labels), bytes);
        catch_up(&metrics.gossip_datagrams.get_or_create(&labels), datagrams);
    }
}

/// Brings a Prometheus counter up to a total counted elsewhere (the transport's atomics).
fn catch_up(counter: &prometheus_client::metrics::counter::Counter, total: u64) {
    let seen = counter.get();
    if total > seen {
        counter.inc_by(total - seen);
    }
}

/// Fetches and imports local Prometheus endpoints.
async fn scrape(client: &HttpClient, urls: &[http::Uri], rule: &ImportRule) -> Vec<Sample> {
    let mut out = Vec::new();
    for url in urls {
        let fetched = tokio::time::timeout(Duration::from_secs(2), async {
            let resp = client.get(url.clone()).await?;
            let body = resp.into_body().collect().await?.to_bytes();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(body)
        })
        .await;
        match fetched {
            Ok(Ok(body)) => {
                let text = String::from_utf8_lossy(&body);
                out.extend(parse_exposition(&text, rule).samples);
            }
            Ok(Err(e)) => {
                tracing::debug!(url = %url, error = %e, "prometheus endpoint unreachable")
            }
            Err(_) => tracing::debug!(url = %url, "prometheus endpoint timed out"),
        }
    }
    out
}
