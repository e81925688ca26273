//! Gossip's pure half: what node state looks like on the wire and where it goes. The member
//! that carries it (chitchat, the sealed transport, keys and clocks) is
//! `telemesh_runtime::gossip`.
//!
//! - [`cells`]: which gossip cell a node's agent joins, and what the cell is called.
//! - [`schema`]: the keys a node publishes and how readers parse them.
//! - [`groups`]: metric groups (`M:` keys, schema version 2): codec and encoding choice;
//!   [`published`]: what an agent published and the writes a change of encoding takes.
//! - [`state`]: a node's keys read into typed state; [`liveness`]: whether a member is up.

pub mod cells;
pub mod groups;
pub mod liveness;
pub mod published;
pub mod schema;
pub mod state;

pub use cells::{Cell, CellCheck, Cells, CellsError, ObserverCheck};
pub use liveness::Liveness;
pub use schema::{MetricValue, Role, SCHEMA_VERSION, StateKey};
pub use state::NodeState;
