//! The placements actions ask for, as every replica's extender sees them: a watch of
//! WorkloadActions keeps the active [`Placement`]s in memory, so the filter verb answers with no
//! API call. Empty (the usual case) costs the filter one atomic load. The same watch fills the
//! action queue the live page shows ([`ActionBoard`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arc_swap::ArcSwap;
use futures::StreamExt as _;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use telemesh_core::action::placement::{self, PodFacts};
use telemesh_core::action::{Placement, WorkloadAction};
use tokio_util::sync::CancellationToken;

use super::board::{ActionBoard, key};

/// Active placements by action (`namespace/name`).
#[derive(Clone, Default)]
pub struct Placements {
    active: Arc<ArcSwap<BTreeMap<String, Placement>>>,
    changed: Arc<tokio::sync::Notify>,
    board: ActionBoard,
}

impl std::fmt::Debug for Placements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placements")
            .field("active", &self.active.load().len())
            .finish()
    }
}

/// The placement that steers a pod, and the action that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steer {
    /// The action, `namespace/name`.
    pub action: String,
    /// The only node the pod may go to.
    pub node: String,
}

impl Placements {
    /// The placement that applies to `pod`, if any. When several do (two actions' new pods of
    /// one workload pending at once cannot happen, since actions on one workload run one at a
    /// time), the oldest action's wins.
    pub fn steer(&self, pod: &PodFacts<'_>) -> Option<Steer> {
        let active = self.active.load();
        if active.is_empty() {
            return None;
        }
        active
            .iter()
            .find(|(_, p)| placement::applies(p, pod))
            .map(|(action, p)| Steer {
                action: action.clone(),
                node: p.node.clone(),
            })
    }

    /// Whether the placement of `action` (`namespace/name`) is visible here.
    pub fn contains(&self, action: &str) -> bool {
        self.active.load().contains_key(action)
    }

    /// Resolves once the placement of `action` (`namespace/name`) is visible here.
    pub async fn wait_for(&self, action: &str) {
        loop {
            let changed = self.changed.notified();
            if self.contains(action) {
                return;
            }
            changed.await;
        }
    }

    /// The action queue this watch fills.
    pub fn board(&self) -> &ActionBoard {
        &self.board
    }

    /// How many placements are active.
    pub fn len(&self) -> usize {
        self.active.load().len()
    }

    /// Whether no placement is active.
    pub fn is_empty(&self) -> bool {
        self.active.load().is_empty()
    }

    fn set(&self, key: String, placement: Option<Placement>) {
        let current = self.active.load();
        if current.get(&key) == placement.as_ref() {
            return;
        }
        let mut next = BTreeMap::clone(&current);
        match placement {
            Some(p) => next.insert(key, p),
            None => next.remove(&key),
        };
        self.active.store(Arc::new(next));
        self.changed.notify_waiters();
    }

    /// Follows every WorkloadAction until `stop`; the watcher re-lists on errors by itself,
    /// backing off while they last.
    pub async fn watch(self, client: Client, stop: CancellationToken) {
        let api = Api::<WorkloadAction>::all(client);
        let mut events = telemesh_runtime::watch_backoff::backoff(watcher::watcher(
            api,
            watcher::Config::default(),
        ))
        .boxed();
        let mut relisted: Option<(BTreeMap<String, Placement>, BTreeSet<String>)> = None;
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                e = events.next() => e,
            };
            match event {
                None => return,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching WorkloadActions failed; retrying with backoff");
                }
                Some(Ok(Event::Init)) => relisted = Some((BTreeMap::new(), BTreeSet::new())),
                Some(Ok(Event::InitApply(a))) => {
                    self.board.apply(&a);
                    if let Some((list, seen)) = &mut relisted {
                        seen.insert(key(&a));
                        if let Some(p) = active_placement(&a) {
                            list.insert(key(&a), p);
                        }
                    }
                }
                Some(Ok(Event::InitDone)) => {
                    if let Some((list, seen)) = relisted.take() {
                        self.active.store(Arc::new(list));
                        self.changed.notify_waiters();
                        self.board.retain(&seen);
                    }
                }
                Some(Ok(Event::Apply(a))) => {
                    self.board.apply(&a);
                    self.set(key(&a), active_placement(&a));
                }
                Some(Ok(Event::Delete(a))) => {
                    self.board.delete(&key(&a));
                    self.set(key(&a), None);
                }
            }
        }
    }
}

/// A placement counts while its action has not ended.
fn active_placement(a: &WorkloadAction) -> Option<Placement> {
    let status = a.status.as_ref()?;
    if status.phase.is_terminal() {
        return None;
    }
    status.placement.clone()
}
