//! Starting and stopping a coordinator replica: the gossip observer and the view updater, the
//! TASPolicy watch, the leader Lease with the action executor and the ScavengerJob controller
//! that follow it, and the extender, API (JSON API, live page and JSON-RPC) and health servers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use prometheus_client::registry::Registry;
use telemesh_runtime::door::{DoorMetrics, DoorName};
use telemesh_runtime::gossip::GossipMember;
use telemesh_runtime::quic::client::QuicClient;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::actions::auth::{ApiAuth, AuthMode, NONE_NOTE};
use crate::actions::rpc::RpcState;
use crate::api::{AgentLink, ApiState};
use crate::config::Config;
use crate::doors::Doors;
use crate::extender::Extender;
use crate::health::HealthState;
use crate::metrics::{ExtenderMetrics, PolicyMetrics, RpcMetrics, ViewMetrics};
use crate::policies::PolicyCache;
use crate::view::{ClusterView, Updater, ViewConfig};

/// A running coordinator replica.
pub struct Coordinator {
    /// Where gossip listens: the flat mesh's address, or cell 0's.
    pub gossip_addr: SocketAddr,
    /// Where each gossip cell is served, by cell index (one address with the flat mesh).
    pub gossip_addrs: Vec<SocketAddr>,
    /// Where the extender listens.
    pub extender_addr: SocketAddr,
    /// Whether the extender serves HTTPS.
    pub extender_https: bool,
    /// Where the JSON API listens.
    pub api_addr: SocketAddr,
    /// Where /metrics, /healthz and /readyz listen.
    pub http_addr: SocketAddr,
    /// The cluster view (tests read it directly).
    pub view: ClusterView,
    /// The policy cache.
    pub policies: PolicyCache,
    stop: CancellationToken,
    tasks: TaskTracker,
    gossip: Vec<Arc<GossipMember>>,
    agents: Option<Arc<ApiState>>,
    grace: Duration,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("gossip_addr", &self.gossip_addr)
            .field("extender_addr", &self.extender_addr)
            .field("api_addr", &self.api_addr)
            .field("http_addr", &self.http_addr)
            .finish_non_exhaustive()
    }
}

// === impl Coordinator ===

impl Coordinator {
    /// Stops: servers finish in-flight requests, gossip is left cleanly, tasks are waited for
    /// up to the grace period.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.tasks.close();
        if tokio::time::timeout(self.grace, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(grace = ?self.grace, "tasks still running after the grace period; exiting anyway");
        }
        if let Some(api) = &self.agents
            && let Some(link) = &api.agents
        {
            link.client.close().await;
        }
        // Every cell at once: each leave waits up to its timeout for the pushes to go out.
        futures::future::join_all(self.gossip.into_iter().map(|member| async move {
            match Arc::try_unwrap(member) {
                Ok(member) => {
                    if let Err(e) = member.shutdown().await {
                        tracing::warn!(error = %e, "leaving the gossip failed");
                    }
                }
                Err(_) => {
                    tracing::warn!("gossip still in use at shutdown; stopping without leaving");
                }
            }
        }))
        .await;
    }

    /// Resolves when the coordinator's stop token is cancelled.
    pub async fn stopped(&self) {
        self.stop.cancelled().await;
    }
}

pub use telemesh_runtime::client::kube_client;

/// This replica's gossip members.
struct Joined {
    /// By cell index (the flat mesh alone with one cell).
    cells: Vec<Arc<GossipMember>>,
    /// The flat mesh beside the cells, while a rolling upgrade from it lasts.
    flat: Option<Arc<GossipMember>>,
}

