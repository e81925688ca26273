//! One gossip member: a chitchat instance (protocol V1, compressed digests) on the sealed relay
//! transport, with the schema's keys.
//!
//! Agents publish their node's metrics; observers (coordinator replicas) join with
//! `role=observer` and publish nothing about nodes. Everyone reads every member's
//! [`NodeState`] with its liveness from chitchat's phi-accrual failure detector, and can follow
//! membership changes as [`MembershipEvent`]s. [`GossipMember::shutdown`] leaves cleanly: it
//! publishes `leaving`, pushes it to a few live peers, then stops, so peers drop the member at
//! once instead of after the failure detector's timeout. Dropping a member stops it without
//! leaving, as a crash would.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chitchat::transport::Transport;
use chitchat::{
    Chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig, ListenerHandle,
    ProtocolVersion, spawn_chitchat,
};
use tokio::sync::{Mutex, broadcast};

use super::AbortOnDrop;
use super::cells::{Cell, Cells, ObserverCheck, check_observers};
use super::clock::{ClusterClock, LocalClock};
use super::groups::{self, MetricEncoding};
use super::keyring::Keyring;
use super::membership::{MemberId, Membership, MembershipEvent};
use super::published::{Published, Write};
use super::relay::{Protection, RelayConfig, RelayTransport, TransportCounters, TransportStats};
use super::schema::{self, Role, SchemaError, StateKey};
use super::seal::{Sealer, V1Frames};
use super::state::NodeState;
use telemesh_core::gossip::Liveness;
use telemesh_core::metric::{MetricName, Sample};

/// Peers a leaving member pushes its `leaving` key to.
const LEAVE_FANOUT: usize = 3;

/// Capacity of the membership event channel; a receiver that lags resynchronises with
/// [`GossipMember::members`].
const EVENT_CAPACITY: usize = 1024;

/// How gossip datagrams are protected.
#[derive(Clone, Debug)]
pub enum Security {
    /// Sealed with this keyring (`--gossip-key-file`).
    Sealed(Keyring),
    /// Clear text (`--insecure-gossip`): dev clusters only.
    Insecure,
}

/// Everything a member needs to join.
#[derive(Clone, Debug)]
pub struct GossipConfig {
    /// The Kubernetes node name (agents) or a replica name (observers); unique in the cluster.
    pub node_name: String,
    /// Distinguishes restarts of the same node; must grow from one start to the next.
    /// Defaults to the start time in Unix milliseconds.
    pub generation: u64,
    /// Members only talk to members of the same cluster id; it is also the AEAD's associated
    /// data, so another cluster's datagrams do not open.
    pub cluster_id: String,
    /// Agent or observer.
    pub role: Role,
    /// The gossip cell this member joins, published under `cell` unless it is the flat mesh
    /// ([`super::cells`]); `cluster_id` must be the cell's.
    pub cell: Cell,
    /// UDP address to listen on; port 0 picks a free port.
    pub listen_addr: SocketAddr,
    /// Address peers reach this member at; defaults to the bound listen address, which must
    /// then not be unspecified (`0.0.0.0`).
    pub advertise_addr: Option<SocketAddr>,
    /// Seeds: `ip:port` or `host:port` (chitchat re-resolves host names every minute, so a
    /// headless Service works).
    pub seeds: Vec<String>,
    /// Time between gossip rounds.
    pub gossip_interval: Duration,
    /// Phi-accrual threshold above which a silent member counts as dead.
    pub phi_threshold: f64,
    /// How long a dead member stays known (as dead) before it is forgotten. It stays in every
    /// digest for half of this, so keep it short: each agent restart leaves one dead member.
    pub dead_node_grace_period: Duration,
    /// How long deleted keys are remembered as tombstones.
    pub tombstone_grace_period: Duration,
    /// Sealed or insecure.
    pub security: Security,
    /// The file the sealed keyring came from: re-read when it changes (a Secret update), every
    /// `key_reload_interval`.
    pub key_file: Option<PathBuf>,
    /// How often `key_file` is checked for changes.
    pub key_reload_interval: Duration,
    /// What to do with version 1 frames (a rolling upgrade; see [`super::seal`]).
    pub v1_frames: V1Frames,
    /// This member's own clock (shifted only by tests that play a wrong clock).
    pub local_clock: LocalClock,
    /// A clock to share with the process's other members (a coordinator replica's cells), so
    /// one estimate comes from all their peers; `None` starts one over `local_clock`.
    pub shared_clock: Option<ClusterClock>,
    /// Relay table limits and the replay window.
    pub relay: RelayConfig,
    /// Longest [`GossipMember::shutdown`] waits for the `leaving` key to go out.
    pub leave_timeout: Duration,
    /// How metrics are laid out: `None` chooses from the observers in view
    /// ([`groups::choose_encoding`]); `Some` pins one (benchmarks, or an operator holding one
    /// key per metric for readers that do not advertise their version).
    pub metric_encoding: Option<MetricEncoding>,
}

// === impl GossipConfig ===

impl GossipConfig {
    /// A configuration with defaults: 1 s rounds, phi 8, 5 min grace periods, agent role,
    /// generation = now in Unix milliseconds, no seeds.
    pub fn new(
        node_name: impl Into<String>,
        cluster_id: impl Into<String>,
        listen_addr: SocketAddr,
        security: Security,
    ) -> Self {
        Self {
            node_name: node_name.into(),
            generation: schema::unix_ms(SystemTime::now()),
            cluster_id: cluster_id.into(),
            role: Role::Agent,
            cell: Cells::FLAT.of(""),
            listen_addr,
            advertise_addr: None,
            seeds: Vec::new(),
            gossip_interval: Duration::from_secs(1),
            phi_threshold: 8.0,
            dead_node_grace_period: Duration::from_secs(5 * 60),
            tombstone_grace_period: Duration::from_secs(5 * 60),
            security,
            key_file: None,
            key_reload_interval: Duration::from_secs(5),
            v1_frames: V1Frames::default(),
            local_clock: LocalClock::default(),
            shared_clock: None,
            relay: RelayConfig::default(),
            leave_timeout: Duration::from_secs(1),
            metric_encoding: None,
        }
    }

    /// Puts the member in `cell`: the cell and its cluster id, made from the base id this
    /// configuration holds (so once, on a configuration made with the base id). The flat
    /// mesh's cell keeps the base id.
    pub fn join_cell(&mut self, cell: Cell) {
        self.cluster_id = cell.cluster_id(&self.cluster_id);
        self.cell = cell;
    }

    fn clock(&self) -> ClusterClock {
        self.shared_clock
            .clone()
            .unwrap_or_else(|| ClusterClock::new(self.local_clock))
    }

