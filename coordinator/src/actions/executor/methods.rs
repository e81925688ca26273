//! The methods as steps. Each step is recorded `Started` before it changes anything and `Done`
//! after (stored with the next write, at the latest before the next step acts: see
//! [`Record::finish`]), and is written to be run again safely: replica changes go from a recorded count to
//! another ([`cluster::set_replicas`]), pod deletions carry the pod's UID, waits compute their
//! deadline from when the step was first recorded. A new leader calls the same function and
//! skips what is done.
//!
//! Create places one more replica (the extender enforces the node), Move is Create, then Ready,
//! then Delete of the old pod (make before break: the workload never runs below its count), and
//! Swap is two Moves, the first undone if the second fails.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::Selector;
use kube::{Api, ResourceExt};
use serde_json::json;
use telemesh_core::action::{
    ActionRequest, ObjectRef, Placement, PodRecord, PodRef, ReplicaChange, ResourceUpdate,
    ScaleTarget, StepState,
};

use crate::actions::fit;

use super::Context;
use super::cluster::{self, ScaleOutcome};
use super::failure::Failure;
use super::record::Record;

/// Runs `request`; `Ok` is the success message.
pub async fn run(
    ctx: &Context,
    rec: &mut Record,
    request: &ActionRequest,
) -> Result<String, Failure> {
    match request {
        ActionRequest::Create { workload, node } => {
            let w = ObjectRef::new(workload.kind.as_str(), &workload.namespace, &workload.name);
            let pod = place_new_pod(ctx, rec, "", &w, node).await;
            match pod {
                Ok(pod) => Ok(format!(
                    "pod {} of {w} is Running and Ready on node {node}",
                    pod.name
                )),
                Err(e) if e.is_final() => {
                    undo_new_pod(ctx, rec, "", &w).await?;
                    Err(Failure::Refused(format!(
                        "{e}; the replica count is restored"
                    )))
                }
                Err(e) => Err(e),
            }
        }
        ActionRequest::Delete { pod } => {
            let o = resolve_pod(ctx, rec, "", pod).await?;
            remove_pod(ctx, rec, "", &o.workload, &o.pod).await?;
            Ok(format!(
                "pod {} is gone and {} has one replica fewer",
                o.pod.name, o.workload
            ))
        }
        ActionRequest::Move { pod, node } => {
            let o = resolve_pod(ctx, rec, "", pod).await?;
            move_pod(ctx, rec, "", &o, node).await
        }
        ActionRequest::Swap { x, y } => swap(ctx, rec, x, y).await,
        ActionRequest::Bind { pod, node } => bind(ctx, rec, pod, node).await,
        ActionRequest::Redeploy { pod } => redeploy(ctx, rec, pod).await,
        ActionRequest::UpdateResources { target, resources } => {
            update_resources(ctx, rec, target, resources).await
        }
        ActionRequest::Scale { target, replicas } => scale(ctx, rec, target, *replicas).await,
    }
}

/// A pod an action acts on, as first seen: its workload, its UID and its node.
#[derive(Debug, Clone)]
struct Origin {
    workload: ObjectRef,
    pod: ObjectRef,
    node: String,
}

/// Resolves `pod` and records it in a `<prefix>Origin` step the first time (detail
/// `<node>|<kind>/<name>`), so a resuming leader acts on the same pod even after it is gone.
#[tracing::instrument(name = "action_step", skip_all, fields(step = "resolve_pod"))]
async fn resolve_pod(
    ctx: &Context,
    rec: &mut Record,
    prefix: &str,
    pod: &PodRef,
) -> Result<Origin, Failure> {
    let name = format!("{prefix}Origin");
    if let Some(step) = rec.status().steps.iter().find(|s| s.name == name).cloned() {
        let parsed = step.object.and_then(|object| {
            let (node, workload) = step.detail.split_once('|')?;
            let (kind, wname) = workload.split_once('/')?;
            Some(Origin {
                workload: ObjectRef::new(kind, &object.namespace, wname),
                node: node.to_string(),
                pod: object,
            })
        });
        return parsed.ok_or_else(|| Failure::Api(format!("step {name} is unreadable")));
    }
    let found = cluster::pod(&ctx.client, &pod.namespace, &pod.name)
        .await?
        .ok_or_else(|| {
            Failure::NotFound(format!("pod {}/{} does not exist", pod.namespace, pod.name))
        })?;
    let workload = cluster::owner_of(&found).ok_or_else(|| {
        Failure::Unsupported(format!(
            "pod {}/{} has no controller: no workload to act on",
            pod.namespace, pod.name
        ))
    })?;
    if !matches!(workload.kind.as_str(), "Deployment" | "StatefulSet") {
        return Err(Failure::Unsupported(format!(
            "pod {}/{} belongs to {workload}; this action needs a Deployment or StatefulSet",
            pod.namespace, pod.name
        )));
    }
    let origin = Origin {
        node: cluster::node_of(&found).unwrap_or_default().to_string(),
        pod: cluster::pod_ref(&found),
        workload,
    };
    let detail = format!(
        "{}|{}/{}",
        origin.node, origin.workload.kind, origin.workload.name
    );
    rec.note(&name, Some(origin.pod.clone()), detail).await?;
    Ok(origin)
}

