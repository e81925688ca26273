//! The `ClusterView`: every node's gossiped state (metrics with their age, rewards, violations,
//! liveness) as one immutable [`Snapshot`] that readers load without a lock.
//!
//! **Structure.** A snapshot is its nodes' entries (`Arc<NodeEntry>`) in one order with a
//! name → position table, published through an [`ArcSwap`]: a reader (the extender, once per
//! request) loads the current `Arc<Snapshot>` with a few atomic operations and then reads a
//! consistent, unchanging view however long it takes, while the updater builds the next one.
//! We chose a flat table over a persistent map (imbl's HAMT): the extender does one lookup per
//! candidate node, up to 5,000 per request and many requests per second, and a flat table
//! answers each in one probe where a HAMT walks several levels; publishing, on the other hand,
//! happens at most once per tick and builds the table anew (one reference-count increment and
//! one insert per node, about 0.1 ms at 5,000 nodes), independent of how many values changed.
//! Only the touched nodes' entries are rebuilt.
//!
//! **Columns.** What the extender reads per candidate, a metric a policy names or a pod type's
//! reward estimate, it reads from a column: that value of every node, by position, built once
//! per snapshot ([`Snapshot::metric_column`], [`Snapshot::reward_column`]) and, while requests
//! ask for it, built again by the updater for the next publication before it is published
//! ([`Snapshot::warm_like`]). A request maps its candidates' names to positions once
//! ([`Snapshot::locate`]) and then reads arrays, instead of probing every candidate's maps of
//! metrics and rewards (scattered over the heap: cache misses). Columns hold the gossiped
//! values with their stamps, nothing computed at a time, so staleness and reward decay are
//! still judged at the request's clock and answers are those of the direct lookups. Beside
//! them, a reader may keep a value of its own computed from the whole snapshot
//! ([`Snapshot::derived`]: the extender's folded filter verdicts), kept and built ahead the
//! same way; one that depends on the clock carries the window it holds in.
//!
//! **Updates** ([`Updater`]). Three sources, folded in on a short tick (default 100 ms), and at
//! once when key changes arrive:
//! - key changes: every key a member sets reaches a callback that queues it (the callback runs
//!   under the gossip lock, so it only pushes) and wakes the updater, which applies the queue in
//!   order, per node, in O(changes). One gossip message's keys arrive under one lock, so a burst
//!   costs one publication; waiting for the tick instead added up to a tick to every change's
//!   way to the extender (docs/scale.md, "Freshness");
//! - membership events (joined, departed, left): liveness and gossip address. Only they (and the
//!   resync) make a member live: one first seen through its keys is `Dead` until its `Joined`;
//! - a periodic full resync (default 30 s, and whenever the event stream lagged) that re-reads
//!   every member.
//!
//! **What an agent stops publishing** leaves the view at once too, not at the resync. Key
//! changes never say so: chitchat 0.13 calls key listeners only for values set, never for
//! tombstones, and a metric group rewritten without one of its metrics is a value set. Both
//! matter to decisions: a metric the agent no longer has must be unknown to the extender as it
//! is to the agent, and a scavenger pod UID the scheduler no longer has on the node fails a
//! preemption cycle. So:
//! - a deletion raises the member's max version, which the membership diff reports as
//!   [`MembershipEvent::Updated`] once a gossip round. The updater also asks for those updates
//!   on each tick ([`GossipMember::sync_updates`]: a walk over the members in step with the
//!   previous one, about 20 µs at 1,000 members when nothing moved), so a deletion is seen
//!   within a tick of its arrival. Passes woken by key changes skip it: what those bring is
//!   folded at once, and a group rewritten without a metric says so itself (below);
//! - on `Updated` or `Joined` of a node (a join too: key changes arrive before the failure
//!   detector calls a member live, and a deletion in between raises no update), the pass
//!   re-reads that member's keys after folding its key changes, all such members under one
//!   gossip lock ([`GossipMember::visit_keys`]), and drops what the view holds of every key the
//!   member deleted: a metric (`m:`, or a whole group `M:`), a scavenger pod (`s:`), a reward
//!   type (`r:`), a violation (`v:`). What a re-read finds unchanged costs a scan of the
//!   member's key names and no copy of its entry; members with no update cost nothing;
//! - a metric group value that lacks a metric the view holds of its family (removed, or moved to
//!   another chunk of a family over [`MAX_VALUE_LEN`](telemesh_core::gossip::schema::MAX_VALUE_LEN))
//!   marks the family for the same re-read, which keeps the family's metrics that some key of
//!   the member still holds. Only such a family's values are parsed again: one that holds its
//!   metrics in one key, as every built-in family does, only when it lost one; one split into
//!   chunks (hundreds of textfile series) on each of its changes, and, after it shrank, on each
//!   update while the deleted chunk's tombstone lasts.
//!
//! A re-read only removes: values come from key changes, so one queued before a re-read and
//! folded after it never rolls a value back. The order makes removals stick: an update is
//! reported only after the deletion it reports was applied, and a key change is queued before
//! any later deletion, so the pass that drains the update folds that change first. A re-read
//! misses only what chitchat forgot: tombstones past the tombstone grace period (5 min), or a
//! member state reset after this replica fell that far behind; the resync covers those.
//!
//! Agents' values carry their measurement time, so every replica computes the same ages from the
//! same gossip: replicas agree up to gossip propagation. Clock skew is corrected on both ends
//! ([`telemesh_runtime::gossip::clock`]): agents stamp in cluster time, and readers age with
//! [`ClusterView::now_ms`], this replica's clock corrected by its gossip peers' send times, so
//! a replica whose own clock is minutes off still sees figures at their true age.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::Hasher as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use hashbrown::HashTable;
use parking_lot::{Mutex, RwLock};
use rustc_hash::{FxBuildHasher, FxHasher};
use telemesh_core::gossip::cells::{check_cell, keep_flat_mesh};
use telemesh_core::gossip::groups::{self, GROUP_PREFIX};
use telemesh_core::gossip::schema::{METRIC_PREFIX, StateKey};
use telemesh_core::gossip::{CellCheck, Cells, Liveness, MetricValue, NodeState, Role};
use telemesh_core::metric::MetricName;
use telemesh_core::policy::{Metrics, Reading};
use telemesh_core::reward::Estimate;
use telemesh_core::scavenge::ScavengerPod;
use telemesh_runtime::gossip::{
    ClusterClock, GossipMember, HeldKeys, KeySubscription, Member, MemberId, MembershipEvent,
};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::TryRecvError;
use tokio_util::sync::CancellationToken;

use crate::metrics::ViewMetrics;

/// The gossip key agents publish their QUIC address under (`ip:port`; see
/// [`NodeEntry::quic_addr`]).
pub use telemesh_core::gossip::schema::QUIC_ADDR_KEY;

/// The read path's maps, hashed with rustc's FxHash (`rustc-hash`): several times faster than
/// SipHash on node names, and the extender hashes every candidate's name. Their keys come from
/// authenticated gossip and the scheduler, not from untrusted clients, so flooding resistance
/// is not needed here.
pub type FastMap<K, V> = HashMap<K, V, FxBuildHasher>;

/// One node as the view knows it.
#[derive(Debug, Clone)]
pub struct NodeEntry {
    /// Kubernetes node name.
    pub name: Arc<str>,
    /// The agent's start generation; changes from older generations are ignored.
    pub generation: u64,
    /// Where the agent gossips, once a membership event or resync named it.
    pub gossip_addr: Option<SocketAddr>,
    /// The agent's QUIC address if it published [`QUIC_ADDR_KEY`].
    pub quic_addr: Option<SocketAddr>,
    /// Up or not, per this replica's failure detector.
    pub liveness: Liveness,
    /// What the agent published, as the schema reads it.
    pub state: NodeState,
    /// Metric lookup by the name a policy uses: full name, or without `node_` (a full name wins
    /// over another metric's short name).
    index: FastMap<Box<str>, MetricValue>,
    /// The gossiped reward estimates by pod type (`<namespace>/<type>`), parsed once when the
    /// state is folded in so the extender never parses on a request.
    /// Every key of `state.rewards` whose value parsed is here; the others were skipped.
    rewards: FastMap<Box<str>, Estimate>,
}

// === impl NodeEntry ===

impl NodeEntry {
    /// An entry for `state` published by `name`.
    pub fn new(name: &str, generation: u64, liveness: Liveness, state: NodeState) -> Self {
        let mut entry = Self {
            name: name.into(),
            generation,
            gossip_addr: None,
            quic_addr: None,
            liveness,
            state,
            index: FastMap::default(),
            rewards: FastMap::default(),
        };
        entry.reindex();
        entry.reindex_rewards();
        entry
    }

    /// Re-reads the reward estimates from `state.rewards`, skipping (and counting) the values
    /// that do not parse.
    fn reindex_rewards(&mut self) {
        self.rewards.clear();
        self.rewards.reserve(self.state.rewards.len());
        for (pod_type, value) in &self.state.rewards {
            if let Ok(estimate) = value.parse::<Estimate>() {
                self.rewards.insert(pod_type.as_str().into(), estimate);
            }
        }
    }

    /// The gossiped reward estimate of `pod_type` (`<namespace>/<type>`) on this node.
    #[inline]
    pub fn reward(&self, pod_type: &str) -> Option<&Estimate> {
        self.rewards.get(pod_type)
    }

    /// Every reward estimate this node gossips, by pod type, in no particular order.
    pub fn rewards(&self) -> impl Iterator<Item = (&str, &Estimate)> {
        self.rewards.iter().map(|(t, e)| (&**t, e))
    }

    /// How many gossiped reward values did not parse and were skipped.
    pub fn malformed_rewards(&self) -> usize {
        self.state.rewards.len() - self.rewards.len()
    }

    fn reindex(&mut self) {
        self.index.clear();
        self.index.reserve(self.state.metrics.len() * 2);
        for (name, value) in &self.state.metrics {
            let short = name.adapter_name();
            if short != name.as_str() {
                self.index.entry(short.into()).or_insert(*value);
            }
        }
        for (name, value) in &self.state.metrics {
            self.index.insert(name.as_str().into(), *value);
        }
    }

    /// The value a policy's metric name refers to (full or without `node_`).
    pub fn metric(&self, policy_name: &str) -> Option<&MetricValue> {
        self.index.get(policy_name)
    }

    /// The scavenger pods the agent gossips, by pod uid.
    pub fn scavengers(&self) -> &std::collections::BTreeMap<String, ScavengerPod> {
        &self.state.scavengers
    }

    /// Whether what the node gossips can be acted on at `now_ms`: the agent is live and its
    /// newest metric is at most `stale_after` old (agents refresh every metric well within
    /// that, so an older newest value means the agent stopped publishing).
    pub fn fresh(&self, now_ms: u64, stale_after: Duration) -> bool {
        let stale_ms = u64::try_from(stale_after.as_millis()).unwrap_or(u64::MAX);
        self.liveness == Liveness::Live && now_ms.saturating_sub(self.newest_ms()) <= stale_ms
    }

