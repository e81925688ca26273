//! Calling one scheduler extender over HTTP, as kube-scheduler's `HTTPExtender` does: a JSON
//! POST per verb with the extender v1 wire types (core's `extender` module, so sim speaks exactly
//! what the coordinator parses), under the registration's timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;

use telemesh_core::extender::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult,
    ExtenderPreemptionArgs, ExtenderPreemptionResult, HostPriorityList, Victims,
};

use super::config::Extender;

/// A node an extender's filter turned down, with the status kube-scheduler gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The extender's reason.
    pub reason: String,
    /// `UnschedulableAndUnresolvable` (preemption never tries the node) rather than
    /// `Unschedulable`.
    pub unresolvable: bool,
}

/// Returns the nodes a filter result turned down, as upstream's `findNodesThatPassExtenders`
/// (v1.32) records them: `FailedAndUnresolvableNodes` as UnschedulableAndUnresolvable,
/// `FailedNodes` as Unschedulable, and a node in both maps only once, unresolvable with that
/// map's reason.
pub fn rejections(result: &ExtenderFilterResult) -> BTreeMap<String, Rejection> {
    let mut out: BTreeMap<String, Rejection> = result
        .failed_and_unresolvable_nodes
        .iter()
        .map(|(node, why)| {
            let rejection = Rejection {
                reason: why.clone(),
                unresolvable: true,
            };
            (node.clone(), rejection)
        })
        .collect();
    for (node, why) in &result.failed_nodes {
        out.entry(node.clone()).or_insert_with(|| Rejection {
            reason: why.clone(),
            unresolvable: false,
        });
    }
    out
}

/// A registered extender, ready to call.
#[derive(Debug, Clone)]
pub struct ExtenderClient {
    /// Its registration.
    pub config: Extender,
    timeout: Duration,
}

impl ExtenderClient {
    /// Wraps a checked registration.
    pub fn new(config: Extender) -> anyhow::Result<Self> {
        let timeout = config.timeout()?;
        Ok(Self { config, timeout })
    }

    /// The filter verb.
    pub async fn filter(&self, args: &ExtenderArgs) -> anyhow::Result<ExtenderFilterResult> {
        let result: ExtenderFilterResult = self.call(&self.config.filter_verb, args).await?;
        if !result.error.is_empty() {
            bail!("extender filter error: {}", result.error);
        }
        Ok(result)
    }

    /// The prioritize verb.
    pub async fn prioritize(&self, args: &ExtenderArgs) -> anyhow::Result<HostPriorityList> {
        self.call(&self.config.prioritize_verb, args).await
    }

    /// Whether the extender takes part in preemption (`SupportsPreemption`: a preempt verb).
    pub fn supports_preemption(&self) -> bool {
        !self.config.preempt_verb.is_empty()
    }

    /// The preempt verb (`HTTPExtender.ProcessPreemption`): the candidate victims per node go
    /// by UID when the extender is nodeCacheCapable, in full otherwise; the answer is always by
    /// UID.
    pub async fn preempt(
        &self,
        pod: &k8s_openapi::api::core::v1::Pod,
        candidates: &BTreeMap<String, Victims>,
    ) -> anyhow::Result<ExtenderPreemptionResult> {
        let args = preemption_args(pod, candidates, self.config.node_cache_capable);
        self.call(&self.config.preempt_verb, &args).await
    }

    /// The bind verb.
    pub async fn bind(&self, args: &ExtenderBindingArgs) -> anyhow::Result<()> {
        let result: ExtenderBindingResult = self.call(&self.config.bind_verb, args).await?;
        if !result.error.is_empty() {
            bail!("extender bind error: {}", result.error);
        }
        Ok(())
    }

    async fn call<A: Serialize, R: DeserializeOwned>(
        &self,
        verb: &str,
        args: &A,
    ) -> anyhow::Result<R> {
        let url = self.config.url(verb);
        let body = serde_json::to_vec(args).context("encoding the extender request")?;
        let bytes = tokio::time::timeout(
            self.timeout,
            crate::cluster::http::request(http::Method::POST, &url, Some(body)),
        )
        .await
        .map_err(|_| anyhow::anyhow!("{url} did not answer within {:?}", self.timeout))??;
        serde_json::from_slice(&bytes).with_context(|| format!("{url} answered malformed JSON"))
    }
}

/// What kube-scheduler sends an extender's preempt verb: `NodeNameToMetaVictims` (UIDs) when it
/// is nodeCacheCapable, else `NodeNameToVictims` (whole pods); the other stays null.
pub fn preemption_args(
    pod: &k8s_openapi::api::core::v1::Pod,
    candidates: &BTreeMap<String, Victims>,
    node_cache_capable: bool,
) -> ExtenderPreemptionArgs {
    if node_cache_capable {
        ExtenderPreemptionArgs {
            pod: Some(pod.clone()),
            node_name_to_victims: None,
            node_name_to_meta_victims: Some(
                candidates
                    .iter()
                    .map(|(node, v)| (node.clone(), v.to_meta()))
                    .collect(),
            ),
        }
    } else {
        ExtenderPreemptionArgs {
            pod: Some(pod.clone()),
            node_name_to_victims: Some(candidates.clone()),
            node_name_to_meta_victims: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preempt_args_carry_uids_or_whole_pods_as_kube_scheduler_sends_them() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "v", "uid": "u-1"}, "spec": {"containers": []}
        }))
        .expect("a pod");
        let candidates: BTreeMap<String, Victims> = [(
            "n1".to_owned(),
            Victims {
                pods: vec![pod.clone()],
                num_pdb_violations: 1,
            },
        )]
        .into();
        let meta = serde_json::to_value(preemption_args(&pod, &candidates, true)).expect("json");
        assert_eq!(
            meta["NodeNameToMetaVictims"],
            serde_json::json!({"n1": {"Pods": [{"UID": "u-1"}], "NumPDBViolations": 1}})
        );
        assert!(meta["NodeNameToVictims"].is_null());
        let full = serde_json::to_value(preemption_args(&pod, &candidates, false)).expect("json");
        assert_eq!(
            full["NodeNameToVictims"]["n1"]["Pods"][0]["metadata"]["uid"],
            "u-1"
        );
        assert_eq!(full["NodeNameToVictims"]["n1"]["NumPDBViolations"], 1);
        assert!(full["NodeNameToMetaVictims"].is_null());
    }

    #[test]
    fn unresolvable_wins_over_failed_as_upstream() {
        let result = ExtenderFilterResult {
            failed_nodes: [
                ("both".to_owned(), "full".to_owned()),
                ("busy".to_owned(), "full".to_owned()),
            ]
            .into(),
            failed_and_unresolvable_nodes: [
                ("both".to_owned(), "policy".to_owned()),
                ("hot".to_owned(), "policy".to_owned()),
            ]
            .into(),
            ..Default::default()
        };
        let r = rejections(&result);
        let unresolvable = |reason: &str| Rejection {
            reason: reason.into(),
            unresolvable: true,
        };
        assert_eq!(r["both"], unresolvable("policy"));
        assert_eq!(r["hot"], unresolvable("policy"));
        assert_eq!(
            r["busy"],
            Rejection {
                reason: "full".into(),
                unresolvable: false
            }
        );
        assert_eq!(r.len(), 3);
    }
}