/// Scales `w` up by one with a placement on `node`, and waits for the new pod to run Ready
/// there. Errors that end the action ([`Failure::is_final`]) leave the undo to the caller.
#[tracing::instrument(name = "action_step", skip_all, fields(step = "place_new_pod"))]
async fn place_new_pod(
    ctx: &Context,
    rec: &mut Record,
    prefix: &str,
    w: &ObjectRef,
    node: &str,
) -> Result<ObjectRef, Failure> {
    let scale_up = format!("{prefix}ScaleUp");
    let existing = rec.status().steps.iter().any(|s| s.name == scale_up);
    // The workload's selector, once read.
    let mut selector = None;
    let b = if existing {
        rec.begin(&scale_up, None, String::new(), None).await?
    } else {
        let state = cluster::workload(&ctx.client, w).await?;
        let pods = cluster::pods_selected(&ctx.client, w, &state.selector).await?;
        let from = state.replicas;
        selector = Some(state.selector);
        rec.status().placement = Some(Placement {
            workload: w.clone(),
            pod_template_hash: String::new(),
            pod: None,
            existing_pods: pods.iter().map(ResourceExt::name_any).collect(),
            node: node.to_string(),
        });
        rec.begin(
            &scale_up,
            Some(w.clone()),
            format!(
                "replicas {from} → {}; the new pod goes to node {node}",
                from + 1
            ),
            Some(ReplicaChange { from, to: from + 1 }),
        )
        .await?
    };
    if !b.done {
        let change = b.replica_change()?;
        // The extenders learn the placement through their watch; wait until this replica's
        // has it, so the new pod is not scheduled before the placement is known.
        ctx.placement_visible(&rec.key()).await;
        cluster::set_replicas(&ctx.client, w, change.from, change.to).await?;
        // Stored with the next step's start.
        rec.finish(b.index, None, None);
    }
    let await_ready = format!("{prefix}AwaitReady");
    let b = rec
        .begin(
            &await_ready,
            None,
            format!("waiting for the new pod to be Ready on {node}"),
            None,
        )
        .await?;
    if b.done {
        return b
            .step
            .object
            .ok_or_else(|| Failure::Api(format!("step {await_ready} lost its pod")));
    }
    if b.step.state == StepState::Failed {
        return Err(Failure::Refused(b.step.detail));
    }
    let existing: Vec<String> = rec
        .status()
        .placement
        .as_ref()
        .map(|p| p.existing_pods.clone())
        .unwrap_or_default();
    let selector = match selector {
        Some(s) => s,
        None => cluster::workload(&ctx.client, w).await?.selector,
    };
    let deadline = remaining(&b.step.started_at, ctx.settings.ready_timeout);
    let grace = ctx.settings.unschedulable_grace;
    let outcome = ctx
        .pods
        .wait(&ctx.client, &w.namespace, &selector, deadline, |pods| {
            new_pod_outcome(pods, w, &existing, node, grace)
        })
        .await?;
    let result = match outcome {
        Some(Ok(pod)) => Ok(pod),
        Some(Err(why)) => Err(Failure::Refused(why)),
        None => Err(Failure::Timeout(format!(
            "no new pod of {w} was Running and Ready on node {node} within {}",
            humantime(ctx.settings.ready_timeout)
        ))),
    };
    match result {
        Ok(pod) => {
            let record = PodRecord {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                node: node.to_string(),
                uid: pod.uid.clone(),
            };
            rec.finish(
                b.index,
                Some(pod.clone()),
                Some(format!("pod {} is Ready on {node}", pod.name)),
            );
            let status = rec.status();
            status.pods_created.push(record);
            status.placement = None;
            rec.save().await?;
            Ok(pod)
        }
        Err(e) => {
            rec.fail_step(b.index, &e.to_string());
            rec.save().await?;
            Err(e)
        }
    }
}

