//! The watch behind a reflector store: every object arrives without its managed fields.
//!
//! The API server records a managed-fields entry per writer on every object (kubelet, the
//! scheduler, controllers: 41 % of a pod's JSON in the dev cluster, docs/scale.md "Stop 29"),
//! and nothing of ours reads them. A reflector stores what reaches it, so they are dropped on
//! the way in: a `modify` after the `reflector(...)` would change only the events flowing on,
//! not what the store keeps.

use futures::Stream;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt as _, watcher as watch};

/// `watcher(api, config)` with each object's managed fields dropped: feed it to a reflector.
pub fn watcher_for_store<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watch(api, config).modify(|object| object.meta_mut().managed_fields = None)
}
