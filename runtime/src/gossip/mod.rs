//! Gossip's member: how node state travels between agents and coordinator replicas. What the
//! state looks like (keys, groups, cells) is `telemesh_core::gossip`.
//!
//! - [`keyring`] and [`seal`]: the AEAD keys from a mounted Secret and the datagram framing.
//! - [`replay`] and [`clock`]: stale and repeated datagrams refused; clock skew estimated from
//!   the frames' send times and corrected.
//! - [`relay`]: the transport adapter that seals chitchat's datagrams at a socket we own.
//! - [`member`]: one chitchat member (agent or observer) with publish, read, watch and leave.
//! - `membership`: the failure detector's live set diffed into membership events.

pub mod clock;
pub mod keyring;
pub mod member;
mod membership;
pub mod relay;
pub mod replay;
pub mod seal;

// The pure half, named as the member's siblings so its files read as they did beside them.
pub(crate) use telemesh_core::gossip::{cells, groups, published, schema, state};

pub use clock::{ClusterClock, LocalClock};
pub use keyring::{Keyring, KeyringError};
pub use member::{
    GossipConfig, GossipError, GossipMember, HeldKeys, KeyChange, KeySubscription, Member, Security,
};
pub use membership::{MemberId, MembershipEvent};
pub use relay::{DropReason, RelayConfig, TransportCounters, TransportStats};
pub use replay::ReplayConfig;
pub use seal::V1Frames;

/// Aborts a task when dropped, so no task outlives its owner.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
