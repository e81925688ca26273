//! The unsaved-work victim ranker (`--scavenger-victims unsaved`, the default): reads each
//! candidate node's scavenger pods from the [`ClusterView`] and lets
//! [`telemesh_core::scavenge::victims`] swap victims and drop dearer nodes.
//!
//! A victim is a scavenger the ranking may swap when its node gossips it under `s:<uid>` and
//! the node is fresh ([`NodeEntry::fresh`]: live, newest metric within `--stale-after`); a
//! stale node's pods are neither swapped nor offered as substitutes, since a pod that left
//! while its agent was silent would make kube-scheduler fail the preemption cycle on an
//! unknown UID. With full victims (nodeCacheCapable false) a pod labelled
//! [`JOB_LABEL`] that the view does not know still counts as a scavenger whose job is hit;
//! with meta victims an unknown UID is just another victim.
//!
//! Gossip is seconds late about pods that leave, so a substitute must also be one the API
//! server holds as staying, by this replica's watch of scavenger pods ([`ScavengerPods`]), and
//! a job with a pod on its way out costs nothing more
//! ([`Standing`]). Before that watch has listed,
//! nothing is swapped; dropping dearer nodes needs no substitute and goes on.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use telemesh_core::extender::{ExtenderPreemptionArgs, MetaPod, MetaVictims};
use telemesh_core::gossip::schema::unix_ms;
use telemesh_core::scavenge::JOB_LABEL;
use telemesh_core::scavenge::victims::{
    Chosen, Loss, NodeVictims, Standing, cpu_seconds, drop_dearer_nodes, job_losses, rank_node,
};

use super::pods::ScavengerPods;
use super::preempt::{RankEffect, VictimRanker};
use crate::view::{ClusterView, NodeEntry, Snapshot};

/// How preempt treats scavenger victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ScavengerVictims {
    /// Spare the scavengers with the most unsaved work, prefer nodes whose victims lose least.
    #[default]
    Unsaved,
    /// Keep kube-scheduler's own victims (upstream's plain choice, for comparison).
    Scheduler,
}

/// Ranks victims by unsaved work, from the view.
#[derive(Debug, Clone)]
pub struct UnsavedWork {
    /// Where the scavenger pods are.
    pub view: ClusterView,
    /// Age beyond which a node's gossip is not trusted.
    pub stale_after: Duration,
    /// Which scavenger pods the API server holds as staying.
    pub pods: ScavengerPods,
}

impl VictimRanker for UnsavedWork {
    fn rank(
        &self,
        args: &ExtenderPreemptionArgs,
        victims: &mut BTreeMap<String, MetaVictims>,
    ) -> RankEffect {
        let pods = self.pods.read();
        rank(
            &self.view.load(),
            pods.standing(),
            args,
            victims,
            self.view.now(),
            self.stale_after,
        )
    }
}

