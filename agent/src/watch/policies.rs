//! TASPolicies in every namespace, from one watch, compiled on demand. Every agent evaluates
//! every policy against its own node, as TAS's enforcer does for all nodes centrally.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::reflector::{self, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt as _};
use telemesh_core::policy::{Policy, TASPolicy};
use telemesh_runtime::store_watch::watcher_for_store;
use telemesh_runtime::watch_backoff::backoff;
use tokio_util::sync::CancellationToken;

/// Starts a reflector of all TASPolicies; returns its store. The task ends with `stop`.
pub fn watch_policies(client: Client, stop: CancellationToken) -> Store<TASPolicy> {
    let (reader, writer) = reflector::store::<TASPolicy>();
    let policies = watcher_for_store(Api::<TASPolicy>::all(client), watcher::Config::default());
    let stream = backoff(reflector(writer, policies)).applied_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        // A missing CRD fails every retry: warn when the watch starts failing, not per retry.
        let mut failing = false;
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                item = stream.next() => match item {
                    Some(Ok(_)) => {
                        if std::mem::take(&mut failing) {
                            tracing::info!("TASPolicy watch recovered");
                        }
                    }
                    Some(Err(e)) if failing => tracing::debug!(error = %e, "TASPolicy watch still failing"),
                    Some(Err(e)) => {
                        failing = true;
                        tracing::warn!(error = %e, "TASPolicy watch failed (is the taspolicies.telemetry.intel.com CRD installed? deploy/crds/); retrying with backoff");
                    }
                    None => break,
                },
            }
        }
    });
    reader
}

/// Compiled policies, recompiled only when a policy's uid or generation changes.
#[derive(Debug, Default)]
pub struct Compiled {
    by_key: HashMap<String, (String, Option<i64>, Arc<Policy>)>,
}

impl Compiled {
    /// The compiled form of every policy in `store`, sorted by `namespace/name`.
    pub fn refresh(&mut self, store: &Store<TASPolicy>) -> Vec<(Arc<TASPolicy>, Arc<Policy>)> {
        let mut out = Vec::new();
        let mut seen = HashMap::new();
        for raw in store.state() {
            let key = format!("{}/{}", raw.namespace().unwrap_or_default(), raw.name_any());
            let uid = raw.uid().unwrap_or_default();
            let generation = raw.metadata.generation;
            let compiled = match self.by_key.get(&key) {
                Some((u, g, p)) if *u == uid && *g == generation => p.clone(),
                _ => Arc::new(Policy::compile(&raw)),
            };
            seen.insert(key, (uid, generation, compiled.clone()));
            out.push((raw, compiled));
        }
        self.by_key = seen;
        out.sort_by(|a, b| (&a.1.namespace, &a.1.name).cmp(&(&b.1.namespace, &b.1.name)));
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::PostParams;
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn the_store_keeps_no_managed_fields() {
        let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
        let client = sim.client().await.unwrap();
        let crd: CustomResourceDefinition =
            serde_yaml_ng::from_str(telemesh_core::policy::crd::CRD_YAML).unwrap();
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
        let api: Api<TASPolicy> = Api::default_namespaced(client.clone());
        let policy: TASPolicy = serde_json::from_value(json!({
            "apiVersion": "telemetry.intel.com/v1alpha1", "kind": "TASPolicy",
            "metadata": {"name": "p"},
            "spec": {"strategies": {"dontschedule": {"rules": [
                {"metricname": "node_load1", "operator": "GreaterThan", "target": 8}
            ]}}}
        }))
        .unwrap();
        api.create(&PostParams::default(), &policy).await.unwrap();
        let written = api.get("p").await.unwrap();
        assert!(
            written
                .metadata
                .managed_fields
                .is_some_and(|m| !m.is_empty())
        );

        let stop = CancellationToken::new();
        let store = watch_policies(client, stop.clone());
        let held =
            telemesh_runtime::testing::eventually("the policy", Duration::from_secs(5), || {
                let held = store.state();
                async move { (!held.is_empty()).then_some(held) }
            })
            .await;
        assert_eq!(held[0].name_any(), "p");
        assert!(held[0].metadata.managed_fields.is_none());
        stop.cancel();
    }
}