/// Joins every gossip cell (or the flat mesh) as an observer, and the flat mesh beside the
/// cells unless `--gossip-flat-mesh-grace 0s`; on a failure, leaves what it joined.
async fn join_gossip(config: &Config) -> anyhow::Result<Joined> {
    let configs = config
        .gossip
        .observer_configs(&config.replica_name, !config.flat_mesh_grace.is_zero())
        .context("starting gossip")?;
    let flat_index = configs.cells.len();
    let mut members = Vec::with_capacity(flat_index + 1);
    for member_config in configs.cells.into_iter().chain(configs.flat) {
        let what = if members.len() == flat_index {
            "the flat mesh".to_owned()
        } else {
            format!("cell {}", member_config.cell)
        };
        match GossipMember::start(member_config).await {
            Ok(member) => members.push(Arc::new(member)),
            Err(e) => {
                for member in members.into_iter().filter_map(|m| Arc::try_unwrap(m).ok()) {
                    let _ = member.shutdown().await;
                }
                return Err(anyhow::Error::new(e).context(format!("starting gossip: {what}")));
            }
        }
    }
    let flat = (members.len() > flat_index).then(|| members.remove(flat_index));
    Ok(Joined {
        cells: members,
        flat,
    })
}

async fn bind(addr: SocketAddr, flag: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.with_context(|| {
        format!("cannot listen on {addr}; is the port in use? pick another --{flag}")
    })
}

/// Serves `app` on `listener` over plain HTTP/1.1 until `stop`, with the door's header deadline.
fn serve_http(
    tasks: &TaskTracker,
    listener: TcpListener,
    app: axum::Router,
    connections: telemesh_runtime::door::Connections,
    stop: CancellationToken,
) {
    tasks.spawn(telemesh_runtime::door::serve(
        listener,
        app,
        connections,
        stop,
        tasks.clone(),
    ));
}

/// Returns a [`ClusterView`] that `members` (this replica's observers, one per gossip cell, at
/// least one) keep current: the view ages figures by their shared cluster clock, and an
/// [`Updater`] task folds their gossip into it until `stop`, leaving `flat` (one of them, with
/// its grace) once no agent is left in it. The replica and the freshness benchmark
/// (`benches/freshness.rs`) both start their views here, so the benchmark measures the fold
/// the replica runs.
pub async fn follow_gossip(
    members: Vec<Arc<GossipMember>>,
    flat: Option<(&Arc<GossipMember>, Duration)>,
    config: ViewConfig,
    metrics: ViewMetrics,
    tasks: &TaskTracker,
    stop: CancellationToken,
) -> ClusterView {
    let clock = members.first().map(|m| m.clock()).unwrap_or_default();
    let view = ClusterView::with_clock(clock);
    let mut updater = Updater::new(members, view.clone(), config, metrics).await;
    if let Some((flat, grace)) = flat {
        updater = updater.with_flat_mesh(flat, grace);
    }
    tasks.spawn(updater.run(stop));
    view
}