    /// When the newest of its metrics was measured (Unix ms), 0 without metrics.
    pub fn newest_ms(&self) -> u64 {
        self.state
            .metrics
            .values()
            .map(|v| v.measured_at_ms)
            .max()
            .unwrap_or(0)
    }

    fn from_member(member: &Member) -> Self {
        let mut entry = Self::new(
            &member.id.node_name,
            member.id.generation,
            member.liveness,
            member.state.clone(),
        );
        entry.gossip_addr = Some(member.id.gossip_addr);
        entry
    }
}

/// A node's metrics read at one instant: what policies evaluate. Values older than
/// `stale_after` are stale (unknown); a node the view does not know has every metric missing.
#[derive(Debug, Clone, Copy)]
pub struct EntryReadings<'a> {
    /// The node, if known.
    pub entry: Option<&'a NodeEntry>,
    /// The reader's clock, Unix ms.
    pub now_ms: u64,
    /// Age beyond which a value is unknown, ms.
    pub stale_after_ms: u64,
}

impl Metrics for EntryReadings<'_> {
    #[inline]
    fn reading(&self, metric: &str) -> Reading {
        reading_of(
            self.entry.and_then(|e| e.metric(metric)).copied(),
            self.now_ms,
            self.stale_after_ms,
        )
    }
}

/// `value` read at `now_ms`: fresh up to `stale_after_ms` old, stale beyond, missing when `None`.
#[inline]
pub fn reading_of(value: Option<MetricValue>, now_ms: u64, stale_after_ms: u64) -> Reading {
    match value {
        None => Reading::Missing,
        // As MetricValue::fresh: a stamp from the future is age zero.
        Some(v) if now_ms.saturating_sub(v.measured_at_ms) <= stale_after_ms => {
            Reading::Fresh(v.value)
        }
        Some(v) => Reading::Stale(v.value),
    }
}

/// A located candidate's metrics read from a snapshot's columns: what [`EntryReadings`] reads
/// from its entry. `columns` must hold every metric a caller asks for; any other is missing.
#[derive(Debug, Clone, Copy)]
pub struct ColumnReadings<'a> {
    /// The metrics' columns, by the name the policy uses.
    pub columns: &'a [(&'a str, Arc<MetricColumn>)],
    /// The candidate's position ([`Snapshot::locate`]); `None`: not in the view.
    pub pos: Option<u32>,
    /// The reader's clock, Unix ms.
    pub now_ms: u64,
    /// Age beyond which a value is unknown, ms.
    pub stale_after_ms: u64,
}

impl Metrics for ColumnReadings<'_> {
    #[inline]
    fn reading(&self, metric: &str) -> Reading {
        let value = self.pos.and_then(|pos| {
            self.columns
                .iter()
                .find(|(m, _)| *m == metric)
                .and_then(|(_, c)| c.get(pos).flatten())
        });
        reading_of(value, self.now_ms, self.stale_after_ms)
    }
}

/// The snapshot's nodes in one fixed order, with a name → position table and, built on demand
/// and kept for the snapshot's life, columns of what the extender reads per candidate (a
/// metric's value, a pod type's estimate) by position. A request maps its candidates' names to
/// positions once, then reads arrays: no per-node map of metrics or rewards is probed on the
/// hot path, and nothing time-dependent is cached, so answers are those of the direct lookups.
#[derive(Default)]
struct NodeTable {
    entries: Vec<Arc<NodeEntry>>,
    /// Every name back to back, and where each ends: the table compares names in this one
    /// dense block instead of chasing each entry's allocation.
    names: String,
    ends: Vec<u32>,
    table: HashTable<u32>,
    metrics: RwLock<FastMap<Box<str>, Arc<MetricColumn>>>,
    rewards: RwLock<FastMap<Box<str>, Arc<RewardColumn>>>,
    derived: RwLock<FastMap<TypeId, FastMap<Box<str>, Derived>>>,
}

/// How a [`Derived`] value is built from a snapshot.
type Derive = Arc<dyn Fn(&Snapshot) -> Arc<dyn Any + Send + Sync> + Send + Sync>;

/// A value a reader computes from a whole snapshot with its own rule ([`Snapshot::derived`]),
/// kept as columns are.
struct Derived {
    value: Arc<dyn Any + Send + Sync>,
    derive: Derive,
    /// Whether a request asked for it on this snapshot: the next publication builds it again.
    asked: AtomicBool,
    /// Publications since one was asked for it.
    idle: u32,
}

impl std::fmt::Debug for NodeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeTable")
            .field("nodes", &self.entries.len())
            .field("metric_columns", &self.metrics.read().len())
            .field("reward_columns", &self.rewards.read().len())
            .field(
                "derived",
                &self
                    .derived
                    .read()
                    .values()
                    .map(FastMap::len)
                    .sum::<usize>(),
            )
            .finish_non_exhaustive()
    }
}

/// At most this many columns of each kind per snapshot (a column is 24-32 bytes per node): past
/// it a request reads the entries directly, as before there were columns.
const MAX_COLUMNS: usize = 64;

/// A column not asked for during this many publications is not rebuilt for the next one.
const IDLE_PUBLICATIONS: u32 = 100;

/// The hash of a node name in [`NodeTable`].
#[inline]
fn hash_name(name: &str) -> u64 {
    // The bytes alone: `str`'s Hash would add a terminator word that tells nothing here.
    let mut h = FxHasher::default();
    h.write(name.as_bytes());
    h.finish()
}

// === impl NodeTable ===

impl NodeTable {
    fn new(entries: Vec<Arc<NodeEntry>>) -> Self {
        let mut names = String::with_capacity(entries.iter().map(|e| e.name.len()).sum());
        let mut ends = Vec::with_capacity(entries.len());
        for e in &entries {
            names.push_str(&e.name);
            ends.push(u32::try_from(names.len()).unwrap_or(u32::MAX));
        }
        let mut out = Self {
            entries,
            names,
            ends,
            table: HashTable::with_capacity(0),
            metrics: RwLock::default(),
            rewards: RwLock::default(),
            derived: RwLock::default(),
        };
        let mut table = HashTable::with_capacity(out.entries.len());
        for i in 0..out.entries.len() {
            let Ok(pos) = u32::try_from(i) else { break };
            table.insert_unique(hash_name(out.name_at(pos)), pos, |&j| {
                hash_name(out.name_at(j))
            });
        }
        out.table = table;
        out
    }

    #[inline]
    fn name_at(&self, pos: u32) -> &str {
        let i = pos as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.names[start..self.ends[i] as usize]
    }

    #[inline]
    fn position(&self, name: &str) -> Option<u32> {
        self.table
            .find(hash_name(name), |&j| self.name_at(j) == name)
            .copied()
    }

    /// Builds the columns `previous` kept and asked for within [`IDLE_PUBLICATIONS`].
    fn warm_like(&self, previous: &NodeTable) {
        fn carry<T: Copy>(
            from: &RwLock<FastMap<Box<str>, Arc<Column<T>>>>,
            into: &RwLock<FastMap<Box<str>, Arc<Column<T>>>>,
            build: impl Fn(&str, u32) -> Column<T>,
        ) {
            let wanted: Vec<(Box<str>, u32)> = from
                .read()
                .iter()
                .filter_map(|(k, c)| {
                    let idle = if c.asked.load(Ordering::Relaxed) {
                        0
                    } else {
                        c.idle + 1
                    };
                    (idle < IDLE_PUBLICATIONS).then(|| (k.clone(), idle))
                })
                .collect();
            let built: Vec<(Box<str>, Arc<Column<T>>)> = wanted
                .into_iter()
                .map(|(k, idle)| {
                    let c = Arc::new(build(&k, idle));
                    (k, c)
                })
                .collect();
            into.write().extend(built);
        }
        carry(&previous.metrics, &self.metrics, |m, idle| {
            Column::build(&self.entries, idle, |e| e.metric(m).copied())
        });
        carry(&previous.rewards, &self.rewards, |t, idle| {
            Column::build(&self.entries, idle, |e| e.reward(t).copied())
        });
    }

    fn column<T: Copy>(
        map: &RwLock<FastMap<Box<str>, Arc<Column<T>>>>,
        key: &str,
        build: impl FnOnce() -> Column<T>,
    ) -> Option<Arc<Column<T>>> {
        if let Some(c) = map.read().get(key) {
            if !c.asked.load(Ordering::Relaxed) {
                c.asked.store(true, Ordering::Relaxed);
            }
            return Some(c.clone());
        }
        if map.read().len() >= MAX_COLUMNS {
            return None;
        }
        let c = Arc::new(build());
        c.asked.store(true, Ordering::Relaxed);
        let mut map = map.write();
        if map.len() >= MAX_COLUMNS {
            return None;
        }
        Some(map.entry(key.into()).or_insert(c).clone())
    }
}

/// One value per node of a snapshot, by position.
#[derive(Debug)]
pub struct Column<T> {
    values: Box<[T]>,
    /// Whether a request asked for it on this snapshot: the next publication builds it again.
    asked: AtomicBool,
    /// Publications since one was asked for it.
    idle: u32,
}

/// A metric (by the name a policy uses) on every node; `None` where the node does not publish it.
pub type MetricColumn = Column<Option<MetricValue>>;

/// A pod type's reward estimate on every node; `None` where the node has none.
pub type RewardColumn = Column<Option<Estimate>>;

// === impl Column ===

impl<T: Copy> Column<T> {
    fn build(entries: &[Arc<NodeEntry>], idle: u32, value: impl Fn(&NodeEntry) -> T) -> Self {
        Self {
            values: entries.iter().map(|e| value(e)).collect(),
            asked: AtomicBool::new(false),
            idle,
        }
    }

    /// The value at `pos` (a position from [`Snapshot::locate`]).
    #[inline]
    pub fn get(&self, pos: u32) -> Option<T> {
        self.values.get(pos as usize).copied()
    }
}

/// An immutable view of every agent, as published at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    nodes: Arc<NodeTable>,
    /// Every pod type some node has an estimate for, with how many nodes do: lets the extender
    /// pass a pod with no reward history through in one lookup, without visiting the nodes.
    reward_types: Arc<RewardTypes>,
    /// Every scavenger pod of every node, by ScavengerJob: a job's loss spans all its nodes.
    scavenger_jobs: Arc<ScavengerJobs>,
    /// Whether the view has synced (first full read done, and an agent seen or the sync timeout
    /// passed): readiness waits for it.
    pub synced: bool,
    /// When this snapshot was published.
    pub published_at: Option<SystemTime>,
}

// === impl Snapshot ===

impl Snapshot {
    /// A synced snapshot of `entries` (tests and benchmarks build views without gossip).
    pub fn from_entries(entries: impl IntoIterator<Item = NodeEntry>) -> Self {
        // Through a map, so that a later entry of the same name replaces an earlier one.
        let nodes: FastMap<Arc<str>, Arc<NodeEntry>> = entries
            .into_iter()
            .map(|e| (e.name.clone(), Arc::new(e)))
            .collect();
        let nodes = NodeTable::new(nodes.into_values().collect());
        Self {
            reward_types: Arc::new(reward_types(nodes.entries.iter())),
            scavenger_jobs: Arc::new(scavenger_jobs(nodes.entries.iter())),
            nodes: Arc::new(nodes),
            synced: true,
            published_at: Some(SystemTime::now()),
        }
    }

