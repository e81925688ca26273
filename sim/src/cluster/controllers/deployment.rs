//! The Deployment controller (apps/v1): rolls a Deployment's pod template out through
//! ReplicaSets, as upstream does, so `kubectl rollout`-style workflows and tests that change a
//! template behave as on a cluster.
//!
//! As upstream: the current template's `pod-template-hash` (an FNV-1a hash of the template and
//! `status.collisionCount`, encoded with upstream's safe alphabet) names the ReplicaSet
//! `<deployment>-<hash>`, which gets the template's labels plus `pod-template-hash` (in its
//! labels, selector and template), a controller ownerReference and the
//! `deployment.kubernetes.io/revision` annotation (one past the highest, also written on the
//! Deployment); a name taken by a ReplicaSet the Deployment does not own bumps `collisionCount`;
//! old ReplicaSets beyond `revisionHistoryLimit` (once scaled to zero) are deleted; status
//! (replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas,
//! observedGeneration, conditions Available and Progressing) goes through the status subresource
//! when it changes; a paused Deployment is left alone entirely.
//!
//! Simplified: RollingUpdate and Recreate both scale the new ReplicaSet straight to
//! `spec.replicas` and the old ones straight to 0, with no maxSurge/maxUnavailable pacing and no
//! waiting for old pods to go first (maxUnavailable only decides the Available condition);
//! `progressDeadlineSeconds` is not enforced (Progressing never turns False); rollback through
//! `spec.rollbackTo` and the `desired-replicas`/`max-replicas` annotations are not written.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::error::{Error, Result};
use super::owners::{self, describe, is_not_found};
use super::runner::{self, Context, RESYNC};

/// The label that ties a ReplicaSet and its pods to one template of a Deployment.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The annotation holding a ReplicaSet's (and the Deployment's current) revision.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// Upstream's `revisionHistoryLimit` default.
const DEFAULT_HISTORY: i32 = 10;

/// Runs the Deployment controller until `stop` is cancelled.
pub async fn run(client: Client, stop: CancellationToken) {
    let ctx = Context::new(client.clone());
    runner::drive("deployment", stop, || {
        Controller::new(
            Api::<Deployment>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(
            Api::<ReplicaSet>::all(client.clone()),
            watcher::Config::default(),
        )
        .run(reconcile, runner::error_policy, ctx.clone())
    })
    .await;
}

// === pure decisions ===

/// Returns the `pod-template-hash` of `template`: FNV-1a (32 bit) over its JSON and the
/// collision count, rendered as upstream renders it (the decimal value with each digit mapped
/// into `bcdfghjklmnpqrstvwxz2456789`), so a short lowercase alphanumeric string.
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    const FNV_OFFSET: u32 = 0x811c_9dc5;
    const FNV_PRIME: u32 = 0x0100_0193;
    // Serializing a typed struct cannot fail; an empty body would only make the hash constant.
    let mut bytes = serde_json::to_vec(template).unwrap_or_default();
    if let Some(n) = collision_count {
        bytes.extend_from_slice(&n.to_le_bytes());
    }
    let hash = bytes.iter().fold(FNV_OFFSET, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(FNV_PRIME)
    });
    safe_encode(&hash.to_string())
}

/// Upstream's `rand.SafeEncodeString`: maps each byte into an alphabet without vowels or
/// look-alike characters, so generated names never spell words.
fn safe_encode(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// Returns a ReplicaSet's revision (0 when it has none).
pub fn revision(rs: &ReplicaSet) -> u64 {
    rs.annotations()
        .get(REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// Returns the revision the current template's ReplicaSet must have, given its own and the
/// highest among the Deployment's ReplicaSets: unchanged when it is the newest, else one past
/// the highest (a template rolled back to becomes the newest revision again, as upstream).
pub fn target_revision(own: u64, highest: u64) -> u64 {
    if own == 0 || own < highest {
        highest + 1
    } else {
        own
    }
}

/// Returns the ReplicaSet the Deployment needs for its current template.
pub fn new_replicaset(deploy: &Deployment, hash: &str, revision: u64) -> ReplicaSet {
    let spec = deploy.spec.clone().unwrap_or_default();
    let mut template = spec.template;
    let tmeta = template.metadata.get_or_insert_with(ObjectMeta::default);
    tmeta
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH.into(), hash.into());
    let labels = tmeta.labels.clone();
    let mut selector = spec.selector;
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH.into(), hash.into());
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", deploy.name_any())),
            namespace: deploy.namespace(),
            labels,
            annotations: Some([(REVISION.to_owned(), revision.to_string())].into()),
            owner_references: owners::controller_ref(deploy).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(spec.replicas.unwrap_or(1)),
            min_ready_seconds: spec.min_ready_seconds,
            selector,
            template: Some(template),
        }),
        status: None,
    }
}

