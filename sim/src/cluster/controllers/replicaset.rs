//! The ReplicaSet controller (apps/v1): keeps `spec.replicas` active pods that match the
//! selector and are controlled by the ReplicaSet, and reports them in its status. Deployments
//! work through it, so this is what gives a Deployment its pods.
//!
//! As upstream: pods get the template's labels, annotations and spec, `generateName
//! <replicaset>-` and a controller ownerReference with blockOwnerDeletion; pods that are
//! finished (Succeeded/Failed) or being deleted do not count; surplus pods are deleted in
//! upstream's `ActivePodsWithRanks` order (see `pods::sort_for_deletion`), so the
//! `controller.kubernetes.io/pod-deletion-cost` annotation picks the pod that goes (a lower cost
//! first, once unscheduled, pending and unready pods are gone); status goes through the status
//! subresource and only when it changes; a ReplicaSet being deleted gets no pod changes.
//!
//! Simplified: Failed pods are deleted (upstream leaves them to the pod garbage collector) and
//! replaced; orphans matching the selector are not adopted; no `ReplicaFailure` condition is
//! written when creation fails (the error is logged and retried); `terminatingReplicas` (an alpha
//! field) is not reported; the co-location rank counts the ReplicaSet's own pods per node, not
//! those of its Deployment's other ReplicaSets too; `LogarithmicScaleDown`'s bucketing of ready and
//! creation times is not applied (exact times are compared, the behaviour with the gate off).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt as _};
use tokio_util::sync::CancellationToken;

use super::error::Result;
use super::owners::{self, describe};
use super::pods;
use super::runner::{self, Context, RESYNC};

/// Runs the ReplicaSet controller until `stop` is cancelled.
pub async fn run(client: Client, stop: CancellationToken) {
    let ctx = Context::new(client.clone());
    runner::drive("replicaset", stop, || {
        Controller::new(
            Api::<ReplicaSet>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
        .run(reconcile, runner::error_policy, ctx.clone())
    })
    .await;
}

/// What one reconcile does to the pods.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// How many pods to create.
    pub create: usize,
    /// Pods to delete: the surplus, then the Failed ones.
    pub delete: Vec<String>,
}

/// Decides how to bring `pods` (the ReplicaSet's own) to `desired` active pods.
pub fn plan(desired: i32, pods: &[Pod]) -> Plan {
    let desired = usize::try_from(desired).unwrap_or(0);
    let mut active: Vec<&Pod> = pods.iter().filter(|p| pods::is_active(p)).collect();
    let mut plan = Plan::default();
    if active.len() < desired {
        plan.create = desired - active.len();
    } else {
        let related = active.clone();
        pods::sort_for_deletion(&mut active, &related);
        let surplus = active.len() - desired;
        plan.delete = active[..surplus].iter().map(|p| p.name_any()).collect();
    }
    plan.delete.extend(
        pods.iter()
            .filter(|p| pods::phase(p) == "Failed" && p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any()),
    );
    plan
}

/// Computes the status `pods` (the ReplicaSet's own) give `rs` at `now`.
pub fn status(rs: &ReplicaSet, pods: &[Pod], now: jiff::Timestamp) -> ReplicaSetStatus {
    let spec = rs.spec.as_ref();
    let min_ready = spec.and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let template_labels = spec
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let active: Vec<&Pod> = pods.iter().filter(|p| pods::is_active(p)).collect();
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(active.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    ReplicaSetStatus {
        replicas: count(&|_| true),
        fully_labeled_replicas: Some(count(&|p| {
            template_labels
                .iter()
                .all(|(k, v)| p.labels().get(k) == Some(v))
        })),
        ready_replicas: Some(count(&pods::is_ready)),
        available_replicas: Some(count(&|p| pods::is_available(p, min_ready, now))),
        observed_generation: rs.metadata.generation,
        conditions: rs.status.as_ref().and_then(|s| s.conditions.clone()),
        terminating_replicas: rs.status.as_ref().and_then(|s| s.terminating_replicas),
    }
}

/// Returns when to look again: when the next ready pod becomes available, else at resync.
fn next_check(rs: &ReplicaSet, pods: &[Pod], now: jiff::Timestamp) -> Action {
    let min_ready = rs
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    pods.iter()
        .filter(|p| pods::is_active(p))
        .filter_map(|p| pods::available_at(p, min_ready, now))
        .min()
        .and_then(|at| now.duration_until(at).try_into().ok())
        .map_or(Action::requeue(RESYNC), Action::requeue)
}

#[tracing::instrument(skip_all, fields(rs.namespace = %rs.namespace().unwrap_or_default(), rs.name = %rs.name_any()))]
async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Context>) -> Result<Action> {
    let result = sync(&rs, &ctx).await;
    ctx.record(rs.as_ref(), result)
}

