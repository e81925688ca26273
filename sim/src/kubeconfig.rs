//! The kubeconfig the sim writes, so every client reaches it as it would a cluster.

use std::path::Path;

use base64::Engine as _;

/// Renders a kubeconfig for `server`, with the CA (PEM) and bearer token when given.
pub fn render(server: &str, ca_pem: Option<&str>, token: Option<&str>) -> String {
    let ca = ca_pem
        .map(|pem| {
            format!(
                "\n    certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(pem)
            )
        })
        .unwrap_or_default();
    // kubectl prompts for a username when an HTTPS cluster has no credentials, so an HTTPS
    // kubeconfig always carries a token; with authentication off the server ignores it.
    let user = match (token, ca_pem) {
        (Some(t), _) => format!("\n    token: {t}"),
        (None, Some(_)) => "\n    token: telemesh-sim-no-auth".to_owned(),
        (None, None) => " {}".to_owned(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: telemesh-sim\n  cluster:\n    server: {server}{ca}\ncontexts:\n- name: telemesh-sim\n  context:\n    cluster: telemesh-sim\n    user: telemesh-sim\n    namespace: default\ncurrent-context: telemesh-sim\nusers:\n- name: telemesh-sim\n  user:{user}\npreferences: {{}}\n"
    )
}

/// A kube client from a kubeconfig's text, built as any program builds one from its file.
pub async fn client(yaml: &str) -> anyhow::Result<kube::Client> {
    use anyhow::Context as _;
    let kc = kube::config::Kubeconfig::from_yaml(yaml).context("parsing the kubeconfig")?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .context("loading the kubeconfig")?;
    kube::Client::try_from(config).context("building a kube client")
}

/// Writes `contents` to `path` through a temporary file and a rename.
pub fn write(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_parses_with_kube_rs() {
        let yaml = render(
            "https://127.0.0.1:1234",
            Some("-----BEGIN CERTIFICATE-----\n"),
            Some("tok"),
        );
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("telemesh-sim"));
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:1234"));
        assert!(cluster.certificate_authority_data.is_some());
    }
}