/// Returns how many pods may be unavailable while the Deployment still counts as Available:
/// `rollingUpdate.maxUnavailable` (a count, or a percentage of `replicas` rounded down, as
/// upstream), 0 for Recreate.
pub fn max_unavailable(deploy: &Deployment) -> i32 {
    let Some(spec) = deploy.spec.as_ref() else {
        return 0;
    };
    let replicas = spec.replicas.unwrap_or(1);
    let strategy = spec.strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate") {
        return 0;
    }
    let value = strategy
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_unavailable.clone())
        .unwrap_or(IntOrString::String("25%".into()));
    let n = match value {
        IntOrString::Int(n) => n,
        IntOrString::String(s) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .map_or(0, |p| {
                i32::try_from(i64::from(replicas) * p / 100).unwrap_or(0)
            }),
    };
    n.clamp(0, replicas.max(0))
}

/// Computes the Deployment's status from its ReplicaSets (`new` among them, if it exists yet),
/// keeping condition timestamps of conditions that did not change.
pub fn status(
    deploy: &Deployment,
    new: Option<&ReplicaSet>,
    all: &[ReplicaSet],
    now: jiff::Timestamp,
) -> DeploymentStatus {
    let desired = deploy.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let sum = |f: &dyn Fn(&ReplicaSet) -> i32| all.iter().map(f).fold(0i32, i32::saturating_add);
    let rs_status = |rs: &ReplicaSet| rs.status.clone().unwrap_or_default();
    let replicas = sum(&|rs| rs_status(rs).replicas);
    let ready = sum(&|rs| rs_status(rs).ready_replicas.unwrap_or(0));
    let available = sum(&|rs| rs_status(rs).available_replicas.unwrap_or(0));
    let updated = new.map_or(0, |rs| rs_status(rs).replicas);
    let new_available = new.map_or(0, |rs| rs_status(rs).available_replicas.unwrap_or(0));
    let new_name = new.map(|rs| rs.name_any()).unwrap_or_default();

    let minimum = available >= desired - max_unavailable(deploy);
    let complete = updated == desired && replicas == desired && new_available == desired;
    let wanted = [
        if minimum {
            condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            )
        } else {
            condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )
        },
        if complete {
            condition(
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                &format!("ReplicaSet \"{new_name}\" has successfully progressed."),
            )
        } else {
            condition(
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                &format!("ReplicaSet \"{new_name}\" is progressing."),
            )
        },
    ];
    let old = deploy.status.as_ref();
    let old_conditions = old.and_then(|s| s.conditions.clone()).unwrap_or_default();
    let conditions = wanted
        .into_iter()
        .map(|c| {
            let before = old_conditions.iter().find(|o| o.type_ == c.type_);
            stamp(c, before, now)
        })
        .collect();
    DeploymentStatus {
        observed_generation: deploy.metadata.generation,
        replicas: Some(replicas),
        updated_replicas: Some(updated),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        unavailable_replicas: Some((desired - available).max(0)),
        collision_count: old.and_then(|s| s.collision_count),
        terminating_replicas: old.and_then(|s| s.terminating_replicas),
        conditions: Some(conditions),
    }
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        ..DeploymentCondition::default()
    }
}

/// Sets a condition's times as upstream does: both kept when nothing changed; the transition
/// time kept when only reason or message changed; both `now` when the status changed.
fn stamp(
    mut c: DeploymentCondition,
    old: Option<&DeploymentCondition>,
    now: jiff::Timestamp,
) -> DeploymentCondition {
    let now = Some(Time(now));
    match old {
        Some(o) if o.status == c.status && o.reason == c.reason && o.message == c.message => {
            c.last_transition_time = o.last_transition_time.clone().or(now.clone());
            c.last_update_time = o.last_update_time.clone().or(now);
        }
        Some(o) if o.status == c.status => {
            c.last_transition_time = o.last_transition_time.clone().or(now.clone());
            c.last_update_time = now;
        }
        _ => {
            c.last_transition_time = now.clone();
            c.last_update_time = now;
        }
    }
    c
}

