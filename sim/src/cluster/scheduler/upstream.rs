//! The real kube-scheduler against sim, as the dev cluster (`--kube-scheduler`) and the
//! end-to-end tests run it: a shipped `KubeSchedulerConfiguration` rendered for one instance
//! (this sim's kubeconfig, leader election off, the extender's address where the coordinator
//! listens) and the command line that starts it.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_yaml_ng::{Mapping, Value};

/// How to render a shipped configuration for one kube-scheduler instance.
#[derive(Debug, Clone, Default)]
pub struct Render {
    /// The kubeconfig kube-scheduler reaches the API server with.
    pub kubeconfig: PathBuf,
    /// Replaces the first extender's `urlPrefix` (the coordinator's address in this run).
    pub url_prefix: Option<String>,
    /// Replaces the first extender's `nodeCacheCapable`.
    pub node_cache_capable: Option<bool>,
    /// Gives the first extender TAS's opt-in, as the chart's `scheduler.pods: optedIn` does:
    /// `managedResources` `telemetry/scheduling` (ignored by the scheduler's resource fit), so
    /// kube-scheduler calls it only for pods that request or limit that resource.
    pub opted_in: bool,
}

/// The dummy extended resource TAS's pods put a limit on to opt in to the extender.
pub const OPT_IN_RESOURCE: &str = "telemetry/scheduling";

impl Render {
    /// Returns `template` (a KubeSchedulerConfiguration in YAML, e.g.
    /// deploy/scheduler/kube-scheduler-config.dev.yaml) with `clientConnection.kubeconfig`, and
    /// `leaderElection.leaderElect: false` (one instance, nothing to elect), and the overrides.
    /// Every other field is kept as shipped.
    pub fn apply(&self, template: &str) -> anyhow::Result<String> {
        let mut doc: Value =
            serde_yaml_ng::from_str(template).context("the scheduler configuration is not YAML")?;
        let Some(top) = doc.as_mapping_mut() else {
            bail!("the scheduler configuration is not a YAML mapping");
        };
        if top.get("kind").and_then(Value::as_str) != Some("KubeSchedulerConfiguration") {
            bail!("not a KubeSchedulerConfiguration");
        }
        let kubeconfig = self.kubeconfig.to_str().with_context(|| {
            format!(
                "the kubeconfig path {} is not UTF-8",
                self.kubeconfig.display()
            )
        })?;
        set(top, "clientConnection", "kubeconfig", kubeconfig.into());
        set(top, "leaderElection", "leaderElect", false.into());
        if self.url_prefix.is_some() || self.node_cache_capable.is_some() || self.opted_in {
            let Some(first) = top
                .get_mut("extenders")
                .and_then(Value::as_sequence_mut)
                .and_then(|s| s.first_mut())
                .and_then(Value::as_mapping_mut)
            else {
                bail!("the scheduler configuration registers no extender to point elsewhere");
            };
            if let Some(url) = &self.url_prefix {
                first.insert("urlPrefix".into(), url.as_str().into());
            }
            if let Some(cache) = self.node_cache_capable {
                first.insert("nodeCacheCapable".into(), cache.into());
            }
            if self.opted_in {
                let mut managed = Mapping::new();
                managed.insert("name".into(), OPT_IN_RESOURCE.into());
                managed.insert("ignoredByScheduler".into(), true.into());
                first.insert(
                    "managedResources".into(),
                    Value::Sequence(vec![Value::Mapping(managed)]),
                );
            }
        }
        serde_yaml_ng::to_string(&doc).context("writing the scheduler configuration")
    }
}

/// Sets `top.<section>.<key>` to `value`, making `section` a mapping if it is not one.
fn set(top: &mut Mapping, section: &str, key: &str, value: Value) {
    let mut inner = match top.remove(section) {
        Some(Value::Mapping(m)) => m,
        _ => Mapping::new(),
    };
    inner.insert(key.into(), value);
    top.insert(section.into(), Value::Mapping(inner));
}

/// kube-scheduler's command line for a rendered `config`: health and metrics served on
/// `--secure-port` (0: not served, so parallel instances never race for a port), the
/// self-signed serving certificate (if any) under `cert_dir`, and `--v=2`, which logs each
/// binding and each unschedulable pod with its reason.
pub fn args(config: &Path, cert_dir: &Path, secure_port: u16) -> Vec<String> {
    vec![
        format!("--config={}", config.display()),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={secure_port}"),
        format!("--cert-dir={}", cert_dir.display()),
        "--v=2".into(),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const DEV: &str = include_str!("../../../../deploy/scheduler/kube-scheduler-config.dev.yaml");

    #[test]
    fn renders_the_shipped_file_for_one_instance() {
        let text = Render {
            kubeconfig: "/tmp/x/kubeconfig".into(),
            url_prefix: Some("http://127.0.0.1:4242/scheduler".into()),
            node_cache_capable: Some(false),
            opted_in: false,
        }
        .apply(DEV)
        .unwrap();
        let doc: Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(doc["clientConnection"]["kubeconfig"], "/tmp/x/kubeconfig");
        assert_eq!(doc["leaderElection"]["leaderElect"], false);
        let ext = &doc["extenders"][0];
        assert_eq!(ext["urlPrefix"], "http://127.0.0.1:4242/scheduler");
        assert_eq!(ext["nodeCacheCapable"], false);
        // The rest as shipped.
        let shipped: Value = serde_yaml_ng::from_str(DEV).unwrap();
        for key in [
            "filterVerb",
            "prioritizeVerb",
            "preemptVerb",
            "weight",
            "httpTimeout",
            "ignorable",
            "managedResources",
        ] {
            assert_eq!(ext[key], shipped["extenders"][0][key], "{key}");
        }
        // Without overrides the extender is untouched.
        let plain = Render {
            kubeconfig: "/k".into(),
            ..Render::default()
        }
        .apply(DEV)
        .unwrap();
        let doc: Value = serde_yaml_ng::from_str(&plain).unwrap();
        assert_eq!(doc["extenders"], shipped["extenders"]);
        // The opt-in: the shipped extender plus TAS's managed resource, as the chart renders
        // it with scheduler.pods optedIn.
        let opted_in = Render {
            kubeconfig: "/k".into(),
            opted_in: true,
            ..Render::default()
        }
        .apply(DEV)
        .unwrap();
        let doc: Value = serde_yaml_ng::from_str(&opted_in).unwrap();
        let mut want = shipped["extenders"][0].clone();
        want["managedResources"] =
            serde_yaml_ng::from_str("[{name: telemetry/scheduling, ignoredByScheduler: true}]")
                .unwrap();
        assert_eq!(doc["extenders"][0], want);
    }

    #[test]
    fn refuses_what_is_not_a_scheduler_configuration() {
        let render = Render::default();
        assert!(render.apply("kind: Pod\n").is_err());
        assert!(render.apply("- a\n").is_err());
        let none = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
        assert!(render.apply(none).is_ok());
        let pointed = Render {
            url_prefix: Some("http://127.0.0.1:1/x".into()),
            ..Render::default()
        };
        assert!(pointed.apply(none).is_err());
    }
}