/// Starts a coordinator; it runs until `stop` is cancelled (then call
/// [`Coordinator::shutdown`]). Every listener is bound before this returns.
pub async fn start(config: Config, stop: CancellationToken) -> anyhow::Result<Coordinator> {
    let tasks = TaskTracker::new();
    // The root registry holds the unprefixed standard process metrics; ours are under
    // `telemesh_coordinator_`.
    let mut root = Registry::default();
    telemesh_runtime::process_metrics::register(&mut root, "telemesh-coordinator");
    let registry = root.sub_registry_with_prefix("telemesh_coordinator");
    let extender_metrics = ExtenderMetrics::register(registry.sub_registry_with_prefix("extender"));
    let view_metrics = ViewMetrics::register(registry.sub_registry_with_prefix("view"));
    let policy_metrics = PolicyMetrics::register(registry.sub_registry_with_prefix("policies"));
    let rpc_metrics = RpcMetrics::register(registry.sub_registry_with_prefix("rpc"));
    let door_metrics = DoorMetrics::register(registry.sub_registry_with_prefix("http"));
    let doors = Doors::new(&config.doors, config.max_body, &door_metrics);

    // Bind everything first, so a taken port fails the start before anything runs.
    let extender_tls = match &config.extender_tls {
        Some(files) => Some(crate::extender::http::server_config(files).context("extender TLS")?),
        None => None,
    };
    let extender_listener = bind(config.extender_listen, "extender-listen").await?;
    let api_listener = bind(config.api_listen, "api-listen").await?;
    let http_listener = bind(config.http_listen, "http-listen").await?;
    let extender_addr = extender_listener.local_addr()?;
    let api_addr = api_listener.local_addr()?;
    let http_addr = http_listener.local_addr()?;

    // Gossip: an observer in every cell (or the flat mesh), on the same sealed transport as the
    // agents.
    let joined = join_gossip(&config).await?;
    let gossip_addrs: Vec<SocketAddr> = joined.cells.iter().map(|m| m.id().gossip_addr).collect();
    let first = joined.flat.as_ref().unwrap_or(&joined.cells[0]);
    let (gossip_addr, gossip_listen) = (first.id().gossip_addr, first.listen_addr());
    let members: Vec<Arc<GossipMember>> =
        joined.cells.iter().chain(&joined.flat).cloned().collect();
    tasks.spawn(
        crate::gossip_metrics::GossipMetrics::register(registry.sub_registry_with_prefix("gossip"))
            .follow(members.clone(), stop.child_token()),
    );

    let view = follow_gossip(
        members.clone(),
        joined
            .flat
            .as_ref()
            .map(|flat| (flat, config.flat_mesh_grace)),
        config.view.clone(),
        view_metrics,
        &tasks,
        stop.child_token(),
    )
    .await;

    let policies = PolicyCache::default();
    let user_agent = telemesh_runtime::client::user_agent(
        "telemesh-coordinator",
        env!("CARGO_PKG_VERSION"),
        &config.replica_name,
    );
    let client = kube_client(config.kubeconfig.as_deref(), &user_agent).await?;
    tasks.spawn(
        policies
            .clone()
            .watch(client.clone(), policy_metrics, stop.child_token()),
    );

    // One leader Lease: its holder executes workload actions and runs the ScavengerJob
    // controller.
    let (leading_tx, leading) = tokio::sync::watch::channel(false);
    tasks.spawn(crate::leader::campaign(
        client.clone(),
        config.leader.clone(),
        config.replica_name.clone(),
        leading_tx,
        stop.child_token(),
    ));

    // Workload actions: every replica follows placements; the Lease holder executes.
    let placements = crate::actions::placements::Placements::default();
    tasks.spawn(placements.clone().watch(client.clone(), stop.child_token()));
    let executor = crate::actions::executor::context(
        client.clone(),
        config.executor.clone(),
        placements.clone(),
        &config.replica_name,
        crate::actions::executor::Metrics::register(registry.sub_registry_with_prefix("actions")),
    );
    tasks.spawn(crate::actions::executor::run(
        executor,
        leading.clone(),
        stop.child_token(),
    ));

    // ScavengerJobs, on the Lease holder.
    if config.scavengers.enabled {
        let parts = crate::scavenge::Parts {
            client: client.clone(),
            settings: config.scavengers.clone(),
            metrics: crate::scavenge::Metrics::register(
                registry.sub_registry_with_prefix("scavengers"),
            ),
            view: view.clone(),
            stale_after: config.settings.stale_after,
            replica: config.replica_name.clone(),
        };
        tasks.spawn(crate::scavenge::run(parts, leading, stop.child_token()));
    }

    // The extender.
    let mut extender = Extender::new(view.clone(), policies.clone(), config.settings);
    if config.settings.scavenger_victims == crate::extender::unsaved::ScavengerVictims::Unsaved {
        // Every replica answers preempt, so every replica watches scavenger pods.
        let (pods, watch) =
            crate::extender::pods::ScavengerPods::watch(client.clone(), stop.child_token());
        tasks.spawn(watch);
        extender = extender.with_scavenger_pods(pods);
    }
    let decisions = extender.decisions.clone();
    let actions_board = placements.board().clone();
    extender.placements = placements;
    let app = doors.extender.guard(crate::extender::http::router(
        extender,
        extender_metrics,
        &config.paths,
        config.max_body,
    ));
    let extender_https = extender_tls.is_some();
    match extender_tls {
        Some(tls) => {
            let (stop, inner) = (stop.child_token(), tasks.clone());
            tasks.spawn(crate::extender::http::serve_tls(
                extender_listener,
                app,
                tls,
                doors.connections(DoorName::Extender),
                stop,
                inner,
            ));
        }
        None => {
            tracing::warn!(
                extender.addr = %extender_addr,
                "the extender serves plain HTTP; pass --extender-cert and --extender-key outside a dev cluster"
            );
            serve_http(
                &tasks,
                extender_listener,
                app,
                doors.connections(DoorName::Extender),
                stop.child_token(),
            );
        }
    }

    // The JSON API.
    let agents = match &config.quic {
        Some(q) => {
            let tls = telemesh_runtime::quic::tls::client_config(&q.files).context("QUIC TLS")?;
            let client = QuicClient::bind(tls, q.bind).context("QUIC client")?;
            Some(AgentLink {
                client,
                agent_port: q.agent_port,
            })
        }
        None => {
            tracing::info!(
                "no --quic-ca/--quic-cert/--quic-key: /api/v1/nodes/{{name}}/pods answers 503"
            );
            None
        }
    };
    let auth = Arc::new(ApiAuth::new(config.api_auth, client.clone()));
    let mut notes = Vec::new();
    if config.api_auth == AuthMode::None {
        tracing::warn!(
            api.addr = %api_addr,
            "--api-auth none: every caller of the JSON API and JSON-RPC may act, unauthenticated; \
             use it only in a dev cluster"
        );
        notes.push(NONE_NOTE.to_owned());
    }
    let api_state = Arc::new(ApiState {
        view: view.clone(),
        stale_after: config.settings.stale_after,
        agents,
        reward_model: config.settings.rewards.model,
    });
    let rpc_state = Arc::new(RpcState {
        client: client.clone(),
        auth: auth.clone(),
        metrics: rpc_metrics,
        stop: stop.child_token(),
    });
    // The live page shares the JSON API's authentication.
    let page = crate::page::Feed::new(
        crate::page::Source {
            view: view.clone(),
            policies: policies.clone(),
            settings: crate::page::PageSettings {
                stale_after: config.settings.stale_after,
                reward_model: config.settings.rewards.model,
                unknown: config.settings.unknown,
            },
            decisions,
            actions: actions_board,
        },
        stop.child_token(),
    );
    tasks.spawn(page.clone().run());
    let api = doors
        .api
        .guard(
            crate::api::router(api_state.clone())
                .merge(crate::page::router(page))
                .route_layer(axum::middleware::from_fn_with_state(
                    auth,
                    crate::actions::auth::require_telemetry_access,
                )),
        )
        .merge(doors.rpc.guard(crate::actions::rpc::router(rpc_state)));
    serve_http(
        &tasks,
        api_listener,
        api,
        doors.connections(DoorName::Api),
        stop.child_token(),
    );

    let health = Arc::new(HealthState {
        registry: root,
        view: view.clone(),
        policies: policies.clone(),
        notes,
    });
    serve_http(
        &tasks,
        http_listener,
        doors.health.guard(crate::health::router(health)),
        doors.connections(DoorName::Http),
        stop.child_token(),
    );

    tracing::info!(
        replica = %config.replica_name,
        gossip.addr = %gossip_addr,
        gossip.listen = %gossip_listen,
        gossip.cells = %config.gossip.cells,
        extender.addr = %extender_addr,
        extender.https = extender_https,
        api.addr = %api_addr,
        page.url = %format!("http://{api_addr}/"),
        http.addr = %http_addr,
        "coordinator listening"
    );
    Ok(Coordinator {
        gossip_addr,
        gossip_addrs,
        extender_addr,
        extender_https,
        api_addr,
        http_addr,
        view,
        policies,
        stop,
        tasks,
        gossip: members,
        agents: Some(api_state),
        grace: config.shutdown_grace,
    })
}