    /// Each name's position in this snapshot (`None`: not in the view), to read columns with.
    pub fn locate<'n>(&self, names: impl Iterator<Item = &'n str>) -> Vec<Option<u32>> {
        names.map(|name| self.nodes.position(name)).collect()
    }

    /// The node at `pos` (a position from [`Self::locate`]).
    #[inline]
    pub fn entry_at(&self, pos: u32) -> Option<&NodeEntry> {
        self.nodes.entries.get(pos as usize).map(|e| &**e)
    }

    /// `metric` (by the name a policy uses) on every node, by position: kept for the snapshot's
    /// life and rebuilt for the next publication while asked for, so only the first request
    /// for a metric builds it.
    pub fn metric_column(&self, metric: &str) -> Arc<MetricColumn> {
        let build = || Column::build(&self.nodes.entries, 0, |e| e.metric(metric).copied());
        NodeTable::column(&self.nodes.metrics, metric, build).unwrap_or_else(|| Arc::new(build()))
    }

    /// `pod_type`'s reward estimate on every node, by position; kept as
    /// [`Self::metric_column`] is.
    pub fn reward_column(&self, pod_type: &str) -> Arc<RewardColumn> {
        let build = || Column::build(&self.nodes.entries, 0, |e| e.reward(pod_type).copied());
        NodeTable::column(&self.nodes.rewards, pod_type, build).unwrap_or_else(|| Arc::new(build()))
    }

    /// Builds the columns `previous` had that requests asked for lately, so that requests on
    /// this snapshot find them ready: the updater calls it before publishing, off the
    /// request path. Each costs one lookup per node.
    pub fn warm_like(&self, previous: &Snapshot) {
        self.nodes.warm_like(&previous.nodes);
        // After the columns: derived values are mostly built from them.
        let wanted: Vec<(TypeId, Box<str>, Derive, u32)> = previous
            .nodes
            .derived
            .read()
            .iter()
            .flat_map(|(kind, m)| m.iter().map(move |(k, d)| (*kind, k, d)))
            .filter_map(|(kind, k, d)| {
                let idle = if d.asked.load(Ordering::Relaxed) {
                    0
                } else {
                    d.idle + 1
                };
                (idle < IDLE_PUBLICATIONS).then(|| (kind, k.clone(), d.derive.clone(), idle))
            })
            .collect();
        let built: Vec<(TypeId, Box<str>, Derived)> = wanted
            .into_iter()
            .map(|(kind, k, derive, idle)| {
                let value = derive(self);
                let derived = Derived {
                    value,
                    derive,
                    asked: AtomicBool::new(false),
                    idle,
                };
                (kind, k, derived)
            })
            .collect();
        let mut map = self.nodes.derived.write();
        for (kind, k, derived) in built {
            map.entry(kind).or_default().insert(k, derived);
        }
    }
    /// A value computed from this snapshot by a reader's rule, under `key` among values of its
    /// type: built by the first request that asks (with the rule `derive()` gives, called only
    /// then), kept for the snapshot's life and, while requests ask for it, built again for the
    /// next publication before it is published ([`Self::warm_like`]), as columns are. A kept
    /// value that does not `fit` (built from an older policy, say) is built anew and replaces
    /// it. The rule must depend on the snapshot alone (and on what it captures), never on the
    /// request. Past `MAX_COLUMNS` (64) values of a type, the result is built for this call only.
    pub fn derived<T, D>(
        &self,
        key: &str,
        fits: impl Fn(&T) -> bool,
        derive: impl FnOnce() -> D,
    ) -> Arc<T>
    where
        T: Any + Send + Sync,
        D: Fn(&Snapshot) -> T + Send + Sync + 'static,
    {
        let kind = TypeId::of::<T>();
        if let Some(d) = self
            .nodes
            .derived
            .read()
            .get(&kind)
            .and_then(|m| m.get(key))
            && let Ok(value) = d.value.clone().downcast::<T>()
            && fits(&value)
        {
            if !d.asked.load(Ordering::Relaxed) {
                d.asked.store(true, Ordering::Relaxed);
            }
            return value;
        }
        let derive = derive();
        let value = Arc::new(derive(self));
        let mut map = self.nodes.derived.write();
        let of_kind = map.entry(kind).or_default();
        if of_kind.len() >= MAX_COLUMNS && !of_kind.contains_key(key) {
            return value;
        }
        let derive: Derive = Arc::new(move |s| Arc::new(derive(s)) as Arc<dyn Any + Send + Sync>);
        let derived = Derived {
            value: value.clone(),
            derive,
            asked: AtomicBool::new(true),
            idle: 0,
        };
        of_kind.insert(key.into(), derived);
        value
    }

    /// Whether any node has a reward estimate for `pod_type`.
    #[inline]
    pub fn has_reward_type(&self, pod_type: &str) -> bool {
        self.reward_types.contains_key(pod_type)
    }

    /// Whether no node has any reward estimate.
    #[inline]
    pub fn has_no_rewards(&self) -> bool {
        self.reward_types.is_empty()
    }

    /// Every pod type some node has an estimate for, with the number of such nodes, in no
    /// particular order.
    pub fn reward_types(&self) -> impl Iterator<Item = (&str, u32)> {
        self.reward_types.iter().map(|(t, n)| (&**t, *n))
    }

    /// Every pod of the ScavengerJob `job` (`namespace/name`) the view knows, on any node.
    pub fn scavenger_job(&self, job: &str) -> &[ScavengerPod] {
        self.scavenger_jobs.get(job).map_or(&[], Vec::as_slice)
    }

    /// The node called `name`.
    #[inline]
    pub fn node(&self, name: &str) -> Option<&NodeEntry> {
        self.nodes
            .position(name)
            .map(|pos| &*self.nodes.entries[pos as usize])
    }

    /// Each candidate's entry, in order (`None`: not in the view).
    pub fn entries_of(
        &self,
        candidates: &crate::extender::parse::Candidates<'_>,
    ) -> Vec<Option<&NodeEntry>> {
        (0..candidates.len())
            .map(|i| self.node(candidates.name(i)))
            .collect()
    }

    /// Every node, in no particular order.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeEntry> {
        self.nodes.entries.iter().map(|e| &**e)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.entries.len()
    }

    /// Whether no node is known.
    pub fn is_empty(&self) -> bool {
        self.nodes.entries.is_empty()
    }

    /// `name`'s metrics as policies read them at `now_ms`.
    #[inline]
    pub fn readings(&self, name: &str, now_ms: u64, stale_after: Duration) -> EntryReadings<'_> {
        EntryReadings {
            entry: self.node(name),
            now_ms,
            stale_after_ms: u64::try_from(stale_after.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// Pod type → number of nodes with an estimate for it.
type RewardTypes = FastMap<Box<str>, u32>;

/// ScavengerJob (`namespace/name`) → its pods on every node.
type ScavengerJobs = FastMap<Box<str>, Vec<ScavengerPod>>;

/// The scavenger pods of `entries`, by job.
fn scavenger_jobs<'a>(entries: impl Iterator<Item = &'a Arc<NodeEntry>>) -> ScavengerJobs {
    let mut jobs = ScavengerJobs::default();
    for pod in entries.flat_map(|e| e.state.scavengers.values()) {
        match jobs.get_mut(pod.job.as_str()) {
            Some(pods) => pods.push(pod.clone()),
            None => {
                jobs.insert(pod.job.as_str().into(), vec![pod.clone()]);
            }
        }
    }
    jobs
}

/// The pod types `entries` have estimates for.
fn reward_types<'a>(entries: impl Iterator<Item = &'a Arc<NodeEntry>>) -> RewardTypes {
    let mut types = RewardTypes::default();
    for e in entries {
        for t in e.rewards.keys() {
            match types.get_mut(t) {
                Some(n) => *n += 1,
                None => {
                    types.insert(t.clone(), 1);
                }
            }
        }
    }
    types
}

/// The shared handle: cheap to clone, read without locks.
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    current: Arc<ArcSwap<Snapshot>>,
    clock: ClusterClock,
}

// === impl ClusterView ===

impl ClusterView {
    /// A view holding `snapshot` (tests and benchmarks).
    pub fn with_snapshot(snapshot: Snapshot) -> Self {
        Self {
            current: Arc::new(ArcSwap::from_pointee(snapshot)),
            clock: ClusterClock::default(),
        }
    }

    /// An empty view whose readers age figures with `clock` (the gossip member's).
    pub fn with_clock(clock: ClusterClock) -> Self {
        Self {
            clock,
            ..Self::default()
        }
    }

    /// Now, in Unix milliseconds, by the cluster clock: what readers age figures against.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The clock readers age figures with.
    pub fn clock(&self) -> &ClusterClock {
        &self.clock
    }

    /// Now by the cluster clock (see [`Self::now_ms`]).
    pub fn now(&self) -> SystemTime {
        self.clock.now()
    }

