//! What the agent's loops share: the gossip member handle and the eviction client.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use telemesh_core::gossip::GossipMember;

/// The gossip member, shared by the loops that publish; `None` once shutdown took it.
pub type SharedGossip = Arc<tokio::sync::Mutex<Option<GossipMember>>>;

/// A client that does not retry 429s: for evictions, a disruption budget's refusal is the
/// answer, tried again on a later pass, not fifteen times within the call.
pub async fn eviction_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let mut config = telemesh_core::client::kube_config(kubeconfig).await?;
    config.default_retry = false;
    kube::Client::try_from(config).context("building the Kubernetes client")
}
