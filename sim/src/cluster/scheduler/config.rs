//! The part of a `KubeSchedulerConfiguration` (kubescheduler.config.k8s.io/v1) sim's scheduler
//! honours: `extenders`, field for field as kube-scheduler reads them, the `schedulerName` of
//! each of `profiles` (the names it serves) and the default profile's NodeResourcesFit
//! `ignoredResources`, so the file an operator gives kube-scheduler
//! (deploy/scheduler/) drives sim the same way.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Deserialize;

/// The file's top level; everything but `extenders` is accepted and ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerConfiguration {
    /// `apiVersion`: must be kubescheduler.config.k8s.io/v1.
    #[serde(default)]
    pub api_version: String,
    /// `kind`: must be KubeSchedulerConfiguration.
    #[serde(default)]
    pub kind: String,
    /// Registered extenders, called in order.
    #[serde(default)]
    pub extenders: Vec<Extender>,
    /// Scheduling profiles: their names and NodeResourcesFit `ignoredResources` are read.
    /// None: the one default profile.
    #[serde(default)]
    pub profiles: Vec<Profile>,
}

/// One scheduling profile (upstream's `KubeSchedulerProfile`), as far as sim reads it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// The `spec.schedulerName` of the pods this profile schedules (upstream default
    /// `default-scheduler`).
    #[serde(default)]
    pub scheduler_name: Option<String>,
    /// Plugin arguments.
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
}

/// One plugin's arguments.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginConfig {
    /// Plugin name, e.g. `NodeResourcesFit`.
    pub name: String,
    /// Its arguments; for NodeResourcesFit, `ignoredResources` is read.
    #[serde(default)]
    pub args: serde_yaml_ng::Value,
}

/// One extender registration (upstream's `Extender`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Extender {
    /// `http://host:port/prefix`; verbs are appended as `/<verb>`.
    pub url_prefix: String,
    /// Filter verb; empty: the extender does not filter.
    #[serde(default)]
    pub filter_verb: String,
    /// Prioritize verb; empty: the extender does not score.
    #[serde(default)]
    pub prioritize_verb: String,
    /// Preempt verb; non-empty: the extender reviews preemption candidates (ProcessPreemption).
    #[serde(default)]
    pub preempt_verb: String,
    /// Bind verb; non-empty: the extender binds the pods it is interested in.
    #[serde(default)]
    pub bind_verb: String,
    /// Multiplies the extender's 0..=10 scores.
    #[serde(default = "one")]
    pub weight: i64,
    /// Send node names instead of whole Node objects.
    #[serde(default)]
    pub node_cache_capable: bool,
    /// HTTPS (not supported by sim's scheduler: it refuses the file rather than send plain HTTP).
    #[serde(default, rename = "enableHTTPS")]
    pub enable_https: bool,
    /// Per-call timeout, a Go duration (`1s`, `500ms`); default 5s as upstream.
    #[serde(default)]
    pub http_timeout: Option<String>,
    /// When the extender fails, schedule without it instead of failing the pod.
    #[serde(default)]
    pub ignorable: bool,
    /// Non-empty: only pods that request or limit one of these are sent to the extender.
    #[serde(default)]
    pub managed_resources: Vec<ManagedResource>,
}

/// An extended resource an extender manages.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedResource {
    /// Resource name, e.g. `telemetry/scheduling`.
    pub name: String,
    /// The scheduler's own resource fit ignores this resource.
    #[serde(default)]
    pub ignored_by_scheduler: bool,
}

fn one() -> i64 {
    1
}

impl SchedulerConfiguration {
    /// Reads and checks a configuration file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the scheduler configuration {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    /// Parses and checks a configuration.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let config: Self = serde_yaml_ng::from_str(text)
            .context("not a KubeSchedulerConfiguration (YAML with an `extenders` list)")?;
        if config.kind != "KubeSchedulerConfiguration"
            || config.api_version != "kubescheduler.config.k8s.io/v1"
        {
            bail!(
                "expected apiVersion kubescheduler.config.k8s.io/v1, kind KubeSchedulerConfiguration; \
                 found {} {}",
                config.api_version,
                config.kind
            );
        }
        for e in &config.extenders {
            if e.enable_https {
                bail!(
                    "extender {}: enableHTTPS is not supported by sim's scheduler; use the dev \
                     configuration (deploy/scheduler/kube-scheduler-config.dev.yaml)",
                    e.url_prefix
                );
            }
            if !e.url_prefix.starts_with("http://") {
                bail!(
                    "extender urlPrefix {:?} must start with http://",
                    e.url_prefix
                );
            }
            if !(1..=100).contains(&e.weight) && !e.prioritize_verb.is_empty() {
                bail!("extender {}: weight must be 1..=100", e.url_prefix);
            }
            e.timeout()?;
        }
        Ok(config)
    }

    /// The scheduler names whose pods are served: each profile's (`default-scheduler` when a
    /// profile names none), or `default` when the file has no profiles. Pods naming another
    /// scheduler are left alone, Pending, as kube-scheduler leaves them.
    pub fn scheduler_names(&self, default: &str) -> BTreeSet<String> {
        if self.profiles.is_empty() {
            return BTreeSet::from([default.to_owned()]);
        }
        self.profiles
            .iter()
            .map(|p| {
                p.scheduler_name
                    .clone()
                    .unwrap_or_else(|| "default-scheduler".to_owned())
            })
            .collect()
    }

    /// Resources the fit check of the profile named `scheduler_name` skips: as kube-scheduler's
    /// `buildExtenders`, the extenders' managed resources marked `ignoredByScheduler` when there
    /// are any (they then replace every profile's list), else that profile's NodeResourcesFit
    /// `ignoredResources` (each profile has its own plugin args).
    pub fn ignored_resources(&self, scheduler_name: &str) -> BTreeSet<String> {
        let from_extenders: BTreeSet<String> = self
            .extenders
            .iter()
            .flat_map(|e| &e.managed_resources)
            .filter(|r| r.ignored_by_scheduler)
            .map(|r| r.name.clone())
            .collect();
        if !from_extenders.is_empty() {
            return from_extenders;
        }
        self.profiles
            .iter()
            .filter(|p| {
                p.scheduler_name.as_deref().unwrap_or("default-scheduler") == scheduler_name
            })
            .flat_map(|p| &p.plugin_config)
            .filter(|c| c.name == "NodeResourcesFit")
            .filter_map(|c| c.args.get("ignoredResources")?.as_sequence())
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_owned))
            .collect()
    }
}

