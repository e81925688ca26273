//! The Kubernetes client every binary builds the same way: `--kubeconfig PATH`, else the
//! in-cluster service account, else `$KUBECONFIG` (docs/architecture.md, "Command lines").

use std::path::Path;

use anyhow::Context as _;

/// Loads the client configuration: the given kubeconfig, else in-cluster, else `$KUBECONFIG`.
pub async fn kube_config(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Config> {
    match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .context("loading the kubeconfig")
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig: pass --kubeconfig, run in a cluster, or set KUBECONFIG"),
    }
}

/// Builds the client from [`kube_config`].
pub async fn kube_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = kube_config(kubeconfig).await?;
    kube::Client::try_from(config).context("building the Kubernetes client")
}