    /// The current snapshot. Lock-free; hold the guard only for the duration of one request.
    #[inline]
    pub fn load(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// The current snapshot as an owned `Arc`, to keep across awaits.
    pub fn load_full(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Replaces the current snapshot.
    pub fn publish(&self, snapshot: Snapshot) {
        self.current.store(Arc::new(snapshot));
    }
}

/// How the updater runs.
#[derive(Debug, Clone)]
pub struct ViewConfig {
    /// How often queued changes are folded in and published.
    pub tick: Duration,
    /// How often every member is re-read in full.
    pub resync: Duration,
    /// With no agent seen, the view counts as synced this long after start.
    pub sync_timeout: Duration,
    /// Age beyond which a value is unknown (for the staleness gauge).
    pub stale_after: Duration,
    /// This replica's gossip cell count, which every agent's must equal.
    pub cells: Cells,
}

/// One queued key change.
#[derive(Debug)]
struct KeyChangeOwned {
    node: Box<str>,
    generation: u64,
    key: Box<str>,
    value: Box<str>,
}

type Queue = Arc<Mutex<Vec<KeyChangeOwned>>>;

/// Keeps a [`ClusterView`] current from this replica's gossip members (observers): one per
/// gossip cell, one for the flat mesh (docs/architecture.md, "Gossip cells"). A node is in one
/// cell, so the members' nodes are merged by name; were a node in two (an agent restarted into
/// another cell), its newer generation wins as it does within one member.
pub struct Updater {
    /// One per gossip member; a node's home is an index into it.
    sources: Vec<Source>,
    /// This replica's name in every member (its own state is not a node).
    me: Arc<str>,
    view: ClusterView,
    config: ViewConfig,
    metrics: ViewMetrics,
    queue: Queue,
    /// Woken by the key-change callback, so queued changes are folded in without waiting for
    /// the tick.
    queued: Arc<tokio::sync::Notify>,
    /// Every member but observers and self, by name: the working copy snapshots are taken from.
    working: HashMap<Arc<str>, Arc<NodeEntry>>,
    synced: bool,
    /// The pod types of the last publication, rebuilt only when a node gained or lost one
    /// (estimates change every few seconds; the set of types seldom does).
    reward_types: Arc<RewardTypes>,
    reward_types_dirty: bool,
    /// The scavenger pods by job of the last publication, rebuilt when some node's changed.
    scavenger_jobs: Arc<ScavengerJobs>,
    scavenger_jobs_dirty: bool,
    /// Nodes whose keys this pass re-reads (module docs), with the metric families whose group
    /// values lacked a metric held here.
    rereads: FastMap<Arc<str>, Vec<Box<str>>>,
    /// Each node's member (by index), as its membership events and the resync found it, so a
    /// re-read locks only that member's gossip state; a node not here is looked for in all.
    homes: FastMap<Arc<str>, usize>,
    /// Nodes already reported with another cell count (one log line each).
    cell_mismatches: HashSet<Arc<str>>,
    /// The flat mesh, joined beside the cells while a rolling upgrade from it lasts.
    flat: Option<FlatMesh>,
}

/// One gossip member the updater follows: its membership events, and its key changes (into
/// the shared queue) while the subscription lives.
struct Source {
    member: Arc<GossipMember>,
    events: broadcast::Receiver<MembershipEvent>,
    _subscription: KeySubscription,
}

/// The flat mesh a replica with cells keeps while agents are left in it.
struct FlatMesh {
    member: Arc<GossipMember>,
    /// How long it is kept once no agent is live in it.
    grace: Duration,
    /// When an agent was last live in it (or when it was joined).
    agent_seen: tokio::time::Instant,
}

// === impl Updater ===

impl Updater {
    /// Subscribes to the key changes of `members` (this replica's, all named alike); call
    /// [`Self::run`] to start folding them in.
    pub async fn new(
        members: Vec<Arc<GossipMember>>,
        view: ClusterView,
        config: ViewConfig,
        metrics: ViewMetrics,
    ) -> Self {
        let queue: Queue = Arc::default();
        let me: Arc<str> = members
            .first()
            .map_or_else(|| Arc::from(""), |m| m.id().node_name.clone());
        let queued = Arc::new(tokio::sync::Notify::new());
        let mut sources = Vec::with_capacity(members.len());
        for member in members {
            // Subscribed before anything is read, so no change falls between.
            let events = member.events();
            let (sink, wake, me) = (queue.clone(), queued.clone(), me.clone());
            let subscription = member
                .on_key_change("", move |change| {
                    if *change.node_name != *me {
                        sink.lock().push(KeyChangeOwned {
                            node: change.node_name.into(),
                            generation: change.generation,
                            key: change.key.into(),
                            value: change.value.into(),
                        });
                        // One stored wake-up at most: a message's keys cost one fold.
                        wake.notify_one();
                    }
                })
                .await;
            sources.push(Source {
                member,
                events,
                _subscription: subscription,
            });
        }
        Self {
            sources,
            me,
            view,
            config,
            metrics,
            queue,
            queued,
            working: HashMap::new(),
            synced: false,
            reward_types: Arc::default(),
            reward_types_dirty: true,
            scavenger_jobs: Arc::default(),
            scavenger_jobs_dirty: true,
            rereads: FastMap::default(),
            homes: FastMap::default(),
            cell_mismatches: HashSet::new(),
            flat: None,
        }
    }

    /// Names `member` (one of the members) as the flat mesh, left once no agent has been live
    /// in it for `grace` (docs/architecture.md, "Rolling upgrade to cells").
    pub fn with_flat_mesh(mut self, member: &Arc<GossipMember>, grace: Duration) -> Self {
        self.flat = Some(FlatMesh {
            member: member.clone(),
            grace,
            agent_seen: tokio::time::Instant::now(),
        });
        self
    }

    /// Folds changes in every tick until `stop`.
    pub async fn run(mut self, stop: CancellationToken) {
        let started = tokio::time::Instant::now();
        let mut arrived = Vec::new();
        let mut tick = tokio::time::interval(self.config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next_resync = tokio::time::Instant::now();
        let mut next_gauges = tokio::time::Instant::now();
        loop {
            let ticked = tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => true,
                _ = self.queued.notified() => false,
            };
            let now = tokio::time::Instant::now();
            let mut changed = false;
            let mut lagged = false;
            if ticked {
                // A deletion shows only as its member's version moving: report it on the tick,
                // not at the round (module docs).
                for source in &self.sources {
                    source.member.sync_updates().await;
                }
            }
            for (index, source) in self.sources.iter_mut().enumerate() {
                loop {
                    match source.events.try_recv() {
                        Ok(event) => arrived.push((index, event)),
                        Err(TryRecvError::Lagged(_)) => lagged = true,
                        Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                    }
                }
            }
            for (source, event) in arrived.drain(..) {
                changed |= self.apply_event(event, source);
            }
            if lagged || now >= next_resync {
                // Changes queued before the read are contained in it; those queued after it
                // are newer and are applied on later ticks.
                self.queue.lock().clear();
                self.resync().await;
                next_resync = now + self.config.resync;
                changed = true;
            } else {
                let batch = std::mem::take(&mut *self.queue.lock());
                if !batch.is_empty() {
                    self.metrics.key_changes.inc_by(batch.len() as u64);
                    self.apply_changes(batch);
                    changed = true;
                }
                changed |= self.reread().await;
            }
            self.rereads.clear();
            if !self.synced
                && (self.working.values().any(|e| e.state.is_agent())
                    || now.duration_since(started) >= self.config.sync_timeout)
            {
                self.synced = true;
                changed = true;
                tracing::info!(nodes = self.working.len(), "cluster view synced");
            }
            if changed {
                self.publish();
            }
            if now >= next_gauges {
                self.update_gauges();
                self.leave_flat_mesh_when_done(now).await;
                next_gauges = now + Duration::from_secs(1);
            }
        }
    }

    async fn resync(&mut self) {
        let mut members = Vec::new();
        for (index, source) in self.sources.iter().enumerate() {
            members.extend(
                source
                    .member
                    .members()
                    .await
                    .into_iter()
                    .map(|m| (index, m)),
            );
        }
        let mut working: HashMap<Arc<str>, Arc<NodeEntry>> = HashMap::with_capacity(members.len());
        self.homes.clear();
        for (source, m) in members.iter().filter(|(_, m)| !m.is_self) {
            if working
                .get(&*m.id.node_name)
                .is_some_and(|e| e.generation > m.id.generation)
            {
                continue;
            }
            let mut entry = NodeEntry::from_member(m);
            // The QUIC key is not in the schema: keep what key changes told us.
            if let Some(old) = self.working.get(&*m.id.node_name)
                && old.generation == entry.generation
            {
                entry.quic_addr = old.quic_addr;
            }
            self.homes.insert(entry.name.clone(), *source);
            working.insert(entry.name.clone(), Arc::new(entry));
        }
        self.working = working;
        self.reward_types_dirty = true;
        self.scavenger_jobs_dirty = true;
        self.metrics.resyncs.inc();
    }

    /// Applies liveness changes and queues the re-read of updated members; returns whether
    /// anything changed.
    fn apply_event(&mut self, event: MembershipEvent, source: usize) -> bool {
        if let MembershipEvent::Joined(id) | MembershipEvent::Updated(id) = &event
            && *id.node_name != *self.me
            && !self
                .working
                .get(&*id.node_name)
                .is_some_and(|e| e.state.role == Some(Role::Observer))
        {
            self.homes.insert(id.node_name.clone(), source);
            // It may have deleted keys (module docs). A join counts too: key changes arrive
            // before the failure detector calls a member live, and a deletion in between
            // raises no update.
            self.rereads.entry(id.node_name.clone()).or_default();
        }
        let (id, liveness): (&MemberId, Liveness) = match &event {
            MembershipEvent::Joined(id) => (id, Liveness::Live),
            MembershipEvent::Updated(_) => return false,
            MembershipEvent::Departed { id, left } => (
                id,
                if *left {
                    Liveness::Left
                } else {
                    Liveness::Dead
                },
            ),
        };
        if *id.node_name == *self.me {
            return false;
        }
        let entry = self.working.entry(id.node_name.clone()).or_insert_with(|| {
            Arc::new(NodeEntry::new(
                &id.node_name,
                id.generation,
                liveness,
                NodeState::default(),
            ))
        });
        if entry.generation > id.generation {
            return false;
        }
        let e = Arc::make_mut(entry);
        if e.generation < id.generation {
            self.reward_types_dirty |= !e.rewards.is_empty();
            self.scavenger_jobs_dirty |= !e.state.scavengers.is_empty();
            *e = NodeEntry::new(&id.node_name, id.generation, liveness, NodeState::default());
        }
        e.liveness = liveness;
        e.gossip_addr = Some(id.gossip_addr);
        true
    }

    fn apply_changes(&mut self, batch: Vec<KeyChangeOwned>) {
        let folded = apply_changes(&mut self.working, batch);
        self.reward_types_dirty |= folded.reward_types_changed;
        self.scavenger_jobs_dirty |= folded.scavengers_changed;
        if folded.malformed_rewards > 0 {
            self.metrics
                .reward_values_malformed
                .inc_by(folded.malformed_rewards);
        }
        for (node, family) in folded.families_lacking {
            let families = self.rereads.entry(node).or_default();
            if !families.contains(&family) {
                families.push(family);
            }
        }
    }

    /// Re-reads the keys of the members queued this pass, under one lock per gossip member
    /// (each holds the nodes of its cell), and drops what they no longer publish (module docs);
    /// returns whether any entry changed.
    async fn reread(&mut self) -> bool {
        if self.rereads.is_empty() {
            return false;
        }
        let rereads = std::mem::take(&mut self.rereads);
        let (working, metrics) = (&mut self.working, &self.metrics);
        let mut dropped = Dropped::default();
        let mut by_member: Vec<Vec<&str>> = vec![Vec::new(); self.sources.len()];
        for name in rereads.keys() {
            match self.homes.get(name) {
                Some(&home) if home < by_member.len() => by_member[home].push(name),
                _ => by_member.iter_mut().for_each(|names| names.push(name)),
            }
        }
        for (source, names) in self.sources.iter().zip(&by_member) {
            if names.is_empty() {
                continue;
            }
            source
                .member
                .visit_keys(names.iter().copied(), |id, keys| {
                    let Some(entry) = working.get_mut(&*id.node_name) else {
                        return;
                    };
                    if entry.generation != id.generation {
                        return;
                    }
                    let families = rereads.get(&*id.node_name).map_or(&[][..], Vec::as_slice);
                    metrics.key_rereads.inc();
                    let gone = gone(entry, &keys, families);
                    if !gone.is_empty() {
                        dropped.add(drop_gone(Arc::make_mut(entry), gone));
                    }
                })
                .await;
        }
        self.rereads = rereads;
        if dropped.scavenger_nodes > 0 {
            self.metrics
                .scavengers_reread
                .inc_by(dropped.scavenger_nodes);
        }
        self.metrics.metrics_removed.inc_by(dropped.metrics);
        self.scavenger_jobs_dirty |= dropped.scavenger_nodes > 0;
        self.reward_types_dirty |= dropped.reward_types;
        dropped.any
    }

    fn publish(&mut self) {
        let nodes = NodeTable::new(
            self.working
                .values()
                .filter(|e| e.state.role != Some(Role::Observer))
                .cloned()
                .collect(),
        );
        if std::mem::take(&mut self.reward_types_dirty) {
            self.reward_types = Arc::new(reward_types(nodes.entries.iter()));
        }
        if std::mem::take(&mut self.scavenger_jobs_dirty) {
            self.scavenger_jobs = Arc::new(scavenger_jobs(nodes.entries.iter()));
        }
        let snapshot = Snapshot {
            nodes: Arc::new(nodes),
            reward_types: self.reward_types.clone(),
            scavenger_jobs: self.scavenger_jobs.clone(),
            synced: self.synced,
            published_at: Some(SystemTime::now()),
        };
        // The columns requests read, built here once per publication rather than by the
        // first request after it.
        snapshot.warm_like(&self.view.load());
        self.view.publish(snapshot);
    }

    /// Leaves the flat mesh once no agent has been live in it for its grace: every agent then
    /// gossips in a cell. Agents in a cell publish it; one without is in the flat mesh.
    async fn leave_flat_mesh_when_done(&mut self, now: tokio::time::Instant) {
        let Some(flat) = &mut self.flat else {
            return;
        };
        let flat_agents = self
            .working
            .values()
            .filter(|e| {
                e.liveness == Liveness::Live && e.state.is_agent() && e.state.cell.is_none()
            })
            .count();
        self.metrics.flat_mesh_agents.set(flat_agents as i64);
        self.metrics.flat_mesh_joined.set(1);
        if flat_agents > 0 {
            flat.agent_seen = now;
        }
        let idle = now.duration_since(flat.agent_seen);
        if keep_flat_mesh(idle, flat.grace) {
            return;
        }
        let Some(flat) = self.flat.take() else {
            return;
        };
        if let Some(i) = self
            .sources
            .iter()
            .position(|source| Arc::ptr_eq(&source.member, &flat.member))
        {
            // Its events and key changes end with it.
            drop(self.sources.remove(i));
            // Indexes moved: nodes are looked for in every member until events place them.
            self.homes.clear();
        }
        self.metrics.flat_mesh_joined.set(0);
        match flat.member.leave().await {
            Ok(()) => tracing::info!(
                idle = ?idle,
                "left the flat gossip mesh: no agent has been in it for its grace; every agent gossips in a cell"
            ),
            Err(e) => tracing::warn!(error = %e, "leaving the flat gossip mesh failed"),
        }
    }

    fn update_gauges(&mut self) {
        let snapshot = self.view.load();
        let now_ms = self.view.now_ms();
        let stale_ms = u64::try_from(self.config.stale_after.as_millis()).unwrap_or(u64::MAX);
        let (mut live, mut dead, mut left, mut stale) = (0, 0, 0, 0);
        let (mut estimates, mut malformed) = (0i64, 0i64);
        let mut oldest_newest_ms = now_ms;
        let mut mismatched = HashSet::new();
        for e in snapshot.nodes() {
            if let Some(CellCheck::CountDiffers { theirs, ours }) =
                e.state.cell.map(|cell| check_cell(cell, self.config.cells))
            {
                if !self.cell_mismatches.contains(&e.name) {
                    tracing::warn!(
                        node.name = %e.name,
                        agent.cells = %theirs,
                        coordinator.cells = %ours,
                        "this node's agent runs with another --gossip-cells than this coordinator; \
                         give both the same count (the chart's gossip.cells), or its node may \
                         drop out of the view"
                    );
                }
                mismatched.insert(e.name.clone());
            }
            estimates += e.rewards.len() as i64;
            malformed += e.malformed_rewards() as i64;
            match e.liveness {
                Liveness::Live => live += 1,
                Liveness::Dead => dead += 1,
                Liveness::Left => left += 1,
            }
            // A node without metrics has no fresh telemetry: stale, but no age.
            let newest = e.newest_ms();
            if now_ms.saturating_sub(newest) > stale_ms {
                stale += 1;
            }
            if newest > 0 {
                oldest_newest_ms = oldest_newest_ms.min(newest);
            }
        }
        self.metrics.set_nodes(live, dead, left, stale);
        self.metrics
            .cell_count_mismatches
            .set(mismatched.len() as i64);
        self.cell_mismatches = mismatched;
        self.metrics.reward_estimates.set(estimates);
        self.metrics.reward_values_skipped.set(malformed);
        self.metrics
            .max_age_seconds
            .set(now_ms.saturating_sub(oldest_newest_ms) as f64 / 1000.0);
    }
}

/// What folding a batch of key changes did, beyond the entries themselves.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Folded {
    /// Some node gained or lost a pod type's estimate.
    reward_types_changed: bool,
    /// Reward values in the batch that did not parse (skipped).
    malformed_rewards: u64,
    /// Some node's scavenger pods changed.
    scavengers_changed: bool,
    /// `(node, family)` for each metric group value that lacked a metric of its family the
    /// node's entry holds: it may have left the family (module docs).
    families_lacking: Vec<(Arc<str>, Box<str>)>,
}

/// What a re-read sees of a member's keys: [`HeldKeys`] in service, a map in tests.
trait KeysNow {
    /// The value of a key the member holds.
    fn get(&self, key: &str) -> Option<&str>;
    /// The keys it holds that start with `prefix`, with their values.
    fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)>;
    /// The keys it deleted (and has not set again).
    fn deleted(&self) -> impl Iterator<Item = &str>;
}