/// Returns the old ReplicaSets to delete so at most `limit` scaled-down ones remain, oldest
/// revision first.
pub fn history_to_delete(old: &[&ReplicaSet], limit: i32) -> Vec<String> {
    let mut idle: Vec<&ReplicaSet> = old
        .iter()
        .copied()
        .filter(|rs| {
            rs.metadata.deletion_timestamp.is_none()
                && rs.spec.as_ref().and_then(|s| s.replicas) == Some(0)
                && rs.status.as_ref().is_none_or(|s| s.replicas == 0)
        })
        .collect();
    let keep = usize::try_from(limit).unwrap_or(0);
    if idle.len() <= keep {
        return Vec::new();
    }
    idle.sort_by_key(|rs| revision(rs));
    let n = idle.len() - keep;
    idle[..n].iter().map(|rs| rs.name_any()).collect()
}

// === reconcile ===

#[tracing::instrument(skip_all, fields(deploy.namespace = %d.namespace().unwrap_or_default(), deploy.name = %d.name_any()))]
async fn reconcile(d: Arc<Deployment>, ctx: Arc<Context>) -> Result<Action> {
    let result = sync(&d, &ctx).await;
    ctx.record(d.as_ref(), result)
}

/// Reads the Deployment and its children, acts on the decision, and writes status.
async fn sync(d: &Deployment, ctx: &Context) -> Result<Action> {
    let ns = d.namespace().unwrap_or_default();
    let deploys: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let rss: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(d) = owners::fresh(&deploys, d).await? else {
        return Ok(Action::await_change());
    };
    let Some(spec) = d.spec.as_ref() else {
        return Ok(Action::await_change());
    };
    if spec.paused == Some(true) || d.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = describe(&d);
    let Some(selector) = owners::selector(&d, Some(&spec.selector))? else {
        tracing::warn!("Deployment has an empty selector; it manages no ReplicaSets");
        return Ok(Action::await_change());
    };
    let mut owned = owners::list_owned(&rss, &selector, &d).await?;
    let collisions = d.status.as_ref().and_then(|s| s.collision_count);
    let hash = pod_template_hash(&spec.template, collisions);
    let desired = spec.replicas.unwrap_or(1);
    let max_rev = owned.iter().map(revision).max().unwrap_or(0);

    let new_index = owned
        .iter()
        .position(|rs| rs.labels().get(POD_TEMPLATE_HASH) == Some(&hash));
    let new_index = match new_index {
        Some(i) => {
            sync_new(
                &rss,
                &owned[i],
                desired,
                spec.min_ready_seconds,
                max_rev,
                &name,
            )
            .await?;
            i
        }
        None => {
            let rs = new_replicaset(&d, &hash, max_rev + 1);
            match rss.create(&PostParams::default(), &rs).await {
                Ok(created) => {
                    tracing::info!(rs.name = %created.name_any(), "ReplicaSet created");
                    owners::undo_if_owner_gone(&deploys, &d, &rss, &[created.name_any()]).await?;
                    owned.push(created);
                    owned.len() - 1
                }
                Err(kube::Error::Api(s)) if s.is_already_exists() => {
                    // Not ours (else the list would have it): pick another name, as upstream.
                    let next = collisions.unwrap_or(0).saturating_add(1);
                    tracing::info!(
                        collision_count = next,
                        "ReplicaSet name taken; bumping collisionCount"
                    );
                    deploys
                        .patch_status(
                            &d.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": {"collisionCount": next}})),
                        )
                        .await
                        .map_err(Error::api(format!("writing the collisionCount of {name}")))?;
                    return Ok(Action::requeue(std::time::Duration::ZERO));
                }
                Err(e) => return Err(Error::api(format!("creating the ReplicaSet of {name}"))(e)),
            }
        }
    };

    let new_rs = &owned[new_index];
    let new_revision = target_revision(revision(new_rs), max_rev);
    let old: Vec<&ReplicaSet> = owned
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != new_index)
        .map(|(_, rs)| rs)
        .collect();
    for rs in &old {
        if rs.spec.as_ref().and_then(|s| s.replicas) != Some(0) {
            tracing::info!(rs.name = %rs.name_any(), "scaling old ReplicaSet to 0");
            scale_to_zero(&rss, rs, &name).await?;
        }
    }
    let limit = spec.revision_history_limit.unwrap_or(DEFAULT_HISTORY);
    for old_name in history_to_delete(&old, limit) {
        tracing::info!(rs.name = %old_name, "deleting ReplicaSet beyond revisionHistoryLimit");
        match rss.delete(&old_name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                return Err(Error::api(format!(
                    "deleting old ReplicaSet {old_name} of {name}"
                ))(e));
            }
        }
    }

    let rev = new_revision.to_string();
    if d.annotations().get(REVISION) != Some(&rev) {
        deploys
            .patch(
                &d.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {REVISION: rev}}})),
            )
            .await
            .map_err(Error::api(format!("writing the revision of {name}")))?;
    }

    let new_status = status(&d, Some(new_rs), &owned, jiff::Timestamp::now());
    if d.status.as_ref() != Some(&new_status) {
        owners::write_status(&deploys, &d, &new_status).await?;
    }
    Ok(Action::requeue(RESYNC))
}