impl Extender {
    /// The per-call timeout (upstream default 5 s).
    pub fn timeout(&self) -> anyhow::Result<Duration> {
        match &self.http_timeout {
            None => Ok(Duration::from_secs(5)),
            Some(s) => telemesh_runtime::cli::parse_duration(s)
                .map_err(|e| anyhow::anyhow!("extender {}: httpTimeout: {e}", self.url_prefix)),
        }
    }

    /// Whether the pod is sent to this extender (upstream's `IsInterested`).
    pub fn is_interested(&self, pod_resources: &BTreeSet<String>) -> bool {
        self.managed_resources.is_empty()
            || self
                .managed_resources
                .iter()
                .any(|r| pod_resources.contains(&r.name))
    }

    /// The URL of `verb`.
    pub fn url(&self, verb: &str) -> String {
        format!("{}/{}", self.url_prefix.trim_end_matches('/'), verb)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn profiles_name_the_schedulers_served() {
        let header =
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
        let none = SchedulerConfiguration::parse(header).unwrap();
        assert_eq!(
            none.scheduler_names("default-scheduler"),
            BTreeSet::from(["default-scheduler".to_owned()])
        );
        let two = SchedulerConfiguration::parse(&format!(
            "{header}profiles:\n- schedulerName: telemesh\n- pluginConfig: []\n"
        ))
        .unwrap();
        assert_eq!(
            two.scheduler_names("ignored"),
            BTreeSet::from(["default-scheduler".to_owned(), "telemesh".to_owned()])
        );
    }

    #[test]
    fn reads_the_dev_registration_shipped_in_deploy() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy/scheduler/kube-scheduler-config.dev.yaml");
        let config = SchedulerConfiguration::load(&path).unwrap();
        let e = &config.extenders[0];
        assert_eq!(e.url("filter"), "http://127.0.0.1:9001/scheduler/filter");
        assert_eq!(e.weight, 5);
        assert!(e.node_cache_capable && e.ignorable);
        assert_eq!(e.timeout().unwrap(), Duration::from_secs(1));
        // TAS's dummy resource is skipped by the fit check (NodeResourcesFit ignoredResources)
        // and every pod goes to the extender (no managedResources): deploy/scheduler/README.md.
        assert_eq!(
            config.ignored_resources("default-scheduler"),
            BTreeSet::from(["telemetry/scheduling".to_owned()])
        );
        assert!(e.is_interested(&BTreeSet::from(["telemetry/scheduling".to_owned()])));
        assert!(e.is_interested(&BTreeSet::from(["cpu".to_owned()])));
    }

    #[test]
    fn extenders_ignored_resources_replace_the_profiles_as_upstream() {
        let both = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
                    profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      ignoredResources: [a/x]\n\
                    extenders:\n- urlPrefix: http://x/s\n  managedResources:\n  - {name: b/y, ignoredByScheduler: true}\n";
        let config = SchedulerConfiguration::parse(both).unwrap();
        assert_eq!(
            config.ignored_resources("default-scheduler"),
            BTreeSet::from(["b/y".to_owned()])
        );
        let other_profile = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
                    profiles:\n- schedulerName: other\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      ignoredResources: [a/x]\n";
        let config = SchedulerConfiguration::parse(other_profile).unwrap();
        assert!(config.ignored_resources("default-scheduler").is_empty());
        assert_eq!(
            config.ignored_resources("other"),
            BTreeSet::from(["a/x".to_owned()])
        );
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        let https = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
                     extenders:\n- urlPrefix: https://x/s\n  enableHTTPS: true\n";
        assert!(
            SchedulerConfiguration::parse(https)
                .unwrap_err()
                .to_string()
                .contains("enableHTTPS")
        );
        let wrong_kind = "apiVersion: v1\nkind: ConfigMap\n";
        assert!(SchedulerConfiguration::parse(wrong_kind).is_err());
    }
}