/// [`UnsavedWork::rank`] at `now` against `view` and the API server's `standing` (`None`:
/// unknown, so nothing is swapped).
pub fn rank(
    view: &Snapshot,
    standing: Option<&Standing>,
    args: &ExtenderPreemptionArgs,
    victims: &mut BTreeMap<String, MetaVictims>,
    now: SystemTime,
    stale_after: Duration,
) -> RankEffect {
    if victims.is_empty() || view.is_empty() {
        return RankEffect::default();
    }
    let now_ms = unix_ms(now);
    // Full victims' labels, by node and uid: `namespace/job` of those labelled as scavengers.
    let full = args
        .node_name_to_victims
        .as_ref()
        .filter(|_| args.node_name_to_meta_victims.is_none());
    let labelled: HashMap<&str, HashMap<&str, String>> = full
        .iter()
        .flat_map(|m| m.iter())
        .map(|(node, v)| {
            (
                node.as_str(),
                v.pods.iter().filter_map(labelled_job).collect(),
            )
        })
        .collect();
    let no_labels = HashMap::new();

    let nodes: Vec<(&str, NodeVictims<'_>)> = victims
        .iter()
        .map(|(name, meta)| {
            let entry = view.node(name);
            let trusted = entry.filter(|e| e.fresh(now_ms, stale_after));
            let labels = labelled.get(name.as_str()).unwrap_or(&no_labels);
            let chosen = meta
                .pods
                .iter()
                .map(|p| {
                    (
                        p.uid.as_str(),
                        classify(&p.uid, entry, trusted.is_some(), labels),
                    )
                })
                .collect();
            let pool = trusted
                .into_iter()
                .flat_map(|e| e.scavengers())
                .filter(|(uid, _)| standing.is_some_and(|s| s.may_name(uid)))
                .map(|(uid, pod)| (uid.as_str(), pod))
                .collect();
            (name.as_str(), NodeVictims { chosen, pool })
        })
        .collect();

    // Every job these nodes could hit, priced over all its pods in the view.
    let mut jobs: HashSet<&str> = HashSet::new();
    for (_, node) in &nodes {
        jobs.extend(node.pool.iter().map(|(_, p)| p.job.as_str()));
        for (_, chosen) in &node.chosen {
            match chosen {
                Chosen::Scavenger(p) => {
                    jobs.insert(p.job.as_str());
                }
                Chosen::UnknownScavenger { job: Some(job) } => {
                    jobs.insert(job);
                }
                _ => {}
            }
        }
    }
    let losses = job_losses(jobs.iter().flat_map(|job| view.scavenger_job(job)), now);
    let loss_of = |job: &str| -> Loss {
        let loss = losses.get(job).copied().unwrap_or(0);
        standing.map_or(loss, |s| s.loss(job, loss))
    };

    let ranked: Vec<_> = nodes.iter().map(|(_, n)| rank_node(n, &loss_of)).collect();
    let pdb_and_loss: Vec<(i64, Option<Loss>)> = nodes
        .iter()
        .zip(&ranked)
        .map(|((name, _), r)| (victims[*name].num_pdb_violations, r.loss))
        .collect();
    let dropped = drop_dearer_nodes(&pdb_and_loss);

    let pod_meta = args.pod.as_ref().map(|p| &p.metadata);
    let pod_namespace = pod_meta
        .and_then(|m| m.namespace.as_deref())
        .unwrap_or_default();
    let pod_name = pod_meta.and_then(|m| m.name.as_deref()).unwrap_or_default();
    let mut effect = RankEffect::default();
    let mut answer: BTreeMap<String, MetaVictims> = BTreeMap::new();
    for (((name, node), r), drop) in nodes.iter().zip(&ranked).zip(&dropped) {
        // One line per candidate node: what the scheduler chose, what is sent back, and what
        // each loses, so a replay can be checked against the work really lost.
        tracing::debug!(
            pod.namespace = pod_namespace,
            pod.name = pod_name,
            node.name = %name,
            scheduler_victims = %VictimList::new(node.chosen.iter().map(|(u, _)| *u), node, &loss_of),
            victims = %VictimList::new(r.uids.iter().copied(), node, &loss_of),
            scheduler_loss_cpu_seconds = cpu_seconds(r.scheduler_loss),
            loss_cpu_seconds = cpu_seconds(r.chosen_loss),
            priced = r.loss.is_some(),
            dropped = *drop,
            "preempt candidate"
        );
        if *drop {
            effect.nodes_dropped += 1;
            continue;
        }
        effect.spared += r.spared;
        effect.loss_avoided = effect.loss_avoided.saturating_add(r.loss_avoided());
        answer.insert(
            (*name).to_owned(),
            MetaVictims {
                pods: r
                    .uids
                    .iter()
                    .map(|uid| MetaPod {
                        uid: (*uid).to_owned(),
                    })
                    .collect(),
                num_pdb_violations: victims[*name].num_pdb_violations,
            },
        );
    }
    if effect.changed() {
        tracing::debug!(
            pod.namespace = pod_namespace,
            pod.name = pod_name,
            spared = effect.spared,
            nodes_dropped = effect.nodes_dropped,
            loss_avoided_cpu_seconds = cpu_seconds(effect.loss_avoided),
            "preempt spared scavengers with unsaved work"
        );
        *victims = answer;
    }
    effect
}

/// Victims of one node as `uid(job:loss in CPU-seconds)`, for the debug log.
struct VictimList<'n, 'a, F> {
    uids: Vec<&'a str>,
    node: &'n NodeVictims<'a>,
    loss_of: &'n F,
}

impl<'n, 'a, F: Fn(&str) -> Loss> VictimList<'n, 'a, F> {
    fn new(uids: impl Iterator<Item = &'a str>, node: &'n NodeVictims<'a>, loss_of: &'n F) -> Self {
        Self {
            uids: uids.collect(),
            node,
            loss_of,
        }
    }

    /// The job `uid` hits, when known.
    fn job(&self, uid: &str) -> Option<&'a str> {
        let chosen = self.node.chosen.iter().find(|(u, _)| *u == uid);
        match chosen.map(|(_, c)| *c) {
            Some(Chosen::Scavenger(p)) => Some(p.job.as_str()),
            Some(Chosen::UnknownScavenger { job }) => job,
            Some(Chosen::Other) => None,
            None => self
                .node
                .pool
                .iter()
                .find(|(u, _)| *u == uid)
                .map(|(_, p)| p.job.as_str()),
        }
    }
}

