//! Membership events: the failure detector's live set, diffed into join, update and departure
//! events against the set the events have reported so far.
//!
//! The diff runs once per gossip round and also whenever a reader looks at members' liveness
//! ([`GossipMember::members`](super::GossipMember::members) and `member`), under the same lock
//! as that read. So every member a reader saw live has been reported as joined, and its
//! departure is reported later however soon it comes. Diffing only on the round's tick left a
//! window: a member that turned live after the last tick and left (or died) before the next one
//! was shown live by `members()` yet never produced a departure event, and a view built from
//! that read plus the events kept it live.

use std::collections::HashMap;

use chitchat::{Chitchat, ChitchatId};
use tokio::sync::broadcast;

use super::member::MembershipEvent;
use super::schema::StateKey;

/// The live, non-leaving members as last reported, with their max versions.
pub(crate) struct Membership {
    reported: HashMap<ChitchatId, u64>,
    scratch: HashMap<ChitchatId, u64>,
    leaving_key: String,
    events: broadcast::Sender<MembershipEvent>,
}

// === impl Membership ===

impl Membership {
    /// Nothing reported yet; events go to `events`.
    pub(crate) fn new(events: broadcast::Sender<MembershipEvent>) -> Self {
        Self {
            reported: HashMap::new(),
            scratch: HashMap::new(),
            leaving_key: StateKey::Leaving.to_string(),
            events,
        }
    }

    /// Reports every change since the last sync. Members that announced leaving count as
    /// departed at once.
    pub(crate) fn sync(&mut self, chitchat: &Chitchat) {
        let mut current = std::mem::take(&mut self.scratch);
        current.clear();
        current.extend(
            chitchat
                .live_nodes()
                .filter_map(|id| Some((id.clone(), self.staying_version(chitchat, id)?))),
        );
        for (id, version) in &current {
            match self.reported.get(id) {
                None => self.send(MembershipEvent::Joined(id.into())),
                Some(v) if v != version => self.send(MembershipEvent::Updated(id.into())),
                Some(_) => {}
            }
        }
        for id in self.reported.keys().filter(|id| !current.contains_key(*id)) {
            self.send(self.departure(chitchat, id));
        }
        self.scratch = std::mem::replace(&mut self.reported, current);
    }

    /// Reports the change of one member only: what a reader of that one member needs.
    pub(crate) fn sync_one(&mut self, chitchat: &Chitchat, id: &ChitchatId) {
        let live = chitchat.live_nodes().any(|l| l == id);
        let now = live.then(|| self.staying_version(chitchat, id)).flatten();
        match (self.reported.get(id).copied(), now) {
            (None, Some(version)) => {
                self.reported.insert(id.clone(), version);
                self.send(MembershipEvent::Joined(id.into()));
            }
            (Some(before), Some(version)) if before != version => {
                self.reported.insert(id.clone(), version);
                self.send(MembershipEvent::Updated(id.into()));
            }
            (Some(_), None) => {
                self.reported.remove(id);
                self.send(self.departure(chitchat, id));
            }
            _ => {}
        }
    }

    /// The member's max version if it is known and has not announced leaving.
    fn staying_version(&self, chitchat: &Chitchat, id: &ChitchatId) -> Option<u64> {
        let state = chitchat.node_state(id)?;
        state
            .get(&self.leaving_key)
            .is_none()
            .then(|| state.max_version())
    }

    fn departure(&self, chitchat: &Chitchat, id: &ChitchatId) -> MembershipEvent {
        let left = chitchat
            .node_state(id)
            .is_some_and(|s| s.get(&self.leaving_key).is_some());
        MembershipEvent::Departed {
            id: id.into(),
            left,
        }
    }

    fn send(&self, event: MembershipEvent) {
        // No receiver is fine: events are for whoever listens.
        let _ = self.events.send(event);
    }
}
