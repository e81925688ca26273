//! Whether a gossip member is up, as its failure detector says: what the member reports and
//! what a reader of the view decides on.

/// Whether a member is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Liveness {
    /// The failure detector hears its heartbeats.
    Live,
    /// It announced it is leaving and is still heard.
    Left,
    /// The failure detector no longer hears it (or has not heard it twice yet).
    Dead,
}
