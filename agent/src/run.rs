//! Starting and stopping an agent: [`start`] lists the agent's tasks (gossip member, pod and
//! policy watches, the own Node's watch under `--label-cleanup tas`, policy enforcer, reward loop, QUIC and HTTP servers, collection loop); the
//! functions below it set each one up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use parking_lot::RwLock;
use prometheus_client::registry::Registry;
use telemesh_core::gossip::StateKey;
use telemesh_core::pod::PodFigures;
use telemesh_core::wire::Response;
use telemesh_runtime::client::kube_client;
use telemesh_runtime::door::{Connections, Door, DoorMetrics, DoorName, Limits};
use telemesh_runtime::gossip::{GossipMember, Member};
use telemesh_runtime::quic::server::{Handler, HandlerFuture, QuicServer};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::collection::collect::CollectorConfig;
use crate::config::{Config, QuicConfig};
use crate::http::HttpState;
use crate::metrics::AgentMetrics;
use crate::shared::SharedGossip;

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
    gossip: SharedGossip,
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

/// Starts an agent; it runs until `stop` is cancelled (then call [`Agent::shutdown`]).
pub async fn start(config: Config, stop: CancellationToken) -> anyhow::Result<Agent> {
    let tasks = TaskTracker::new();
    // The root registry holds the unprefixed standard process metrics; ours are under
    // `telemesh_agent_`.
    let mut registry = Registry::default();
    let metrics = AgentMetrics::register(registry.sub_registry_with_prefix("telemesh_agent"));
    telemesh_runtime::process_metrics::register(&mut registry, "telemesh-agent");

    // Gossip first: it works without the API server.
    let member = join_gossip(&config).await?;
    let gossip_addr = member.id().gossip_addr;
    let gossip_listen = member.listen_addr();
    let counters = member.counters();
    let gossip: SharedGossip = Arc::new(tokio::sync::Mutex::new(Some(member)));

    let user_agent = telemesh_runtime::client::user_agent(
        "telemesh-agent",
        env!("CARGO_PKG_VERSION"),
        &config.node_name,
    );
    let client = kube_client(config.kubeconfig.as_deref(), &user_agent).await?;
    let pods =
        crate::watch::pods::watch_node_pods(client.clone(), &config.node_name, stop.child_token());
    let pods_synced = Arc::new(AtomicBool::new(false));
    tasks.spawn(mark_synced(pods.clone(), pods_synced.clone()));
    // One watch for the policy loop and the collection loop's verdict pushes.
    let policies = crate::watch::policies::watch_policies(client.clone(), stop.child_token());
    let latest_samples: crate::shared::LatestSamples = Arc::new(RwLock::new(None));
    let latest_pods: Arc<RwLock<Vec<PodFigures>>> = Arc::new(RwLock::new(Vec::new()));
    // Writes go through a client that does not retry within a call, behind one backoff.
    let writes = crate::shared::write_client(config.kubeconfig.as_deref(), &user_agent).await?;
    let backoff = crate::enforcement::api_backoff::SharedApiBackoff::default();
    // The Node's labels for TAS's clean-up, which removes labels the agent did not write.
    let own_node = (config.policy.label_cleanup
        == crate::enforcement::label_cleanup::LabelCleanup::Tas)
        .then(|| {
            crate::watch::node_watch::watch_own_node(
                client.clone(),
                &config.node_name,
                stop.child_token(),
            )
        });
    let evictor = crate::shared::evictor(
        &writes,
        &config.node_name,
        config.policy.eviction.as_ref(),
        &backoff,
        metrics.refusals(),
    );

    tasks.spawn(crate::enforcement::run(
        crate::enforcement::Inputs {
            node_name: config.node_name.clone(),
            client: writes,
            backoff,
            evictor: evictor.clone(),
            policies: policies.clone(),
            pods: pods.clone(),
            samples: latest_samples.clone(),
            gossip: gossip.clone(),
            own_node,
            config: config.policy.clone(),
            metrics: metrics.clone(),
        },
        stop.child_token(),
    ));
    tasks.spawn(crate::scavengers::run(
        crate::scavengers::Inputs {
            host_root: config.host_root.clone(),
            pods: pods.clone(),
            samples: latest_samples.clone(),
            gossip: gossip.clone(),
            evictor,
            metrics: metrics.clone(),
            config: config.scavengers.clone(),
        },
        stop.child_token(),
    ));
    tasks.spawn(crate::rewards::run(
        crate::rewards::Inputs {
            client: client.clone(),
            pods: pods.clone(),
            figures: latest_pods.clone(),
            gossip: gossip.clone(),
            metrics: metrics.clone(),
            config: config.rewards.clone(),
        },
        stop.child_token(),
    ));
    let quic_addr = match &config.quic {
        Some(quic) => Some(
            serve_quic(
                quic,
                &config.node_name,
                &latest_pods,
                &gossip,
                gossip_addr,
                &tasks,
                &stop,
            )
            .await?,
        ),
        None => None,
    };
    let door_metrics = DoorMetrics::register(
        registry
            .sub_registry_with_prefix("telemesh_agent")
            .sub_registry_with_prefix("http"),
    );
    let http_state = Arc::new(HttpState {
        registry,
        ready: AtomicBool::new(false),
        debug_state: debug_state(gossip.clone()),
    });
    let http_addr = serve_http(&config, http_state.clone(), door_metrics, &tasks, &stop).await?;
    tasks.spawn(crate::collection::run(
        crate::collection::Inputs {
            node_name: config.node_name.clone(),
            collector: CollectorConfig {
                textfile_dir: config.textfile_dir.clone(),
                ..CollectorConfig::with_root(config.host_root.clone())
            },
            interval: config.collect_interval,
            deadband: config.deadband,
            prometheus_endpoints: config
                .prometheus_endpoints
                .iter()
                .filter_map(|u| u.parse().ok())
                .collect(),
            pods,
            pods_synced,
            policies,
            unknown: config.policy.unknown,
            gossip: gossip.clone(),
            counters,
            latest_pods,
            latest_samples,
            metrics,
            http: http_state,
        },
        stop.child_token(),
    ));

    tracing::info!(
        node.name = %config.node_name,
        gossip.addr = %gossip_addr,
        gossip.listen = %gossip_listen,
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

/// Joins the gossip as this node's agent.
async fn join_gossip(config: &Config) -> anyhow::Result<GossipMember> {
    let member_config = config
        .gossip
        .agent_config(&config.node_name)
        .context("starting gossip")?;
    GossipMember::start(member_config)
        .await
        .context("starting gossip")
}

/// Sets `synced` once the pod watch has its first full list.
async fn mark_synced(pods: Store<Pod>, synced: Arc<AtomicBool>) {
    if pods.wait_until_ready().await.is_ok() {
        synced.store(true, Ordering::Relaxed);
    }
}

/// Starts the QUIC server and publishes where it listens to gossip; returns the bound address.
async fn serve_quic(
    quic: &QuicConfig,
    node_name: &str,
    latest_pods: &Arc<RwLock<Vec<PodFigures>>>,
    gossip: &SharedGossip,
    gossip_addr: SocketAddr,
    tasks: &TaskTracker,
    stop: &CancellationToken,
) -> anyhow::Result<SocketAddr> {
    let files = telemesh_runtime::quic::tls::TlsFiles {
        ca: quic.ca.clone(),
        cert_chain: quic.cert.clone(),
        key: quic.key.clone(),
    };
    let tls = telemesh_runtime::quic::tls::server_config(&files).context("QUIC TLS")?;
    let handler = Arc::new(QuicHandler {
        node_name: node_name.to_owned(),
        pods: latest_pods.clone(),
    });
    let server = QuicServer::bind(quic.listen, tls, handler).context("binding QUIC")?;
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
    Ok(addr)
}

/// Largest body of the HTTP endpoints: GETs without one.
const HTTP_MAX_BODY: usize = 16 << 10;

/// Binds the HTTP listener and serves /metrics, health and debug endpoints until `stop`, behind
/// a door (body limit, header and body deadlines; no rate limit: Prometheus and the kubelet's
/// probes call at their own fixed pace).
async fn serve_http(
    config: &Config,
    state: Arc<HttpState>,
    metrics: DoorMetrics,
    tasks: &TaskTracker,
    stop: &CancellationToken,
) -> anyhow::Result<SocketAddr> {
    let listen = config.http_listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| {
            format!("cannot listen on {listen} for HTTP; pick another --http-listen")
        })?;
    let addr = listener.local_addr()?;
    let door = Door::new(
        DoorName::Http,
        Limits {
            max_body: HTTP_MAX_BODY,
            body_timeout: config.http_timeouts.http_body_timeout,
            rate: None,
        },
        metrics.clone(),
    );
    let connections = Connections {
        door: DoorName::Http,
        header_timeout: config.http_timeouts.http_header_timeout,
        metrics,
    };
    tasks.spawn(telemesh_runtime::door::serve(
        listener,
        door.guard(crate::http::router(state)),
        connections,
        stop.child_token(),
        tasks.clone(),
    ));
    Ok(addr)
}

/// Renders `/debug/state` from the gossip member when asked.
fn debug_state(
    gossip: SharedGossip,
) -> Box<dyn Fn() -> futures::future::BoxFuture<'static, serde_json::Value> + Send + Sync> {
    Box::new(move || {
        let gossip = gossip.clone();
        Box::pin(async move {
            let guard = gossip.lock().await;
            match guard.as_ref() {
                Some(member) => members_json(&member.members().await),
                None => serde_json::json!({"members": []}),
            }
        })
    })
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
                "cell": m.state.cell.map(|c| c.to_string()),
                "metrics": metrics,
            })
        })
        .collect();
    serde_json::json!({ "members": list })
}
