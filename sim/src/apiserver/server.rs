//! The API server's shared state and its settings: what every verb, watch and encoding reads.
//! Its construction (with the built-in objects) and its router are the parent module's.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use super::{crds, encodings, objects, requests};
use crate::storage::registry::Registry;
use crate::storage::store::Store;

/// (group, version).
pub(in crate::apiserver) type GroupVersion = (String, String);

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Events kept per resource for watch resumption; older resourceVersions get 410 Gone.
    pub history_capacity: usize,
    /// Events buffered per watcher; a watcher further behind is closed (its client re-watches).
    pub watch_buffer: usize,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            history_capacity: 10_000,
            watch_buffer: 8_192,
            bookmark_interval: Duration::from_secs(10),
            max_body_bytes: 8 << 20,
        }
    }
}

/// The shared server state.
#[derive(Debug)]
pub struct Server {
    /// All objects.
    pub store: Store,
    /// Served resources; CRDs change it at run time.
    pub registry: RwLock<Registry>,
    /// Tokens and permissions.
    pub auth: requests::auth::Auth,
    /// Authorization decisions, recorded once enabled (tests check RBAC against it).
    pub audit: requests::auth::AuditLog,
    /// The ValidatingAdmissionPolicies, compiled.
    pub vap: crds::vap::Policies,
    /// Settings.
    pub config: ServerConfig,
    /// The address clients reach us at (for discovery's serverAddressByClientCIDRs).
    pub address: OnceLock<String>,
    pub(in crate::apiserver) gc: objects::gc::GcQueue,
    pub(in crate::apiserver) openapi_cache: Mutex<HashMap<GroupVersion, (u64, Arc<Bytes>)>>,
    pub(in crate::apiserver) openapi_v2_cache:
        Mutex<Option<(u64, Arc<encodings::openapi_v2::Served>)>>,
    pub(in crate::apiserver) registry_generation: std::sync::atomic::AtomicU64,
}

impl Server {
    /// Notes that the set of served resources changed (OpenAPI documents must be rebuilt).
    pub fn registry_changed(&self) {
        self.registry_generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(in crate::apiserver) fn registry_generation(&self) -> u64 {
        self.registry_generation
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}