impl<F: Fn(&str) -> Loss> std::fmt::Display for VictimList<'_, '_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, uid) in self.uids.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            match self.job(uid) {
                Some(job) => write!(
                    f,
                    "{sep}{uid}({job}:{:.0})",
                    cpu_seconds((self.loss_of)(job))
                )?,
                None => write!(f, "{sep}{uid}(other)")?,
            }
        }
        Ok(())
    }
}

/// What the ranking makes of the victim `uid` on a node (`entry`, trusted or not).
fn classify<'a>(
    uid: &str,
    entry: Option<&'a NodeEntry>,
    trusted: bool,
    labels: &'a HashMap<&str, String>,
) -> Chosen<'a> {
    match entry.and_then(|e| e.scavengers().get(uid)) {
        Some(pod) if trusted => Chosen::Scavenger(pod),
        Some(pod) => Chosen::UnknownScavenger {
            job: Some(&pod.job),
        },
        None => match labels.get(uid) {
            Some(job) => Chosen::UnknownScavenger { job: Some(job) },
            None => Chosen::Other,
        },
    }
}

/// A full victim's uid and ScavengerJob (`namespace/name`), when it is labelled as a scavenger.
fn labelled_job(pod: &Pod) -> Option<(&str, String)> {
    let m = &pod.metadata;
    let job = m.labels.as_ref()?.get(JOB_LABEL)?;
    let namespace = m.namespace.as_deref().unwrap_or("default");
    Some((m.uid.as_deref()?, format!("{namespace}/{job}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use telemesh_core::extender::Victims;
    use telemesh_core::gossip::{Liveness, NodeState};

    use super::*;

    const NOW_MS: u64 = 1_800_000_000_000;
    const STALE: Duration = Duration::from_secs(45);

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(NOW_MS)
    }

    /// A node gossiping a fresh metric and `pods`: (uid, job, seconds unsaved, millicores).
    fn node(name: &str, metric_age_s: u64, pods: &[(&str, &str, u64, u64)]) -> NodeEntry {
        let mut kvs = vec![
            ("role".to_owned(), "agent".to_owned()),
            (
                "m:node_cpu".to_owned(),
                format!("1@{}", NOW_MS - metric_age_s * 1000),
            ),
        ];
        for (uid, job, unsaved_s, cpu) in pods {
            kvs.push((
                format!("s:{uid}"),
                format!("{job}@{}@{cpu}@1073741824", NOW_MS - unsaved_s * 1000),
            ));
        }
        let state = NodeState::from_key_values(kvs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        NodeEntry::new(name, 1, Liveness::Live, state)
    }

    fn meta(uids: &[&str]) -> MetaVictims {
        MetaVictims {
            pods: uids.iter().map(|u| MetaPod { uid: (*u).into() }).collect(),
            num_pdb_violations: 0,
        }
    }

    fn args(victims: &BTreeMap<String, MetaVictims>) -> ExtenderPreemptionArgs {
        ExtenderPreemptionArgs {
            pod: None,
            node_name_to_victims: None,
            node_name_to_meta_victims: Some(victims.clone()),
        }
    }

    /// The API server holds `uids` as staying; `interrupted` jobs have a pod on its way out
    /// (preempted, in namespace `ns`).
    fn standing(uids: &[&str], interrupted: &[&str]) -> Standing {
        let pod = |uid: &str, job: &str, status: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": uid, "namespace": "ns", "uid": uid,
                             "labels": {JOB_LABEL: job}},
                "spec": {"nodeName": "n", "containers": [{"name": "job", "image": "i"}]},
                "status": status,
            }))
            .unwrap()
        };
        let mut pods: Vec<Pod> = uids
            .iter()
            .map(|u| pod(u, "any", serde_json::json!({"phase": "Running"})))
            .collect();
        for job in interrupted {
            let name = job.strip_prefix("ns/").unwrap();
            let marked = serde_json::json!({"phase": "Running", "conditions": [
                {"type": "DisruptionTarget", "status": "True"}]});
            pods.push(pod(&format!("{name}-leaving"), name, marked));
        }
        Standing::of(&pods)
    }

    fn uids(v: &BTreeMap<String, MetaVictims>) -> BTreeMap<&str, Vec<&str>> {
        v.iter()
            .map(|(n, m)| (n.as_str(), m.pods.iter().map(|p| p.uid.as_str()).collect()))
            .collect()
    }

    #[test]
    fn swaps_by_unsaved_work_across_the_jobs_nodes_and_drops_dearer_nodes() {
        // Job "ns/big" has a pod on n2 as well: its loss is 2 cores × 300 s + 1 × 300 s.
        let view = Snapshot::from_entries([
            node(
                "n1",
                1,
                &[("a", "ns/big", 300, 2000), ("b", "ns/small", 10, 2000)],
            ),
            node("n2", 1, &[("c", "ns/big", 300, 1000)]),
            node("n3", 1, &[("d", "ns/mid", 100, 1000)]),
        ]);
        let mut victims = BTreeMap::from([
            ("n1".to_owned(), meta(&["a"])),
            ("n3".to_owned(), meta(&["d"])),
            ("mixed".to_owned(), meta(&["web"])),
        ]);
        let request = args(&victims);
        let api = standing(&["a", "b", "c", "d"], &[]);
        let effect = rank(&view, Some(&api), &request, &mut victims, now(), STALE);
        // n1: b (20 CPU-s) instead of a (900); n3 loses 100 > 20: dropped; "mixed" is not
        // in the view: its victim is not a scavenger, left to the scheduler.
        assert_eq!(
            uids(&victims),
            BTreeMap::from([("n1", vec!["b"]), ("mixed", vec!["web"])])
        );
        assert_eq!(effect.spared, 1);
        assert_eq!(effect.nodes_dropped, 1);
        assert_eq!(effect.loss_avoided, 880_000_000);
    }

    #[test]
    fn stale_nodes_are_neither_swapped_nor_priced() {
        let view = Snapshot::from_entries([
            node(
                "old",
                600,
                &[("a", "ns/big", 300, 2000), ("b", "ns/small", 10, 2000)],
            ),
            node("n", 1, &[("c", "ns/mid", 100, 1000)]),
        ]);
        let mut victims = BTreeMap::from([
            ("old".to_owned(), meta(&["a"])),
            ("n".to_owned(), meta(&["c"])),
        ]);
        let before = victims.clone();
        let api = standing(&["a", "b", "c"], &[]);
        let effect = rank(
            &view,
            Some(&api),
            &args(&before),
            &mut victims,
            now(),
            STALE,
        );
        assert_eq!(victims, before);
        assert_eq!(effect, RankEffect::default());
    }

    /// n1: the scheduler would evict "dear" (1 core, an hour unsaved) where "cheap" (a minute)
    /// frees as much; n2's only scavenger has ten minutes unsaved.
    fn two_nodes() -> (Snapshot, BTreeMap<String, MetaVictims>) {
        let view = Snapshot::from_entries([
            node(
                "n1",
                1,
                &[
                    ("dear", "ns/dear", 3600, 1000),
                    ("cheap", "ns/cheap", 60, 1000),
                ],
            ),
            node("n2", 1, &[("mid", "ns/mid", 600, 1000)]),
        ]);
        let victims = BTreeMap::from([
            ("n1".to_owned(), meta(&["dear"])),
            ("n2".to_owned(), meta(&["mid"])),
        ]);
        (view, victims)
    }

    #[test]
    fn a_pod_the_api_server_no_longer_holds_as_staying_is_never_named() {
        // "cheap" was the victim of the preemption a moment ago: its key is still gossiped,
        // but the API server has it terminating (or gone). Naming it would make kube-scheduler
        // drop the whole answer and preempt "dear" on its own.
        let (view, mut victims) = two_nodes();
        let request = args(&victims);
        let api = standing(&["dear", "mid"], &[]);
        let effect = rank(&view, Some(&api), &request, &mut victims, now(), STALE);
        // No swap on n1 (an hour): n2 (ten minutes) is cheaper, n1 dropped.
        assert_eq!(uids(&victims), BTreeMap::from([("n2", vec!["mid"])]));
        assert_eq!((effect.spared, effect.nodes_dropped), (0, 1));
    }

    #[test]
    fn before_the_watch_lists_nothing_is_swapped_but_dearer_nodes_still_drop() {
        let (view, mut victims) = two_nodes();
        let request = args(&victims);
        let effect = rank(&view, None, &request, &mut victims, now(), STALE);
        assert_eq!(uids(&victims), BTreeMap::from([("n2", vec!["mid"])]));
        assert_eq!((effect.spared, effect.nodes_dropped), (0, 1));
    }

    #[test]
    fn a_job_already_interrupted_costs_nothing_more() {
        // "dear" has a sibling the API server has terminating: its hour is lost already, so
        // n1's own victim costs nothing, and n2's ten minutes make n2 the dearer node.
        let (view, mut victims) = two_nodes();
        let request = args(&victims);
        let api = standing(&["dear", "cheap", "mid"], &["ns/dear"]);
        let effect = rank(&view, Some(&api), &request, &mut victims, now(), STALE);
        assert_eq!(uids(&victims), BTreeMap::from([("n1", vec!["dear"])]));
        assert_eq!((effect.spared, effect.nodes_dropped), (0, 1));
    }

    #[test]
    fn full_victims_labelled_as_scavengers_are_kept_and_their_job_is_free() {
        let view = Snapshot::from_entries([node(
            "n1",
            1,
            &[("b", "ns/other", 50, 1000), ("c", "ns/lagging", 400, 1000)],
        )]);
        let mut lagging = Pod::default();
        lagging.metadata.uid = Some("x".into());
        lagging.metadata.namespace = Some("ns".into());
        lagging.metadata.labels = Some(BTreeMap::from([(JOB_LABEL.into(), "lagging".into())]));
        let mut b = Pod::default();
        b.metadata.uid = Some("b".into());
        let request = ExtenderPreemptionArgs {
            pod: None,
            node_name_to_victims: Some(BTreeMap::from([(
                "n1".to_owned(),
                Victims {
                    pods: vec![lagging, b],
                    num_pdb_violations: 0,
                },
            )])),
            node_name_to_meta_victims: None,
        };
        let mut victims = BTreeMap::from([("n1".to_owned(), meta(&["x", "b"]))]);
        let api = standing(&["x", "b", "c"], &[]);
        let effect = rank(&view, Some(&api), &request, &mut victims, now(), STALE);
        // x (not gossiped yet) stays; its job is hit, so its gossiped pod c is free to take
        // instead of b.
        assert_eq!(uids(&victims), BTreeMap::from([("n1", vec!["x", "c"])]));
        assert_eq!(effect.spared, 1);
        assert_eq!(effect.loss_avoided, 50_000_000);
    }

    #[test]
    fn an_empty_view_or_request_changes_nothing() {
        let mut victims = BTreeMap::from([("n1".to_owned(), meta(&["a"]))]);
        let before = victims.clone();
        let effect = rank(
            &Snapshot::default(),
            None,
            &args(&before),
            &mut victims,
            now(),
            STALE,
        );
        assert_eq!((victims, effect), (before, RankEffect::default()));
        let view = Snapshot::from_entries([node("n1", 1, &[("a", "ns/j", 1, 1)])]);
        let mut none = BTreeMap::new();
        let effect = rank(&view, None, &args(&none), &mut none, now(), STALE);
        assert!(none.is_empty() && !effect.changed());
    }
}
