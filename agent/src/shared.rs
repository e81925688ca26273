//! What the agent's loops share: the gossip member handle, the eviction client and the evictor.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use telemesh_core::gossip::GossipMember;

/// The gossip member, shared by the loops that publish; `None` once shutdown took it.
pub type SharedGossip = Arc<tokio::sync::Mutex<Option<GossipMember>>>;

/// The node's evictor, shared by the policy loop and the scavenger loop so that
/// `--max-evictions-per-minute` bounds the node's evictions, whoever asks.
pub type SharedEvictor = Arc<tokio::sync::Mutex<crate::evictor::Evictor>>;

/// The node's evictor when local eviction is on: a client that does not retry 429s, Events
/// recorded as the node's `telemesh-agent`, pods of other nodes refused into `refusals`.
pub async fn evictor(
    kubeconfig: Option<&Path>,
    node_name: &str,
    config: Option<&crate::config::EvictionConfig>,
    refusals: crate::scope::Refusals,
) -> anyhow::Result<Option<SharedEvictor>> {
    let Some(config) = config else {
        return Ok(None);
    };
    let client = eviction_client(kubeconfig).await?;
    let reporter = kube::runtime::events::Reporter {
        controller: "telemesh-agent".into(),
        instance: Some(node_name.to_owned()),
    };
    let recorder = kube::runtime::events::Recorder::new(client.clone(), reporter);
    Ok(Some(Arc::new(tokio::sync::Mutex::new(
        crate::evictor::Evictor::new(node_name, refusals, client, recorder, config.clone()),
    ))))
}

/// A client that does not retry 429s: for evictions, a disruption budget's refusal is the
/// answer, tried again on a later pass, not fifteen times within the call.
pub async fn eviction_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let mut config = telemesh_core::client::kube_config(kubeconfig).await?;
    config.default_retry = false;
    kube::Client::try_from(config).context("building the Kubernetes client")
}