impl KeysNow for HeldKeys<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        HeldKeys::get(self, key)
    }
    fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
        HeldKeys::with_prefix(self, prefix)
    }
    fn deleted(&self) -> impl Iterator<Item = &str> {
        HeldKeys::deleted(self)
    }
}

/// What an entry holds that its member no longer publishes.
#[derive(Debug, Default, PartialEq)]
struct Gone {
    metrics: Vec<MetricName>,
    scavengers: Vec<String>,
    rewards: Vec<String>,
    violations: Vec<String>,
}

impl Gone {
    fn is_empty(&self) -> bool {
        self.metrics.is_empty()
            && self.scavengers.is_empty()
            && self.rewards.is_empty()
            && self.violations.is_empty()
    }
}

/// What `entry` holds that its member, whose keys are `keys` now, no longer publishes: the
/// items of the keys it deleted, and the metrics of `families` (and of deleted group keys) that
/// no key of the member holds any more. Reads only: the caller copies the entry only when
/// something is gone.
fn gone(entry: &NodeEntry, keys: &impl KeysNow, families: &[Box<str>]) -> Gone {
    let mut gone = Gone::default();
    let mut stale: Vec<&str> = families.iter().map(|f| &**f).collect();
    for key in keys.deleted() {
        match key.parse::<StateKey>() {
            Ok(StateKey::Scavenger(uid)) if entry.state.scavengers.contains_key(&uid) => {
                gone.scavengers.push(uid);
            }
            Ok(StateKey::Reward(pod_type)) if entry.state.rewards.contains_key(&pod_type) => {
                gone.rewards.push(pod_type);
            }
            Ok(StateKey::Violation(policy)) if entry.state.violations.contains_key(&policy) => {
                gone.violations.push(policy);
            }
            Ok(StateKey::Metric(name)) if entry.state.metrics.contains_key(&name) => {
                // While its family has a group, the group says (a group without it marks the
                // family when folded): the writer moved to groups.
                let family = groups::prefix_of(name.as_str());
                if keys.get(&groups::group_key(family, 0)).is_none() {
                    gone.metrics.push(name);
                }
            }
            Ok(StateKey::MetricGroup(_)) => {
                if let Some(rest) = key.strip_prefix(GROUP_PREFIX)
                    && let Ok(family) = groups::parse_group_rest(rest)
                    && family_members(entry, family).next().is_some()
                {
                    stale.push(family);
                }
            }
            _ => {}
        }
    }
    stale.sort_unstable();
    stale.dedup();
    for family in stale {
        let now = family_now(keys, family);
        for name in family_members(entry, family) {
            if !now.contains_key(name) && !gone.metrics.contains(name) {
                gone.metrics.push(name.clone());
            }
        }
    }
    gone
}

/// The metrics of `family` (group prefix) an entry holds.
fn family_members<'e>(
    entry: &'e NodeEntry,
    family: &'e str,
) -> impl Iterator<Item = &'e MetricName> {
    entry
        .state
        .metrics
        .range::<str, _>((
            std::ops::Bound::Included(family),
            std::ops::Bound::Unbounded,
        ))
        .map(|(name, _)| name)
        .take_while(move |name| name.as_str().starts_with(family))
        .filter(move |name| groups::prefix_of(name.as_str()) == family)
}

/// The metrics of `family` a member publishes now: in its group chunks and in `m:` keys.
fn family_now(keys: &impl KeysNow, family: &str) -> BTreeMap<MetricName, MetricValue> {
    let group = groups::group_key(family, 0);
    let single = format!("{METRIC_PREFIX}{family}");
    let chunks = keys.with_prefix(&group).filter(|(key, _)| {
        key.strip_prefix(GROUP_PREFIX)
            .and_then(|rest| groups::parse_group_rest(rest).ok())
            == Some(family)
    });
    let singles = keys.with_prefix(&single).filter(|(key, _)| {
        key.strip_prefix(METRIC_PREFIX)
            .is_some_and(|name| groups::prefix_of(name) == family)
    });
    NodeState::from_key_values(chunks.chain(singles)).metrics
}

/// What re-reads dropped from the entries.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Dropped {
    /// Whether any entry changed.
    any: bool,
    /// Metrics dropped.
    metrics: u64,
    /// Nodes whose scavenger pods changed.
    scavenger_nodes: u64,
    /// Whether some node lost a pod type's estimate.
    reward_types: bool,
}

impl Dropped {
    fn add(&mut self, other: Dropped) {
        self.any |= other.any;
        self.metrics += other.metrics;
        self.scavenger_nodes += other.scavenger_nodes;
        self.reward_types |= other.reward_types;
    }
}

/// Drops from `entry` what its member no longer publishes.
fn drop_gone(entry: &mut NodeEntry, gone: Gone) -> Dropped {
    let mut dropped = Dropped {
        any: !gone.is_empty(),
        ..Dropped::default()
    };
    for name in &gone.metrics {
        dropped.metrics += u64::from(entry.state.metrics.remove(name).is_some());
    }
    if dropped.metrics > 0 {
        entry.reindex();
    }
    let before = entry.state.scavengers.len();
    for uid in &gone.scavengers {
        entry.state.scavengers.remove(uid);
    }
    dropped.scavenger_nodes = u64::from(entry.state.scavengers.len() != before);
    for pod_type in &gone.rewards {
        entry.state.rewards.remove(pod_type);
        dropped.reward_types |= entry.rewards.remove(pod_type.as_str()).is_some();
    }
    for policy in &gone.violations {
        entry.state.violations.remove(policy);
    }
    dropped
}