    fn failure_detector(&self) -> FailureDetectorConfig {
        // chitchat's "phi" is the silence divided by the mean heartbeat interval, a window of
        // intervals smoothed by the prior (`initial_interval`), which weighs like 5 samples:
        // only the mean matters, and 32 intervals give a steady one. The window is allocated
        // whole for every member: 8 bytes a sample, 256 B per member at 32 instead of 800 B
        // at 100 (0.5 MB per agent at 1,000 members) and 8 KB at chitchat's default 1,000.
        // The prior of 2.5 rounds keeps the steady mean where 100 samples and a 5-round prior
        // had it, (32 + 5 × 2.5) / 37 ≈ (100 + 5 × 5) / 105 ≈ 1.2 rounds, so a steadily heard
        // member is still declared dead after about 9.6 silent rounds at phi 8; a new member
        // with one interval heard still needs 18 silent rounds (was 35).
        FailureDetectorConfig {
            phi_threshold: self.phi_threshold,
            sampling_window_size: 32,
            max_interval: (self.gossip_interval * 10).max(Duration::from_secs(10)),
            initial_interval: self.gossip_interval * 5 / 2,
            dead_node_grace_period: self.dead_node_grace_period,
        }
    }
}

/// Why a member could not start or do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum GossipError {
    /// A configuration value that cannot work.
    #[error("gossip {field} {problem}")]
    Config {
        /// The setting.
        field: &'static str,
        /// What is wrong and what to do.
        problem: &'static str,
    },
    /// The listen address could not be bound.
    #[error(
        "cannot bind gossip socket {addr}/UDP: {source}; is the port in use? pick another --gossip-listen"
    )]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Listening on `0.0.0.0` with nothing to advertise.
    #[error(
        "gossip listens on {listen}, which peers cannot reach; pass --gossip-advertise with this node's IP"
    )]
    NoAdvertise {
        /// The bound address.
        listen: SocketAddr,
    },
    /// chitchat did not start.
    #[error("cannot start gossip: {source}")]
    Start {
        /// chitchat's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// chitchat stopped with an error.
    #[error("gossip stopped with an error: {source}")]
    Stopped {
        /// chitchat's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A value or key the schema refuses.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// An observer asked to publish node keys.
    #[error(
        "observer {node} publishes no node keys; only agents publish metrics, rewards and violations"
    )]
    Observer {
        /// The observer's name.
        node: String,
    },
    /// A key the member manages itself, or one with a dedicated method.
    #[error(
        "gossip key {key} cannot be set directly; use publish_metrics for metrics, shutdown to leave"
    )]
    ManagedKey {
        /// The key.
        key: String,
    },
    /// Keyring replacement on an insecure member.
    #[error(
        "gossip runs with --insecure-gossip, so there is no keyring to replace; restart with --gossip-key-file"
    )]
    Insecure,
}

/// Results of this module.
pub type Result<T, E = GossipError> = std::result::Result<T, E>;

impl GossipError {
    /// A bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config { .. } => "config",
            Self::Bind { .. } => "bind",
            Self::NoAdvertise { .. } => "no_advertise",
            Self::Start { .. } => "start",
            Self::Stopped { .. } => "stopped",
            Self::Schema(_) => "schema",
            Self::Observer { .. } => "observer",
            Self::ManagedKey { .. } => "managed_key",
            Self::Insecure => "insecure",
        }
    }
}

/// One member as seen from here.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// Who.
    pub id: MemberId,
    /// Up or not.
    pub liveness: Liveness,
    /// Whether this is the member asking.
    pub is_self: bool,
    /// What it published, as far as this schema understands it.
    pub state: NodeState,
}

/// A key change seen by [`GossipMember::on_key_change`].
#[derive(Debug, Clone, Copy)]
pub struct KeyChange<'a> {
    /// The member that owns the key.
    pub node_name: &'a str,
    /// Its generation.
    pub generation: u64,
    /// The key without the subscribed prefix.
    pub key: &'a str,
    /// The new value.
    pub value: &'a str,
}

/// Keeps an [`GossipMember::on_key_change`] callback registered; dropping it unsubscribes.
#[must_use = "dropping the subscription unsubscribes at once"]
pub struct KeySubscription {
    _handle: ListenerHandle,
}

impl fmt::Debug for KeySubscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeySubscription").finish_non_exhaustive()
    }
}

/// A running gossip member.
pub struct GossipMember {
    /// Taken by the leave: a member that left stays a value (its counters and clock readable)
    /// but gossips no more.
    handle: parking_lot::Mutex<Option<ChitchatHandle>>,
    chitchat: Arc<Mutex<Chitchat>>,
    id: MemberId,
    /// The bound socket (the advertised address may be another, e.g. a NAT or a proxy's).
    listen_addr: SocketAddr,
    role: Role,
    cell: Cell,
    counters: Arc<TransportCounters>,
    sealer: Option<Sealer>,
    clock: ClusterClock,
    events: broadcast::Sender<MembershipEvent>,
    /// Locked inside the chitchat lock, by the round's watcher and by every liveness read.
    membership: Arc<parking_lot::Mutex<Membership>>,
    /// The metrics published and their encoding; locked inside the chitchat lock.
    published: parking_lot::Mutex<Published>,
    metric_encoding: Option<MetricEncoding>,
    gossip_interval: Duration,
    leave_timeout: Duration,
    /// Whether the counters see this member's datagrams (our relay transport), so a leave can
    /// wait for its pushes to go out.
    counted: bool,
    _watcher: AbortOnDrop,
    _key_reload: Option<AbortOnDrop>,
}

// === impl GossipMember ===

impl GossipMember {
    /// Binds the gossip socket, then joins through the seeds on the sealed (or, if configured,
    /// insecure) relay transport.
    #[tracing::instrument(skip_all, fields(node.name = %config.node_name, gossip.listen = %config.listen_addr))]
    pub async fn start(config: GossipConfig) -> Result<Self> {
        let (protection, sealer) = match &config.security {
            Security::Sealed(keyring) => {
                let sealer = Sealer::new(keyring.clone(), config.cluster_id.as_bytes().to_vec())
                    .with_v1_frames(config.v1_frames);
                tracing::info!(keys = ?keyring.fingerprints(), "gossip sealed; the first key seals");
                (Protection::Sealed(sealer.clone()), Some(sealer))
            }
            Security::Insecure => {
                tracing::warn!(
                    "gossip is NOT encrypted (--insecure-gossip); use it in dev clusters only"
                );
                (Protection::Plain, None)
            }
        };
        let clock = config.clock();
        let transport =
            RelayTransport::new(protection, config.relay.clone()).with_clock(clock.clone());
        let bound = transport
            .prebind(config.listen_addr)
            .map_err(|source| GossipError::Bind {
                addr: config.listen_addr,
                source,
            })?;
        let counters = transport.counters();
        Self::spawn(config, bound, &transport, Some(counters), sealer, clock).await
    }

