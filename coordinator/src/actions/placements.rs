//! The placements actions ask for, as every replica's extender sees them: a watch of
//! WorkloadActions keeps the active [`Placement`]s in memory, so the filter verb answers with no
//! API call. Empty (the usual case) costs the filter one atomic load.

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use futures::StreamExt as _;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt as _};
use telemesh_core::action::placement::{self, PodFacts};
use telemesh_core::action::{Placement, WorkloadAction};
use tokio_util::sync::CancellationToken;

/// Active placements by action (`namespace/name`).
#[derive(Clone, Default)]
pub struct Placements {
    active: Arc<ArcSwap<BTreeMap<String, Placement>>>,
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
    }

    /// Follows every WorkloadAction until `stop`; the watcher re-lists on errors by itself.
    pub async fn watch(self, client: Client, stop: CancellationToken) {
        let api = Api::<WorkloadAction>::all(client);
        let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
        let mut relisted: Option<BTreeMap<String, Placement>> = None;
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                e = events.next() => e,
            };
            match event {
                None => return,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching WorkloadActions failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
                Some(Ok(Event::Init)) => relisted = Some(BTreeMap::new()),
                Some(Ok(Event::InitApply(a))) => {
                    if let (Some(list), Some(p)) = (&mut relisted, active_placement(&a)) {
                        list.insert(key(&a), p);
                    }
                }
                Some(Ok(Event::InitDone)) => {
                    if let Some(list) = relisted.take() {
                        self.active.store(Arc::new(list));
                    }
                }
                Some(Ok(Event::Apply(a))) => self.set(key(&a), active_placement(&a)),
                Some(Ok(Event::Delete(a))) => self.set(key(&a), None),
            }
        }
    }
}

fn key(a: &WorkloadAction) -> String {
    format!("{}/{}", a.namespace().unwrap_or_default(), a.name_any())
}

/// A placement counts while its action has not ended.
fn active_placement(a: &WorkloadAction) -> Option<Placement> {
    let status = a.status.as_ref()?;
    if status.phase.is_terminal() {
        return None;
    }
    status.placement.clone()
}
