//! The `ScavengerJob` custom resource (`telemesh.io/v1alpha1`): a black-box batch job that runs
//! on idle capacity, yields to every other workload and resumes from its last checkpoint.
//!
//! The CRD manifest is `deploy/crds/scavengerjobs.telemesh.io.yaml` ([`CRD_YAML`]), written by
//! hand for its CEL rules and printer columns, as the WorkloadAction one is. The controller
//! (coordinator, on the leader) is the only writer of `status`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// The CRD manifest, for tests and `telemesh-sim dev` to install.
pub const CRD_YAML: &str = include_str!("../../../deploy/crds/scavengerjobs.telemesh.io.yaml");

/// The scavengers' PriorityClass manifest (`deploy/priorityclasses.yaml`), for tests and
/// `telemesh-sim dev` to apply.
pub const PRIORITY_CLASS_YAML: &str = include_str!("../../../deploy/priorityclasses.yaml");

/// `spec`: what to run and how it checkpoints.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[kube(
    group = "telemesh.io",
    version = "v1alpha1",
    kind = "ScavengerJob",
    plural = "scavengerjobs",
    shortname = "sj",
    namespaced,
    status = "ScavengerJobStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ScavengerJobSpec {
    /// Container image.
    pub image: String,
    /// Entrypoint (the image's when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables (plain values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Requests and limits of each pod's container (equal limits make the pods Guaranteed).
    #[serde(default)]
    pub resources: ResourceRequirements,
    /// Volumes from PVCs, ConfigMaps and Secrets, each with its mount path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Pods that run at once (and must all finish); all are interrupted together.
    #[serde(default = "one")]
    pub parallelism: i32,
    /// The user the container runs as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    /// The job checkpoints at least this often (Go duration: `90s`, `10m`, `1h30m`) and resumes
    /// from its last checkpoint.
    pub checkpoint_interval: String,
    /// Time a run needs before its work counts as worth keeping (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_run: Option<String>,
    /// Labels and annotations copied onto the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_metadata: Option<PodMetadata>,
}

fn one() -> i32 {
    1
}

/// One environment variable.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct EnvVar {
    /// Name.
    pub name: String,
    /// Value.
    #[serde(default)]
    pub value: String,
}

/// One volume: exactly one source (a CEL rule says so) and where it is mounted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// The volume's name in the pod.
    pub name: String,
    /// Where it is mounted in the container.
    pub mount_path: String,
    /// Mounted read-only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// A PersistentVolumeClaim in the job's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimSource>,
    /// A ConfigMap in the job's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    /// A Secret in the job's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretSource>,
}

/// `persistentVolumeClaim`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClaimSource {
    /// The claim's name.
    pub claim_name: String,
}

/// `configMap`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ConfigMapSource {
    /// The ConfigMap's name.
    pub name: String,
}

/// `secret`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SecretSource {
    /// The Secret's name.
    pub secret_name: String,
}

/// What a volume refers to, for the missing-volume check and its message.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VolumeRef {
    /// A PersistentVolumeClaim, by name.
    Claim(String),
    /// A ConfigMap, by name.
    ConfigMap(String),
    /// A Secret, by name.
    Secret(String),
}

impl std::fmt::Display for VolumeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Claim(n) => write!(f, "PersistentVolumeClaim {n}"),
            Self::ConfigMap(n) => write!(f, "ConfigMap {n}"),
            Self::Secret(n) => write!(f, "Secret {n}"),
        }
    }
}

impl Volume {
    /// The object the volume refers to (None when the schema's one-source rule was bypassed).
    pub fn source(&self) -> Option<VolumeRef> {
        match (
            &self.persistent_volume_claim,
            &self.config_map,
            &self.secret,
        ) {
            (Some(c), None, None) => Some(VolumeRef::Claim(c.claim_name.clone())),
            (None, Some(c), None) => Some(VolumeRef::ConfigMap(c.name.clone())),
            (None, None, Some(s)) => Some(VolumeRef::Secret(s.secret_name.clone())),
            _ => None,
        }
    }
}