    /// Joins over a transport of the caller's, typically chitchat's in-process
    /// `ChannelTransport` in tests. `listen_addr` must name a port; `security` and `relay` are
    /// not used (the transport decides), the transport counters stay at zero, and a leave waits
    /// one gossip interval (at most `leave_timeout`) for its pushes.
    pub async fn start_on(config: GossipConfig, transport: &dyn Transport) -> Result<Self> {
        let listen = config.listen_addr;
        let clock = config.clock();
        Self::spawn(config, listen, transport, None, None, clock).await
    }

    async fn spawn(
        config: GossipConfig,
        listen_addr: SocketAddr,
        transport: &dyn Transport,
        counters: Option<Arc<TransportCounters>>,
        sealer: Option<Sealer>,
        clock: ClusterClock,
    ) -> Result<Self> {
        let invalid = |field, problem| Err(GossipError::Config { field, problem });
        if config.node_name.is_empty() {
            return invalid("node name", "is empty; pass --node-name");
        }
        if config.cluster_id.is_empty() {
            return invalid(
                "cluster id",
                "is empty; give every member the same cluster id",
            );
        }
        if config.gossip_interval.is_zero() {
            return invalid("interval", "is zero; use something like 1s");
        }
        let advertise = config.advertise_addr.unwrap_or(listen_addr);
        if advertise.ip().is_unspecified() || advertise.port() == 0 {
            return Err(GossipError::NoAdvertise { listen: advertise });
        }
        let chitchat_id = ChitchatId::new(config.node_name.as_str(), config.generation, advertise);
        let chitchat_config = ChitchatConfig {
            chitchat_id: chitchat_id.clone(),
            cluster_id: config.cluster_id.clone(),
            gossip_interval: config.gossip_interval,
            listen_addr,
            seed_nodes: config.seeds.clone(),
            failure_detector_config: config.failure_detector(),
            marked_for_deletion_grace_period: config.tombstone_grace_period,
            catchup_callback: None,
            // chitchat's live-nodes watch deep-copies every live member's keys whenever any
            // member's version moves, i.e. every round at scale: a second copy of the cluster
            // state and ~1 ms of cloning per round at 1,000 members. Rejecting every node here
            // keeps that watch empty; `watch_membership` polls the failure detector instead.
            extra_liveness_predicate: Some(Box::new(|_| false)),
            protocol_version: ProtocolVersion::V1,
        };
        let handle = spawn_chitchat(
            chitchat_config,
            schema::identity_entries(config.role, config.cell),
            transport,
        )
        .await
        .map_err(|e| GossipError::Start { source: e.into() })?;
        let chitchat = handle.chitchat();
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        let membership = Arc::new(parking_lot::Mutex::new(Membership::new(events.clone())));
        let watcher = tokio::spawn(watch_membership(
            chitchat.clone(),
            membership.clone(),
            config.gossip_interval,
        ));
        let id = MemberId::from(&chitchat_id);
        let key_reload = match (&sealer, &config.key_file) {
            (Some(sealer), Some(path)) => Some(AbortOnDrop(tokio::spawn(reload_keyring(
                sealer.clone(),
                path.clone(),
                config.key_reload_interval,
            )))),
            _ => None,
        };
        tracing::info!(member = %id, role = %config.role, seeds = ?config.seeds, "gossip member started");
        Ok(Self {
            handle: parking_lot::Mutex::new(Some(handle)),
            chitchat,
            id,
            listen_addr,
            role: config.role,
            cell: config.cell,
            counted: counters.is_some(),
            counters: counters.unwrap_or_default(),
            sealer,
            clock,
            events,
            membership,
            published: parking_lot::Mutex::default(),
            metric_encoding: config.metric_encoding,
            gossip_interval: config.gossip_interval,
            leave_timeout: config.leave_timeout,
            _watcher: AbortOnDrop(watcher),
            _key_reload: key_reload,
        })
    }

    /// The cluster clock: the local clock corrected by the peers' send times. Stamp figures
    /// with it (agents) and age them with it (observers).
    pub fn clock(&self) -> ClusterClock {
        self.clock.clone()
    }

