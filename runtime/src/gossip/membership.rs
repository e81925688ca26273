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
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use chitchat::{Chitchat, ChitchatId};
use tokio::sync::broadcast;

use super::schema::StateKey;

/// Who a member is: node name, generation (one per start) and gossip address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemberId {
    /// Kubernetes node name (agents) or replica name (observers).
    pub node_name: Arc<str>,
    /// Start generation.
    pub generation: u64,
    /// Address peers gossip with.
    pub gossip_addr: SocketAddr,
}

impl From<&ChitchatId> for MemberId {
    fn from(id: &ChitchatId) -> Self {
        Self {
            node_name: id.node_id.clone(),
            generation: id.generation_id,
            gossip_addr: id.gossip_advertise_addr,
        }
    }
}

impl fmt::Display for MemberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}#{}@{}",
            self.node_name, self.generation, self.gossip_addr
        )
    }
}

/// A change in the set of live members or in one member's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipEvent {
    /// A member became live.
    Joined(MemberId),
    /// A live member published new keys.
    Updated(MemberId),
    /// A member stopped being live: it left cleanly (`left`) or the failure detector gave up.
    Departed {
        /// Who.
        id: MemberId,
        /// Whether it announced leaving.
        left: bool,
    },
}

/// The live, non-leaving members as last reported, with their max versions.
pub(crate) struct Membership {
    reported: HashMap<ChitchatId, u64>,
    scratch: HashMap<ChitchatId, u64>,
    /// Every known member's max version as of the last [`Membership::sync_updates`], in the
    /// order of chitchat's node states, so that the next walks both in step.
    walked: Vec<(ChitchatId, u64)>,
    /// Members whose version moved during a walk (kept to reuse its allocation).
    moved: Vec<ChitchatId>,
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
            walked: Vec::new(),
            moved: Vec::new(),
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

    /// Reports an update of each reported member whose version moved since it was reported;
    /// joins and departures wait for [`Self::sync`]. It walks chitchat's node states in step
    /// with the previous walk (both in the same order, members compared by their shared
    /// pointers), so a member that did not move costs a step and a comparison, no lookup and no
    /// allocation: cheap enough for a reader's short tick
    /// ([`GossipMember::sync_updates`](super::GossipMember::sync_updates)).
    pub(crate) fn sync_updates(&mut self, chitchat: &Chitchat) {
        let states = chitchat.node_states();
        let mut moved = std::mem::take(&mut self.moved);
        moved.clear();
        let mut in_step = states.len() == self.walked.len();
        if in_step {
            for ((id, state), (seen, version)) in states.iter().zip(&mut self.walked) {
                if id != seen {
                    in_step = false;
                    break;
                }
                if state.max_version() != *version {
                    *version = state.max_version();
                    moved.push(id.clone());
                }
            }
        }
        if !in_step {
            // Members came or went since the last walk: start a new one, and look at everyone.
            self.walked.clear();
            self.walked
                .extend(states.iter().map(|(id, s)| (id.clone(), s.max_version())));
            moved.clear();
            moved.extend(self.reported.keys().cloned());
        }
        for id in &moved {
            let now = self.staying_version(chitchat, id);
            if let (Some(version), Some(reported)) = (now, self.reported.get_mut(id))
                && *reported != version
            {
                *reported = version;
                let _ = self.events.send(MembershipEvent::Updated(id.into()));
            }
        }
        self.moved = moved;
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
