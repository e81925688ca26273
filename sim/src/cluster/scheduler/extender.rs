//! Calling one scheduler extender over HTTP, as kube-scheduler's `HTTPExtender` does: a JSON
//! POST per verb with the extender v1 wire types (core's `extender` module, so sim speaks exactly
//! what the coordinator parses), under the registration's timeout.

use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;

use telemesh_core::extender::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult,
    HostPriorityList,
};

use super::config::Extender;

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