/// Folds queued key changes into the working map, node by node, in arrival order.
fn apply_changes(
    working: &mut HashMap<Arc<str>, Arc<NodeEntry>>,
    batch: Vec<KeyChangeOwned>,
) -> Folded {
    let mut folded = Folded::default();
    let mut by_node: HashMap<&str, Vec<&KeyChangeOwned>> = HashMap::new();
    for change in &batch {
        by_node.entry(&change.node).or_default().push(change);
    }
    for (node, changes) in by_node {
        // Keys reach us before the failure detector has heard the member twice, and a freshly
        // started replica also hears the keys of members that died within the grace period
        // (peers still gossip their state). Only the detector decides liveness: until its
        // `Joined`, the member is `Dead`, as a resync reads it, so both paths agree.
        let entry = working.entry(Arc::from(node)).or_insert_with(|| {
            Arc::new(NodeEntry::new(
                node,
                changes[0].generation,
                Liveness::Dead,
                NodeState::default(),
            ))
        });
        let e = Arc::make_mut(entry);
        let mut touched_metrics = false;
        for change in changes {
            if change.generation < e.generation {
                continue;
            }
            if change.generation > e.generation {
                // A restarted agent: its old keys are gone with the old generation, and the
                // new generation is live once the failure detector has heard it (`Joined`).
                folded.reward_types_changed |= !e.rewards.is_empty();
                folded.scavengers_changed |= !e.state.scavengers.is_empty();
                *e = NodeEntry::new(
                    node,
                    change.generation,
                    Liveness::Dead,
                    NodeState::default(),
                );
            }
            if &*change.key == QUIC_ADDR_KEY {
                e.quic_addr = change.value.parse().ok();
                continue;
            }
            let one = NodeState::from_key_values([(&*change.key, &*change.value)]);
            touched_metrics |= !one.metrics.is_empty();
            if let Some(rest) = change.key.strip_prefix(GROUP_PREFIX)
                && let Ok(family) = groups::parse_group_rest(rest)
                && family_members(e, family).any(|name| !one.metrics.contains_key(name))
            {
                // A metric held here is not in this value: removed, or in another chunk.
                folded
                    .families_lacking
                    .push((e.name.clone(), family.into()));
            }
            if one.scavengers.is_empty()
                && let Ok(StateKey::Scavenger(uid)) = change.key.parse::<StateKey>()
            {
                // A value that turned malformed: the pod is no longer known here.
                folded.scavengers_changed |= e.state.scavengers.remove(&uid).is_some();
            }
            folded.scavengers_changed |= !one.scavengers.is_empty();
            for (pod_type, value) in &one.rewards {
                match value.parse::<Estimate>() {
                    Ok(estimate) => match e.rewards.get_mut(pod_type.as_str()) {
                        Some(slot) => *slot = estimate,
                        None => {
                            e.rewards.insert(pod_type.as_str().into(), estimate);
                            folded.reward_types_changed = true;
                        }
                    },
                    Err(error) => {
                        folded.malformed_rewards += 1;
                        // A type whose value turned malformed is no longer known here.
                        folded.reward_types_changed |=
                            e.rewards.remove(pod_type.as_str()).is_some();
                        tracing::debug!(
                            node.name = %node, "pod.type" = %pod_type, %error,
                            "skipping a malformed reward value"
                        );
                    }
                }
            }
            merge(&mut e.state, one);
        }
        if touched_metrics {
            e.reindex();
        }
    }
    folded
}