/// Brings the current template's ReplicaSet to `desired` replicas and the newest revision.
async fn sync_new(
    rss: &Api<ReplicaSet>,
    rs: &ReplicaSet,
    desired: i32,
    min_ready_seconds: Option<i32>,
    max_rev: u64,
    owner: &str,
) -> Result<()> {
    let spec = rs.spec.as_ref();
    let mut patch = serde_json::Map::new();
    if spec.and_then(|s| s.replicas) != Some(desired)
        || spec.and_then(|s| s.min_ready_seconds) != min_ready_seconds
    {
        patch.insert(
            "spec".into(),
            json!({"replicas": desired, "minReadySeconds": min_ready_seconds}),
        );
    }
    let target = target_revision(revision(rs), max_rev);
    if target != revision(rs) {
        patch.insert(
            "metadata".into(),
            json!({"annotations": {REVISION: target.to_string()}}),
        );
    }
    if patch.is_empty() {
        return Ok(());
    }
    tracing::info!(rs.name = %rs.name_any(), replicas = desired, "syncing the current ReplicaSet");
    rss.patch(
        &rs.name_any(),
        &PatchParams::default(),
        &Patch::Merge(serde_json::Value::Object(patch)),
    )
    .await
    .map_err(Error::api(format!(
        "scaling ReplicaSet {} of {owner}",
        rs.name_any()
    )))?;
    Ok(())
}

