//! The StatefulSet controller (apps/v1): gives a StatefulSet its pods with stable identities, in
//! order, as upstream's `pkg/controller/statefulset` does, so workload actions on StatefulSets
//! (WAM's test-c) and tests meet what a cluster does.
//!
//! As upstream: pod `<set>-<ordinal>` for each ordinal from `spec.ordinals.start` (default 0),
//! labelled with the template's labels plus `statefulset.kubernetes.io/pod-name`,
//! `apps.kubernetes.io/pod-index` and `controller-revision-hash` (the revision's name), with
//! `hostname` the pod's name and `subdomain` the set's `serviceName`, and a controller
//! ownerReference with blockOwnerDeletion; one PersistentVolumeClaim per volumeClaimTemplate,
//! `<template>-<set>-<ordinal>`, created (when missing) before its pod and referenced by a volume
//! named after the template, and kept when pods go (the default `Retain` policy); the template's
//! revisions as ControllerRevisions `<set>-<hash>` (controlled by the set, labelled with the
//! template's labels and `controller.kubernetes.io/hash`, `data` holding the template as
//! upstream's replace patch, `revision` one past the highest; a revision equal to an older one is
//! reused and renumbered; a name taken by different data bumps `status.collisionCount`; history
//! beyond `revisionHistoryLimit` that no pod uses is deleted). `OrderedReady` (the default)
//! creates ordinal *i* only when every lower one is Running and Ready (and available for
//! `minReadySeconds`), one per sync, and stops at the first pod that is not; it scales down from
//! the highest ordinal, one pod at a time, waiting for each to be gone, only while the pods it
//! keeps are healthy, and an unhealthy pod above them goes only when it is the first unhealthy
//! one. `Parallel` creates and deletes all at once. Failed and Succeeded pods are
//! deleted and recreated with the same name. `RollingUpdate` deletes, highest ordinal first and one
//! at a time, pods at ordinals `>= start + partition` whose `controller-revision-hash` is not the
//! update revision, waiting for each replacement to be healthy; pods created below the partition
//! get the current revision's template. `OnDelete` only gives recreated pods the new template.
//! Status (replicas, readyReplicas, currentReplicas, updatedReplicas, availableReplicas,
//! currentRevision, updateRevision, collisionCount, observedGeneration; the current revision
//! advances once every pod is updated and ready) goes through the status subresource when it
//! changes; a set being deleted gets no pod changes.
//!
//! Simplified: `persistentVolumeClaimRetentionPolicy` `Delete` is not applied (claims are always
//! retained) and claims get no ownerReferences; claims stay Pending (the sim binds no volumes, and
//! its scheduler ignores them); `maxUnavailable` (alpha) is ignored, so updates go one pod at a
//! time; pods whose labels or volumes were changed by hand are not repaired (upstream's
//! `identityMatches`/`storageMatches`); orphans are not adopted; creation is not batched
//! (`Parallel` creates all missing pods in one sync); no Events.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::deployment::pod_template_hash;
use super::error::{Error, Result};
use super::owners::{self, describe, is_not_found};
use super::pods;
use super::runner::{self, Context, RESYNC};

/// The pod label naming the pod itself, so a Service can select one replica.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The pod label holding the pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The pod label naming the ControllerRevision the pod was made from.
pub const REVISION_LABEL: &str = "controller-revision-hash";
/// The ControllerRevision label holding the revision's hash.
pub const REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// Runs the StatefulSet controller until `stop` is cancelled.
pub async fn run(client: Client, stop: CancellationToken) {
    let ctx = Context::new(client.clone());
    runner::drive("statefulset", stop, || {
        Controller::new(
            Api::<StatefulSet>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
        .run(reconcile, runner::error_policy, ctx.clone())
    })
    .await;
}

// === identity ===

/// Returns the first ordinal (`spec.ordinals.start`, default 0).
pub fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
}

fn replicas(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
        .max(0)
}

/// Returns the name of the set's pod with `ordinal`.
pub fn pod_name(set: &str, ordinal: i32) -> String {
    format!("{set}-{ordinal}")
}