    /// The keyring's fingerprints now, primary first (empty when insecure).
    pub fn key_fingerprints(&self) -> Vec<String> {
        self.sealer
            .as_ref()
            .map(|s| {
                s.keyring()
                    .fingerprints()
                    .into_iter()
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// This member's identity.
    pub fn id(&self) -> &MemberId {
        &self.id
    }

    /// The socket this member listens on; peers reach it at [`MemberId::gossip_addr`], which
    /// is another address when `--gossip-advertise` names one.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen_addr
    }

    /// The transport's live counters (bytes, datagrams, drops by reason, relays).
    pub fn counters(&self) -> Arc<TransportCounters> {
        self.counters.clone()
    }

    /// A copy of the transport counters now.
    pub fn stats(&self) -> TransportStats {
        self.counters.snapshot()
    }

    /// Publishes samples measured at `measured_at`: grouped by family in `M:` keys, or one
    /// `m:` key per metric while a live observer speaks schema version 1 ([`groups`]).
    /// Nothing is published if any sample is refused.
    pub async fn publish_metrics(&self, samples: &[Sample], measured_at: SystemTime) -> Result<()> {
        self.ensure_agent()?;
        let updates = samples
            .iter()
            .map(|s| Ok((s.name.clone(), schema::published_value(s, measured_at)?)))
            .collect::<Result<Vec<_>, SchemaError>>()?;
        let mut chitchat = self.chitchat.lock().await;
        let encoding = self
            .metric_encoding
            .unwrap_or_else(|| encoding_in_view(&chitchat));
        let writes = self.published.lock().publish(encoding, updates);
        apply_writes(chitchat.self_node_state(), writes);
        Ok(())
    }

    /// Deletes metrics no longer measured; readers stop seeing them at once.
    pub async fn remove_metrics(&self, names: &[MetricName]) -> Result<()> {
        self.ensure_agent()?;
        let mut chitchat = self.chitchat.lock().await;
        let writes = self.published.lock().remove(names);
        apply_writes(chitchat.self_node_state(), writes);
        Ok(())
    }

    /// Sets a reserved key (`r:` reward, `v:` violation, `s:` scavenger pod, QUIC address).
    pub async fn set(&self, key: &StateKey, value: &str) -> Result<()> {
        self.ensure_settable(key)?;
        key.validate()?;
        key.validate_value(value)?;
        self.chitchat
            .lock()
            .await
            .self_node_state()
            .set(key.to_string(), value);
        Ok(())
    }

    /// Deletes a reserved key (`r:` reward, `v:` violation, `s:` scavenger pod), if present.
    pub async fn delete(&self, key: &StateKey) -> Result<()> {
        self.ensure_settable(key)?;
        self.delete_keys(&[key.to_string()]).await;
        Ok(())
    }

    async fn delete_keys(&self, keys: &[String]) {
        let mut chitchat = self.chitchat.lock().await;
        let state = chitchat.self_node_state();
        for key in keys {
            if state.get(key).is_some() {
                state.delete(key);
            }
        }
    }

    fn ensure_agent(&self) -> Result<()> {
        match self.role {
            Role::Agent => Ok(()),
            Role::Observer => Err(GossipError::Observer {
                node: self.id.node_name.to_string(),
            }),
        }
    }

    fn ensure_settable(&self, key: &StateKey) -> Result<()> {
        self.ensure_agent()?;
        match key {
            StateKey::Reward(_)
            | StateKey::Violation(_)
            | StateKey::Scavenger(_)
            | StateKey::QuicAddr => Ok(()),
            _ => Err(GossipError::ManagedKey {
                key: key.to_string(),
            }),
        }
    }

    /// Every known member, self included, one per node name (the newest generation), sorted by
    /// name. Dead members stay listed until the dead-node grace period ends; observers are
    /// listed too (`state.role`), so cluster views keep only `state.is_agent()`.
    pub async fn members(&self) -> Vec<Member> {
        let chitchat = self.chitchat.lock().await;
        // What this read shows live has been reported as joined, so its departure will be.
        self.membership.lock().sync(&chitchat);
        let live: HashSet<&ChitchatId> = chitchat.live_nodes().collect();
        let mut newest: BTreeMap<&str, (&ChitchatId, &chitchat::NodeState)> = BTreeMap::new();
        for (id, node) in chitchat.node_states() {
            let slot = newest.entry(&id.node_id).or_insert((id, node));
            if slot.0.generation_id < id.generation_id {
                *slot = (id, node);
            }
        }
        newest
            .into_values()
            .map(|(id, node)| describe(&chitchat, id, node, live.contains(id)))
            .collect()
    }

    /// One member by node name (its newest generation), as [`Self::members`] would list it;
    /// cheaper when following [`MembershipEvent`]s one node at a time.
    pub async fn member(&self, node_name: &str) -> Option<Member> {
        let chitchat = self.chitchat.lock().await;
        let (id, node) = newest(&chitchat, node_name)?;
        self.membership.lock().sync_one(&chitchat, id);
        let live = chitchat.live_nodes().any(|l| l == id);
        Some(describe(&chitchat, id, node, live))
    }

    /// Calls `visit` with the newest generation of each named member and the keys it holds now,
    /// deletions included ([`HeldKeys`]), all under one lock: what a reader that follows key
    /// changes ([`Self::on_key_change`], which never reports a deletion) reads to find what a
    /// member stopped publishing. Names this member does not know are skipped. `visit` runs
    /// with the gossip state locked: keep it short and do not call this member from it.
    pub async fn visit_keys<'n>(
        &self,
        node_names: impl IntoIterator<Item = &'n str>,
        mut visit: impl FnMut(&MemberId, HeldKeys<'_>),
    ) {
        let chitchat = self.chitchat.lock().await;
        for name in node_names {
            if let Some((id, node)) = newest(&chitchat, name) {
                visit(&MemberId::from(id), HeldKeys { node });
            }
        }
    }

    /// Reports [`MembershipEvent::Updated`] now, instead of at the next round, for each live
    /// member whose version moved; joins and departures keep to the round. A member's deletions
    /// reach a reader only this way (its version moves with no key change to show for it), so a
    /// reader that must see them sooner than a round, as the coordinator's view does, calls this
    /// on its own tick. It walks every known member in order: a step and a comparison for each
    /// that did not move.
    pub async fn sync_updates(&self) {
        let chitchat = self.chitchat.lock().await;
        self.membership.lock().sync_updates(&chitchat);
    }

    /// Number of members the failure detector hears, self included (cheap: nothing is parsed;
    /// members announcing `leaving` still count until they go quiet).
    pub async fn live_count(&self) -> usize {
        self.chitchat.lock().await.live_nodes().count()
    }

    /// Numbers of live and dead members (distinct node names, self included), without parsing
    /// any state: cheap enough for every collection tick at 1,000 members.
    pub async fn liveness_counts(&self) -> (usize, usize) {
        let chitchat = self.chitchat.lock().await;
        let live: HashSet<&str> = chitchat.live_nodes().map(|id| &*id.node_id).collect();
        let dead = chitchat
            .dead_nodes()
            .map(|id| &*id.node_id)
            .filter(|name| !live.contains(name))
            .collect::<HashSet<&str>>()
            .len();
        (live.len(), dead)
    }

    /// The gossip cell this member joined.
    pub fn cell(&self) -> Cell {
        self.cell
    }

    /// The cell each live observer (coordinator replica) in view published (`None`: it is in
    /// the flat mesh), checked against this member's count.
    pub async fn check_observers(&self) -> ObserverCheck {
        let chitchat = self.chitchat.lock().await;
        let me = chitchat.self_chitchat_id();
        let cells: Vec<Option<Cell>> = chitchat
            .live_nodes()
            .filter(|id| *id != me)
            .filter_map(|id| chitchat.node_state(id))
            .filter(|node| announces_observer(node))
            .map(|node| node.get(schema::CELL_KEY).and_then(|v| v.parse().ok()))
            .collect();
        check_observers(self.cell.cells(), &cells)
    }

    /// Starts one exchange with each live observer now, ahead of the next round, so the
    /// observers (coordinator replicas) hear this member's latest state within a round trip
    /// instead of after the epidemic's rounds. Each is a full exchange (Syn, SynAck, then the
    /// Ack that carries what the observer lacks): spend it on rare changes that matter at once,
    /// not on every publication. Returns how many exchanges were started.
    pub async fn push_to_observers(&self) -> usize {
        if self.handle.lock().is_none() {
            return 0;
        }
        let observers: Vec<SocketAddr> = {
            let chitchat = self.chitchat.lock().await;
            let me = chitchat.self_chitchat_id();
            chitchat
                .live_nodes()
                .filter(|id| *id != me)
                .filter(|id| chitchat.node_state(id).is_some_and(announces_observer))
                .map(|id| id.gossip_advertise_addr)
                .collect()
        };
        let handle = self.handle.lock();
        let Some(handle) = handle.as_ref() else {
            return 0;
        };
        let mut started = 0;
        for addr in observers {
            match handle.gossip(addr) {
                Ok(()) => started += 1,
                // Only when the gossip server has stopped: the next round will not come either.
                Err(e) => {
                    tracing::debug!(peer = %addr, error = %e, "push to an observer not started")
                }
            }
        }
        started
    }

    /// Membership changes from now on. Subscribe, then read [`Self::members`]: every member a
    /// read shows live has been reported as joined by then, and its departure will be reported
    /// however soon after the read it comes. A receiver that lags gets `RecvError::Lagged` and
    /// should resynchronise with [`Self::members`].
    pub fn events(&self) -> broadcast::Receiver<MembershipEvent> {
        self.events.subscribe()
    }

    /// Calls `callback` for every key under `prefix` that a member sets or changes (deletions
    /// are not reported), until the subscription is dropped. It runs with the gossip state
    /// locked: keep it short and do not call this member from it.
    pub async fn on_key_change(
        &self,
        prefix: &str,
        callback: impl Fn(KeyChange<'_>) + Send + Sync + 'static,
    ) -> KeySubscription {
        let handle = self
            .chitchat
            .lock()
            .await
            .subscribe_event(prefix, move |event| {
                callback(KeyChange {
                    node_name: &event.node.node_id,
                    generation: event.node.generation_id,
                    key: event.key,
                    value: event.value,
                });
            });
        KeySubscription { _handle: handle }
    }

    /// Replaces the keyring without a restart (a rotation step: install, use, remove).
    pub fn replace_keyring(&self, keyring: Keyring) -> Result<()> {
        let sealer = self.sealer.as_ref().ok_or(GossipError::Insecure)?;
        tracing::info!(member = %self.id, keys = ?keyring.fingerprints(), "gossip keyring replaced");
        sealer.replace_keyring(keyring);
        Ok(())
    }

    /// Leaves cleanly: publishes `leaving`, pushes it to a few live peers (waiting at most
    /// `leave_timeout` for the exchanges), then stops gossip.
    pub async fn shutdown(self) -> Result<()> {
        self.leave().await
    }

    /// [`Self::shutdown`] for a member others still hold (a coordinator leaving the flat mesh
    /// once a rolling upgrade to cells is over): it gossips no more; a second leave does nothing.
    #[tracing::instrument(skip_all, fields(member = %self.id))]
    pub async fn leave(&self) -> Result<()> {
        let Some(handle) = self.handle.lock().take() else {
            return Ok(());
        };
        let peers: Vec<SocketAddr> = {
            let mut chitchat = self.chitchat.lock().await;
            chitchat
                .self_node_state()
                .set(StateKey::Leaving.to_string(), "1");
            let me = chitchat.self_chitchat_id().clone();
            chitchat
                .live_nodes()
                .filter(|id| **id != me)
                .map(|id| id.gossip_advertise_addr)
                .take(LEAVE_FANOUT)
                .collect()
        };
        if !peers.is_empty() {
            // Each push is Syn out, SynAck in, Ack (carrying `leaving`) out.
            let target = self.counters.snapshot().datagrams_out + 2 * peers.len() as u64;
            for peer in &peers {
                let _ = handle.gossip(*peer);
            }
            let counters = self.counters.clone();
            let counted = self.counted;
            let one_round = self.leave_timeout.min(self.gossip_interval);
            let flushed = tokio::time::timeout(self.leave_timeout, async move {
                if !counted {
                    // Nothing to observe on a foreign transport: give the pushes a round.
                    return tokio::time::sleep(one_round).await;
                }
                while counters.snapshot().datagrams_out < target {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
            tracing::info!(
                peers = peers.len(),
                flushed = flushed.is_ok(),
                "left gossip"
            );
        }
        handle
            .shutdown()
            .await
            .map_err(|e| GossipError::Stopped { source: e.into() })
    }
}

impl fmt::Debug for GossipMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GossipMember")
            .field("id", &self.id)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// What one member holds now, as [`GossipMember::visit_keys`] reads it: its live keys and the
/// keys it deleted, whose tombstones chitchat keeps for the tombstone grace period.
#[derive(Clone, Copy)]
pub struct HeldKeys<'a> {
    node: &'a chitchat::NodeState,
}

// === impl HeldKeys ===

impl<'a> HeldKeys<'a> {
    /// The value of `key`, if the member holds it (set and not deleted since).
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.node.get(key)
    }

    /// The keys starting with `prefix` that the member holds, with their values, in key order.
    pub fn with_prefix(&self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.node
            .iter_prefix(prefix)
            .map(|(key, v)| (key, v.value.as_str()))
    }

    /// The keys the member deleted and has not set again, in key order (tombstones are kept for
    /// the tombstone grace period, then forgotten).
    pub fn deleted(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.node
            .key_values_including_deleted()
            .filter(|(_, v)| v.is_deleted())
            .map(|(key, _)| key)
    }
}

impl fmt::Debug for HeldKeys<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldKeys")
            .field("max_version", &self.node.max_version())
            .finish_non_exhaustive()
    }
}

/// The newest generation of `node_name` that chitchat knows, found in the node states' order
/// (name, then generation) rather than by a scan of every member.
fn newest<'c>(
    chitchat: &'c Chitchat,
    node_name: &str,
) -> Option<(&'c ChitchatId, &'c chitchat::NodeState)> {
    let first = ChitchatId::new(node_name, 0, SocketAddr::from(([0, 0, 0, 0], 0)));
    chitchat
        .node_states()
        .range(first..)
        .take_while(|(id, _)| &*id.node_id == node_name)
        .max_by_key(|(id, _)| id.generation_id)
}

/// Reads one chitchat node state as a [`Member`].
fn describe(
    chitchat: &Chitchat,
    id: &ChitchatId,
    node: &chitchat::NodeState,
    live: bool,
) -> Member {
    let state = NodeState::from_key_values(node.key_values());
    let liveness = match (live, state.leaving) {
        (false, _) => Liveness::Dead,
        (true, true) => Liveness::Left,
        (true, false) => Liveness::Live,
    };
    Member {
        id: MemberId::from(id),
        liveness,
        is_self: id == chitchat.self_chitchat_id(),
        state,
    }
}

/// Re-reads the key file whenever it changes (a Secret update: kubelet swaps the files in within
/// about a minute) and gives the sealer the new keyring, so a rotation needs no restart. A file
/// that does not parse keeps the current keyring (logged); the next change is tried again.
async fn reload_keyring(sealer: Sealer, path: PathBuf, every: Duration) {
    let files = crate::reload::Watched::new(vec![path.clone()]);
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first look compares keys rather than the signature: the file may have changed
    // between the start-up read and this task's first signature.
    let mut first = true;
    loop {
        tick.tick().await;
        if !std::mem::take(&mut first) && !files.changed() {
            continue;
        }
        match Keyring::load(&path) {
            Ok(keyring) if keyring.fingerprints() == sealer.keyring().fingerprints() => {}
            Ok(keyring) => {
                tracing::info!(
                    keys = ?keyring.fingerprints(),
                    gossip.key_file = %path.display(),
                    "gossip keyring reloaded; the first key seals"
                );
                sealer.replace_keyring(keyring);
            }
            Err(error) => tracing::warn!(
                %error,
                "gossip key file changed but does not load; keeping the current keyring"
            ),
        }
    }
}

/// Reports membership changes once per gossip round (chitchat updates liveness once a round),
/// for listeners when nobody reads members.
async fn watch_membership(
    chitchat: Arc<Mutex<Chitchat>>,
    membership: Arc<parking_lot::Mutex<Membership>>,
    interval: Duration,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let chitchat = chitchat.lock().await;
        membership.lock().sync(&chitchat);
    }
}

