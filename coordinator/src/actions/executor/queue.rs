//! Which stored actions may start now: one at a time per workload, in arrival order, at most a
//! bound in parallel. Pure, so the ordering rule is in one function with its tests.

use std::collections::BTreeSet;

use telemesh_core::action::ObjectRef;

/// An action that has not ended, as the queue sees it.
#[derive(Debug, Clone)]
pub struct Queued {
    /// `namespace/name`.
    pub key: String,
    /// `spec.receivedAt` in nanoseconds since the epoch ([`received_ns`]).
    pub received_ns: i128,
    /// The workloads it changes (`status.workloads`).
    pub workloads: Vec<ObjectRef>,
    /// Whether a task of this executor is running it.
    pub running: bool,
}

/// `spec.receivedAt` as nanoseconds since the epoch; an unreadable stamp sorts last (and
/// such an action still runs: the API server only stores what the RPC front end wrote).
pub fn received_ns(received_at: &str) -> i128 {
    received_at
        .parse::<jiff::Timestamp>()
        .map_or(i128::MAX, |t| t.as_nanosecond())
}

/// The actions to start now, in arrival order. Every earlier action that has not ended holds
/// its workloads, whether it runs yet or not, so a later action on the same workload waits its
/// turn even when an earlier one is held back by the parallelism bound.
pub fn runnable(mut queue: Vec<Queued>, max_running: usize) -> Vec<String> {
    queue.sort_by(|a, b| (a.received_ns, a.key.as_str()).cmp(&(b.received_ns, b.key.as_str())));
    let mut running = queue.iter().filter(|q| q.running).count();
    let mut held: BTreeSet<ObjectRef> = BTreeSet::new();
    let mut start = Vec::new();
    for q in queue {
        let free = q.workloads.iter().all(|w| !held.contains(w));
        if !q.running && free && running < max_running {
            running += 1;
            start.push(q.key);
        }
        held.extend(q.workloads);
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(key: &str, at: &str, workloads: &[&str], running: bool) -> Queued {
        Queued {
            key: key.into(),
            received_ns: at.parse().unwrap_or_else(|_| received_ns(at)),
            workloads: workloads
                .iter()
                .map(|w| ObjectRef::new("Deployment", "ul", w))
                .collect(),
            running,
        }
    }

    #[test]
    fn one_action_per_workload_in_arrival_order() {
        let queue = vec![
            q("ul/c", "2026-01-01T00:00:03Z", &["a"], false),
            q("ul/a", "2026-01-01T00:00:01.5Z", &["a"], false),
            q("ul/b", "2026-01-01T01:00:02.000001+01:00", &["b"], false),
        ];
        assert_eq!(runnable(queue, 8), vec!["ul/a", "ul/b"]);
        assert_eq!(received_ns("not a time"), i128::MAX);
    }

    #[test]
    fn a_running_action_holds_its_workloads_and_counts_against_the_bound() {
        let queue = vec![
            q("ul/a", "1", &["a"], true),
            q("ul/b", "2", &["a", "b"], false),
            q("ul/c", "3", &["c"], false),
            q("ul/d", "4", &["d"], false),
        ];
        assert_eq!(runnable(queue, 2), vec!["ul/c"]);
    }

    #[test]
    fn a_swap_holds_both_workloads_and_a_held_back_action_still_holds_its_turn() {
        let queue = vec![
            q("ul/swap", "1", &["a", "b"], false),
            q("ul/b", "2", &["b"], false),
            q("ul/c", "3", &["c"], false),
            q("ul/c2", "4", &["c"], false),
        ];
        // Bound 1: the swap starts; c waits for the bound, and c2 waits behind c.
        assert_eq!(runnable(queue.clone(), 1), vec!["ul/swap"]);
        assert_eq!(runnable(queue, 8), vec!["ul/swap", "ul/c"]);
    }

    #[test]
    fn ties_in_time_break_by_name() {
        let queue = vec![q("ul/y", "1", &["a"], false), q("ul/x", "1", &["a"], false)];
        assert_eq!(runnable(queue, 8), vec!["ul/x"]);
    }
}