/// Returns the ordinal of `pod` when its name is `<set>-<digits>`, as upstream parses it.
pub fn ordinal_of(set: &str, pod: &str) -> Option<i32> {
    let (parent, digits) = pod.rsplit_once('-')?;
    if parent != set || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Returns the name of the claim `template` makes for the pod with `ordinal`.
pub fn claim_name(template: &str, set: &str, ordinal: i32) -> String {
    format!("{template}-{set}-{ordinal}")
}

/// Returns the claims the pod with `ordinal` needs: each volumeClaimTemplate, named for the pod,
/// labelled with the set's `matchLabels` on top of the template's.
pub fn claims(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let Some(spec) = set.spec.as_ref() else {
        return Vec::new();
    };
    let match_labels = spec.selector.match_labels.clone().unwrap_or_default();
    spec.volume_claim_templates
        .iter()
        .flatten()
        .map(|template| {
            let mut claim = template.clone();
            let meta = &mut claim.metadata;
            meta.name = Some(claim_name(
                template.metadata.name.as_deref().unwrap_or_default(),
                &set.name_any(),
                ordinal,
            ));
            meta.namespace = set.metadata.namespace.clone();
            meta.labels
                .get_or_insert_with(BTreeMap::new)
                .extend(match_labels.clone());
            meta.resource_version = None;
            meta.uid = None;
            claim.status = None;
            claim
        })
        .collect()
}

/// Returns the pod with `ordinal` that `set`, carrying `template`, creates at `revision`.
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, ordinal: i32, revision: &str) -> Pod {
    let name = pod_name(&set.name_any(), ordinal);
    let labels = BTreeMap::from([
        (POD_NAME_LABEL.to_owned(), name.clone()),
        (POD_INDEX_LABEL.to_owned(), ordinal.to_string()),
        (REVISION_LABEL.to_owned(), revision.to_owned()),
    ]);
    // The server fills in the uid on create; a stored StatefulSet always has one.
    let owner = owners::controller_ref(set).unwrap_or_default();
    let namespace = set.namespace().unwrap_or_default();
    let mut pod = pods::from_template(template, &namespace, String::new(), owner, &labels);
    pod.metadata.generate_name = None;
    pod.metadata.name = Some(name.clone());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(name);
    spec.subdomain = set
        .spec
        .as_ref()
        .and_then(|s| s.service_name.clone())
        .filter(|s| !s.is_empty());
    // One volume per claim, named after its template, replacing a template volume of that name.
    let claim_volumes: Vec<Volume> = claims(set, ordinal)
        .into_iter()
        .zip(
            set.spec
                .iter()
                .flat_map(|s| s.volume_claim_templates.iter().flatten()),
        )
        .map(|(claim, template)| Volume {
            name: template.name_any(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.name_any(),
                read_only: Some(false),
            }),
            ..Volume::default()
        })
        .collect();
    if !claim_volumes.is_empty() {
        let taken: BTreeSet<String> = claim_volumes.iter().map(|v| v.name.clone()).collect();
        let mut volumes = claim_volumes;
        volumes.extend(
            spec.volumes
                .take()
                .unwrap_or_default()
                .into_iter()
                .filter(|v| !taken.contains(&v.name)),
        );
        spec.volumes = Some(volumes);
    }
    pod
}

/// Returns the revision `pod` was made from (its `controller-revision-hash` label).
pub fn pod_revision(pod: &Pod) -> &str {
    pod.labels().get(REVISION_LABEL).map_or("", String::as_str)
}

// === revisions ===

/// Returns the revision data for `template`: upstream's patch that restores it.
pub fn revision_data(template: &PodTemplateSpec) -> serde_json::Value {
    let mut t = serde_json::to_value(template).unwrap_or_default();
    if let Some(o) = t.as_object_mut() {
        o.insert("$patch".into(), json!("replace"));
    }
    json!({ "spec": { "template": t } })
}

/// Returns the template a revision holds; `None` when its data is not a StatefulSet patch.
pub fn revision_template(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut t = revision.data.as_ref()?.0.pointer("/spec/template")?.clone();
    t.as_object_mut()?.remove("$patch");
    serde_json::from_value(t).ok()
}

/// Returns the name and hash of the revision `set`'s current template makes. The hash changes
/// exactly when the template (or `status.collisionCount`) does.
pub fn revision_name(set: &StatefulSet) -> (String, String) {
    let template = set
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let collisions = set.status.as_ref().and_then(|s| s.collision_count);
    let hash = pod_template_hash(&template, collisions);
    (format!("{}-{hash}", set.name_any()), hash)
}

/// Returns the ControllerRevision that records `set`'s current template as `number`.
pub fn new_revision(set: &StatefulSet, number: i64) -> ControllerRevision {
    let (name, hash) = revision_name(set);
    let template = set
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(REVISION_HASH_LABEL.into(), hash);
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: owners::controller_ref(set).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(revision_data(&template))),
        revision: number,
    }
}

/// Returns the revisions to delete: the oldest of those no pod uses and that are neither current
/// nor the update, beyond `limit` of them.
pub fn history_to_delete(
    revisions: &[ControllerRevision],
    live: &BTreeSet<String>,
    limit: i32,
) -> Vec<String> {
    let mut old: Vec<&ControllerRevision> = revisions
        .iter()
        .filter(|r| !live.contains(&r.name_any()))
        .collect();
    let keep = usize::try_from(limit).unwrap_or(0);
    if old.len() <= keep {
        return Vec::new();
    }
    old.sort_by_key(|r| r.revision);
    old[..old.len() - keep]
        .iter()
        .map(|r| r.name_any())
        .collect()
}