/// `podMetadata`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PodMetadata {
    /// Labels added to every pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations added to every pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Where a ScavengerJob is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum Phase {
    /// Waiting for its first turn (or for another one after its pods stayed unschedulable, or
    /// did not start for a cause that may clear by itself).
    #[default]
    Pending,
    /// Its Job exists.
    Running,
    /// Preempted or evicted; waiting for its next turn, ahead of jobs interrupted less.
    Interrupted,
    /// Every pod finished.
    Succeeded,
    /// A pod failed on its own, or the job cannot run (missing volumes, a pod that cannot start
    /// until someone changes something); `message` says why.
    Failed,
}

impl Phase {
    /// Every phase, for metrics.
    pub const ALL: [Self; 5] = [
        Self::Pending,
        Self::Running,
        Self::Interrupted,
        Self::Succeeded,
        Self::Failed,
    ];

    /// Whether the job waits for a turn.
    pub fn is_waiting(self) -> bool {
        matches!(self, Self::Pending | Self::Interrupted)
    }

    /// Whether the job has ended for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }

    /// The phase's name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Interrupted => "Interrupted",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
        }
    }
}

/// `status`: written only by the controller on the leader.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ScavengerJobStatus {
    /// Phase; absent means Pending.
    #[serde(default)]
    pub phase: Phase,
    /// Times the job was preempted or evicted.
    #[serde(default)]
    pub interrupted_count: u32,
    /// When each run started (its Job was created).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running_timestamps: Vec<Time>,
    /// When each interruption happened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interrupted_timestamps: Vec<Time>,
    /// When the job ended (Succeeded or Failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_timestamp: Option<Time>,
    /// The start of the current checkpoint window: the current run's start advanced by whole
    /// checkpoint intervals, as of the controller's last write (agents compute the live value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_window_start: Option<Time>,
    /// The current run's start (the RUNNING-FOR column), absent while not Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_run_start: Option<Time>,
    /// The current run's Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
    /// Pods of the current run seen so far: one missing later, unfinished, was removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<String>,
    /// Since when the current run has had an unschedulable pod (the timeout counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unschedulable_since: Option<Time>,
    /// CPU-seconds lost at interruptions, estimated (work since the checkpoint window start).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wasted_cpu_seconds: f64,
    /// What happened last, for a person.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Standard conditions (`Running`, `Complete`, `Failed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// A spec field that does not parse (the schema's rules should have refused it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSpec {
    /// A duration that is not Go's.
    #[error(
        "{field} {value:?} is not a duration like 90s, 10m or 1h30m; fix the ScavengerJob's spec"
    )]
    Duration {
        /// The field.
        field: &'static str,
        /// Its value.
        value: String,
    },
    /// A volume without exactly one source.
    #[error(
        "volume {0:?} needs exactly one of persistentVolumeClaim, configMap or secret; fix the ScavengerJob's spec"
    )]
    VolumeSource(String),
}

/// Parses a Go duration (`kube::core::Duration`, as `metav1.Duration`); empty (which Go
/// refuses too) and negative are refused.
fn parse_go_duration(field: &'static str, value: &str) -> Result<Duration, InvalidSpec> {
    let invalid = || InvalidSpec::Duration {
        field,
        value: value.to_owned(),
    };
    if value.is_empty() {
        return Err(invalid());
    }
    let parsed: kube::core::Duration = value.parse().map_err(|_| invalid())?;
    if parsed.is_negative() {
        return Err(invalid());
    }
    Ok(parsed.into())
}

impl ScavengerJobSpec {
    /// The declared checkpoint interval (never zero: the schema asks for at least 1s).
    pub fn checkpoint_interval(&self) -> Result<Duration, InvalidSpec> {
        parse_go_duration("checkpointInterval", &self.checkpoint_interval).and_then(|d| {
            if d.is_zero() {
                Err(InvalidSpec::Duration {
                    field: "checkpointInterval",
                    value: self.checkpoint_interval.clone(),
                })
            } else {
                Ok(d)
            }
        })
    }

    /// The declared minimum run, if any.
    pub fn minimum_run(&self) -> Result<Option<Duration>, InvalidSpec> {
        self.minimum_run
            .as_deref()
            .map(|v| parse_go_duration("minimumRun", v))
            .transpose()
    }

    /// Pods at once, at least one.
    pub fn pods(&self) -> u32 {
        u32::try_from(self.parallelism).unwrap_or(0).max(1)
    }
}

