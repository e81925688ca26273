//! Starting and stopping an agent: the kube client and pod watch, the gossip member, the
//! collection loop that publishes what changed, the QUIC and HTTP servers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use http_body_util::{BodyExt as _, Empty};
use parking_lot::RwLock;
use prometheus_client::registry::Registry;
use telemesh_core::gossip::{
    DropReason, GossipConfig, GossipMember, Keyring, Member, Security, StateKey,
};
use telemesh_core::pod::PodFigures;
use telemesh_core::quic::server::{Handler, HandlerFuture, QuicServer};
use telemesh_core::wire::Response;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::collect::prom::{ImportRule, parse_exposition};
use crate::collect::{Collector, CollectorConfig, PodRef};
use crate::config::{Config, GossipSecurity};
use crate::http::HttpState;
use crate::metrics::{
    AgentMetrics, Direction, DirectionLabels, DropLabels, Liveness as PeerLiveness, MetricLabel,
    PeerLabels,
};
use crate::publish::Publisher;

/// A running agent.
pub struct Agent {
    /// Where gossip listens.
    pub gossip_addr: SocketAddr,
    /// Where HTTP listens.
    pub http_addr: SocketAddr,
    /// Where QUIC listens, if enabled.
    pub quic_addr: Option<SocketAddr>,
    stop: CancellationToken,
    tasks: TaskTracker,
    gossip: Arc<tokio::sync::Mutex<Option<GossipMember>>>,
    grace: Duration,
}

impl Agent {
    /// Stops cleanly: leaves the gossip, finishes in-flight requests, waits for tasks up to the
    /// grace period.
    pub async fn shutdown(self) {
        self.stop.cancel();
        if let Some(member) = self.gossip.lock().await.take()
            && let Err(e) = member.shutdown().await
        {
            tracing::warn!(error = %e, "leaving the gossip failed");
        }
        self.tasks.close();
        if tokio::time::timeout(self.grace, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(grace = ?self.grace, "tasks still running after the grace period; exiting anyway");
        }
    }

    /// Stops at once without leaving the gossip, as a crash would (for tests of failure
    /// detection).
    pub async fn kill(self) {
        self.stop.cancel();
        // Dropping the member aborts its tasks without announcing anything.
        drop(self.gossip.lock().await.take());
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Resolves when the agent's stop token is cancelled.
    pub async fn stopped(&self) {
        self.stop.cancelled().await;
    }
}

pub use telemesh_core::client::kube_client;

/// A client that does not retry 429s: for evictions, a disruption budget's refusal is the
/// answer, tried again on a later pass, not fifteen times within the call.
async fn eviction_client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let mut config = telemesh_core::client::kube_config(kubeconfig).await?;
    config.default_retry = false;
    kube::Client::try_from(config).context("building the Kubernetes client")
}

/// Answers the coordinator's QUIC requests from the latest collection.
struct QuicHandler {
    node_name: String,
    pods: Arc<RwLock<Vec<PodFigures>>>,
}

impl Handler for QuicHandler {
    fn ping(&self, nonce: u64) -> Response {
        Response::Pong {
            nonce,
            node_name: self.node_name.clone(),
            agent_version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn pod_telemetry(&self) -> HandlerFuture<'_> {
        let pods = self.pods.read().clone();
        let node_name = self.node_name.clone();
        Box::pin(async move { Response::PodTelemetry { node_name, pods } })
    }
}

/// Renders what this agent sees of every member, for `/debug/state`.
fn members_json(members: &[Member]) -> serde_json::Value {
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let list: Vec<serde_json::Value> = members
        .iter()
        .map(|m| {
            let metrics: serde_json::Map<String, serde_json::Value> = m
                .state
                .metrics
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::json!({"value": v.value, "age_ms": now_ms.saturating_sub(v.measured_at_ms)})))
                .collect();
            serde_json::json!({
                "node": &*m.id.node_name,
                "generation": m.id.generation,
                "gossip_addr": m.id.gossip_addr.to_string(),
                "liveness": format!("{:?}", m.liveness),
                "self": m.is_self,
                "role": m.state.role.map(|r| format!("{r:?}")),
                "metrics": metrics,
            })
        })
        .collect();
    serde_json::json!({ "members": list })
}

/// The gossip member, shared by the loops that publish; `None` once shutdown took it.
pub type SharedGossip = Arc<tokio::sync::Mutex<Option<GossipMember>>>;