/// Merges the entries read from some keys into a node's state.
fn merge(into: &mut NodeState, from: NodeState) {
    if from.schema_version.is_some() {
        into.schema_version = from.schema_version;
    }
    if from.role.is_some() {
        into.role = from.role;
    }
    if from.cell.is_some() {
        into.cell = from.cell;
    }
    into.leaving |= from.leaving;
    into.metrics.extend(from.metrics);
    into.rewards.extend(from.rewards);
    into.violations.extend(from.violations);
    into.scavengers.extend(from.scavengers);
    into.skipped.unknown_keys += from.skipped.unknown_keys;
    into.skipped.malformed_values += from.skipped.malformed_values;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn change(node: &str, generation: u64, key: &str, value: &str) -> KeyChangeOwned {
        KeyChangeOwned {
            node: node.into(),
            generation,
            key: key.into(),
            value: value.into(),
        }
    }

    #[test]
    fn every_identity_key_folds_in() {
        let mut working = HashMap::new();
        apply_changes(
            &mut working,
            vec![
                change("n1", 1, "v", "2"),
                change("n1", 1, "role", "agent"),
                change("n1", 1, "cell", "3/40"),
            ],
        );
        let state = &working["n1"].state;
        assert_eq!(state.schema_version, Some(2));
        assert_eq!(state.role, Some(Role::Agent));
        assert_eq!(state.cell, Some("3/40".parse().unwrap()));
    }

    #[test]
    fn key_changes_fold_in_per_node_and_generation() {
        let mut working = HashMap::new();
        apply_changes(
            &mut working,
            vec![
                change("n1", 1, "role", "agent"),
                change("n1", 1, "m:node_metric", "5@1000"),
                change("n1", 1, "m:node_metric", "7@2000"),
                change("n1", 1, "quic", "127.0.0.1:7443"),
                change("n1", 1, "v:ns/p", "dontschedule"),
                change("n2", 3, "m:cpu", "1@1000"),
            ],
        );
        let n1 = &working["n1"];
        assert!(n1.state.is_agent());
        assert_eq!(n1.metric("metric").unwrap().value, 7.0);
        assert_eq!(n1.metric("node_metric").unwrap().measured_at_ms, 2000);
        assert_eq!(n1.quic_addr, Some("127.0.0.1:7443".parse().unwrap()));
        assert_eq!(n1.state.violations["ns/p"], "dontschedule");
        assert_eq!(
            n1.liveness,
            Liveness::Dead,
            "keys alone do not make a member live: the failure detector's Joined does"
        );
        Arc::make_mut(working.get_mut("n1").unwrap()).liveness = Liveness::Live;
        // An older generation's change is ignored, a newer one starts the node afresh (and
        // not live: the detector has not heard the new generation yet).
        apply_changes(
            &mut working,
            vec![
                change("n2", 2, "m:cpu", "9@9000"),
                change("n1", 2, "m:other", "1@3000"),
            ],
        );
        assert_eq!(working["n2"].metric("cpu").unwrap().value, 1.0);
        assert!(working["n1"].metric("metric").is_none());
        assert_eq!(working["n1"].generation, 2);
        assert_eq!(working["n1"].liveness, Liveness::Dead);
    }

    #[test]
    fn metric_groups_fold_in_like_single_keys() {
        // Schema version 2 agents pack a family in one `M:` key; a metric answers to its full
        // name and its short one, stamped with the group's collection time.
        let mut working = HashMap::new();
        apply_changes(
            &mut working,
            vec![
                change("n1", 1, "role", "agent"),
                change(
                    "n1",
                    1,
                    "M:node_pressure_",
                    "4000;cpu_some_avg10_ratio=0.25;io_some_avg10_ratio=0",
                ),
                change("n1", 1, "M:node_", "5000;load1=2.5"),
            ],
        );
        let n1 = &working["n1"];
        let psi = n1.metric("pressure_cpu_some_avg10_ratio").unwrap();
        assert_eq!((psi.value, psi.measured_at_ms), (0.25, 4000));
        assert_eq!(n1.metric("node_load1").unwrap().value, 2.5);
        assert_eq!(n1.state.skipped, Default::default());
    }

    #[test]
    fn full_names_win_over_short_names() {
        let state = NodeState::from_key_values([("m:node_x", "1@1"), ("m:x", "2@1")]);
        let e = NodeEntry::new("n", 1, Liveness::Live, state);
        assert_eq!(e.metric("x").unwrap().value, 2.0);
        assert_eq!(e.metric("node_x").unwrap().value, 1.0);
    }

    #[test]
    fn readings_age_out_and_unknown_nodes_are_missing() {
        let state = NodeState::from_key_values([("m:node_metric", "5@10000")]);
        let snap = Snapshot::from_entries([NodeEntry::new("n", 1, Liveness::Live, state)]);
        let stale = Duration::from_secs(10);
        assert_eq!(
            snap.readings("n", 20_000, stale).reading("metric"),
            Reading::Fresh(5.0)
        );
        assert_eq!(
            snap.readings("n", 20_001, stale).reading("metric"),
            Reading::Stale(5.0)
        );
        // A clock behind the writer's: age zero.
        assert_eq!(
            snap.readings("n", 1, stale).reading("metric"),
            Reading::Fresh(5.0)
        );
        assert_eq!(
            snap.readings("other", 20_000, stale).reading("metric"),
            Reading::Missing
        );
    }

    #[test]
    fn derived_values_are_built_once_kept_and_built_ahead_while_asked_for() {
        use std::sync::atomic::AtomicUsize;
        let built = Arc::new(AtomicUsize::new(0));
        let nodes =
            |n: usize| {
                Snapshot::from_entries((0..n).map(|i| {
                    NodeEntry::new(&format!("n{i}"), 1, Liveness::Live, NodeState::default())
                }))
            };
        // The value: how many nodes the snapshot had, and under which version of the rule.
        let ask = |s: &Snapshot, version: u32| {
            let built = built.clone();
            let fits = move |v: &(usize, u32)| v.1 == version;
            *s.derived("k", fits, move || {
                move |s: &Snapshot| {
                    built.fetch_add(1, Ordering::Relaxed);
                    (s.len(), version)
                }
            })
        };
        let a = nodes(2);
        assert_eq!(ask(&a, 1), (2, 1));
        assert_eq!(ask(&a, 1), (2, 1));
        assert_eq!(
            built.load(Ordering::Relaxed),
            1,
            "kept for the snapshot's life"
        );
        let b = nodes(3);
        b.warm_like(&a);
        assert_eq!(built.load(Ordering::Relaxed), 2, "built ahead for the next");
        assert_eq!(ask(&b, 1), (3, 1), "from the new snapshot");
        assert_eq!(built.load(Ordering::Relaxed), 2);
        assert_eq!(
            ask(&b, 2),
            (3, 2),
            "a value that does not fit is built anew"
        );
        assert_eq!(built.load(Ordering::Relaxed), 3);
        // One not asked for is dropped after IDLE_PUBLICATIONS.
        let mut previous = b;
        for _ in 0..IDLE_PUBLICATIONS {
            let next = nodes(1);
            next.warm_like(&previous);
            previous = next;
        }
        let before = built.load(Ordering::Relaxed);
        let last = nodes(1);
        last.warm_like(&previous);
        assert_eq!(
            built.load(Ordering::Relaxed),
            before,
            "idle: no longer built"
        );
        assert!(last.nodes.derived.read().values().all(|m| m.is_empty()));
    }

    #[test]
    fn columns_are_read_by_position_and_built_ahead_while_asked_for() {
        let node = |name: &str, v: f64| {
            let state = NodeState::from_key_values([
                ("m:node_metric", format!("{v}@1000").as_str()),
                ("r:ns/t", "0,2@1000"),
            ]);
            NodeEntry::new(name, 1, Liveness::Live, state)
        };
        let a = Snapshot::from_entries([node("n1", 1.0), node("n2", 2.0)]);
        let pos = a.locate(["n2", "n1", "other"].into_iter());
        assert_eq!(pos[2], None);
        let col = a.metric_column("metric");
        let value = |p: Option<u32>| col.get(p.unwrap()).flatten().map(|v| v.value);
        assert_eq!((value(pos[0]), value(pos[1])), (Some(2.0), Some(1.0)));
        assert_eq!(a.entry_at(pos[1].unwrap()).unwrap().name.as_ref(), "n1");
        assert!(a.metric_column("absent").get(0).unwrap().is_none());
        assert_eq!(a.reward_column("ns/t").get(0).flatten().unwrap().bad, 2.0);

        // The next publication builds what was asked for, from its own entries.
        let b = Snapshot::from_entries([node("n1", 5.0), node("n3", 7.0)]);
        b.warm_like(&a);
        assert_eq!(b.nodes.metrics.read().len(), 2, "metric and absent");
        assert_eq!(b.nodes.rewards.read().len(), 1);
        let p1 = b.locate(["n1"].into_iter())[0].unwrap();
        assert_eq!(
            b.metric_column("metric").get(p1).flatten().unwrap().value,
            5.0
        );

        // A column no request asks for is dropped after IDLE_PUBLICATIONS.
        let mut previous = b;
        for _ in 0..IDLE_PUBLICATIONS {
            let next = Snapshot::from_entries([node("n1", 5.0)]);
            next.warm_like(&previous);
            assert!(next.nodes.metrics.read().contains_key("metric"));
            previous = next;
        }
        let last = Snapshot::from_entries([node("n1", 5.0)]);
        last.warm_like(&previous);
        assert!(last.nodes.metrics.read().is_empty());
        assert!(last.nodes.rewards.read().is_empty());
    }

    #[test]
    fn rewards_are_parsed_once_and_malformed_values_skipped_and_counted() {
        let state = NodeState::from_key_values([
            ("role", "agent"),
            ("r:default/D", "0.5,3.25@1700000000000"),
            ("r:web/api", "not an estimate"),
            ("r:web/db", "-1,0@5"),
        ]);
        let e = NodeEntry::new("n", 1, Liveness::Live, state);
        let d = e.reward("default/D").unwrap();
        assert_eq!((d.good, d.bad, d.at_ms), (0.5, 3.25, 1_700_000_000_000));
        assert!(e.reward("web/api").is_none() && e.reward("web/db").is_none());
        assert_eq!(e.malformed_rewards(), 2);
        assert_eq!(e.rewards().count(), 1);
        let snap = Snapshot::from_entries([
            e,
            NodeEntry::new("m", 1, Liveness::Live, NodeState::default()),
        ]);
        assert!(snap.has_reward_type("default/D"));
        assert!(
            !snap.has_reward_type("web/api"),
            "only a malformed value: unknown type"
        );
        assert_eq!(snap.reward_types().collect::<Vec<_>>(), [("default/D", 1)]);
        assert!(Snapshot::default().has_no_rewards());
    }

    #[test]
    fn reward_changes_fold_in_and_say_when_the_set_of_types_changed() {
        let mut working = HashMap::new();
        let folded = apply_changes(
            &mut working,
            vec![
                change("n1", 1, "role", "agent"),
                change("n1", 1, "r:default/D", "0,4@1000"),
                change("n1", 1, "r:default/E", "1,2,3"),
            ],
        );
        assert_eq!(
            folded,
            Folded {
                reward_types_changed: true,
                malformed_rewards: 1,
                scavengers_changed: false,
                families_lacking: Vec::new(),
            }
        );
        assert_eq!(working["n1"].reward("default/D").unwrap().bad, 4.0);
        assert_eq!(working["n1"].malformed_rewards(), 1);
        // A new value for a known type: the same types.
        let folded = apply_changes(
            &mut working,
            vec![change("n1", 1, "r:default/D", "1,3@2000")],
        );
        assert_eq!(folded, Folded::default());
        assert_eq!(working["n1"].reward("default/D").unwrap().at_ms, 2000);
        // A known type turning malformed is dropped; a malformed one turning valid is added.
        let folded = apply_changes(
            &mut working,
            vec![
                change("n1", 1, "r:default/D", "oops"),
                change("n1", 1, "r:default/E", "1,0@3000"),
            ],
        );
        assert!(folded.reward_types_changed);
        assert_eq!(folded.malformed_rewards, 1);
        assert!(working["n1"].reward("default/D").is_none());
        assert_eq!(working["n1"].reward("default/E").unwrap().good, 1.0);
        assert_eq!(working["n1"].malformed_rewards(), 1);
        // A restarted agent's estimates go with its old generation.
        let folded = apply_changes(&mut working, vec![change("n1", 2, "role", "agent")]);
        assert!(folded.reward_types_changed);
        assert_eq!(working["n1"].rewards().count(), 0);
    }

    #[test]
    fn scavenger_pods_fold_in_leave_and_index_by_job() {
        let mut working = HashMap::new();
        let folded = apply_changes(
            &mut working,
            vec![
                change("n1", 1, "role", "agent"),
                change("n1", 1, "s:u1", "ns/a@1000@500@1024"),
                change("n1", 1, "s:u2", "ns/b@2000@250@1024"),
                change("n2", 1, "s:u3", "ns/a@3000@500@1024"),
            ],
        );
        assert!(folded.scavengers_changed);
        assert_eq!(working["n1"].scavengers().len(), 2);
        assert_eq!(working["n1"].scavengers()["u1"].checkpoint_ms, 1000);
        // A new checkpoint replaces the value; a malformed one forgets the pod.
        let folded = apply_changes(
            &mut working,
            vec![
                change("n1", 1, "s:u1", "ns/a@5000@500@1024"),
                change("n1", 1, "s:u2", "junk"),
            ],
        );
        assert!(folded.scavengers_changed);
        assert_eq!(working["n1"].scavengers()["u1"].checkpoint_ms, 5000);
        assert!(!working["n1"].scavengers().contains_key("u2"));
        // Other keys leave scavengers alone.
        let folded = apply_changes(&mut working, vec![change("n1", 1, "m:cpu", "1@1")]);
        assert!(!folded.scavengers_changed);

        let snap = Snapshot::from_entries(working.values().map(|e| (**e).clone()));
        let mut a: Vec<u64> = snap
            .scavenger_job("ns/a")
            .iter()
            .map(|p| p.checkpoint_ms)
            .collect();
        a.sort_unstable();
        assert_eq!(a, [3000, 5000], "a job's pods on every node");
        assert!(snap.scavenger_job("ns/b").is_empty());

        // A re-read of the member (which shows deletions) drops the pods whose keys it deleted.
        let keys = Keys::new([], ["s:u1", "s:u9"]);
        let gone = gone(&working["n1"], &keys, &[]);
        assert_eq!(gone.scavengers, ["u1"]);
        let dropped = drop_gone(Arc::make_mut(working.get_mut("n1").unwrap()), gone);
        assert_eq!(dropped.scavenger_nodes, 1);
        assert!(working["n1"].scavengers().is_empty());
        assert!(super::gone(&working["n1"], &keys, &[]).is_empty());

        // A restarted agent's pods go with its old generation.
        let folded = apply_changes(&mut working, vec![change("n2", 2, "role", "agent")]);
        assert!(folded.scavengers_changed);
        assert!(working["n2"].scavengers().is_empty());
    }

    /// A member's keys as a re-read sees them: live keys with values, and deleted keys.
    struct Keys {
        live: BTreeMap<String, String>,
        deleted: Vec<String>,
    }

    impl Keys {
        fn new<'a>(
            live: impl IntoIterator<Item = (&'a str, &'a str)>,
            deleted: impl IntoIterator<Item = &'a str>,
        ) -> Self {
            Self {
                live: live
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
                deleted: deleted.into_iter().map(str::to_owned).collect(),
            }
        }
    }

    impl KeysNow for Keys {
        fn get(&self, key: &str) -> Option<&str> {
            self.live.get(key).map(String::as_str)
        }
        fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
            self.live
                .range::<str, _>((
                    std::ops::Bound::Included(prefix),
                    std::ops::Bound::Unbounded,
                ))
                .take_while(move |(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (k.as_str(), v.as_str()))
        }
        fn deleted(&self) -> impl Iterator<Item = &str> {
            self.deleted.iter().map(String::as_str)
        }
    }

    fn names(gone: &Gone) -> Vec<&str> {
        gone.metrics.iter().map(MetricName::as_str).collect()
    }

    /// What a member deleted leaves the entry: each kind of key, with what it held.
    #[test]
    fn a_reread_drops_what_the_member_deleted() {
        let mut working = HashMap::new();
        apply_changes(
            &mut working,
            vec![
                change("n1", 1, "role", "agent"),
                change("n1", 1, "M:node_", "1000;load1=2;load5=3"),
                change("n1", 1, "M:node_textfile_", "1000;probe=1;other=2"),
                change("n1", 1, "m:node_disk_reads", "4@1000"),
                change("n1", 1, "m:node_cpu_ratio", "0.5@1000"),
                change("n1", 1, "s:u1", "ns/a@1000@500@1024"),
                change("n1", 1, "r:default/D", "0,4@1000"),
                change("n1", 1, "v:ns/p", "dontschedule"),
            ],
        );
        let entry = &working["n1"];
        // Nothing deleted, nothing gone (and nothing copied).
        let unchanged = Keys::new([("M:node_", "1000;load1=2;load5=3")], []);
        assert!(gone(entry, &unchanged, &[]).is_empty());
        // The textfile family's group deleted (its last metrics removed), a single key deleted
        // while its family has no group, and one deleted after its family moved into a group
        // (the group governs: it holds the metric), a pod, a reward type and a violation.
        let keys = Keys::new(
            [
                ("M:node_", "1000;load1=2;load5=3"),
                ("M:node_cpu_", "2000;ratio=0.5"),
            ],
            [
                "M:node_textfile_",
                "m:node_disk_reads",
                "m:node_cpu_ratio",
                "s:u1",
                "r:default/D",
                "v:ns/p",
                "v:ns/never-held",
            ],
        );
        let gone = gone(entry, &keys, &[]);
        assert_eq!(
            names(&gone),
            [
                "node_disk_reads",
                "node_textfile_other",
                "node_textfile_probe"
            ]
        );
        assert_eq!(
            (
                gone.scavengers.len(),
                gone.rewards.len(),
                gone.violations.len()
            ),
            (1, 1, 1)
        );
        let e = Arc::make_mut(working.get_mut("n1").unwrap());
        let dropped = drop_gone(e, gone);
        assert_eq!(
            dropped,
            Dropped {
                any: true,
                metrics: 3,
                scavenger_nodes: 1,
                reward_types: true,
            }
        );
        assert!(e.metric("textfile_probe").is_none() && e.metric("node_disk_reads").is_none());
        assert_eq!(e.metric("load1").unwrap().value, 2.0);
        assert_eq!(e.metric("cpu_ratio").unwrap().value, 0.5);
        assert!(e.reward("default/D").is_none() && e.state.violations.is_empty());
    }

    /// A group value without a metric of its family held here marks the family; its re-read
    /// keeps what another chunk or a single key still holds and drops the rest.
    #[test]
    fn a_group_without_a_held_metric_marks_its_family_for_a_reread() {
        let mut working = HashMap::new();
        let folded = apply_changes(
            &mut working,
            vec![
                change("n1", 1, "M:node_", "1000;load1=2;load5=3;gone=1"),
                change("n1", 1, "M:node_x_", "1000;a=1"),
            ],
        );
        assert!(
            folded.families_lacking.is_empty(),
            "a first value lacks nothing"
        );
        let folded = apply_changes(
            &mut working,
            vec![
                change("n1", 1, "M:node_", "2000;load1=2.5"),
                change("n1", 1, "M:node_x_", "2000;a=2"),
            ],
        );
        assert_eq!(
            folded.families_lacking,
            [(Arc::from("n1"), Box::from("node_"))]
        );
        // The fold itself only adds: load5 and gone are still held until the re-read.
        assert_eq!(working["n1"].metric("load1").unwrap().value, 2.5);
        assert!(working["n1"].metric("load5").is_some());
        // load5 moved to a second chunk; `gone` is in no key any more.
        let keys = Keys::new(
            [
                ("M:node_", "2000;load1=2.5"),
                ("M:node_#1", "2000;load5=3"),
                ("M:node_x_", "2000;a=2"),
            ],
            [],
        );
        let gone = gone(&working["n1"], &keys, &[Box::from("node_")]);
        assert_eq!(names(&gone), ["node_gone"]);
        // The family of nameless metrics (`M:*`) works the same.
        let mut working = HashMap::new();
        apply_changes(&mut working, vec![change("n1", 1, "M:*", "1000;up=1;x=2")]);
        let keys = Keys::new([("M:*", "2000;up=1")], []);
        assert_eq!(
            names(&super::gone(&working["n1"], &keys, &[Box::from("")])),
            ["x"]
        );
    }

    #[test]
    fn only_live_nodes_with_recent_metrics_are_fresh() {
        let state = NodeState::from_key_values([("m:node_cpu", "1@100000")]);
        let stale = Duration::from_secs(10);
        let live = NodeEntry::new("n", 1, Liveness::Live, state.clone());
        assert!(live.fresh(110_000, stale));
        assert!(!live.fresh(110_001, stale));
        assert!(!NodeEntry::new("n", 1, Liveness::Dead, state.clone()).fresh(100_000, stale));
        assert!(!NodeEntry::new("n", 1, Liveness::Left, state).fresh(100_000, stale));
        let silent = NodeEntry::new("n", 1, Liveness::Live, NodeState::default());
        assert!(!silent.fresh(100_000, stale), "no metric at all: not fresh");
    }

    /// Agent `n1` and an observer seeded with it, gossiping on loopback every 100 ms.
    async fn agent_and_observer() -> (GossipMember, Arc<GossipMember>) {
        use telemesh_runtime::gossip::{GossipConfig, Security};
        let config = |name: &str, role, seeds: Vec<String>| {
            let mut c = GossipConfig::new(
                name,
                "view-test",
                "127.0.0.1:0".parse().unwrap(),
                Security::Insecure,
            );
            c.role = role;
            c.seeds = seeds;
            c.gossip_interval = Duration::from_millis(100);
            c
        };
        let agent = GossipMember::start(config("n1", Role::Agent, vec![]))
            .await
            .unwrap();
        let seed = agent.id().gossip_addr.to_string();
        let observer = Arc::new(
            GossipMember::start(config("coordinator", Role::Observer, vec![seed]))
                .await
                .unwrap(),
        );
        (agent, observer)
    }

    /// An updater on `observer` with a 20 ms tick and an hour-long resync, so that only the
    /// tick's re-reads can remove anything; stop it with the token, then await the task.
    async fn run_updater(
        observer: Arc<GossipMember>,
        stale_after: Duration,
    ) -> (
        ClusterView,
        ViewMetrics,
        CancellationToken,
        tokio::task::JoinHandle<()>,
    ) {
        let view = ClusterView::default();
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = ViewMetrics::register(&mut registry);
        let updater = Updater::new(
            vec![observer],
            view.clone(),
            ViewConfig {
                tick: Duration::from_millis(20),
                resync: Duration::from_secs(3600),
                sync_timeout: Duration::from_millis(100),
                stale_after,
                cells: Cells::FLAT,
            },
            metrics.clone(),
        )
        .await;
        let stop = CancellationToken::new();
        let task = tokio::spawn(updater.run(stop.clone()));
        (view, metrics, stop, task)
    }

    /// Real gossip on loopback: an agent deletes scavenger pods' keys, before and after the
    /// observer's failure detector has it live, and the view drops them long before the
    /// (hour-long) resync would.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deleted_scavenger_pods_leave_the_view_within_rounds() {
        use telemesh_runtime::testing::eventually;

        const WITHIN: Duration = Duration::from_secs(20);
        let (agent, observer) = agent_and_observer().await;
        let mut events = observer.events();
        let (view, metrics, stop, task) = run_updater(observer, Duration::from_secs(45)).await;
        let pods = |view: &ClusterView| -> Vec<String> {
            view.load()
                .node("n1")
                .map(|e| e.scavengers().keys().cloned().collect())
                .unwrap_or_default()
        };
        let key = |uid: &str| StateKey::Scavenger(uid.into());

        for uid in ["u1", "u2", "u3"] {
            agent.set(&key(uid), "ns/a@1000@500@1024").await.unwrap();
        }
        eventually("three scavenger pods in the view", WITHIN, || async {
            (pods(&view) == ["u1", "u2", "u3"]).then_some(())
        })
        .await;
        // Key changes arrive before the failure detector calls the agent live (a few rounds):
        // a deletion then is caught when it joins.
        agent.delete(&key("u3")).await.unwrap();
        let joined = async {
            loop {
                match events.recv().await {
                    Ok(MembershipEvent::Joined(id)) if &*id.node_name == "n1" => return,
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("membership events ended: {e}"),
                }
            }
        };
        tokio::time::timeout(WITHIN, joined)
            .await
            .expect("the agent to join");
        eventually("u3 to leave the view", WITHIN, || async {
            (pods(&view) == ["u1", "u2"]).then_some(())
        })
        .await;
        // A live member's deletion is caught by its update.
        agent.delete(&key("u1")).await.unwrap();
        eventually("u1 to leave the view", WITHIN, || async {
            (pods(&view) == ["u2"]).then_some(())
        })
        .await;
        assert_eq!(view.load().scavenger_job("ns/a").len(), 1);
        assert_eq!(
            metrics.resyncs.get(),
            1,
            "only the first read, no resync since"
        );
        // Each deletion was seen by a re-read.
        assert_eq!(metrics.scavengers_reread.get(), 2);
        stop.cancel();
        task.await.unwrap();
    }

    /// Real gossip on loopback, with an hour-long resync: metrics an agent stops publishing
    /// leave the view within gossip rounds, whether their group is rewritten without them or
    /// deleted with them (the last of their family). Before the re-read, both stayed until the
    /// resync, and the extender kept deciding on values the agent no longer had.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deleted_metrics_leave_the_view_within_rounds() {
        use telemesh_core::metric::Sample;
        use telemesh_runtime::testing::eventually;

        const WITHIN: Duration = Duration::from_secs(20);
        let (agent, observer) = agent_and_observer().await;
        let (view, metrics, stop, task) = run_updater(observer, Duration::from_secs(3600)).await;
        let held = |view: &ClusterView| -> Vec<String> {
            view.load()
                .node("n1")
                .map(|e| e.state.metrics.keys().map(|n| n.to_string()).collect())
                .unwrap_or_default()
        };
        let name = |n: &str| MetricName::new(n).unwrap();
        let samples: Vec<Sample> = ["node_load1", "node_load5", "node_lone_probe"]
            .into_iter()
            .map(|n| Sample {
                name: name(n),
                value: 1.0,
            })
            .collect();
        agent
            .publish_metrics(&samples, SystemTime::now())
            .await
            .unwrap();
        eventually("three metrics in the view", WITHIN, || async {
            (held(&view).len() == 3).then_some(())
        })
        .await;
        // `M:node_` rewritten without load5.
        agent.remove_metrics(&[name("node_load5")]).await.unwrap();
        eventually("load5 to leave the view", WITHIN, || async {
            (held(&view) == ["node_load1", "node_lone_probe"]).then_some(())
        })
        .await;
        // `M:node_lone_` deleted: a tombstone, no key change at all.
        agent
            .remove_metrics(&[name("node_lone_probe")])
            .await
            .unwrap();
        eventually("the probe to leave the view", WITHIN, || async {
            (held(&view) == ["node_load1"]).then_some(())
        })
        .await;
        let snapshot = view.load();
        let readings = snapshot.readings("n1", view.now_ms(), Duration::from_secs(3600));
        assert_eq!(readings.reading("lone_probe"), Reading::Missing);
        assert_eq!(
            metrics.resyncs.get(),
            1,
            "only the first read, no resync since"
        );
        assert_eq!(metrics.metrics_removed.get(), 2);
        stop.cancel();
        task.await.unwrap();
    }

    /// Key changes reach the view when they arrive, not at the next tick: with an hour-long
    /// tick and resync, a new value still shows within gossip rounds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn key_changes_are_folded_in_without_waiting_for_the_tick() {
        use telemesh_core::metric::{MetricName, Sample};
        use telemesh_runtime::testing::eventually;

        const WITHIN: Duration = Duration::from_secs(20);
        let (agent, observer) = agent_and_observer().await;
        let view = ClusterView::default();
        let mut registry = prometheus_client::registry::Registry::default();
        let hour = Duration::from_secs(3600);
        let updater = Updater::new(
            vec![observer],
            view.clone(),
            ViewConfig {
                tick: hour,
                resync: hour,
                sync_timeout: Duration::from_millis(100),
                stale_after: Duration::from_secs(45),
                cells: Cells::FLAT,
            },
            ViewMetrics::register(&mut registry),
        )
        .await;
        let stop = CancellationToken::new();
        let task = tokio::spawn(updater.run(stop.clone()));
        let load = |view: &ClusterView| {
            view.load()
                .node("n1")
                .and_then(|e| e.metric("node_load1"))
                .map(|v| v.value)
        };
        // The first tick (at once) has passed by the second value: only a wake-up folds it in.
        for value in [1.0, 2.0] {
            let sample = Sample {
                name: MetricName::new("node_load1").unwrap(),
                value,
            };
            agent
                .publish_metrics(&[sample], SystemTime::now())
                .await
                .unwrap();
            eventually("the new value in the view", WITHIN, || async {
                (load(&view) == Some(value)).then_some(())
            })
            .await;
        }
        stop.cancel();
        task.await.unwrap();
    }
}
