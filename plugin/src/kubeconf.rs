//! The kubeconfig as kubectl reads it (`--kubeconfig`, else `$KUBECONFIG`, else
//! `~/.kube/config`; `--context`; the context's namespace unless `-n`), the bearer token the
//! coordinators' API gets, and where a coordinator Service is when its API cannot be reached.

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use secrecy::ExposeSecret as _;

use crate::cli::GlobalArgs;

/// The chart's labels on the coordinator Service (deploy/helm/telemesh, `_helpers.tpl`).
pub const COORDINATOR_SELECTOR: &str =
    "app.kubernetes.io/name=telemesh,app.kubernetes.io/component=coordinator";

/// The client configuration from the kubeconfig kubectl would use.
pub async fn config(args: &GlobalArgs) -> anyhow::Result<kube::Config> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))
        }
        None => kube::Config::from_kubeconfig(&options)
            .await
            .context("no usable kubeconfig: pass --kubeconfig or set KUBECONFIG, as for kubectl"),
    }
}

/// The namespace: `-n`, else the context's, else `default` (kube's `default_namespace`).
pub fn namespace(args: &GlobalArgs, config: Option<&kube::Config>) -> String {
    args.namespace
        .clone()
        .or_else(|| config.map(|c| c.default_namespace.clone()))
        .unwrap_or_else(|| "default".to_owned())
}

/// The bearer token for the coordinators' API: `--token`, else the kubeconfig user's static
/// token (`token`, or the file `tokenFile` names). Exec plugins and client certificates give
/// none: the API's TokenReview needs a bearer token (`kubectl create token` makes one).
pub fn bearer_token(args: &GlobalArgs, config: Option<&kube::Config>) -> Option<String> {
    if let Some(t) = &args.token {
        return Some(t.clone());
    }
    let auth = &config?.auth_info;
    auth.token
        .as_ref()
        .map(|t| t.expose_secret().to_owned())
        .or_else(|| {
            let file = auth.token_file.as_ref()?;
            Some(std::fs::read_to_string(file).ok()?.trim().to_owned())
        })
        .filter(|t| !t.is_empty())
}

/// How to reach a coordinator Service the chart made, found through the API server (the
/// Services labelled [`COORDINATOR_SELECTOR`], the current namespace's first): a
/// `kubectl port-forward` line, or empty when none can be listed.
pub async fn port_forward_hint(client: &kube::Client, namespace: &str) -> String {
    let Ok(list) = Api::<Service>::all(client.clone())
        .list(&ListParams::default().labels(COORDINATOR_SELECTOR))
        .await
    else {
        return String::new();
    };
    let mut services: Vec<(String, String)> = list
        .items
        .into_iter()
        .filter_map(|s| Some((s.metadata.namespace?, s.metadata.name?)))
        .collect();
    services.sort_by_key(|(ns, name)| (ns != namespace, ns.clone(), name.clone()));
    hint(&services)
}

/// The hint for the first of `services` (`(namespace, name)`).
pub fn hint(services: &[(String, String)]) -> String {
    match services.first() {
        None => String::new(),
        Some((ns, name)) => format!(
            "; the coordinator Service {ns}/{name} answers after `kubectl port-forward -n {ns} svc/{name} 9080:api`"
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::Parser as _;

    use super::*;
    use crate::cli::Cli;

    fn args(extra: &[&str]) -> GlobalArgs {
        let argv = ["k", "jobs"].iter().chain(extra).copied();
        Cli::try_parse_from(argv).unwrap().global
    }

    async fn kubeconfig(dir: &std::path::Path, token_line: &str) -> kube::Config {
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: c\n  cluster: {{server: 'http://127.0.0.1:1'}}\ncontexts:\n- name: a\n  context: {{cluster: c, user: u, namespace: team-a}}\n- name: b\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user: {{{token_line}}}\n"
            ),
        )
        .unwrap();
        let mut a = args(&[]);
        a.kubeconfig = Some(path);
        config(&a).await.unwrap()
    }

    #[tokio::test]
    async fn namespace_and_token_come_from_flags_then_the_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        let c = kubeconfig(dir.path(), "token: s3cret").await;
        assert_eq!(namespace(&args(&[]), Some(&c)), "team-a");
        assert_eq!(namespace(&args(&["-n", "ul"]), Some(&c)), "ul");
        assert_eq!(namespace(&args(&[]), None), "default");
        assert_eq!(
            bearer_token(&args(&[]), Some(&c)).as_deref(),
            Some("s3cret")
        );
        assert_eq!(
            bearer_token(&args(&["--token", "flag"]), Some(&c)).as_deref(),
            Some("flag")
        );
        std::fs::write(dir.path().join("tok"), "from-file\n").unwrap();
        let file = format!("tokenFile: {}", dir.path().join("tok").display());
        let c = kubeconfig(dir.path(), &file).await;
        assert_eq!(
            bearer_token(&args(&[]), Some(&c)).as_deref(),
            Some("from-file")
        );
        assert_eq!(bearer_token(&args(&[]), None), None);
    }

    #[test]
    fn the_hint_names_the_first_service() {
        assert_eq!(hint(&[]), "");
        let h = hint(&[("telemesh-system".into(), "telemesh-coordinator".into())]);
        assert!(
            h.contains("kubectl port-forward -n telemesh-system svc/telemesh-coordinator 9080:api"),
            "{h}"
        );
    }
}