/// Fetches and imports local Prometheus endpoints.
async fn scrape(
    client: &hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Empty<bytes::Bytes>,
    >,
    urls: &[http::Uri],
    rule: &ImportRule,
) -> Vec<telemesh_core::metric::Sample> {
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

/// Starts an agent; it runs until `stop` is cancelled (then call [`Agent::shutdown`]).
pub async fn start(config: Config, stop: CancellationToken) -> anyhow::Result<Agent> {
    let tasks = TaskTracker::new();
    let mut registry = Registry::with_prefix("telemesh_agent");
    let metrics = AgentMetrics::register(&mut registry);

    // Gossip first: it works without the API server.
    let security = match &config.gossip_security {
        GossipSecurity::Sealed(path) => {
            Security::Sealed(Keyring::load(path).context("starting gossip")?)
        }
        GossipSecurity::Insecure => {
            tracing::warn!(
                "gossip is NOT encrypted (--insecure-gossip): use this only in a dev cluster"
            );
            Security::Insecure
        }
    };
    let mut gossip_config = GossipConfig::new(
        &config.node_name,
        &config.cluster_id,
        config.gossip_listen,
        security,
    );
    gossip_config.advertise_addr = config.gossip_advertise;
    gossip_config.seeds = config.gossip_seeds.clone();
    gossip_config.gossip_interval = config.gossip_interval;
    let member = GossipMember::start(gossip_config)
        .await
        .context("starting gossip")?;
    let gossip_addr = member.id().gossip_addr;
    let counters = member.counters();
    let gossip = Arc::new(tokio::sync::Mutex::new(Some(member)));

    let client = kube_client(config.kubeconfig.as_deref()).await?;
    let pods = crate::pods::watch_node_pods(client.clone(), &config.node_name, stop.child_token());
    let policy_store = crate::policies::watch_policies(client.clone(), stop.child_token());
    let latest_samples: crate::enforcer::LatestSamples = Arc::new(RwLock::new(None));
    {
        let inputs = crate::enforcer::Inputs {
            node_name: config.node_name.clone(),
            client: client.clone(),
            eviction_client: eviction_client(config.kubeconfig.as_deref()).await?,
            policies: policy_store,
            pods: pods.clone(),
            samples: latest_samples.clone(),
            gossip: gossip.clone(),
            config: config.policy.clone(),
            metrics: metrics.clone(),
        };
        tasks.spawn(crate::enforcer::run(inputs, stop.child_token()));
    }
    let pods_synced = Arc::new(AtomicBool::new(false));
    {
        let (pods, synced) = (pods.clone(), pods_synced.clone());
        tasks.spawn(async move {
            if pods.wait_until_ready().await.is_ok() {
                synced.store(true, Ordering::Relaxed);
            }
        });
    }

    let latest_pods: Arc<RwLock<Vec<PodFigures>>> = Arc::new(RwLock::new(Vec::new()));
    tasks.spawn(crate::rewards::run(
        crate::rewards::Inputs {
            pods: pods.clone(),
            figures: latest_pods.clone(),
            gossip: gossip.clone(),
            metrics: metrics.clone(),
            config: config.rewards.clone(),
        },
        stop.child_token(),
    ));
    let debug_gossip = gossip.clone();
    let http_state = Arc::new(HttpState {
        registry,
        ready: AtomicBool::new(false),
        debug_state: Box::new(move || {
            let gossip = debug_gossip.clone();
            Box::pin(async move {
                let guard = gossip.lock().await;
                match guard.as_ref() {
                    Some(member) => members_json(&member.members().await),
                    None => serde_json::json!({"members": []}),
                }
            })
        }),
    });

    let quic_addr = match &config.quic {
        Some(q) => {
            let files = telemesh_core::quic::tls::TlsFiles {
                ca: q.ca.clone(),
                cert_chain: q.cert.clone(),
                key: q.key.clone(),
            };
            let tls = telemesh_core::quic::tls::server_config(&files).context("QUIC TLS")?;
            let handler = Arc::new(QuicHandler {
                node_name: config.node_name.clone(),
                pods: latest_pods.clone(),
            });
            let server = QuicServer::bind(q.listen, tls, handler).context("binding QUIC")?;
            let addr = server.local_addr();
            tasks.spawn(server.run(stop.child_token()));
            // Tell the coordinator where to ask: the QUIC port at the address peers gossip with
            // (a 0.0.0.0 listen address is not reachable as such).
            let advertised = if addr.ip().is_unspecified() {
                SocketAddr::new(gossip_addr.ip(), addr.port())
            } else {
                addr
            };
            if let Some(member) = gossip.lock().await.as_ref() {
                member
                    .set(&StateKey::QuicAddr, &advertised.to_string())
                    .await
                    .context("publishing the QUIC address to gossip")?;
            }
            Some(addr)
        }
        None => None,
    };

    let listener = tokio::net::TcpListener::bind(config.http_listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} for HTTP; pick another --http-listen",
                config.http_listen
            )
        })?;
    let http_addr = listener.local_addr()?;
    let app = crate::http::router(http_state.clone());
    let http_stop = stop.child_token();
    tasks.spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(http_stop.cancelled_owned())
            .await
        {
            tracing::error!(error = %e, "HTTP server stopped");
        }
    });

    // The collection loop.
    let loop_stop = stop.child_token();
    let gossip_loop = gossip.clone();
    let node_name = config.node_name.clone();
    let interval = config.collect_interval;
    let band = config.deadband;
    let collector_config = CollectorConfig {
        textfile_dir: config.textfile_dir.clone(),
        ..CollectorConfig::with_root(config.host_root.clone())
    };
    let urls: Vec<http::Uri> = config
        .prometheus_endpoints
        .iter()
        .filter_map(|u| u.parse().ok())
        .collect();
    tasks.spawn(async move {
        let mut collector = Some(Collector::new(collector_config.clone()));
        let mut publisher = Publisher::new(band);
        let http_client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        let rule = ImportRule::default();
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut ready = false;
        loop {
            tokio::select! {
                _ = loop_stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let refs: Vec<PodRef> = crate::pods::pod_refs(&pods)
                .into_iter()
                .map(|(namespace, name, uid)| PodRef { namespace, name, uid })
                .collect();
            let started = std::time::Instant::now();
            let Some(mut c) = collector.take() else { break };
            // A pass over many cgroup and resctrl files blocks: keep it off the async workers.
            let joined = tokio::task::spawn_blocking(move || {
                let collection = c.sample(std::time::Instant::now(), &refs);
                (c, collection)
            })
            .await;
            let (c, mut collection) = match joined {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "collection panicked; restarting the collector");
                    (Collector::new(collector_config.clone()), Default::default())
                }
            };
            collector = Some(c);
            if !urls.is_empty() {
                // Built-in metrics win a name clash (node-exporter also has `node_load1`).
                let imported = scrape(&http_client, &urls, &rule).await;
                crate::collect::prom::merge_imported(&mut collection.samples, imported);
            }
            metrics.collection_seconds.observe(started.elapsed().as_secs_f64());
            for (source, err) in &collection.errors {
                tracing::debug!(node.name = %node_name, source = %source, error = %err, "source unreadable");
            }
            for s in &collection.samples {
                metrics.node_metric.get_or_create(&MetricLabel { metric: s.name.to_string() }).set(s.value);
            }
            *latest_pods.write() = collection.pods;
            let selection = publisher.select(&collection.samples, tokio::time::Instant::now());
            // Handed over, not copied: the policy loop is the last reader of this collection.
            *latest_samples.write() = Some((SystemTime::now(), std::mem::take(&mut collection.samples)));
            let guard = gossip_loop.lock().await;
            let Some(member) = guard.as_ref() else { break };
            if !selection.publish.is_empty() {
                match member.publish_metrics(&selection.publish, SystemTime::now()).await {
                    Ok(()) => {
                        metrics.published.inc_by(selection.publish.len() as u64);
                    }
                    Err(e) => tracing::warn!(error = %e, "publishing to gossip failed"),
                }
            }
            if !selection.gone.is_empty()
                && let Err(e) = member.remove_metrics(&selection.gone).await
            {
                tracing::warn!(error = %e, "removing metrics from gossip failed");
            }
            // Counts only: parsing every member's state each tick would cost more than collecting.
            let (alive, dead) = member.liveness_counts().await;
            drop(guard);
            let (alive, dead) = (alive as i64, dead as i64);
            metrics.gossip_peers.get_or_create(&PeerLabels { state: PeerLiveness::Alive }).set(alive);
            metrics.gossip_peers.get_or_create(&PeerLabels { state: PeerLiveness::Dead }).set(dead);
            let stats = counters.snapshot();
            for (reason, count) in DropReason::ALL.iter().zip(stats.dropped) {
                catch_up(&metrics.gossip_dropped.get_or_create(&DropLabels { reason: reason.as_str().into() }), count);
            }
            for (direction, bytes, datagrams) in [
                (Direction::In, stats.bytes_in, stats.datagrams_in),
                (Direction::Out, stats.bytes_out, stats.datagrams_out),
            ] {
                let labels = DirectionLabels { direction };
                catch_up(&metrics.gossip_bytes.get_or_create(&labels), bytes);
                catch_up(&metrics.gossip_datagrams.get_or_create(&labels), datagrams);
            }
            // Ready once a collection went out and the pod watch has synced.
            if !ready && pods_synced.load(Ordering::Relaxed) {
                ready = true;
                http_state.ready.store(true, Ordering::Relaxed);
                tracing::info!(node.name = %node_name, "agent ready");
            }
        }
    });

    tracing::info!(
        node.name = %config.node_name,
        gossip.addr = %gossip_addr,
        http.addr = %http_addr,
        quic.addr = ?quic_addr,
        "agent listening"
    );
    Ok(Agent {
        gossip_addr,
        http_addr,
        quic_addr,
        stop,
        tasks,
        gossip,
        grace: config.shutdown_grace,
    })
}

/// Brings a Prometheus counter up to a total counted elsewhere (the transport's atomics).
fn catch_up(counter: &prometheus_client::metrics::counter::Counter, total: u64) {
    let seen = counter.get();
    if total > seen {
        counter.inc_by(total - seen);
    }
}