/// Scales an old ReplicaSet to zero replicas.
async fn scale_to_zero(rss: &Api<ReplicaSet>, rs: &ReplicaSet, owner: &str) -> Result<()> {
    let patch = Patch::Merge(json!({"spec": {"replicas": 0}}));
    rss.patch(&rs.name_any(), &PatchParams::default(), &patch)
        .await
        .map_err(Error::api(format!(
            "scaling down old ReplicaSet {} of {owner}",
            rs.name_any()
        )))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, ReplicaSetStatus};
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
        }
    }

    fn deploy(replicas: i32) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("d-uid".into()),
                generation: Some(2),
                ..ObjectMeta::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                selector: LabelSelector {
                    match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
                    ..LabelSelector::default()
                },
                template: template("nginx:1"),
                ..DeploymentSpec::default()
            }),
            status: None,
        }
    }

    fn rs_with(name: &str, rev: u64, replicas: i32, available: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some([(REVISION.to_owned(), rev.to_string())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                ..ReplicaSetSpec::default()
            }),
            status: Some(ReplicaSetStatus {
                replicas,
                ready_replicas: Some(available),
                available_replicas: Some(available),
                ..ReplicaSetStatus::default()
            }),
        }
    }

    #[test]
    fn template_hash_is_stable_short_and_safe() {
        let a = pod_template_hash(&template("nginx:1"), None);
        assert_eq!(a, pod_template_hash(&template("nginx:1"), None));
        assert!(!a.is_empty() && a.len() <= 10, "{a}");
        assert!(
            a.bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)),
            "{a}"
        );
        assert_ne!(a, pod_template_hash(&template("nginx:2"), None));
        assert_ne!(a, pod_template_hash(&template("nginx:1"), Some(1)));
    }

    #[test]
    fn safe_encoding_matches_upstream() {
        // Upstream maps byte b to alphanums[b % 27]: '0' (48) is index 21, '4'; '6' (54) wraps to 'b'.
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
    }

    #[test]
    fn new_replicaset_carries_the_hash_revision_and_owner() {
        let rs = new_replicaset(&deploy(3), "abc", 4);
        assert_eq!(rs.name_any(), "web-abc");
        assert_eq!(
            rs.labels().get(POD_TEMPLATE_HASH).map(String::as_str),
            Some("abc")
        );
        assert_eq!(revision(&rs), 4);
        let spec = rs.spec.clone().unwrap_or_default();
        assert_eq!(spec.replicas, Some(3));
        let sel = spec.selector.match_labels.unwrap_or_default();
        assert_eq!(sel.get(POD_TEMPLATE_HASH).map(String::as_str), Some("abc"));
        assert_eq!(sel.get("app").map(String::as_str), Some("web"));
        let tlabels = spec
            .template
            .and_then(|t| t.metadata)
            .and_then(|m| m.labels)
            .unwrap_or_default();
        assert_eq!(
            tlabels.get(POD_TEMPLATE_HASH).map(String::as_str),
            Some("abc")
        );
        let owner = &rs.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Deployment", "d-uid", Some(true))
        );
        assert_eq!(owner.block_owner_deletion, Some(true));
    }

    #[test]
    fn rolled_back_templates_become_the_newest_revision() {
        assert_eq!(target_revision(3, 3), 3);
        assert_eq!(target_revision(1, 3), 4);
        assert_eq!(target_revision(0, 0), 1);
        assert_eq!(target_revision(0, 2), 3);
    }

    #[test]
    fn max_unavailable_rounds_percentages_down() {
        assert_eq!(max_unavailable(&deploy(3)), 0);
        assert_eq!(max_unavailable(&deploy(8)), 2);
        let mut d = deploy(8);
        if let Some(s) = d.spec.as_mut() {
            s.strategy = Some(k8s_openapi::api::apps::v1::DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            });
        }
        assert_eq!(max_unavailable(&d), 0);
    }

    #[test]
    fn status_sums_replicasets_and_keeps_unchanged_condition_times() {
        let d = deploy(3);
        let new = rs_with("web-new", 2, 3, 3);
        let old = rs_with("web-old", 1, 1, 1);
        let all = vec![new.clone(), old];
        let t0 = jiff::Timestamp::from_second(1_700_000_000).expect("valid");
        let s = status(&d, Some(&new), &all, t0);
        assert_eq!(s.replicas, Some(4));
        assert_eq!(s.updated_replicas, Some(3));
        assert_eq!(s.available_replicas, Some(4));
        assert_eq!(s.unavailable_replicas, Some(0));
        assert_eq!(s.observed_generation, Some(2));
        let progressing = |s: &DeploymentStatus| {
            s.conditions
                .clone()
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "Progressing")
        };
        assert_eq!(
            progressing(&s).and_then(|c| c.reason).as_deref(),
            Some("ReplicaSetUpdated")
        );

        // The old ReplicaSet drains: progress completes; Available keeps its times.
        let mut d2 = d.clone();
        d2.status = Some(s);
        let all = vec![new.clone(), rs_with("web-old", 1, 0, 0)];
        let later = t0 + jiff::SignedDuration::from_secs(60);
        let s2 = status(&d2, Some(&new), &all, later);
        let available = s2
            .conditions
            .clone()
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Available");
        assert_eq!(available.and_then(|c| c.last_update_time), Some(Time(t0)));
        let p = progressing(&s2);
        assert_eq!(
            p.clone().and_then(|c| c.reason).as_deref(),
            Some("NewReplicaSetAvailable")
        );
        assert_eq!(
            p.clone().and_then(|c| c.last_transition_time),
            Some(Time(t0))
        );
        assert_eq!(p.and_then(|c| c.last_update_time), Some(Time(later)));
        // Nothing changes: the same status, so no write.
        let mut d3 = d2.clone();
        d3.status = Some(s2.clone());
        assert_eq!(
            status(
                &d3,
                Some(&new),
                &all,
                later + jiff::SignedDuration::from_secs(5)
            ),
            s2
        );
    }

    #[test]
    fn history_beyond_the_limit_goes_oldest_first() {
        let a = rs_with("a", 1, 0, 0);
        let b = rs_with("b", 2, 0, 0);
        let c = rs_with("c", 3, 0, 0);
        let busy = rs_with("busy", 0, 2, 2);
        assert_eq!(history_to_delete(&[&c, &busy, &a, &b], 1), ["a", "b"]);
        assert!(history_to_delete(&[&a, &b], 10).is_empty());
    }
}
