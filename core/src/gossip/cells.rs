//! Gossip cells: the agents gossip in bounded groups instead of one cluster-wide mesh.
//!
//! chitchat puts a digest of every member in every exchange, so a flat mesh costs each agent
//! in proportion to the cluster and stops working once a digest outgrows a datagram (about
//! 3,000 members with random-part node names). No agent needs another agent's state: only the
//! coordinator replicas need the whole cluster. So each node's agent joins one cell, a separate
//! chitchat cluster, and every coordinator replica joins every cell and merges them into one
//! view (docs/architecture.md, "Gossip cells").
//!
//! Everything here is pure: which cell a node is in ([`Cells::of`], jump consistent hashing, so
//! a new count moves only the nodes that must move), what the cell's cluster is called, and at
//! which port a coordinator replica serves it. One cell is the flat mesh of old: the cluster id
//! and port unchanged, which is what makes a rolling upgrade from it possible.

use std::fmt;
use std::hash::Hasher as _;
use std::str::FromStr;

/// Most cells a cluster may be split into: a coordinator replica serves each on its own port.
pub const MAX_CELLS: u16 = 1_024;

/// The chart's cell count (its `gossip.cells`; the deploy test holds them equal): 100 nodes a
/// cell on average at 5,000 nodes (Kubernetes' largest supported cluster), the size at which a sealed mesh measured within the agent's gossip
/// targets (docs/scale.md, "Stop 32"), and the largest of the 50 well under 200 (the hash's
/// spread puts the largest at about 1.3 times the mean); 50 ports on a coordinator replica.
pub const DEFAULT_CELLS: u16 = 50;

/// How many cells the agents are split into (1 to [`MAX_CELLS`]); 1 is the flat mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cells(u16);

/// A cell count that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CellsError {
    /// Zero or more than [`MAX_CELLS`].
    #[error(
        "--gossip-cells must be 1 (the flat mesh) to {MAX_CELLS}, not {0}; size it to about 100 nodes a cell"
    )]
    OutOfRange(u32),
    /// Not a number.
    #[error("--gossip-cells wants a number, not {0:?}")]
    NotANumber(String),
    /// A `cell` value that is not `<index>/<count>` with index below count.
    #[error("{0:?} is not a cell: expected <index>/<count> with index below count")]
    BadCell(String),
    /// A seed without a port, or whose cell port would pass 65535.
    #[error(
        "gossip cell seed {seed:?}: expected host:port with port + cells below 65536 (the port is the coordinators' base gossip port)"
    )]
    BadSeed {
        /// The seed as given.
        seed: String,
    },
}

// === impl Cells ===

impl Cells {
    /// The flat mesh: one cell holding every node.
    pub const FLAT: Self = Self(1);

    /// A count of 1 to [`MAX_CELLS`].
    pub fn new(count: u32) -> Result<Self, CellsError> {
        match u16::try_from(count) {
            Ok(n) if (1..=MAX_CELLS).contains(&n) => Ok(Self(n)),
            _ => Err(CellsError::OutOfRange(count)),
        }
    }

    /// The number of cells.
    pub fn count(self) -> u16 {
        self.0
    }

    /// Whether this is the flat mesh (one cell).
    pub fn is_flat(self) -> bool {
        self.0 == 1
    }

    /// The cell a node's agent belongs to: jump consistent hashing (Lamping and Veach, 2014) of
    /// SipHash-1-3 with zero keys over the node name, both fixed algorithms, so every binary
    /// and version puts a node in the same cell. Changing the count from `n` to `m > n` moves
    /// only the `1 - n/m` share of nodes that must move.
    pub fn of(self, node_name: &str) -> Cell {
        let mut hasher = siphasher::sip::SipHasher13::new_with_keys(0, 0);
        hasher.write(node_name.as_bytes());
        Cell {
            index: jump_consistent_hash(hasher.finish(), self.0),
            count: self,
        }
    }

    /// Every cell, in index order.
    pub fn all(self) -> impl Iterator<Item = Cell> {
        (0..self.0).map(move |index| Cell { index, count: self })
    }
}

impl Default for Cells {
    fn default() -> Self {
        Self::FLAT
    }
}

impl fmt::Display for Cells {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for Cells {
    type Err = CellsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let n: u32 = s
            .trim()
            .parse()
            .map_err(|_| CellsError::NotANumber(s.to_owned()))?;
        Self::new(n)
    }
}

