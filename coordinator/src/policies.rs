//! The TASPolicy cache: every policy in every namespace, compiled ([`Policy::compile`]) and
//! published like the cluster view, as an immutable set behind an `ArcSwap`, so the extender
//! looks a pod's policy up without a lock.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use futures::StreamExt as _;
use kube::runtime::watcher::{self, Event};
use telemesh_core::policy::{Policy, TASPolicy};
use tokio_util::sync::CancellationToken;

use crate::metrics::PolicyMetrics;

/// Compiled policies by namespace, then name.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    by_namespace: HashMap<String, HashMap<String, Arc<Policy>>>,
    /// Whether the initial list has been read.
    pub synced: bool,
}

// === impl PolicySet ===

impl PolicySet {
    /// A synced set of `policies` (tests and benchmarks).
    pub fn from_policies(policies: impl IntoIterator<Item = Policy>) -> Self {
        let mut set = Self {
            synced: true,
            ..Self::default()
        };
        for p in policies {
            set.insert(p);
        }
        set
    }

    /// The policy `name` in `namespace`.
    #[inline]
    pub fn get(&self, namespace: &str, name: &str) -> Option<&Arc<Policy>> {
        self.by_namespace.get(namespace)?.get(name)
    }

    /// Every policy, by namespace then name.
    pub fn sorted(&self) -> Vec<&Policy> {
        let mut all: Vec<&Policy> = self
            .by_namespace
            .values()
            .flat_map(HashMap::values)
            .map(|p| &**p)
            .collect();
        all.sort_unstable_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        all
    }

    /// Number of policies.
    pub fn len(&self) -> usize {
        self.by_namespace.values().map(HashMap::len).sum()
    }

    /// Whether there is no policy.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn insert(&mut self, policy: Policy) {
        self.by_namespace
            .entry(policy.namespace.clone())
            .or_default()
            .insert(policy.name.clone(), Arc::new(policy));
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(names) = self.by_namespace.get_mut(namespace) {
            names.remove(name);
            if names.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
    }
}

/// The shared handle: cheap to clone, read without locks.
#[derive(Debug, Clone, Default)]
pub struct PolicyCache {
    current: Arc<ArcSwap<PolicySet>>,
}

// === impl PolicyCache ===

impl PolicyCache {
    /// A cache holding `set`.
    pub fn with_set(set: PolicySet) -> Self {
        Self {
            current: Arc::new(ArcSwap::from_pointee(set)),
        }
    }

    /// The current set. Lock-free; hold the guard only for the duration of one request.
    #[inline]
    pub fn load(&self) -> arc_swap::Guard<Arc<PolicySet>> {
        self.current.load()
    }

    fn publish(&self, set: PolicySet) {
        self.current.store(Arc::new(set));
    }

    /// Watches TASPolicies in all namespaces into the cache until `stop`; errors are logged,
    /// counted and retried with backoff.
    pub async fn watch(
        self,
        client: kube::Client,
        metrics: PolicyMetrics,
        stop: CancellationToken,
    ) {
        let api: kube::Api<TASPolicy> = kube::Api::all(client);
        let mut stream = telemesh_runtime::watch_backoff::backoff(watcher::watcher(
            api,
            watcher::Config::default(),
        ))
        .boxed();
        let mut working = PolicySet::default();
        let mut initial: Option<PolicySet> = None;
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                event = stream.next() => event,
            };
            let Some(event) = event else { return };
            match event {
                Ok(Event::Init) => initial = Some(PolicySet::default()),
                Ok(Event::InitApply(p)) => {
                    if let Some(set) = initial.as_mut() {
                        set.insert(compile(&p));
                    }
                }
                Ok(Event::InitDone) => {
                    if let Some(mut set) = initial.take() {
                        set.synced = true;
                        if !working.synced {
                            tracing::info!(policies = set.len(), "TASPolicy cache synced");
                        }
                        working = set;
                    }
                }
                Ok(Event::Apply(p)) => working.insert(compile(&p)),
                Ok(Event::Delete(p)) => {
                    let (ns, name) = (
                        p.metadata.namespace.as_deref().unwrap_or_default(),
                        p.metadata.name.as_deref().unwrap_or_default(),
                    );
                    tracing::info!(policy.name = %format!("{ns}/{name}"), "TASPolicy deleted");
                    working.remove(ns, name);
                }
                Err(e) => {
                    metrics.watch_errors.inc();
                    tracing::warn!(
                        error = %e,
                        "TASPolicy watch failed; retrying. Is the CRD installed? \
                         kubectl apply -f deploy/crds/taspolicies.telemetry.intel.com.yaml"
                    );
                    continue;
                }
            }
            metrics.policies.set(working.len() as i64);
            self.publish(working.clone());
        }
    }
}

fn compile(p: &TASPolicy) -> Policy {
    let policy = Policy::compile(p);
    for problem in &policy.problems {
        tracing::warn!(policy.name = %policy.key(), %problem, "TASPolicy partly ignored");
    }
    policy
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn policy(namespace: &str, name: &str) -> Policy {
        let yaml = format!(
            "apiVersion: telemetry.intel.com/v1alpha1\nkind: TASPolicy\n\
             metadata: {{ name: {name}, namespace: {namespace} }}\nspec: {{ strategies: {{}} }}"
        );
        Policy::compile(&serde_yaml_ng::from_str::<TASPolicy>(&yaml).unwrap())
    }

    #[test]
    fn sorted_lists_every_policy_by_namespace_then_name() {
        let set = PolicySet::from_policies([
            policy("b", "x"),
            policy("a", "z"),
            policy("b", "a"),
            policy("a", "y"),
        ]);
        let keys: Vec<String> = set.sorted().iter().map(|p| p.key()).collect();
        assert_eq!(keys, ["a/y", "a/z", "b/a", "b/x"]);
    }
}
