//! Gossip: how node state travels between agents and coordinator replicas.
//!
//! - [`cells`]: which gossip cell a node's agent joins, and what the cell is called (pure).
//! - [`schema`]: the keys a node publishes and how readers parse them (pure, no I/O).
//! - [`groups`]: metric groups (`M:` keys, schema version 2): codec and encoding choice;
//!   [`published`]: what an agent published and the writes a change of encoding takes.
//! - [`keyring`] and [`seal`]: the AEAD keys from a mounted Secret and the datagram framing.
//! - [`replay`] and [`clock`]: stale and repeated datagrams refused; clock skew estimated from
//!   the frames' send times and corrected.
//! - [`relay`]: the transport adapter that seals chitchat's datagrams at a socket we own.
//! - [`member`]: one chitchat member (agent or observer) with publish, read, watch and leave.
//! - `membership`: the failure detector's live set diffed into membership events.

pub mod cells;
pub mod clock;
pub mod groups;
pub mod keyring;
pub mod member;
mod membership;
pub mod published;
pub mod relay;
pub mod replay;
pub mod schema;
pub mod seal;
pub mod state;

pub use cells::{Cell, CellCheck, Cells, CellsError, ObserverCheck};
pub use clock::{ClusterClock, LocalClock};
pub use keyring::{Keyring, KeyringError};
pub use member::{
    GossipConfig, GossipError, GossipMember, HeldKeys, KeyChange, KeySubscription, Liveness,
    Member, Security,
};
pub use membership::{MemberId, MembershipEvent};
pub use relay::{DropReason, RelayConfig, TransportCounters, TransportStats};
pub use replay::ReplayConfig;
pub use schema::{MetricValue, Role, SCHEMA_VERSION, StateKey};
pub use seal::V1Frames;
pub use state::NodeState;

/// Aborts a task when dropped, so no task outlives its owner.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