impl ScavengerJob {
    /// The phase (Pending when there is no status yet).
    pub fn phase(&self) -> Phase {
        self.status.as_ref().map(|s| s.phase).unwrap_or_default()
    }

    /// Interruptions so far.
    pub fn interrupted_count(&self) -> u32 {
        self.status.as_ref().map_or(0, |s| s.interrupted_count)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    #[test]
    fn the_manifest_names_this_type() {
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(CRD_YAML).unwrap();
        assert_eq!(crd.spec.group, "telemesh.io");
        assert_eq!(crd.spec.names.kind, "ScavengerJob");
        assert_eq!(crd.spec.names.plural, "scavengerjobs");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.versions[0].name, "v1alpha1");
        let columns: Vec<String> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(columns, ["Phase", "Interrupted", "Running-For", "Age"]);
    }

    #[test]
    fn the_manifest_schema_has_the_fields_of_the_rust_types() {
        use crate::crd_parity::{assert_fields_match, schema_of};
        assert_fields_match(
            CRD_YAML,
            schema_of::<ScavengerJobSpec>(),
            schema_of::<ScavengerJobStatus>(),
            &[],
            &[(
                "spec.resources.claims",
                "the spec reuses the core ResourceRequirements, but the controller creates no \
                 pod-level resourceClaims for container claims to name, so the CRD offers only \
                 requests and limits",
            )],
        );
    }

    #[test]
    fn the_priority_class_is_the_contracts() {
        let pc: k8s_openapi::api::scheduling::v1::PriorityClass =
            serde_yaml_ng::from_str(PRIORITY_CLASS_YAML).unwrap();
        assert_eq!(
            pc.metadata.name.as_deref(),
            Some(super::super::PRIORITY_CLASS)
        );
        assert_eq!(pc.value, super::super::PRIORITY);
        assert_eq!(pc.preemption_policy.as_deref(), Some("Never"));
        assert_eq!(pc.global_default, Some(false));
    }

    #[test]
    fn a_minimal_spec_parses_with_defaults() {
        let spec: ScavengerJobSpec = serde_json::from_value(serde_json::json!({
            "image": "busybox", "checkpointInterval": "1h30m"
        }))
        .unwrap();
        assert_eq!(spec.parallelism, 1);
        assert_eq!(
            spec.checkpoint_interval().unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(spec.minimum_run().unwrap(), None);
    }

    #[test]
    fn durations_are_go_durations() {
        let spec = |interval: &str| ScavengerJobSpec {
            checkpoint_interval: interval.into(),
            ..Default::default()
        };
        assert_eq!(
            spec("90s").checkpoint_interval().unwrap(),
            Duration::from_secs(90)
        );
        assert_eq!(
            spec("1m500ms").checkpoint_interval().unwrap(),
            Duration::from_millis(60_500)
        );
        for bad in ["", "0", "0s", "10", "1d", "-5m", "ten minutes"] {
            assert!(spec(bad).checkpoint_interval().is_err(), "{bad:?}");
        }
        let with_min = ScavengerJobSpec {
            minimum_run: Some("5m".into()),
            ..spec("1m")
        };
        assert_eq!(
            with_min.minimum_run().unwrap(),
            Some(Duration::from_secs(300))
        );
    }

    #[test]
    fn a_volume_names_its_one_source() {
        let mut v = Volume {
            name: "data".into(),
            mount_path: "/data".into(),
            persistent_volume_claim: Some(ClaimSource {
                claim_name: "work".into(),
            }),
            ..Default::default()
        };
        assert_eq!(v.source(), Some(VolumeRef::Claim("work".into())));
        assert_eq!(
            v.source().unwrap().to_string(),
            "PersistentVolumeClaim work"
        );
        v.secret = Some(SecretSource {
            secret_name: "s".into(),
        });
        assert_eq!(v.source(), None);
    }

    #[test]
    fn status_round_trips_with_camel_case_fields() {
        let status = ScavengerJobStatus {
            phase: Phase::Interrupted,
            interrupted_count: 2,
            job_name: Some("render-2".into()),
            ..Default::default()
        };
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["phase"], "Interrupted");
        assert_eq!(json["interruptedCount"], 2);
        assert_eq!(json["jobName"], "render-2");
        let back: ScavengerJobStatus = serde_json::from_value(json).unwrap();
        assert_eq!(back, status);
    }
}
