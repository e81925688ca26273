//! What each series is and the budget issues 19 and 30 set for it: the titles on the plots and the
//! target column of the README's table. A series the catalogue does not know is still drawn and
//! tabled, under its own name and without a target.

/// A cost ceiling, set for one cluster size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// The figure must stay at or below this.
    pub at_most: f64,
    /// The member or node count the target is set for.
    pub at_size: u64,
}

impl Target {
    /// Whether a value measured at `size` meets the target; `None` where the target speaks of
    /// another size.
    pub fn met(&self, size: u64, value: f64) -> Option<bool> {
        (size == self.at_size).then_some(value <= self.at_most)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Known {
    pub series: &'static str,
    pub title: &'static str,
    /// "members" or "nodes": what the x axis counts.
    pub counts: &'static str,
    pub target: Option<Target>,
}

const fn known(
    series: &'static str,
    title: &'static str,
    counts: &'static str,
    target: Option<(f64, u64)>,
) -> Known {
    Known {
        series,
        title,
        counts,
        target: match target {
            Some((at_most, at_size)) => Some(Target { at_most, at_size }),
            None => None,
        },
    }
}

const MEMBERS: &str = "members";
const NODES: &str = "nodes";

/// The series the benches print, in the order the README lists them.
pub const KNOWN: &[Known] = &[
    // agent/benches/footprint.rs: the real agent binary, 100 pods, 1 s collection; at each
    // cluster size it gossips in its cell (CLUSTER, one cell per 100 nodes) with the replicas.
    known("agent_rss_mib", "Agent RSS", NODES, Some((12.0, 5000))),
    known("agent_anon_mib", "Agent RSS, anonymous", NODES, None),
    known("agent_file_mib", "Agent RSS, file-backed", NODES, None),
    known(
        "agent_cpu_percent",
        "Agent CPU (% of a core)",
        NODES,
        Some((0.5, 5000)),
    ),
    known("agent_gossip_out_kbps", "Agent gossip out", NODES, None),
    known("agent_gossip_in_kbps", "Agent gossip in", NODES, None),
    // The fewest members alive in the agent's view over the window: its cell and the replicas.
    known(
        "agent_members_alive",
        "Members alive in the agent's view (fewest)",
        NODES,
        None,
    ),
    // runtime/benches/gossip.rs `cell<N>`: the largest cell of an N-node cluster (GKE-style names)
    // with three replicas, sealed UDP on the wall clock (issue 30's targets).
    known(
        "gossip_idle_kbps",
        "Gossip per node, idle",
        NODES,
        Some((10.0, 5000)),
    ),
    known(
        "gossip_loaded_kbps",
        "Gossip per node, 10 updates/s",
        NODES,
        Some((40.0, 5000)),
    ),
    known(
        "gossip_conv99_p50_s",
        "Gossip 99 % convergence, p50",
        NODES,
        None,
    ),
    known(
        "gossip_conv99_max_s",
        "Gossip 99 % convergence, max",
        NODES,
        Some((1.5, 5000)),
    ),
    known(
        "gossip_member_anon_kb",
        "Heap per gossip member",
        NODES,
        None,
    ),
    // A replica is in every cell: its bytes in one cell times the cell count.
    known(
        "gossip_replica_kbps",
        "Gossip per coordinator replica, all cells, 10 updates/s",
        NODES,
        None,
    ),
    known(
        "gossip_replica_cpu_percent",
        "CPU per coordinator replica, all cells, 10 updates/s (% of a core)",
        NODES,
        None,
    ),
    known(
        "gossip_replica_arrival_p99_s",
        "A change reaches every replica, gossip p99",
        NODES,
        Some((1.5, 5000)),
    ),
    // The scan for members' updates a coordinator's view runs on every tick to see deletions
    // (issue 37).
    known(
        "gossip_update_scan_us",
        "Scan for members' updates, none found",
        NODES,
        None,
    ),
    // coordinator/benches/extender.rs: nodeCacheCapable, rewards and a blended policy.
    known(
        "extender_filter_p99_us",
        "Extender filter p99",
        NODES,
        Some((500.0, 5000)),
    ),
    known(
        "extender_prioritize_p99_us",
        "Extender prioritize p99",
        NODES,
        Some((500.0, 5000)),
    ),
    known(
        "extender_filter_names_p99_us",
        "Extender filter p99, no rewards",
        NODES,
        None,
    ),
    known(
        "extender_fullnode_ratio_filter",
        "Full-node filter / IgnoredAny parse",
        NODES,
        Some((1.3, 5000)),
    ),
    known(
        "extender_fullnode_ratio_prioritize",
        "Full-node prioritize / IgnoredAny parse",
        NODES,
        Some((1.3, 5000)),
    ),
    // coordinator/benches/freshness.rs: a telemetry change until every replica's decisions.
    known("freshness_p50_s", "Freshness p50", MEMBERS, None),
    known(
        "freshness_p99_s",
        "Freshness p99",
        MEMBERS,
        Some((1.5, 1000)),
    ),
    known(
        "freshness_collect_p99_s",
        "Freshness: collection wait p99",
        MEMBERS,
        None,
    ),
    known(
        "freshness_gossip_p99_s",
        "Freshness: gossip p99",
        MEMBERS,
        None,
    ),
    known(
        "freshness_fold_p99_s",
        "Freshness: view fold p99",
        MEMBERS,
        None,
    ),
    // The same bench: a metric a node stops publishing, until every replica's filter treats it
    // as unknown (issue 37).
    known(
        "freshness_removal_p50_s",
        "Metric removal reaches every replica, p50",
        MEMBERS,
        None,
    ),
    known(
        "freshness_removal_p99_s",
        "Metric removal reaches every replica, p99",
        MEMBERS,
        Some((1.5, 1000)),
    ),
];

/// The catalogue entry of a series.
pub fn lookup(series: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.series == series)
}

/// Where a series sorts: catalogue order, unknown series after every known one.
pub fn rank(series: &str) -> usize {
    KNOWN
        .iter()
        .position(|k| k.series == series)
        .unwrap_or(KNOWN.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_speaks_only_of_its_size() {
        let t = Target {
            at_most: 16.0,
            at_size: 1000,
        };
        assert_eq!(t.met(1000, 15.9), Some(true));
        assert_eq!(t.met(1000, 16.0), Some(true));
        assert_eq!(t.met(1000, 16.1), Some(false));
        assert_eq!(t.met(100, 30.0), None);
    }

    #[test]
    fn series_names_are_unique() {
        for (i, k) in KNOWN.iter().enumerate() {
            assert_eq!(rank(k.series), i, "{} listed twice", k.series);
        }
    }
}