/// What the pods of `w` say about the new pod: Ready on the node, placed elsewhere (the
/// scheduler did not ask our extender), unschedulable for longer than `grace`, or not yet.
fn new_pod_outcome(
    pods: &[Arc<Pod>],
    w: &ObjectRef,
    existing: &[String],
    node: &str,
    grace: Duration,
) -> Option<Result<ObjectRef, String>> {
    let now = jiff::Timestamp::now();
    for pod in pods {
        if existing.iter().any(|e| *e == pod.name_any())
            || cluster::is_terminating(pod)
            || cluster::owner_of(pod).as_ref() != Some(w)
        {
            continue;
        }
        match cluster::node_of(pod) {
            Some(n) if n == node => {
                if cluster::is_running_and_ready(pod) {
                    return Some(Ok(cluster::pod_ref(pod)));
                }
            }
            Some(other) => {
                return Some(Err(format!(
                    "the new pod {} was scheduled to node {other}, not {node}: the scheduler did not \
                     ask Telemesh's extender about it (see deploy/scheduler/README.md)",
                    pod.name_any()
                )));
            }
            None => {
                if let Some((since, message)) = cluster::unschedulable(pod) {
                    let waited = since
                        .map(|s| now.duration_since(s).unsigned_abs())
                        .unwrap_or_default();
                    if waited >= grace {
                        return Some(Err(format!(
                            "node {node} cannot take the new pod {}: {message}",
                            pod.name_any()
                        )));
                    }
                }
            }
        }
    }
    None
}

/// Undoes [`place_new_pod`]: removes the new pod, if one exists, and restores the count.
#[tracing::instrument(name = "action_step", skip_all, fields(step = "undo_new_pod"))]
async fn undo_new_pod(
    ctx: &Context,
    rec: &mut Record,
    prefix: &str,
    w: &ObjectRef,
) -> Result<(), Failure> {
    let scale_up = format!("{prefix}ScaleUp");
    let Some(up) = rec
        .status()
        .steps
        .iter()
        .find(|s| s.name == scale_up)
        .and_then(|s| s.replicas)
    else {
        return Ok(());
    };
    let existing: Vec<String> = rec
        .status()
        .placement
        .as_ref()
        .map(|p| p.existing_pods.clone())
        .unwrap_or_default();
    let created: Vec<String> = rec
        .status()
        .pods_created
        .iter()
        .map(|p| p.name.clone())
        .collect();
    let name = format!("{prefix}Rollback");
    let b = rec
        .begin(
            &name,
            Some(w.clone()),
            format!("removing the new pod; replicas {} → {}", up.to, up.from),
            Some(ReplicaChange {
                from: up.to,
                to: up.from,
            }),
        )
        .await?;
    if b.done {
        return Ok(());
    }
    let pods = cluster::pods_of(&ctx.client, w).await?;
    let new: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            let n = p.name_any();
            (!existing.contains(&n) || created.contains(&n)) && !cluster::is_terminating(p)
        })
        .collect();
    for pod in &new {
        cluster::mark_for_deletion(&ctx.client, &cluster::pod_ref(pod)).await?;
    }
    match cluster::set_replicas(&ctx.client, w, up.to, up.from).await? {
        ScaleOutcome::Changed | ScaleOutcome::AlreadyDone => {}
    }
    for pod in new {
        rec.status().pods_removed.push(PodRecord {
            namespace: w.namespace.clone(),
            name: pod.name_any(),
            node: cluster::node_of(pod).unwrap_or_default().to_string(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        });
    }
    rec.status().placement = None;
    rec.finish(b.index, None, None);
    rec.save().await
}