/// One cell of a [`Cells`] layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cell {
    index: u16,
    count: Cells,
}

// === impl Cell ===

impl Cell {
    /// Its index, below the count.
    pub fn index(self) -> u16 {
        self.index
    }

    /// The layout it belongs to.
    pub fn cells(self) -> Cells {
        self.count
    }

    /// The chitchat cluster id of this cell: the base id for the flat mesh (so old members and
    /// a one-cell layout are the same cluster), `<base>.cell-<index>` otherwise. It is also the
    /// seal's associated data, so another cell's datagrams do not open.
    pub fn cluster_id(self, base: &str) -> String {
        if self.count.is_flat() {
            base.to_owned()
        } else {
            format!("{base}.cell-{}", self.index)
        }
    }

    /// The port a coordinator replica serves this cell at, from its base gossip port: the base
    /// itself for the flat mesh, `base + 1 + index` for a cell (so the flat mesh keeps its port
    /// while a rolling upgrade runs both). `None` past 65535.
    pub fn coordinator_port(self, base: u16) -> Option<u16> {
        if self.count.is_flat() {
            return Some(base);
        }
        base.checked_add(1)?.checked_add(self.index)
    }

    /// Where an agent of this cell seeds: `seed` names the coordinators' base gossip port
    /// (`host:port`, a headless Service name works), the cell's port replaces it.
    pub fn coordinator_seed(self, seed: &str) -> Result<String, CellsError> {
        let bad = || CellsError::BadSeed {
            seed: seed.to_owned(),
        };
        let (host, port) = seed.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host.is_empty() {
            return Err(bad());
        }
        let port = self.coordinator_port(port).ok_or_else(bad)?;
        Ok(format!("{host}:{port}"))
    }
}

/// `<index>/<count>`, the value a member publishes under the `cell` key.
impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Cell {
    type Err = CellsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || CellsError::BadCell(s.to_owned());
        let (index, count) = s.split_once('/').ok_or_else(bad)?;
        let index: u16 = index.parse().map_err(|_| bad())?;
        let count: Cells = count.parse().map_err(|_| bad())?;
        if index >= count.0 {
            return Err(bad());
        }
        Ok(Self { index, count })
    }
}

/// What a member's published cell says against the reader's own layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellCheck {
    /// Same count, and the member is in the cell its name hashes to.
    Agrees,
    /// The member was started with another cell count: the two must be made equal, or nodes
    /// land in cells nobody serves.
    CountDiffers {
        /// The member's count.
        theirs: Cells,
        /// The reader's.
        ours: Cells,
    },
}

/// Checks the cell a member published against the reader's layout. A member that published
/// none is in the flat mesh (as members before cells were), which a rolling upgrade from it
/// expects, so only published cells are checked.
pub fn check_cell(published: Cell, ours: Cells) -> CellCheck {
    let theirs = published.cells();
    if theirs == ours {
        CellCheck::Agrees
    } else {
        CellCheck::CountDiffers { theirs, ours }
    }
}

/// What an agent makes of the coordinator replicas in its cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObserverCheck {
    /// No replica is live in the cell: nobody reads this node.
    NoneLive,
    /// Every live replica uses the agent's count.
    Agrees,
    /// A live replica uses another count.
    CountDiffers {
        /// The replica's count.
        theirs: Cells,
        /// The agent's.
        ours: Cells,
    },
}

/// Checks the cells the live observers of an agent's mesh published (`None`: the flat mesh)
/// against the agent's count.
pub fn check_observers(ours: Cells, observers: &[Option<Cell>]) -> ObserverCheck {
    if observers.is_empty() {
        return ObserverCheck::NoneLive;
    }
    observers
        .iter()
        .map(|cell| cell.map_or(Cells::FLAT, Cell::cells))
        .find(|theirs| *theirs != ours)
        .map_or(ObserverCheck::Agrees, |theirs| {
            ObserverCheck::CountDiffers { theirs, ours }
        })
}