// === pure decisions ===

/// One change to the set's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Create the claims, then the pod, for `ordinal`; from the current revision's template when
    /// `current` (below the partition), else from the update revision's.
    Create {
        /// The pod's ordinal.
        ordinal: i32,
        /// Whether the current revision (not the update revision) makes it.
        current: bool,
    },
    /// Create the missing claims of the existing, pending pod with `ordinal`.
    Claims {
        /// The pod's ordinal.
        ordinal: i32,
    },
    /// Delete the pod (finished, condemned by a scale-down, or of an old revision).
    Delete {
        /// The pod's name.
        pod: String,
    },
}

fn is_parallel(set: &StatefulSet) -> bool {
    set.spec
        .as_ref()
        .and_then(|s| s.pod_management_policy.as_deref())
        == Some("Parallel")
}

fn is_on_delete(set: &StatefulSet) -> bool {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        == Some("OnDelete")
}

fn partition(set: &StatefulSet) -> Option<i32> {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref())
        .map(|r| r.partition.unwrap_or(0))
}

fn min_ready_seconds(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Running, Ready and not being deleted: what lets an ordered set go on.
fn is_healthy(pod: &Pod) -> bool {
    pods::is_running_and_ready(pod) && !is_terminating(pod)
}

/// Returns whether a pod created now at `ordinal` gets the current revision rather than the
/// update revision (upstream's `newVersionedStatefulSetPod`): below the partition under
/// RollingUpdate.
pub fn uses_current_revision(set: &StatefulSet, ordinal: i32) -> bool {
    if is_on_delete(set) {
        return false;
    }
    let start = start_ordinal(set);
    match partition(set) {
        Some(p) => ordinal < start.saturating_add(p),
        None => {
            let current = set
                .status
                .as_ref()
                .and_then(|s| s.current_replicas)
                .unwrap_or(0);
            ordinal < start.saturating_add(current)
        }
    }
}

/// Decides the changes that bring `pods` (the set's own) toward `set`'s spec, given the update
/// revision's name, as upstream's `updateStatefulSet` does in one sync: replicas in ordinal
/// order, then condemned pods from the highest ordinal, then the rolling update. An ordered set
/// stops at the first step it must wait on.
pub fn plan(
    set: &StatefulSet,
    pods: &[Pod],
    update_revision: &str,
    now: jiff::Timestamp,
) -> Vec<Step> {
    if set.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    let name = set.name_any();
    let start = start_ordinal(set);
    let end = start.saturating_add(replicas(set));
    let ordered = !is_parallel(set);
    let min_ready = min_ready_seconds(set);
    let mut slots: Vec<Option<&Pod>> = vec![None; usize::try_from(end - start).unwrap_or(0)];
    let mut condemned: Vec<(i32, &Pod)> = Vec::new();
    for pod in pods {
        let Some(ordinal) = ordinal_of(&name, &pod.name_any()) else {
            continue;
        };
        if (start..end).contains(&ordinal) {
            if let Some(slot) = usize::try_from(ordinal - start)
                .ok()
                .and_then(|i| slots.get_mut(i))
            {
                *slot = Some(pod);
            }
        } else {
            condemned.push((ordinal, pod));
        }
    }
    condemned.sort_by_key(|(ordinal, _)| std::cmp::Reverse(*ordinal));
    let first_unhealthy = slots
        .iter()
        .flatten()
        .copied()
        // Condemned pods in ascending order here, as upstream looks for the lowest.
        .chain(condemned.iter().rev().map(|(_, p)| *p))
        .find(|p| !is_healthy(p))
        .map(|p| p.name_any());

    let mut steps = Vec::new();
    for (ordinal, slot) in (start..end).zip(&slots) {
        let Some(pod) = slot else {
            steps.push(Step::Create {
                ordinal,
                current: uses_current_revision(set, ordinal),
            });
            if ordered {
                return steps;
            }
            continue;
        };
        if pods::is_terminal(pod) {
            // Recreated with the same name once this one is gone.
            if !is_terminating(pod) {
                steps.push(Step::Delete {
                    pod: pod.name_any(),
                });
            }
            if ordered {
                return steps;
            }
            continue;
        }
        if pods::phase(pod) == "Pending" && !claims(set, ordinal).is_empty() {
            steps.push(Step::Claims { ordinal });
        }
        if ordered && !(is_healthy(pod) && pods::is_available(pod, min_ready, now)) {
            return steps;
        }
    }

    for (_, pod) in &condemned {
        if is_terminating(pod) {
            if ordered {
                return steps;
            }
            continue;
        }
        let is_first_unhealthy = first_unhealthy.as_deref() == Some(pod.name_any().as_str());
        if ordered
            && !(pods::is_running_and_ready(pod) && pods::is_available(pod, min_ready, now))
            && !is_first_unhealthy
        {
            return steps;
        }
        steps.push(Step::Delete {
            pod: pod.name_any(),
        });
        if ordered {
            return steps;
        }
    }

    if is_on_delete(set) {
        return steps;
    }
    let update_min = start.saturating_add(partition(set).unwrap_or(0));
    for (ordinal, slot) in (start..end).zip(&slots).rev() {
        if ordinal < update_min {
            break;
        }
        let Some(pod) = slot else { break };
        if pod_revision(pod) != update_revision && !is_terminating(pod) {
            steps.push(Step::Delete {
                pod: pod.name_any(),
            });
            break;
        }
        if !is_healthy(pod) {
            break;
        }
    }
    steps
}

/// Computes the status `pods` (the set's own) give `set` at `now`, as upstream counts it: every
/// pod toward replicas, Running and Ready ones toward ready (and available after
/// `minReadySeconds`), pods not being deleted toward the revision they carry; the current revision
/// becomes the update revision once every pod is updated and ready under RollingUpdate.
pub fn status(
    set: &StatefulSet,
    pods: &[Pod],
    current_revision: &str,
    update_revision: &str,
    now: jiff::Timestamp,
) -> StatefulSetStatus {
    let min_ready = min_ready_seconds(set);
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(pods.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let replicas = count(&|_| true);
    let ready = count(&pods::is_running_and_ready);
    let available =
        count(&|p| pods::is_running_and_ready(p) && pods::is_available(p, min_ready, now));
    let current = count(&|p| !is_terminating(p) && pod_revision(p) == current_revision);
    let updated = count(&|p| !is_terminating(p) && pod_revision(p) == update_revision);
    let old = set.status.clone().unwrap_or_default();
    let mut status = StatefulSetStatus {
        replicas,
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        current_replicas: Some(current),
        updated_replicas: Some(updated),
        current_revision: Some(current_revision.to_owned()),
        update_revision: Some(update_revision.to_owned()),
        observed_generation: set.metadata.generation,
        collision_count: old.collision_count,
        conditions: old.conditions,
    };
    if !is_on_delete(set) && updated == replicas && ready == replicas {
        status.current_replicas = Some(updated);
        status.current_revision = Some(update_revision.to_owned());
    }
    status
}

/// Returns when to look again: when the next ready pod becomes available, else at resync.
fn next_check(set: &StatefulSet, pods: &[Pod], now: jiff::Timestamp) -> Action {
    let min_ready = min_ready_seconds(set);
    pods.iter()
        .filter_map(|p| pods::available_at(p, min_ready, now))
        .min()
        .and_then(|at| now.duration_until(at).try_into().ok())
        .map_or(Action::requeue(RESYNC), Action::requeue)
}

// === reconcile ===

#[tracing::instrument(skip_all, fields(sts.namespace = %set.namespace().unwrap_or_default(), sts.name = %set.name_any()))]
async fn reconcile(set: Arc<StatefulSet>, ctx: Arc<Context>) -> Result<Action> {
    let result = sync(&set, &ctx).await;
    ctx.record(set.as_ref(), result)
}

/// The APIs one StatefulSet's sync uses.
struct Apis {
    sets: Api<StatefulSet>,
    pods: Api<Pod>,
    revisions: Api<ControllerRevision>,
    claims: Api<PersistentVolumeClaim>,
}

/// Reads the set, its revisions and pods, acts on the decision, and writes status.
async fn sync(set: &StatefulSet, ctx: &Context) -> Result<Action> {
    let ns = set.namespace().unwrap_or_default();
    let apis = Apis {
        sets: Api::namespaced(ctx.client.clone(), &ns),
        pods: Api::namespaced(ctx.client.clone(), &ns),
        revisions: Api::namespaced(ctx.client.clone(), &ns),
        claims: Api::namespaced(ctx.client.clone(), &ns),
    };
    let Some(set) = owners::fresh(&apis.sets, set).await? else {
        return Ok(Action::await_change());
    };
    let name = describe(&set);
    let Some(spec) = set.spec.as_ref() else {
        return Ok(Action::await_change());
    };
    let Some(selector) = owners::selector(&set, Some(&spec.selector))? else {
        tracing::warn!("StatefulSet has an empty selector; it manages no pods");
        return Ok(Action::await_change());
    };
    let revisions = owners::list_owned(&apis.revisions, &selector, &set).await?;
    let Some(update) = update_revision(&apis, &set, &revisions).await? else {
        // A hash collision: collisionCount went up, and that change brings the next sync.
        return Ok(Action::await_change());
    };
    let current = set
        .status
        .as_ref()
        .and_then(|s| s.current_revision.as_deref())
        .and_then(|c| revisions.iter().find(|r| r.name_any() == c))
        .cloned()
        .unwrap_or_else(|| update.clone());
    let owned = owners::list_owned(&apis.pods, &selector, &set).await?;

    let now = jiff::Timestamp::now();
    let steps = plan(&set, &owned, &update.name_any(), now);
    let mut created = Vec::new();
    let applied = apply(&apis, &set, &steps, &current, &update, &name, &mut created).await;
    // Whatever was created must not outlive a set deleted meanwhile, even after an error.
    owners::undo_if_owner_gone(&apis.sets, &set, &apis.pods, &created).await?;
    applied?;

    let new_status = status(&set, &owned, &current.name_any(), &update.name_any(), now);
    if set.status.as_ref() != Some(&new_status) {
        owners::write_status(&apis.sets, &set, &new_status).await?;
    }
    truncate_history(&apis, &set, &revisions, &owned, &new_status).await?;
    Ok(next_check(&set, &owned, now))
}

/// Carries out `steps`, adding the names of the pods it creates to `created`.
async fn apply(
    apis: &Apis,
    set: &StatefulSet,
    steps: &[Step],
    current: &ControllerRevision,
    update: &ControllerRevision,
    owner: &str,
    created: &mut Vec<String>,
) -> Result<()> {
    for step in steps {
        match step {
            Step::Create {
                ordinal,
                current: use_current,
            } => {
                let revision = if *use_current { current } else { update };
                let template = revision_template(revision).unwrap_or_else(|| {
                    set.spec
                        .as_ref()
                        .map(|s| s.template.clone())
                        .unwrap_or_default()
                });
                create_claims(apis, set, *ordinal).await?;
                let pod = new_pod(set, &template, *ordinal, &revision.name_any());
                match apis.pods.create(&PostParams::default(), &pod).await {
                    Ok(_) => {
                        tracing::info!(pod.name = %pod.name_any(), revision = %revision.name_any(), "pod created");
                        created.push(pod.name_any());
                    }
                    // A pod the list did not show yet; the next sync sees it.
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => {
                        return Err(Error::api(format!(
                            "creating pod {} of {owner}",
                            pod.name_any()
                        ))(e));
                    }
                }
            }
            Step::Claims { ordinal } => create_claims(apis, set, *ordinal).await?,
            Step::Delete { pod } => {
                tracing::info!(pod.name = %pod, "deleting pod");
                pods::delete(&apis.pods, std::slice::from_ref(pod), owner).await?;
            }
        }
    }
    Ok(())
}

/// Creates the claims of the pod with `ordinal` that do not exist yet.
async fn create_claims(apis: &Apis, set: &StatefulSet, ordinal: i32) -> Result<()> {
    for claim in claims(set, ordinal) {
        let claim_name = claim.name_any();
        let existing = apis
            .claims
            .get_opt(&claim_name)
            .await
            .map_err(Error::api(format!("reading claim {claim_name}")))?;
        if existing.is_some() {
            continue;
        }
        match apis.claims.create(&PostParams::default(), &claim).await {
            Ok(_) => tracing::info!(claim.name = %claim_name, "claim created"),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                return Err(Error::api(format!(
                    "creating claim {claim_name} of {}",
                    describe(set)
                ))(e));
            }
        }
    }
    Ok(())
}

/// Returns the revision of the set's current template, creating or renumbering it as upstream
/// does; `None` after bumping `collisionCount` because the name is taken by other data.
async fn update_revision(
    apis: &Apis,
    set: &StatefulSet,
    revisions: &[ControllerRevision],
) -> Result<Option<ControllerRevision>> {
    let highest = revisions.iter().map(|r| r.revision).max().unwrap_or(0);
    let wanted = new_revision(set, highest + 1);
    let name = wanted.name_any();
    let existing = match revisions.iter().find(|r| r.name_any() == name) {
        Some(r) => Some(r.clone()),
        None => match apis.revisions.create(&PostParams::default(), &wanted).await {
            Ok(created) => {
                tracing::info!(revision = %name, number = created.revision, "revision created");
                return Ok(Some(created));
            }
            Err(kube::Error::Api(s)) if s.code == 409 => apis
                .revisions
                .get_opt(&name)
                .await
                .map_err(Error::api(format!("reading revision {name}")))?,
            Err(e) => return Err(Error::api(format!("creating revision {name}"))(e)),
        },
    };
    let uid = set.uid().unwrap_or_default();
    match existing {
        Some(r) if r.data == wanted.data && owners::is_controlled_by(&r, &uid) => {
            if r.revision >= highest {
                return Ok(Some(r));
            }
            // A template rolled back to: that revision becomes the newest.
            let patch = Patch::Merge(json!({ "revision": highest + 1 }));
            let renumbered = apis
                .revisions
                .patch(&name, &PatchParams::default(), &patch)
                .await
                .map_err(Error::api(format!("renumbering revision {name}")))?;
            Ok(Some(renumbered))
        }
        _ => {
            let collisions = set
                .status
                .as_ref()
                .and_then(|s| s.collision_count)
                .unwrap_or(0);
            tracing::info!(revision = %name, collisions = collisions + 1, "revision name taken; bumping collisionCount");
            owners::write_status(
                &apis.sets,
                set,
                &json!({ "collisionCount": collisions.saturating_add(1) }),
            )
            .await?;
            Ok(None)
        }
    }
}

/// Deletes revisions beyond `revisionHistoryLimit` (default 10) that nothing uses any more.
async fn truncate_history(
    apis: &Apis,
    set: &StatefulSet,
    revisions: &[ControllerRevision],
    pods: &[Pod],
    status: &StatefulSetStatus,
) -> Result<()> {
    let mut live: BTreeSet<String> = pods.iter().map(|p| pod_revision(p).to_owned()).collect();
    live.extend(status.current_revision.clone());
    live.extend(status.update_revision.clone());
    let limit = set
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10);
    for name in history_to_delete(revisions, &live, limit) {
        match apis
            .revisions
            .delete(&name, &DeleteParams::background())
            .await
        {
            Ok(_) => tracing::debug!(revision = %name, "old revision deleted"),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::api(format!("deleting revision {name}"))(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::cluster::controllers::pods::tests::{pod, ready, ts};

    fn set(replicas: i32, extra: serde_json::Value) -> StatefulSet {
        let mut v = json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "generation": 3},
            "spec": {
                "replicas": replicas,
                "serviceName": "web-svc",
                "selector": {"matchLabels": {"app": "web"}},
                "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "nginx:1"}],
                             "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}]}
                },
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data", "labels": {"tier": "db"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
                }]
            }
        });
        json_patch::merge(&mut v, &extra);
        serde_json::from_value(v).unwrap()
    }

    /// A pod of the set: ordinal, revision, and whether it is Running and Ready.
    fn member(ordinal: i32, revision: &str, healthy: bool) -> Pod {
        let name = pod_name("web", ordinal);
        let mut p = if healthy {
            ready(pod(&name, i64::from(ordinal), "Running"), 0)
        } else {
            pod(&name, i64::from(ordinal), "Pending")
        };
        p.metadata.labels = Some([(REVISION_LABEL.to_owned(), revision.to_owned())].into());
        p
    }

    fn no_claims(mut s: StatefulSet) -> StatefulSet {
        s.spec.as_mut().unwrap().volume_claim_templates = None;
        s
    }

    fn create(ordinal: i32) -> Step {
        Step::Create {
            ordinal,
            current: false,
        }
    }

    fn delete(name: &str) -> Step {
        Step::Delete { pod: name.into() }
    }

    #[test]
    fn ordinals_parse_only_for_the_set() {
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        assert_eq!(ordinal_of("my-web", "my-web-3"), Some(3));
        assert_eq!(ordinal_of("web", "web-x"), None);
        assert_eq!(ordinal_of("web", "web-"), None);
        assert_eq!(ordinal_of("web", "other-1"), None);
        assert_eq!(ordinal_of("web", "web-+1"), None);
        assert_eq!(ordinal_of("web", "web-a-1"), None);
    }

    #[test]
    fn pods_get_identity_storage_revision_and_owner() {
        let s = set(2, json!({}));
        let template = s.spec.as_ref().unwrap().template.clone();
        let p = new_pod(&s, &template, 1, "web-abc");
        assert_eq!(p.metadata.name.as_deref(), Some("web-1"));
        assert_eq!(p.metadata.generate_name, None);
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
        let labels = p.labels();
        assert_eq!(labels["app"], "web");
        assert_eq!(labels[POD_NAME_LABEL], "web-1");
        assert_eq!(labels[POD_INDEX_LABEL], "1");
        assert_eq!(labels[REVISION_LABEL], "web-abc");
        let owner = &p.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("StatefulSet", "u1")
        );
        assert_eq!(owner.controller, Some(true));
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-1"));
        assert_eq!(spec.subdomain.as_deref(), Some("web-svc"));
        let volumes = spec.volumes.as_ref().unwrap();
        assert_eq!(
            volumes.len(),
            2,
            "the claim replaces the template's volume of its name"
        );
        assert_eq!(volumes[0].name, "data");
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "data-web-1"
        );
        assert_eq!(volumes[1].name, "cache");
    }

    #[test]
    fn claims_are_named_for_the_pod_and_carry_the_selector() {
        let c = claims(&set(2, json!({})), 4);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].metadata.name.as_deref(), Some("data-web-4"));
        assert_eq!(c[0].metadata.namespace.as_deref(), Some("ns"));
        let labels = c[0].labels();
        assert_eq!(
            (labels["app"].as_str(), labels["tier"].as_str()),
            ("web", "db")
        );
    }

    #[test]
    fn ordered_sets_create_one_pod_at_a_time_after_the_previous_is_ready() {
        let s = set(3, json!({}));
        assert_eq!(plan(&s, &[], "r2", ts(0)), [create(0)]);
        // web-0 exists but is not ready: wait (its claims are ensured while it is pending).
        let pending = [member(0, "r2", false)];
        assert_eq!(
            plan(&s, &pending, "r2", ts(0)),
            [Step::Claims { ordinal: 0 }]
        );
        let s = no_claims(s);
        assert_eq!(plan(&s, &pending, "r2", ts(0)), []);
        let first_ready = [member(0, "r2", true)];
        assert_eq!(plan(&s, &first_ready, "r2", ts(0)), [create(1)]);
        // A missing lower ordinal comes back first, with the same name.
        let hole = [member(0, "r2", true), member(2, "r2", true)];
        assert_eq!(plan(&s, &hole, "r2", ts(0)), [create(1)]);
    }

    #[test]
    fn ordered_sets_wait_for_min_ready_seconds() {
        let s = no_claims(set(2, json!({"spec": {"minReadySeconds": 30}})));
        let pods = [member(0, "r", true)]; // ready since ts(0)
        assert_eq!(plan(&s, &pods, "r", ts(10)), []);
        assert_eq!(plan(&s, &pods, "r", ts(30)), [create(1)]);
    }

    #[test]
    fn ordinals_start_where_the_spec_says() {
        let s = no_claims(set(2, json!({"spec": {"ordinals": {"start": 5}}})));
        assert_eq!(plan(&s, &[], "r", ts(0)), [create(5)]);
        let pods = [member(5, "r", true), member(0, "r", true)];
        assert_eq!(plan(&s, &pods, "r", ts(0)), [create(6)]);
        let pods = [
            member(5, "r", true),
            member(6, "r", true),
            member(0, "r", true),
        ];
        assert_eq!(
            plan(&s, &pods, "r", ts(0)),
            [delete("web-0")],
            "outside the range"
        );
    }

    #[test]
    fn parallel_sets_create_and_delete_all_at_once() {
        let s = no_claims(set(3, json!({"spec": {"podManagementPolicy": "Parallel"}})));
        assert_eq!(plan(&s, &[], "r", ts(0)), [create(0), create(1), create(2)]);
        let s = no_claims(set(1, json!({"spec": {"podManagementPolicy": "Parallel"}})));
        let pods = [
            member(0, "r", false),
            member(1, "r", false),
            member(2, "r", true),
        ];
        assert_eq!(
            plan(&s, &pods, "r", ts(0)),
            [delete("web-2"), delete("web-1")]
        );
    }

    #[test]
    fn ordered_scale_down_takes_the_highest_first_and_only_when_the_rest_are_healthy() {
        let s = no_claims(set(1, json!({})));
        let pods = [
            member(0, "r", true),
            member(1, "r", true),
            member(2, "r", true),
        ];
        assert_eq!(plan(&s, &pods, "r", ts(0)), [delete("web-2")]);
        // An unhealthy condemned pod waits while it is not the first unhealthy one.
        let pods = [
            member(0, "r", true),
            member(1, "r", true),
            member(2, "r", false),
            member(3, "r", false),
        ];
        assert_eq!(plan(&s, &pods, "r", ts(0)), []);
        // The first unhealthy pod itself may go.
        let pods = [member(0, "r", true), member(1, "r", false)];
        assert_eq!(plan(&s, &pods, "r", ts(0)), [delete("web-1")]);
        // As upstream, a healthy condemned pod goes even when a lower condemned one is unhealthy.
        let pods = [
            member(0, "r", true),
            member(1, "r", false),
            member(2, "r", true),
        ];
        assert_eq!(plan(&s, &pods, "r", ts(0)), [delete("web-2")]);
        // A remaining replica that is not ready blocks scale-down.
        let pods = [member(0, "r", false), member(1, "r", true)];
        assert_eq!(plan(&s, &pods, "r", ts(0)), []);
    }

    #[test]
    fn failed_pods_are_deleted_to_be_recreated() {
        let s = no_claims(set(2, json!({})));
        let mut failed = member(0, "r", false);
        failed.status.as_mut().unwrap().phase = Some("Failed".into());
        assert_eq!(
            plan(&s, &[failed, member(1, "r", true)], "r", ts(0)),
            [delete("web-0")]
        );
    }

    #[test]
    fn rolling_updates_replace_from_the_highest_ordinal_down_to_the_partition() {
        let s = no_claims(set(
            4,
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}}),
        ));
        let all_old: Vec<Pod> = (0..4).map(|i| member(i, "old", true)).collect();
        assert_eq!(plan(&s, &all_old, "new", ts(0)), [delete("web-3")]);
        // web-3 updated but not ready yet: wait.
        let mut pods = all_old.clone();
        pods[3] = member(3, "new", false);
        assert_eq!(plan(&s, &pods, "new", ts(0)), []);
        pods[3] = member(3, "new", true);
        assert_eq!(plan(&s, &pods, "new", ts(0)), [delete("web-2")]);
        pods[2] = member(2, "new", true);
        assert_eq!(
            plan(&s, &pods, "new", ts(0)),
            [],
            "below the partition stays"
        );
        // Recreated pods below the partition keep the current revision.
        assert!(uses_current_revision(&s, 1));
        assert!(!uses_current_revision(&s, 2));
        let on_delete = no_claims(set(
            4,
            json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}),
        ));
        assert_eq!(plan(&on_delete, &all_old, "new", ts(0)), []);
        assert!(!uses_current_revision(&on_delete, 0));
    }

    #[test]
    fn a_set_being_deleted_gets_no_changes() {
        let mut s = no_claims(set(2, json!({})));
        s.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(0)));
        assert_eq!(plan(&s, &[], "r", ts(0)), []);
    }

    #[test]
    fn status_counts_revisions_and_completes_the_rollout() {
        let s = no_claims(set(3, json!({"spec": {"minReadySeconds": 10}})));
        let pods = [
            member(0, "old", true),
            member(1, "new", true),
            member(2, "new", false),
        ];
        let st = status(&s, &pods, "old", "new", ts(5));
        assert_eq!(st.replicas, 3);
        assert_eq!(st.ready_replicas, Some(2));
        assert_eq!(st.available_replicas, Some(0));
        assert_eq!(st.current_replicas, Some(1));
        assert_eq!(st.updated_replicas, Some(2));
        assert_eq!(st.current_revision.as_deref(), Some("old"));
        assert_eq!(st.update_revision.as_deref(), Some("new"));
        assert_eq!(st.observed_generation, Some(3));
        let done = [
            member(0, "new", true),
            member(1, "new", true),
            member(2, "new", true),
        ];
        let st = status(&s, &done, "old", "new", ts(10));
        assert_eq!(st.available_replicas, Some(3));
        assert_eq!(st.current_revision.as_deref(), Some("new"));
        assert_eq!(st.current_replicas, Some(3));
    }

    #[test]
    fn revisions_change_exactly_when_the_template_does() {
        let a = set(1, json!({}));
        let more = set(5, json!({"spec": {"podManagementPolicy": "Parallel"}}));
        let changed = set(
            1,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
        );
        assert_eq!(revision_name(&a), revision_name(&more));
        assert_ne!(revision_name(&a).0, revision_name(&changed).0);
        assert!(revision_name(&a).0.starts_with("web-"));
        let r = new_revision(&a, 7);
        assert_eq!(r.revision, 7);
        assert_eq!(r.labels()[REVISION_HASH_LABEL], revision_name(&a).1);
        assert_eq!(r.labels()["app"], "web");
        assert_eq!(r.owner_references()[0].uid, "u1");
        assert_eq!(
            revision_template(&r).as_ref(),
            a.spec.as_ref().map(|s| &s.template)
        );
        assert_eq!(
            r.data.as_ref().unwrap().0["spec"]["template"]["$patch"],
            "replace"
        );
    }

    #[test]
    fn history_beyond_the_limit_goes_oldest_first_sparing_live_revisions() {
        let rev = |name: &str, n: i64| ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            data: None,
            revision: n,
        };
        let revisions = [
            rev("a", 1),
            rev("b", 2),
            rev("c", 3),
            rev("d", 4),
            rev("e", 5),
        ];
        let live: BTreeSet<String> = ["a".to_owned(), "e".to_owned()].into();
        assert_eq!(history_to_delete(&revisions, &live, 1), ["b", "c"]);
        assert!(history_to_delete(&revisions, &live, 10).is_empty());
    }
}