/// Removes exactly `pod` from `w` and shrinks `w` by one.
#[tracing::instrument(name = "action_step", skip_all, fields(step = "remove_pod"))]
async fn remove_pod(
    ctx: &Context,
    rec: &mut Record,
    prefix: &str,
    w: &ObjectRef,
    pod: &ObjectRef,
) -> Result<(), Failure> {
    let scale_down = format!("{prefix}ScaleDown");
    let existing = rec.status().steps.iter().any(|s| s.name == scale_down);
    // The workload's selector and the pod's node, once read.
    let mut seen: Option<(Selector, String)> = None;
    let b = if existing {
        rec.begin(&scale_down, None, String::new(), None).await?
    } else {
        let current = cluster::pod(&ctx.client, &pod.namespace, &pod.name).await?;
        match &current {
            Some(p)
                if p.metadata.uid.as_deref() == Some(pod.uid.as_str())
                    && !cluster::is_terminating(p) => {}
            _ => {
                return Err(Failure::NotFound(format!(
                    "pod {}/{} is gone or being deleted already",
                    pod.namespace, pod.name
                )));
            }
        }
        let state = cluster::workload(&ctx.client, w).await?;
        if w.kind == "StatefulSet" {
            let last = format!("{}-{}", w.name, state.replicas - 1);
            if pod.name != last {
                return Err(Failure::Unsupported(format!(
                    "a StatefulSet removes only its highest ordinal ({last}), so {} cannot go alone; \
                     use action.Redeploy to replace it or action.Scale",
                    pod.name
                )));
            }
        } else {
            siblings_ready(ctx, w, pod, &state.selector).await?;
        }
        let node = current
            .as_ref()
            .and_then(cluster::node_of)
            .unwrap_or_default()
            .to_string();
        seen = Some((state.selector.clone(), node));
        rec.begin(
            &scale_down,
            Some(pod.clone()),
            format!(
                "replicas {} → {}, removing pod {}",
                state.replicas,
                state.replicas - 1,
                pod.name
            ),
            Some(ReplicaChange {
                from: state.replicas,
                to: state.replicas - 1,
            }),
        )
        .await?
    };
    if !b.done {
        let change = b.replica_change()?;
        if w.kind == "Deployment" {
            match cluster::mark_for_deletion(&ctx.client, pod).await {
                Err(Failure::Api(e)) if e.contains("404") || e.contains("not found") => {}
                other => other?,
            }
        }
        cluster::set_replicas(&ctx.client, w, change.from, change.to).await?;
        // Stored with the next step's start.
        rec.finish(b.index, None, None);
    }
    let await_removed = format!("{prefix}AwaitRemoved");
    let b = rec
        .begin(
            &await_removed,
            Some(pod.clone()),
            format!("waiting for pod {} to go", pod.name),
            None,
        )
        .await?;
    if b.done {
        return Ok(());
    }
    let (selector, node) = match seen {
        Some(seen) => seen,
        None => (
            cluster::workload(&ctx.client, w).await?.selector,
            cluster::pod(&ctx.client, &pod.namespace, &pod.name)
                .await?
                .and_then(|p| cluster::node_of(&p).map(str::to_string))
                .unwrap_or_default(),
        ),
    };
    let deadline = remaining(&b.step.started_at, ctx.settings.ready_timeout);
    let uid = pod.uid.clone();
    let gone = ctx
        .pods
        .wait(&ctx.client, &w.namespace, &selector, deadline, |pods| {
            let ours = pods
                .iter()
                .find(|p| p.metadata.uid.as_deref() == Some(uid.as_str()));
            match ours {
                None => Some(()),
                Some(p) if cluster::is_terminating(p) => Some(()),
                Some(_) => None,
            }
        })
        .await?;
    if gone.is_none() {
        let why = format!(
            "pod {} is still there after {}: its controller removed another pod instead",
            pod.name,
            humantime(ctx.settings.ready_timeout)
        );
        rec.fail_step(b.index, &why);
        rec.save().await?;
        return Err(Failure::Conflict(why));
    }
    // Stored with the caller's next write (the action's end or its next step).
    rec.finish(b.index, None, Some(format!("pod {} is gone", pod.name)));
    rec.status().pods_removed.push(PodRecord {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        node,
        uid: pod.uid.clone(),
    });
    Ok(())
}

/// Waits until every other pod of `w` is scheduled, Running and Ready and `w` is not rolling
/// out: only then does the lowest deletion cost decide which pod its ReplicaSet removes.
#[tracing::instrument(name = "action_step", skip_all, fields(step = "siblings_ready"))]
async fn siblings_ready(
    ctx: &Context,
    w: &ObjectRef,
    pod: &ObjectRef,
    selector: &Selector,
) -> Result<(), Failure> {
    let name = pod.name.clone();
    let deadline = tokio::time::Instant::now() + ctx.settings.ready_timeout;
    let ready = ctx
        .pods
        .wait(
            &ctx.client,
            &w.namespace,
            selector,
            ctx.settings.ready_timeout,
            |pods| {
                pods.iter()
                    .filter(|p| p.name_any() != name && cluster::owner_of(p).as_ref() == Some(w))
                    .all(|p| !cluster::is_terminating(p) && cluster::is_running_and_ready(p))
                    .then_some(())
            },
        )
        .await?;
    // The controller's status lags the pods it counts (a Move's new pod is Ready before the
    // Deployment says so): wait for it within the same deadline.
    let settled = ready.is_some()
        && cluster::wait_settled(
            &ctx.client,
            w,
            deadline.saturating_duration_since(tokio::time::Instant::now()),
        )
        .await?;
    if !settled {
        return Err(Failure::Refused(format!(
            "{w} has pods that are not Ready or is rolling out, so its ReplicaSet could remove one of \
             them instead of {}; try again when it has settled",
            pod.name
        )));
    }
    Ok(())
}

