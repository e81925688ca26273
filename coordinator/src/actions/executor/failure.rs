//! Why a step or an action could not go on: the one error every part of the executor
//! returns, and whether it ends the action.

/// Why a step or an action could not go on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Failure {
    /// An API call failed; the action is retried (its done steps are skipped).
    #[error("{0}")]
    Api(String),
    /// Another writer changed the action: this executor is no longer its owner.
    #[error("{0}")]
    LostOwnership(String),
    /// Something the action names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The action cannot apply to what it names.
    #[error("{0}")]
    Unsupported(String),
    /// Someone else changed what the action was changing.
    #[error("{0}")]
    Conflict(String),
    /// The cluster refused (the node cannot take the pod, ...).
    #[error("{0}")]
    Refused(String),
    /// A wait ran out.
    #[error("{0}")]
    Timeout(String),
    /// The action was undone.
    #[error("{0}")]
    RolledBack(String),
}

impl Failure {
    /// Whether the action ends with this failure (else it is retried later).
    pub fn is_final(&self) -> bool {
        !matches!(self, Self::Api(_) | Self::LostOwnership(_))
    }
}
