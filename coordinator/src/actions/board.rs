//! The action queue as the live page shows it: every WorkloadAction not yet ended, and the last
//! [`FINISHED`] that ended, each with its steps. Filled by the placements watch
//! ([`super::placements::Placements::watch`]), the one WorkloadAction watch every replica runs,
//! so the page costs no second watch.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::ResourceExt as _;
use parking_lot::Mutex;
use serde::Serialize;
use telemesh_core::action::{Step, WorkloadAction};

/// How many ended actions are kept.
pub const FINISHED: usize = 20;

/// One action as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionSummary {
    /// `namespace/name`.
    pub action: String,
    /// The JSON-RPC method (`Move`, `Swap`, ...).
    pub method: String,
    /// What it acts on.
    pub target: String,
    /// The node it names, if any.
    pub node: Option<String>,
    /// Phase.
    pub phase: &'static str,
    /// What happened, for a person.
    pub message: String,
    /// When it was accepted.
    pub received_at: String,
    /// Its steps, in order.
    pub steps: Vec<Step>,
}

impl ActionSummary {
    /// The summary of `a`.
    pub fn of(a: &WorkloadAction) -> Self {
        let status = a.status.clone().unwrap_or_default();
        Self {
            action: key(a),
            method: a.spec.method.clone(),
            target: a.spec.target.clone(),
            node: a.spec.node.clone(),
            phase: status.phase.as_str(),
            message: status.message,
            received_at: a.spec.received_at.clone(),
            steps: status.steps,
        }
    }
}

/// `namespace/name` of an action.
pub fn key(a: &WorkloadAction) -> String {
    format!("{}/{}", a.namespace().unwrap_or_default(), a.name_any())
}

/// The queue, shared: cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ActionBoard {
    inner: Arc<Mutex<Inner>>,
    version: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct Inner {
    active: BTreeMap<String, ActionSummary>,
    finished: VecDeque<ActionSummary>,
}

/// What the page lists.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Queue {
    /// Actions not yet ended, oldest first.
    pub active: Vec<ActionSummary>,
    /// The last ended actions, newest first.
    pub finished: Vec<ActionSummary>,
}

// === impl ActionBoard ===

impl ActionBoard {
    /// Takes in an added or changed action.
    pub fn apply(&self, a: &WorkloadAction) {
        let summary = ActionSummary::of(a);
        let ended = a.status.as_ref().is_some_and(|s| s.phase.is_terminal());
        let mut inner = self.inner.lock();
        let known = inner
            .active
            .get(&summary.action)
            .or_else(|| inner.finished.iter().find(|s| s.action == summary.action));
        if known == Some(&summary) {
            return;
        }
        inner.finished.retain(|s| s.action != summary.action);
        if ended {
            inner.active.remove(&summary.action);
            if inner.finished.len() == FINISHED {
                inner.finished.pop_back();
            }
            inner.finished.push_front(summary);
        } else {
            inner.active.insert(summary.action.clone(), summary);
        }
        self.version.fetch_add(1, Ordering::Release);
    }

    /// Forgets a deleted action.
    pub fn delete(&self, action: &str) {
        let mut inner = self.inner.lock();
        inner.active.remove(action);
        inner.finished.retain(|s| s.action != action);
        self.version.fetch_add(1, Ordering::Release);
    }

    /// After a re-list: forgets the actions not in it.
    pub fn retain(&self, listed: &BTreeSet<String>) {
        let mut inner = self.inner.lock();
        inner.active.retain(|k, _| listed.contains(k));
        inner.finished.retain(|s| listed.contains(&s.action));
        self.version.fetch_add(1, Ordering::Release);
    }

    /// The queue now.
    pub fn queue(&self) -> Queue {
        let inner = self.inner.lock();
        let mut active: Vec<ActionSummary> = inner.active.values().cloned().collect();
        active.sort_by(|a, b| a.received_at.cmp(&b.received_at));
        Queue {
            active,
            finished: inner.finished.iter().cloned().collect(),
        }
    }

    /// Changes whenever [`ActionBoard::queue`] does.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use telemesh_core::action::{ActionPhase, WorkloadActionSpec, WorkloadActionStatus};

    use super::*;

    fn action(name: &str, phase: ActionPhase, at: &str) -> WorkloadAction {
        let mut a = WorkloadAction::new(
            name,
            WorkloadActionSpec {
                method: "Move".into(),
                target: "default/web".into(),
                received_at: at.into(),
                ..Default::default()
            },
        );
        a.metadata.namespace = Some("default".into());
        a.status = Some(WorkloadActionStatus {
            phase,
            ..Default::default()
        });
        a
    }

    #[test]
    fn active_actions_are_listed_oldest_first_and_ended_ones_move_to_finished() {
        let board = ActionBoard::default();
        board.apply(&action("b", ActionPhase::Running, "2026-11-25T01:00:02Z"));
        board.apply(&action("a", ActionPhase::Pending, "2026-11-25T01:00:01Z"));
        let v = board.version();
        board.apply(&action("a", ActionPhase::Pending, "2026-11-25T01:00:01Z"));
        assert_eq!(board.version(), v, "an unchanged action changes nothing");
        let q = board.queue();
        let names: Vec<&str> = q.active.iter().map(|s| s.action.as_str()).collect();
        assert_eq!(names, ["default/a", "default/b"]);
        board.apply(&action("b", ActionPhase::Succeeded, "2026-11-25T01:00:02Z"));
        let q = board.queue();
        assert_eq!(q.active.len(), 1);
        assert_eq!(q.finished[0].action, "default/b");
        assert_eq!(q.finished[0].phase, "Succeeded");
        board.retain(&BTreeSet::from(["default/b".to_owned()]));
        assert!(board.queue().active.is_empty());
        board.delete("default/b");
        assert_eq!(board.queue(), Queue::default());
    }

    #[test]
    fn only_the_last_finished_actions_are_kept() {
        let board = ActionBoard::default();
        for i in 0..FINISHED + 3 {
            board.apply(&action(&format!("a{i}"), ActionPhase::Failed, "t"));
        }
        let q = board.queue();
        assert_eq!(q.finished.len(), FINISHED);
        assert_eq!(q.finished[0].action, format!("default/a{}", FINISHED + 2));
    }
}