/// Move: a new pod on `node`, Ready, then the old pod removed; rolled back on failure.
#[tracing::instrument(name = "action_step", skip_all, fields(step = "move_pod"))]
async fn move_pod(
    ctx: &Context,
    rec: &mut Record,
    prefix: &str,
    origin: &Origin,
    node: &str,
) -> Result<String, Failure> {
    let (w, pod) = (&origin.workload, &origin.pod);
    if origin.node == node {
        return Err(Failure::Refused(format!(
            "pod {} already runs on node {node}",
            pod.name
        )));
    }
    if w.kind == "StatefulSet" {
        return Err(Failure::Unsupported(format!(
            "moving a StatefulSet pod ({}) would run two pods with one identity; use action.Redeploy \
             and action.Bind, or move a Deployment's pod",
            pod.name
        )));
    }
    match place_new_pod(ctx, rec, prefix, w, node).await {
        Ok(_) => {}
        Err(e) if e.is_final() => {
            undo_new_pod(ctx, rec, prefix, w).await?;
            return Err(Failure::RolledBack(format!(
                "{e}; the new pod was removed and pod {} kept",
                pod.name
            )));
        }
        Err(e) => return Err(e),
    }
    match remove_pod(ctx, rec, prefix, w, pod).await {
        Ok(()) => Ok(format!(
            "pod {} moved from node {} to node {node}",
            pod.name, origin.node
        )),
        Err(e) if e.is_final() => {
            undo_new_pod(ctx, rec, prefix, w).await?;
            Err(Failure::RolledBack(format!(
                "{e}; the new pod was removed and pod {} kept",
                pod.name
            )))
        }
        Err(e) => Err(e),
    }
}

