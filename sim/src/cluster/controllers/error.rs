//! Why a controller's reconcile failed, and what it says about it.

/// Why a reconcile failed. The controller logs it and retries the object with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error("{action} failed: {source}; the controller retries with backoff")]
    Api {
        /// What the controller was doing, naming the object (`creating a pod for ReplicaSet ns/x`).
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The object's selector does not parse.
    #[error("{object} has an invalid spec.selector: {source}; fix the selector")]
    Selector {
        /// The object (`ReplicaSet ns/x`).
        object: String,
        /// Why it is not a query.
        #[source]
        source: telemesh_core::selector::SelectorError,
    },
}

/// The result of a reconcile step.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Returns a bounded label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Api { .. } => "api",
            Self::Selector { .. } => "selector",
        }
    }

    /// Wraps a client error with what the controller was doing.
    pub(super) fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Api { action, source }
    }
}
