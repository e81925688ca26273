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
    HostPriorityList,
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

#[cfg(test)]
mod tests {
    use super::*;

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