/// Swap: x moves to y's node, then y to x's; if y's move fails, x is moved back.
#[tracing::instrument(name = "action_step", skip_all, fields(step = "swap"))]
async fn swap(ctx: &Context, rec: &mut Record, x: &PodRef, y: &PodRef) -> Result<String, Failure> {
    let ox = resolve_pod(ctx, rec, "x.", x).await?;
    let oy = resolve_pod(ctx, rec, "y.", y).await?;
    if ox.node.is_empty() || oy.node.is_empty() {
        return Err(Failure::Refused(format!(
            "both pods must be scheduled to swap them ({} on {:?}, {} on {:?})",
            ox.pod.name, ox.node, oy.pod.name, oy.node
        )));
    }
    move_pod(ctx, rec, "x.", &ox, &oy.node).await?;
    match move_pod(ctx, rec, "y.", &oy, &ox.node).await {
        Ok(_) => Ok(format!(
            "pod {} of {} moved to node {} and pod {} of {} to node {}",
            ox.pod.name, ox.workload, oy.node, oy.pod.name, oy.workload, ox.node
        )),
        Err(Failure::RolledBack(why)) => {
            // Undo x's move: its replacement goes back to x's node.
            let replacement = rec
                .status()
                .steps
                .iter()
                .find(|s| s.name == "x.AwaitReady")
                .and_then(|s| s.object.clone());
            let Some(pod) = replacement else {
                return Err(Failure::Refused(format!(
                    "{why}; x's replacement is unknown, so x stays moved"
                )));
            };
            let back = Origin {
                workload: ox.workload.clone(),
                pod,
                node: oy.node.clone(),
            };
            match move_pod(ctx, rec, "x.back.", &back, &ox.node).await {
                Ok(_) => Err(Failure::RolledBack(format!(
                    "moving {} failed ({why}); {}'s move was undone",
                    oy.pod.name, ox.pod.name
                ))),
                Err(e) if e.is_final() => Err(Failure::Refused(format!(
                    "moving {} failed ({why}), and moving {}'s replacement back failed too ({e}): \
                     it runs on node {} now",
                    oy.pod.name, ox.pod.name, oy.node
                ))),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// The executor's failure for a Bind the fit check refuses.
fn bind_failure(refusal: fit::BindRefusal) -> Failure {
    match refusal {
        fit::BindRefusal::Api(e) => Failure::Api(format!("checking the Bind: {e}")),
        r @ (fit::BindRefusal::PodNotFound(..) | fit::BindRefusal::NodeNotFound { .. }) => {
            Failure::NotFound(r.to_string())
        }
        r => Failure::Refused(r.to_string()),
    }
}

/// Bind: a pending, unplaced pod bound to `node` (refused when it does not fit), then Ready.
#[tracing::instrument(name = "action_step", skip_all, fields(step = "bind"))]
async fn bind(
    ctx: &Context,
    rec: &mut Record,
    pod: &PodRef,
    node: &str,
) -> Result<String, Failure> {
    let b = rec
        .begin(
            "Bind",
            Some(ObjectRef::new("Pod", &pod.namespace, &pod.name)),
            format!("binding to node {node}"),
            None,
        )
        .await?;
    if !b.done {
        let current = cluster::pod(&ctx.client, &pod.namespace, &pod.name)
            .await?
            .ok_or_else(|| {
                Failure::NotFound(format!("pod {}/{} does not exist", pod.namespace, pod.name))
            })?;
        match cluster::node_of(&current) {
            Some(n) if n == node && b.resumed => {}
            Some(_) => {
                return Err(Failure::Refused(
                    "pod cannot be bound since it has nodeName set".to_string(),
                ));
            }
            None => {
                // The same check the RPC front end made before storing the Bind, again now:
                // the pod or the node may have changed since.
                let current = fit::check_bind(&ctx.client, pod, node)
                    .await
                    .map_err(bind_failure)?;
                let binding = Binding {
                    metadata: kube::api::ObjectMeta {
                        name: Some(pod.name.clone()),
                        namespace: Some(pod.namespace.clone()),
                        uid: current.metadata.uid.clone(),
                        ..Default::default()
                    },
                    target: ObjectReference {
                        kind: Some("Node".into()),
                        name: Some(node.to_string()),
                        api_version: Some("v1".into()),
                        ..Default::default()
                    },
                };
                Api::<Pod>::namespaced(ctx.client.clone(), &pod.namespace)
                    .create_subresource::<Binding, serde_json::Value>(
                        "binding",
                        &pod.name,
                        &PostParams::default(),
                        &binding,
                    )
                    .await
                    .map_err(|e| {
                        Failure::Refused(format!(
                            "failed to bind Pod {} to Node {node}: {e}",
                            pod.name
                        ))
                    })?;
            }
        }
        rec.finish(b.index, None, None);
        rec.save().await?;
    }
    let b = rec
        .begin(
            "AwaitReady",
            None,
            format!("waiting for pod {} to be Ready on {node}", pod.name),
            None,
        )
        .await?;
    if !b.done {
        let deadline = remaining(&b.step.started_at, ctx.settings.ready_timeout);
        let name = pod.name.clone();
        let ready = ctx
            .pods
            // A pod of no workload: the namespace's watch (the empty selector).
            .wait(
                &ctx.client,
                &pod.namespace,
                &Selector::default(),
                deadline,
                |pods| {
                    pods.iter()
                        .find(|p| p.name_any() == name)
                        .filter(|p| cluster::is_running_and_ready(p))
                        .map(|p| cluster::pod_ref(p))
                },
            )
            .await?;
        let Some(bound) = ready else {
            return Err(Failure::Timeout(format!(
                "pod {} is bound to node {node} but was not Ready within {}",
                pod.name,
                humantime(ctx.settings.ready_timeout)
            )));
        };
        rec.finish(b.index, Some(bound), None);
        rec.save().await?;
    }
    Ok(format!(
        "pod {} is bound to node {node}, Running and Ready",
        pod.name
    ))
}

/// Redeploy: the pod is deleted (UID precondition) for its controller to recreate.
#[tracing::instrument(name = "action_step", skip_all, fields(step = "redeploy"))]
async fn redeploy(ctx: &Context, rec: &mut Record, pod: &PodRef) -> Result<String, Failure> {
    let existing = rec.status().steps.iter().any(|s| s.name == "DeletePod");
    let b = if existing {
        rec.begin("DeletePod", None, String::new(), None).await?
    } else {
        let current = cluster::pod(&ctx.client, &pod.namespace, &pod.name)
            .await?
            .ok_or_else(|| {
                Failure::NotFound(format!("pod {}/{} does not exist", pod.namespace, pod.name))
            })?;
        if current
            .owner_references()
            .iter()
            .all(|o| o.controller != Some(true))
        {
            return Err(Failure::Unsupported(format!(
                "pod {}/{} has no controller to recreate it; delete it yourself if it should go",
                pod.namespace, pod.name
            )));
        }
        rec.begin(
            "DeletePod",
            Some(cluster::pod_ref(&current)),
            format!("deleting pod {}", pod.name),
            None,
        )
        .await?
    };
    if !b.done {
        let target = b
            .step
            .object
            .clone()
            .ok_or_else(|| Failure::Api("step DeletePod lost its pod".into()))?;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(target.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match Api::<Pod>::namespaced(ctx.client.clone(), &pod.namespace)
            .delete(&pod.name, &params)
            .await
        {
            Ok(_) => {}
            // Gone already, or a new pod of the same name (a previous leader's delete worked).
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(Failure::Api(format!("deleting pod {}: {e}", pod.name))),
        }
        rec.status().pods_removed.push(PodRecord {
            namespace: target.namespace.clone(),
            name: target.name.clone(),
            node: String::new(),
            uid: target.uid.clone(),
        });
        rec.finish(b.index, None, None);
        rec.save().await?;
    }
    Ok(format!(
        "pod {} was deleted; its controller recreates it",
        pod.name
    ))
}

/// The workload a Scale or UpdateResources means.
async fn target_workload(ctx: &Context, target: &ScaleTarget) -> Result<ObjectRef, Failure> {
    match target {
        ScaleTarget::Workload(w) => Ok(ObjectRef::new(w.kind.as_str(), &w.namespace, &w.name)),
        ScaleTarget::Pod(p) => {
            let pod = cluster::pod(&ctx.client, &p.namespace, &p.name)
                .await?
                .ok_or_else(|| {
                    Failure::NotFound(format!("pod {}/{} does not exist", p.namespace, p.name))
                })?;
            cluster::owner_of(&pod)
                .filter(|w| matches!(w.kind.as_str(), "Deployment" | "StatefulSet"))
                .ok_or_else(|| {
                    Failure::Unsupported(format!(
                        "pod {}/{} belongs to no Deployment or StatefulSet",
                        p.namespace, p.name
                    ))
                })
        }
    }
}

/// UpdateResources: a strategic-merge patch of the template's container resources (only the
/// fields given); the rollout follows the workload's strategy, as in WAM.
#[tracing::instrument(name = "action_step", skip_all, fields(step = "update_resources"))]
async fn update_resources(
    ctx: &Context,
    rec: &mut Record,
    target: &ScaleTarget,
    r: &ResourceUpdate,
) -> Result<String, Failure> {
    let w = target_workload(ctx, target).await?;
    let b = rec
        .begin(
            "PatchTemplate",
            Some(w.clone()),
            format!("container {}", r.container_name),
            None,
        )
        .await?;
    if b.done {
        return Ok(format!(
            "{w}'s container {} resources updated",
            r.container_name
        ));
    }
    let mut requests = serde_json::Map::new();
    let mut limits = serde_json::Map::new();
    for (is_limit, key, value) in [
        (false, "cpu", &r.cpu_request),
        (true, "cpu", &r.cpu_limit),
        (false, "memory", &r.memory_request),
        (true, "memory", &r.memory_limit),
    ] {
        if let Some(v) = value {
            let map = if is_limit { &mut limits } else { &mut requests };
            map.insert(key.to_string(), json!(v));
        }
    }
    let mut resources = serde_json::Map::new();
    if !requests.is_empty() {
        resources.insert("requests".into(), requests.into());
    }
    if !limits.is_empty() {
        resources.insert("limits".into(), limits.into());
    }
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": r.container_name, "resources": resources}
    ]}}}});
    let params = PatchParams::default();
    let containers = |spec: Option<k8s_openapi::api::core::v1::PodSpec>| {
        spec.map(|s| s.containers.into_iter().map(|c| c.name).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let names = match w.kind.as_str() {
        "Deployment" => {
            let api = Api::<Deployment>::namespaced(ctx.client.clone(), &w.namespace);
            let d = api
                .get(&w.name)
                .await
                .map_err(|e| Failure::NotFound(format!("reading {w}: {e}")))?;
            containers(d.spec.and_then(|s| s.template.spec))
        }
        _ => {
            let api = Api::<StatefulSet>::namespaced(ctx.client.clone(), &w.namespace);
            let s = api
                .get(&w.name)
                .await
                .map_err(|e| Failure::NotFound(format!("reading {w}: {e}")))?;
            containers(s.spec.and_then(|s| s.template.spec))
        }
    };
    if !names.contains(&r.container_name) {
        return Err(Failure::Refused(format!(
            "{w} has no container {:?} (it has {})",
            r.container_name,
            names.join(", ")
        )));
    }
    let result = match w.kind.as_str() {
        "Deployment" => Api::<Deployment>::namespaced(ctx.client.clone(), &w.namespace)
            .patch(&w.name, &params, &Patch::Strategic(&patch))
            .await
            .map(|d| d.metadata.generation),
        _ => Api::<StatefulSet>::namespaced(ctx.client.clone(), &w.namespace)
            .patch(&w.name, &params, &Patch::Strategic(&patch))
            .await
            .map(|d| d.metadata.generation),
    };
    let generation = result.map_err(|e| Failure::Refused(format!("patching {w}: {e}")))?;
    rec.finish(
        b.index,
        None,
        Some(format!(
            "container {} resources set; {w} is at generation {}",
            r.container_name,
            generation.unwrap_or_default()
        )),
    );
    rec.save().await?;
    Ok(format!(
        "{w}'s container {} resources updated; the rollout follows its strategy",
        r.container_name
    ))
}

/// Scale: the replica count set; done when the workload has that many pods (which pods go is
/// the controller's choice, as in WAM).
#[tracing::instrument(name = "action_step", skip_all, fields(step = "scale"))]
async fn scale(
    ctx: &Context,
    rec: &mut Record,
    target: &ScaleTarget,
    replicas: i32,
) -> Result<String, Failure> {
    let w = target_workload(ctx, target).await?;
    let existing = rec.status().steps.iter().any(|s| s.name == "Scale");
    let before: Vec<String> = if existing {
        Vec::new()
    } else {
        cluster::pods_of(&ctx.client, &w)
            .await?
            .iter()
            .filter(|p| !cluster::is_terminating(p))
            .map(ResourceExt::name_any)
            .collect()
    };
    let b = if existing {
        rec.begin("Scale", None, String::new(), None).await?
    } else {
        let from = cluster::workload(&ctx.client, &w).await?.replicas;
        rec.begin(
            "Scale",
            Some(w.clone()),
            format!("replicas {from} → {replicas}"),
            Some(ReplicaChange { from, to: replicas }),
        )
        .await?
    };
    if !b.done {
        let change = b.replica_change()?;
        if change.from != change.to {
            cluster::set_replicas(&ctx.client, &w, change.from, change.to).await?;
        }
        rec.finish(b.index, None, None);
        rec.save().await?;
    }
    let b = rec
        .begin(
            "AwaitPods",
            None,
            format!("waiting for {replicas} pods"),
            None,
        )
        .await?;
    if !b.done {
        let state = cluster::workload(&ctx.client, &w).await?;
        let deadline = remaining(&b.step.started_at, ctx.settings.ready_timeout);
        let count = usize::try_from(replicas).unwrap_or_default();
        let now = ctx
            .pods
            .wait(
                &ctx.client,
                &w.namespace,
                &state.selector,
                deadline,
                |pods| {
                    let live: Vec<String> = pods
                        .iter()
                        .filter(|p| {
                            !cluster::is_terminating(p) && cluster::owner_of(p).as_ref() == Some(&w)
                        })
                        .map(|p| p.name_any())
                        .collect();
                    (live.len() == count).then_some(live)
                },
            )
            .await?
            .ok_or_else(|| {
                Failure::Timeout(format!(
                    "{w} did not reach {replicas} pods within {}",
                    humantime(ctx.settings.ready_timeout)
                ))
            })?;
        if !before.is_empty() || existing {
            let status = rec.status();
            for name in now.iter().filter(|n| !before.contains(n)) {
                status.pods_created.push(PodRecord {
                    namespace: w.namespace.clone(),
                    name: name.clone(),
                    ..Default::default()
                });
            }
            for name in before.iter().filter(|n| !now.contains(n)) {
                status.pods_removed.push(PodRecord {
                    namespace: w.namespace.clone(),
                    name: name.clone(),
                    ..Default::default()
                });
            }
        }
        rec.finish(b.index, None, None);
        rec.save().await?;
    }
    Ok(format!("{w} has {replicas} replicas"))
}

/// What is left of `timeout` for a step recorded at `started_at`.
fn remaining(started_at: &str, timeout: Duration) -> Duration {
    let Ok(started) = started_at.parse::<jiff::Timestamp>() else {
        return timeout;
    };
    let elapsed = jiff::Timestamp::now()
        .duration_since(started)
        .unsigned_abs();
    timeout.saturating_sub(elapsed)
}

fn humantime(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