/// Whether a member's state says it is an observer (a coordinator replica).
fn announces_observer(node: &chitchat::NodeState) -> bool {
    node.get(schema::ROLE_KEY) == Some(Role::Observer.as_str())
}

/// The metric encoding the live observers in view can read ([`groups::choose_encoding`]).
fn encoding_in_view(chitchat: &Chitchat) -> MetricEncoding {
    let self_id = chitchat.self_chitchat_id();
    groups::choose_encoding(
        chitchat
            .live_nodes()
            .filter(|id| *id != self_id)
            .filter_map(|id| chitchat.node_state(id))
            .map(|node| {
                let state = NodeState::from_key_values(
                    ["role", "v"]
                        .into_iter()
                        .filter_map(|k| node.get(k).map(|v| (k, v))),
                );
                (state.role, state.schema_version)
            }),
    )
}

/// Applies key writes to the member's own state; deleting an absent key does nothing.
fn apply_writes(state: &mut chitchat::NodeState, writes: Vec<Write>) {
    for write in writes {
        match write {
            Write::Set(key, value) => state.set(key, value),
            Write::Delete(key) => {
                if state.get(&key).is_some() {
                    state.delete(&key);
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn config(name: &str) -> GossipConfig {
        GossipConfig::new(
            name,
            "mesh",
            "127.0.0.1:0".parse().unwrap(),
            Security::Insecure,
        )
    }

    /// Whether `reader` sees `node`'s metric `name` at `value`, and the keys `node` holds.
    async fn seen(reader: &GossipMember, node: &str, name: &str, value: f64) -> bool {
        reader
            .member(node)
            .await
            .is_some_and(|m| m.state.metric(name).is_some_and(|v| v.value == value))
    }

    fn own_keys(chitchat: &mut Chitchat) -> Vec<String> {
        chitchat
            .self_node_state()
            .key_values()
            .map(|(k, _)| k.to_owned())
            .filter(|k| k.starts_with("m:") || k.starts_with("M:"))
            .collect()
    }

    #[tokio::test]
    async fn a_mixed_cluster_keeps_one_key_per_metric_until_every_observer_reads_groups() {
        use crate::testing::eventually;
        let within = Duration::from_secs(20);
        let fast = |mut c: GossipConfig| {
            c.gossip_interval = Duration::from_millis(50);
            c
        };
        let agent = GossipMember::start(fast(config("n1"))).await.unwrap();
        let seed = agent.id().gossip_addr.to_string();
        let mut c = fast(config("coordinator-old"));
        c.role = Role::Observer;
        c.seeds = vec![seed.clone()];
        let old = GossipMember::start(c).await.unwrap();
        // A coordinator of the previous build: it advertises schema version 1.
        old.chitchat.lock().await.self_node_state().set("v", "1");
        let sample = |v: f64| Sample {
            name: MetricName::new("node_load1").unwrap(),
            value: v,
        };
        eventually("the agent sees the old observer", within, || async {
            let m = agent.member("coordinator-old").await?;
            (m.liveness == Liveness::Live && m.state.schema_version == Some(1)).then_some(())
        })
        .await;
        agent
            .publish_metrics(&[sample(1.0)], SystemTime::now())
            .await
            .unwrap();
        assert_eq!(
            own_keys(&mut *agent.chitchat.lock().await),
            ["m:node_load1"]
        );
        eventually("the old observer reads the metric", within, || async {
            seen(&old, "n1", "node_load1", 1.0).await.then_some(())
        })
        .await;

        // The old replica is replaced by a new one: the agent moves to groups at its next
        // publication, and the new replica reads them.
        let mut c = fast(config("coordinator-new"));
        c.role = Role::Observer;
        c.seeds = vec![seed];
        let new = GossipMember::start(c).await.unwrap();
        drop(old);
        eventually(
            "the agent stops counting the old observer",
            within,
            || async {
                let m = agent.member("coordinator-old").await?;
                (m.liveness != Liveness::Live).then_some(())
            },
        )
        .await;
        agent
            .publish_metrics(&[sample(2.0)], SystemTime::now())
            .await
            .unwrap();
        assert_eq!(own_keys(&mut *agent.chitchat.lock().await), ["M:node_"]);
        eventually("the new observer reads the group", within, || async {
            seen(&new, "n1", "node_load1", 2.0).await.then_some(())
        })
        .await;
    }

    /// The window and prior of [`GossipConfig::failure_detector`] leave the failure
    /// detection time of a steadily heard member within 10 % of what the 100-interval window
    /// with a 5-round prior gave for the same heartbeat intervals. chitchat's timeout is
    /// phi × (window sum + 5 × prior) / (window length + 5); the mean interval heard is read
    /// back from it (with two members a heartbeat is heard about twice a round).
    /// The flat mesh's wall (issue 30): a member that holds every node of a 5,000-node cluster
    /// whose names have random parts (GKE's) cannot gossip at all, since its digest alone
    /// outgrows a UDP datagram, so its peer never hears its news. (The loaded nodes fill one
    /// between 4,600 and 4,900, about 14 bytes each compressed; a real node's heartbeat adds to
    /// that, so a real mesh reaches the wall sooner.) The same member in its cell of that cluster (the chart's 50
    /// cells) gossips. chitchat builds digests only inside its crate, so the other nodes are
    /// loaded into the member's state with chitchat's public `reset_node_state_if_update`
    /// rather than run: a node's digest entry is its id and versions, the same for a loaded node
    /// as for a live one.
    #[tokio::test]
    async fn a_flat_mesh_of_5000_random_names_cannot_gossip_and_the_same_nodes_in_cells_can() {
        use super::super::cells::DEFAULT_CELLS;
        use crate::testing::eventually;
        use telemesh_core::testing::NameShape;
        let within = Duration::from_secs(20);
        let names: Vec<String> = (0..5_000).map(|i| NameShape::Gke.name(i)).collect();
        let keyring = Keyring::from_keys(&[[7; 32]]).unwrap();
        let sample = |v: f64| Sample {
            name: MetricName::new("node_load1").unwrap(),
            value: v,
        };
        for cells in [Cells::FLAT, Cells::new(u32::from(DEFAULT_CELLS)).unwrap()] {
            let cell = cells.of(&names[0]);
            let mut in_cell = names.iter().filter(|n| cells.of(n) == cell);
            let (a_name, b_name) = (in_cell.next().unwrap(), in_cell.next().unwrap());
            let others: Vec<&String> = in_cell.collect();
            let config = |name: &str, seeds: Vec<String>| {
                let mut c = GossipConfig::new(
                    name,
                    "wall",
                    "127.0.0.1:0".parse().unwrap(),
                    Security::Sealed(keyring.clone()),
                );
                c.join_cell(cell);
                c.seeds = seeds;
                c.gossip_interval = Duration::from_millis(50);
                c
            };
            let a = GossipMember::start(config(a_name, Vec::new()))
                .await
                .unwrap();
            let seed = a.id().gossip_addr.to_string();
            let b = GossipMember::start(config(b_name, vec![seed]))
                .await
                .unwrap();
            a.publish_metrics(&[sample(1.0)], SystemTime::now())
                .await
                .unwrap();
            eventually("b hears a", within, || async {
                seen(&b, a_name, "node_load1", 1.0).await.then_some(())
            })
            .await;

            // a learns of every other node of its mesh, then has news. Each as a node of a
            // real cluster looks in a digest: started at its own millisecond within the last
            // month (the generation), at its own address in a /16, with its own count of
            // versions. (Its heartbeat stays 0, which compresses better than a real one.)
            {
                let mut chitchat = a.chitchat.lock().await;
                for (i, name) in others.iter().enumerate() {
                    let h = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    let generation = 1_764_000_000_000 + h % 2_592_000_000;
                    let [_, _, _, _, _, _, b, c] = h.to_be_bytes();
                    let addr = SocketAddr::from(([10, 20, b, c], 7946));
                    let id = ChitchatId::new((*name).clone(), generation, addr);
                    let max_version = 100 + (h >> 20) % 5_000;
                    chitchat.reset_node_state_if_update(&id, std::iter::empty(), max_version, 0);
                }
            }
            // b's rounds: b knows only a, so every datagram b sends is a Syn to a (or an Ack
            // of a's answer), which a answers with a SynAck carrying its digest.
            let rounds = |n: u64| {
                let b = &b;
                async move {
                    let at = b.stats().datagrams_out;
                    eventually(
                        &format!("{n} more of b's datagrams to a"),
                        within,
                        || async { (b.stats().datagrams_out >= at + n).then_some(()) },
                    )
                    .await;
                }
            };
            // Five of b's rounds first, so that nothing a queued before it learnt of the others
            // is still on its way out.
            rounds(5).await;
            let sent = a.stats().datagrams_out;
            a.publish_metrics(&[sample(2.0)], SystemTime::now())
                .await
                .unwrap();
            if cells.is_flat() {
                // Twenty of b's Syns answered by nothing. With its digest alone over a datagram,
                // a's chitchat cannot answer: 0.13 even panics building the SynAck's delta (its
                // serializer asserts at least 100 bytes are left), which kills a's gossip task
                // here and aborts a shipped agent (panic = "abort"). Had it not, the SynAck and
                // every Syn of a would still be too large to send.
                rounds(20).await;
                assert_eq!(
                    a.stats().datagrams_out,
                    sent,
                    "a sent nothing with {} other nodes in its digest",
                    others.len()
                );
                assert!(
                    seen(&b, a_name, "node_load1", 1.0).await,
                    "b still holds a's old value"
                );
            } else {
                eventually("b hears a's news", within, || async {
                    seen(&b, a_name, "node_load1", 2.0).await.then_some(())
                })
                .await;
                assert!(
                    a.stats().datagrams_out > sent,
                    "a gossips in a cell of {} nodes",
                    others.len() + 2
                );
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_steadily_heard_member_is_declared_dead_after_the_same_silence_as_with_100_intervals()
    {
        let channel = chitchat::transport::ChannelTransport::with_mtu(65_507);
        let member = |name: &str, port: u16, seeds: Vec<String>| {
            let mut c = GossipConfig::new(
                name,
                "mesh",
                SocketAddr::from(([127, 0, 0, 1], port)),
                Security::Insecure,
            );
            c.seeds = seeds;
            c
        };
        let a = GossipMember::start_on(member("a", 30_001, vec![]), &channel)
            .await
            .unwrap();
        let b = GossipMember::start_on(
            member("b", 30_002, vec![a.id().gossip_addr.to_string()]),
            &channel,
        )
        .await
        .unwrap();
        // More rounds than the window holds, so the mean is the window's and the prior's only.
        tokio::time::sleep(Duration::from_secs(100)).await;
        let b_id = ChitchatId::new("b", b.id().generation, b.id().gossip_addr);
        let timeout = a
            .chitchat
            .lock()
            .await
            .failure_detection_timeout(&b_id)
            .unwrap();
        let timeout = timeout.as_secs_f64();
        let heard = (timeout / 8.0 * 37.0 - 5.0 * 2.5) / 32.0;
        assert!(
            (0.25..=1.0).contains(&heard),
            "b heard every {heard} s, not about once or twice a round"
        );
        let before = 8.0 * (100.0 * heard + 5.0 * 5.0) / 105.0;
        assert!(
            (timeout - before).abs() <= 0.1 * before,
            "b would be declared dead after {timeout} s of silence, {before} s with the old window"
        );
    }

    /// A member on loopback port `port` whose rounds are 10 s apart: on a paused clock, what
    /// arrives between rounds came by a push.
    fn ten_second_rounds(name: &str, port: u16, role: Role, seeds: Vec<String>) -> GossipConfig {
        let mut c = GossipConfig::new(
            name,
            "mesh",
            SocketAddr::from(([127, 0, 0, 1], port)),
            Security::Insecure,
        );
        c.gossip_interval = Duration::from_secs(10);
        c.role = role;
        c.seeds = seeds;
        c
    }

    /// A deletion shows only as the member's version moving: a reader that syncs membership
    /// sees an update at once (not at the next round), and the keys it re-reads show the
    /// deletion (paused clock, 10 s rounds, the deletion pushed between rounds).
    #[tokio::test(start_paused = true)]
    async fn a_reader_sees_a_deletion_as_an_update_and_in_the_keys_it_reads() {
        let channel = chitchat::transport::ChannelTransport::with_mtu(65_507);
        let a = GossipMember::start_on(
            ten_second_rounds("a", 30_041, Role::Agent, vec![]),
            &channel,
        )
        .await
        .unwrap();
        let seed = vec![a.id().gossip_addr.to_string()];
        let c = GossipMember::start_on(
            ten_second_rounds("c", 30_042, Role::Observer, seed),
            &channel,
        )
        .await
        .unwrap();
        let pod = StateKey::Scavenger("u1".into());
        a.set(&pod, "ns/a@1000@500@1024").await.unwrap();
        // Rounds at 0, 10 and 20 s: both live, the key known; the next round is at 30 s.
        tokio::time::sleep(Duration::from_secs(25)).await;
        c.sync_updates().await;
        let mut events = c.events();
        async fn held(c: &GossipMember) -> (bool, Vec<String>) {
            let (mut live, mut deleted) = (false, Vec::new());
            c.visit_keys(["a", "nobody"], |id, keys| {
                assert_eq!(&*id.node_name, "a");
                live = keys.get("s:u1").is_some();
                deleted = keys.deleted().map(str::to_owned).collect();
            })
            .await;
            (live, deleted)
        }
        assert_eq!(held(&c).await, (true, vec![]));

        a.delete(&pod).await.unwrap();
        assert_eq!(a.push_to_observers().await, 1);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            matches!(
                events.try_recv(),
                Err(broadcast::error::TryRecvError::Empty)
            ),
            "nothing reported before the reader syncs"
        );
        c.sync_updates().await;
        match events.try_recv() {
            Ok(MembershipEvent::Updated(id)) => assert_eq!(&*id.node_name, "a"),
            other => panic!("expected a's update, got {other:?}"),
        }
        assert_eq!(held(&c).await, (false, vec!["s:u1".to_owned()]));
        // Nothing changed since: nothing reported.
        c.sync_updates().await;
        assert!(events.try_recv().is_err());
    }

    /// A push reaches each live observer within a round trip, between rounds, and no agent:
    /// rounds are 10 s apart on a paused clock, so only the push can carry the value at once.
    #[tokio::test(start_paused = true)]
    async fn a_push_reaches_the_observers_between_rounds_and_no_agent() {
        let channel = chitchat::transport::ChannelTransport::with_mtu(65_507);
        let a = GossipMember::start_on(
            ten_second_rounds("a", 30_021, Role::Agent, vec![]),
            &channel,
        )
        .await
        .unwrap();
        let seed = vec![a.id().gossip_addr.to_string()];
        let b = GossipMember::start_on(
            ten_second_rounds("b", 30_022, Role::Agent, seed.clone()),
            &channel,
        )
        .await
        .unwrap();
        let c = GossipMember::start_on(
            ten_second_rounds("c", 30_023, Role::Observer, seed),
            &channel,
        )
        .await
        .unwrap();
        // Rounds at 0, 10 and 20 s: everyone met and live; the next round is at 30 s.
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert_eq!(a.liveness_counts().await, (3, 0), "all three live at a");

        let load = Sample {
            name: MetricName::new("node_load1").unwrap(),
            value: 20.0,
        };
        a.publish_metrics(&[load], SystemTime::now()).await.unwrap();
        assert_eq!(a.push_to_observers().await, 1, "one exchange, with c");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            seen(&c, "a", "node_load1", 20.0).await,
            "the observer heard the push"
        );
        assert!(
            !seen(&b, "a", "node_load1", 20.0).await,
            "the agent b heard it too, so a round ran: the test proves nothing"
        );
        drop(b);
    }

    #[tokio::test]
    async fn unreachable_advertise_addresses_are_refused() {
        let mut c = config("n1");
        c.listen_addr = "0.0.0.0:0".parse().unwrap();
        let err = GossipMember::start(c).await.unwrap_err();
        assert_eq!(err.kind(), "no_advertise");
        assert!(err.to_string().contains("--gossip-advertise"), "{err}");
    }

    #[tokio::test]
    async fn the_key_file_is_reloaded_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        let (a, b) = (
            Keyring::generate_line().unwrap(),
            Keyring::generate_line().unwrap(),
        );
        std::fs::write(&path, format!("{a}\n")).unwrap();
        let mut c = config("n1");
        c.security = Security::Sealed(Keyring::load(&path).unwrap());
        c.key_file = Some(path.clone());
        c.key_reload_interval = Duration::from_millis(20);
        let member = GossipMember::start(c).await.unwrap();
        let before = member.key_fingerprints();
        assert_eq!(before.len(), 1);
        std::fs::write(&path, format!("{b}\n{a}\n")).unwrap();
        let after = crate::testing::eventually("the new keyring", Duration::from_secs(5), || {
            let fps = member.key_fingerprints();
            async move { (fps.len() == 2).then_some(fps) }
        })
        .await;
        assert_eq!(after[1], before[0], "the old key is second: it still opens");
        assert_ne!(after[0], before[0], "the new key seals");
    }

    #[tokio::test]
    async fn empty_names_and_zero_intervals_are_refused() {
        let err = GossipMember::start(config("")).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "gossip node name is empty; pass --node-name"
        );
        let mut c = config("n1");
        c.gossip_interval = Duration::ZERO;
        assert_eq!(GossipMember::start(c).await.unwrap_err().kind(), "config");
    }

    #[tokio::test]
    async fn observers_publish_nothing_and_agents_only_reserved_keys() {
        let mut c = config("coordinator-0");
        c.role = Role::Observer;
        let observer = GossipMember::start(c).await.unwrap();
        let sample = Sample {
            name: MetricName::new("x").unwrap(),
            value: 1.0,
        };
        let err = observer
            .publish_metrics(&[sample], SystemTime::now())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "observer");
        let me = observer.members().await;
        assert_eq!(me.len(), 1);
        assert_eq!(me[0].state.role, Some(Role::Observer));
        assert!(!me[0].state.is_agent());

        let agent = GossipMember::start(config("n1")).await.unwrap();
        let err = agent.set(&StateKey::Leaving, "1").await.unwrap_err();
        assert_eq!(err.kind(), "managed_key");
        agent
            .set(&StateKey::Violation("high-cpu".into()), "cpu>0.9")
            .await
            .unwrap();
        let big = "x".repeat(schema::MAX_VALUE_LEN + 1);
        let err = agent
            .set(&StateKey::Reward("web".into()), &big)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "schema");
        let me = agent.members().await;
        assert_eq!(me[0].state.violations["high-cpu"], "cpu>0.9");
        assert_eq!(me[0].state.schema_version, Some(schema::SCHEMA_VERSION));
        assert!(me[0].is_self);
        assert_eq!(
            agent
                .replace_keyring(Keyring::from_keys(&[[1; 32]]).unwrap())
                .unwrap_err()
                .kind(),
            "insecure"
        );
    }
}