/// Whether a check is worth a warning now, for an agent with `ours` cells: a count that
/// differs at once, no live replica once that has lasted `patience` (an agent starting before
/// the replicas, or while one restarts, is not an error), each only when it begins. In the flat
/// mesh no replica is a test or a replica-less setup, not a layout error: never warned.
pub fn observer_warning(
    ours: Cells,
    previous: ObserverCheck,
    previous_for: std::time::Duration,
    now: ObserverCheck,
    patience: std::time::Duration,
) -> bool {
    match now {
        ObserverCheck::Agrees => false,
        ObserverCheck::CountDiffers { .. } => previous != now,
        ObserverCheck::NoneLive => {
            !ours.is_flat() && previous == ObserverCheck::NoneLive && previous_for >= patience
        }
    }
}

/// Whether a coordinator replica serving cells keeps the flat mesh it joined for a rolling
/// upgrade from it, given how long no agent has been live there (since it joined, if none
/// ever was): for `grace` after the last one went, so an old agent restarting in place, or a
/// replica that started before the old agents reached it, is not cut off.
pub fn keep_flat_mesh(no_agent_for: std::time::Duration, grace: std::time::Duration) -> bool {
    no_agent_for < grace
}

/// Jump consistent hashing: maps `key` to a bucket below `buckets` so that growing the bucket
/// count moves only the keys the new buckets take (Lamping and Veach, "A Fast, Minimal Memory,
/// Consistent Hash Algorithm", 2014; the paper's reference code).
fn jump_consistent_hash(mut key: u64, buckets: u16) -> u16 {
    let buckets = i64::from(buckets.max(1));
    let (mut b, mut j) = (-1_i64, 0_i64);
    while j < buckets {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1_u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    // b < buckets ≤ u16::MAX.
    b as u16
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("gke-prod-pool-1-{:08x}-{:04x}", i * 7919, i % 977))
            .collect()
    }

    #[test]
    fn the_jump_hash_is_the_papers() {
        // The vectors of github.com/dgryski/go-jump, a port of the paper's code.
        for (key, buckets, bucket) in [
            (1, 1, 0),
            (42, 57, 43),
            (0xDEAD_10CC, 1, 0),
            (0xDEAD_10CC, 666, 361),
            (256, 1024, 520),
        ] {
            assert_eq!(
                jump_consistent_hash(key, buckets),
                bucket,
                "{key} {buckets}"
            );
        }
    }

    #[test]
    fn a_node_is_always_in_the_same_cell() {
        // Fixed values: a change of hash or algorithm would split a rolling upgrade's agents
        // from the coordinators that compute cells the old way.
        let cells = Cells::new(40).unwrap();
        let got: Vec<u16> = [
            "node-1",
            "ip-10-0-3-17.ec2.internal",
            "aks-pool-1-vmss000002",
        ]
        .iter()
        .map(|n| cells.of(n).index())
        .collect();
        assert_eq!(got, [12, 9, 0], "the cells of these names moved");
    }

    #[test]
    fn cells_are_even_and_small_at_5000_nodes() {
        let cells = Cells::new(u32::from(DEFAULT_CELLS)).unwrap();
        let mut sizes = vec![0usize; usize::from(DEFAULT_CELLS)];
        for name in names(5_000) {
            sizes[usize::from(cells.of(&name).index())] += 1;
        }
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        // 100 a cell on average; the default keeps every cell well under 200.
        assert!(*max < 140, "largest cell {max}: {sizes:?}");
        assert!(*min > 65, "smallest cell {min}: {sizes:?}");
    }

    #[test]
    fn growing_the_count_moves_only_the_nodes_that_must_move() {
        let (from, to) = (Cells::new(16).unwrap(), Cells::new(32).unwrap());
        let all = names(5_000);
        let moved: Vec<&String> = all
            .iter()
            .filter(|n| from.of(n).index() != to.of(n).index())
            .collect();
        // Exactly the nodes the new cells take, and each goes to a new cell.
        assert!(moved.iter().all(|n| to.of(n).index() >= 16));
        let share = moved.len() as f64 / all.len() as f64;
        assert!((0.45..0.55).contains(&share), "moved {share}");
    }

    #[test]
    fn one_cell_is_the_flat_mesh() {
        let flat = Cells::FLAT.of("any-node");
        assert_eq!(flat.index(), 0);
        assert_eq!(flat.cluster_id("telemesh"), "telemesh");
        assert_eq!(flat.coordinator_port(7947), Some(7947));
        assert_eq!(
            flat.coordinator_seed("coord.ns.svc:7947").unwrap(),
            "coord.ns.svc:7947"
        );
    }

    #[test]
    fn a_cell_has_its_own_cluster_and_coordinator_port() {
        let cells = Cells::new(4).unwrap();
        let ports: Vec<_> = cells
            .all()
            .map(|c| c.coordinator_port(7947).unwrap())
            .collect();
        assert_eq!(ports, [7948, 7949, 7950, 7951]);
        let third = cells.all().nth(2).unwrap();
        assert_eq!(third.cluster_id("telemesh"), "telemesh.cell-2");
        assert_eq!(
            third.coordinator_seed("coord.ns.svc:7947").unwrap(),
            "coord.ns.svc:7950"
        );
        assert_eq!(third.coordinator_seed("[::1]:7947").unwrap(), "[::1]:7950");
        assert!(third.coordinator_seed("coord.ns.svc").is_err());
        assert!(third.coordinator_seed(":7947").is_err());
        assert_eq!(cells.all().last().unwrap().coordinator_port(65_533), None);
    }

    #[test]
    fn counts_and_cells_parse_and_refuse_what_cannot_work() {
        assert_eq!("32".parse::<Cells>().unwrap().count(), 32);
        assert_eq!("0".parse::<Cells>().unwrap_err(), CellsError::OutOfRange(0));
        assert!("1025".parse::<Cells>().is_err());
        assert!("many".parse::<Cells>().is_err());
        let cell: Cell = "3/32".parse().unwrap();
        assert_eq!((cell.index(), cell.cells().count()), (3, 32));
        assert_eq!(cell.to_string(), "3/32");
        for bad in ["32/32", "3", "3/0", "-1/4", "a/b"] {
            assert!(bad.parse::<Cell>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_flat_mesh_is_kept_for_its_grace_after_its_last_agent() {
        use std::time::Duration;
        let grace = Duration::from_secs(300);
        assert!(keep_flat_mesh(Duration::ZERO, grace));
        assert!(keep_flat_mesh(Duration::from_secs(299), grace));
        assert!(!keep_flat_mesh(grace, grace));
        assert!(
            !keep_flat_mesh(Duration::ZERO, Duration::ZERO),
            "a zero grace keeps nothing"
        );
    }

    #[test]
    fn an_agent_names_a_replica_with_another_count_and_warns_once() {
        use std::time::Duration;
        let ours = Cells::new(40).unwrap();
        let theirs = Cells::new(8).unwrap();
        assert_eq!(check_observers(ours, &[]), ObserverCheck::NoneLive);
        assert_eq!(
            check_observers(ours, &[Some(ours.of("a")), Some(ours.of("a"))]),
            ObserverCheck::Agrees
        );
        let differs = ObserverCheck::CountDiffers { theirs, ours };
        assert_eq!(
            check_observers(ours, &[Some(ours.of("a")), Some(theirs.of("a"))]),
            differs
        );
        assert_eq!(
            check_observers(ours, &[None]),
            ObserverCheck::CountDiffers {
                theirs: Cells::FLAT,
                ours
            }
        );
        let (second, patience) = (Duration::from_secs(1), Duration::from_secs(30));
        assert!(observer_warning(
            ours,
            ObserverCheck::Agrees,
            second,
            differs,
            patience
        ));
        assert!(
            !observer_warning(ours, differs, second, differs, patience),
            "once"
        );
        assert!(!observer_warning(
            ours,
            ObserverCheck::NoneLive,
            second,
            ObserverCheck::NoneLive,
            patience
        ));
        assert!(observer_warning(
            ours,
            ObserverCheck::NoneLive,
            patience,
            ObserverCheck::NoneLive,
            patience
        ));
        assert!(!observer_warning(
            ours,
            differs,
            second,
            ObserverCheck::Agrees,
            patience
        ));
        assert!(!observer_warning(
            Cells::FLAT,
            ObserverCheck::NoneLive,
            patience,
            ObserverCheck::NoneLive,
            patience
        ));
    }

    #[test]
    fn a_member_with_another_count_is_named() {
        let ours = Cells::new(32).unwrap();
        assert_eq!(check_cell(ours.of("n"), ours), CellCheck::Agrees);
        let theirs = Cells::new(16).unwrap();
        assert_eq!(
            check_cell(theirs.of("n"), ours),
            CellCheck::CountDiffers { theirs, ours }
        );
    }
}
