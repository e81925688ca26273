//! The Kubernetes client every binary builds the same way: `--kubeconfig PATH`, else what kube's
//! `Config::infer` finds: the kubeconfig `$KUBECONFIG` names (its files merged; `~/.kube/config`
//! when it is unset) and, only when that cannot be loaded, the in-cluster service account
//! (docs/architecture.md, "Command lines"). So a kubeconfig in a pod's environment or home wins
//! over its service account. Every request carries a `User-Agent` naming the binary, its version
//! and its instance (node or replica), so the API server's audit log, and sim's request counts
//! (docs/faults.md), tell the callers apart. kube-rs sends no `User-Agent` of its own.

use std::path::Path;

use anyhow::Context as _;
use http::HeaderValue;

/// The `User-Agent` of `binary` at `version` running as `instance`, in client-go's shape
/// (`telemesh-agent/0.1.0 (node-a)`). Characters a header cannot carry become `_`.
pub fn user_agent(binary: &str, version: &str, instance: &str) -> HeaderValue {
    let text: String = format!("{binary}/{version} ({instance})")
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("telemesh"))
}

/// Loads the client configuration: the given kubeconfig, else `$KUBECONFIG` (or
/// `~/.kube/config`), else in-cluster (kube's `Config::infer`, in that order); every request
/// carries `user_agent` ([`user_agent`]).
pub async fn kube_config(
    kubeconfig: Option<&Path>,
    user_agent: &HeaderValue,
) -> anyhow::Result<kube::Config> {
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .context("loading the kubeconfig")?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig: pass --kubeconfig, run in a cluster, or set KUBECONFIG")?,
    };
    config
        .headers
        .push((http::header::USER_AGENT, user_agent.clone()));
    Ok(config)
}

/// Builds the client from [`kube_config`].
pub async fn kube_client(
    kubeconfig: Option<&Path>,
    user_agent: &HeaderValue,
) -> anyhow::Result<kube::Client> {
    let config = kube_config(kubeconfig, user_agent).await?;
    kube::Client::try_from(config).context("building the Kubernetes client")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_agent_names_binary_version_and_instance() {
        assert_eq!(
            user_agent("telemesh-agent", "0.1.0", "node-a"),
            "telemesh-agent/0.1.0 (node-a)"
        );
        assert_eq!(
            user_agent("telemesh-coordinator", "0.1.0", "réplica\n1"),
            "telemesh-coordinator/0.1.0 (r_plica_1)"
        );
    }
}