/// Reads the ReplicaSet and its children, acts on the decision, and writes status.
async fn sync(rs: &ReplicaSet, ctx: &Context) -> Result<Action> {
    let ns = rs.namespace().unwrap_or_default();
    let rs_api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(rs) = owners::fresh(&rs_api, rs).await? else {
        return Ok(Action::await_change());
    };
    let name = describe(&rs);
    let Some(spec) = rs.spec.as_ref() else {
        return Ok(Action::await_change());
    };
    let Some(selector) = owners::selector(&rs, Some(&spec.selector))? else {
        tracing::warn!("ReplicaSet has an empty selector; it manages no pods");
        return Ok(Action::await_change());
    };
    let owned = owners::list_owned(&pod_api, &selector, &rs).await?;

    if rs.metadata.deletion_timestamp.is_none() {
        let plan = plan(spec.replicas.unwrap_or(1), &owned);
        if !plan.delete.is_empty() {
            tracing::info!(count = plan.delete.len(), "deleting pods");
            pods::delete(&pod_api, &plan.delete, &name).await?;
        }
        if plan.create > 0 {
            tracing::info!(count = plan.create, "creating pods");
            let pod = new_pod(&rs, &ns);
            let created = pods::create(&pod_api, &pod, plan.create, &name).await?;
            owners::undo_if_owner_gone(&rs_api, &rs, &pod_api, &created).await?;
        }
    }

    let now = jiff::Timestamp::now();
    let new_status = status(&rs, &owned, now);
    if rs.status.as_ref() != Some(&new_status) {
        owners::write_status(&rs_api, &rs, &new_status).await?;
    }
    Ok(next_check(&rs, &owned, now))
}

/// Returns the pod the ReplicaSet creates.
fn new_pod(rs: &ReplicaSet, ns: &str) -> Pod {
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    // The server fills in the uid on create; a stored ReplicaSet always has one.
    let owner = owners::controller_ref(rs).unwrap_or_default();
    pods::from_template(
        &template,
        ns,
        format!("{}-", rs.name_any()),
        owner,
        &Default::default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::controllers::pods::tests::{pod, ready, ts};
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn missing_pods_are_created() {
        let pods = vec![pod("a", 0, "Running"), pod("done", 0, "Succeeded")];
        assert_eq!(
            plan(3, &pods),
            Plan {
                create: 2,
                delete: vec![]
            }
        );
    }

    #[test]
    fn surplus_pods_are_deleted_newest_first_and_failed_ones_replaced() {
        let pods = vec![
            pod("old", 1, "Pending"),
            pod("new", 9, "Pending"),
            pod("mid", 5, "Pending"),
            pod("failed", 0, "Failed"),
        ];
        assert_eq!(
            plan(1, &pods),
            Plan {
                create: 0,
                delete: vec!["new".into(), "mid".into(), "failed".into()]
            }
        );
        let p = plan(4, &pods);
        assert_eq!((p.create, p.delete), (1, vec!["failed".to_owned()]));
    }

    #[test]
    fn scaling_down_by_one_deletes_the_pod_with_the_lowest_deletion_cost() {
        let running_ready = |name: &str, sec: i64| {
            let mut p = ready(pod(name, sec, "Running"), sec + 1);
            p.spec.get_or_insert_with(Default::default).node_name = Some(format!("n-{name}"));
            p
        };
        let mut chosen = running_ready("chosen", 10);
        chosen.metadata.annotations = Some(
            [(
                pods::DELETION_COST_ANNOTATION.to_owned(),
                "-2147483648".to_owned(),
            )]
            .into(),
        );
        let pods = vec![
            running_ready("older", 0),
            chosen,
            running_ready("newer", 20),
        ];
        assert_eq!(
            plan(2, &pods),
            Plan {
                create: 0,
                delete: vec!["chosen".into()]
            }
        );
    }

    #[test]
    fn status_counts_active_ready_and_labelled_pods() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                generation: Some(4),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                min_ready_seconds: Some(30),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".to_owned(), "web".to_owned())].into()),
                        ..ObjectMeta::default()
                    }),
                    spec: None,
                }),
                ..ReplicaSetSpec::default()
            }),
            status: None,
        };
        let mut labelled = ready(pod("a", 0, "Running"), 0);
        labelled.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
        let pods = vec![
            labelled,
            ready(pod("b", 0, "Running"), 90),
            pod("c", 0, "Pending"),
            pod("gone", 0, "Failed"),
        ];
        let s = status(&rs, &pods, ts(100));
        assert_eq!(s.replicas, 3);
        assert_eq!(s.fully_labeled_replicas, Some(1));
        assert_eq!(s.ready_replicas, Some(2));
        assert_eq!(s.available_replicas, Some(1));
        assert_eq!(s.observed_generation, Some(4));
        assert_eq!(
            next_check(&rs, &pods, ts(100)),
            Action::requeue(std::time::Duration::from_secs(20))
        );
    }
}
