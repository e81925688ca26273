//! Graceful deletion of pods, decided as kube-apiserver decides it (the pod strategy's
//! `CheckGracefulDelete` and the generic registry's `BeforeDelete`): a pod bound to a node and
//! not finished is only marked (`deletionTimestamp` = now + the grace period,
//! `deletionGracePeriodSeconds`) and stays, `Terminating`, until its node's kubelet deletes it
//! with grace period 0. A pod no node holds, or one that has finished, goes at once. A second
//! delete may only shorten the wait. Every other kind is deleted at once (finalizers aside).
//!
//! sim deleted every pod at once until a real kube-apiserver showed otherwise
//! (devcluster/tests/control_plane.rs); the kubelet stand-ins finish terminating pods as kubelet does.

use serde_json::Value;

/// What a delete does to an object, before finalizers are considered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grace {
    /// Not a graceful kind, or the wait was forced off: delete now unless finalizers hold it.
    Immediate,
    /// Mark the object: it is deleted at `deletion_timestamp` (RFC 3339) at the latest, by
    /// whoever finishes it first (its kubelet); 0 seconds and no finalizers delete now.
    Mark {
        /// The grace period in seconds.
        seconds: i64,
        /// When the grace period ends.
        deletion_timestamp: String,
    },
    /// Already terminating with a grace period no longer than the one asked for: nothing changes.
    Pending,
}

/// Decides a delete of `obj` (a pod when `is_pod`) asking for `requested` seconds of grace
/// (`DeleteOptions.gracePeriodSeconds`), at `now`.
pub fn decide(is_pod: bool, obj: &Value, requested: Option<i64>, now: jiff::Timestamp) -> Grace {
    if !is_pod {
        return Grace::Immediate;
    }
    let metadata = &obj["metadata"];
    if metadata
        .get("deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        // Already terminating: only a shorter grace period changes anything.
        let Some(current) = metadata
            .get("deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
        else {
            return Grace::Immediate;
        };
        return match requested {
            Some(seconds) if seconds < current => {
                let started = metadata["deletionTimestamp"]
                    .as_str()
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                    .map_or(now, |end| end - jiff::SignedDuration::from_secs(current));
                Grace::Mark {
                    seconds,
                    deletion_timestamp: timestamp(started, seconds),
                }
            }
            _ => Grace::Pending,
        };
    }
    let bound = obj["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        obj["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    let mut seconds = if bound && !finished {
        requested
            .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(0)
    } else {
        0
    };
    if seconds < 0 {
        // Upstream turns a negative period into the shortest wait, not into none.
        seconds = 1;
    }
    Grace::Mark {
        seconds,
        deletion_timestamp: timestamp(now, seconds),
    }
}

fn timestamp(from: jiff::Timestamp, seconds: i64) -> String {
    (from + jiff::SignedDuration::from_secs(seconds))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-11-28T12:00:00Z".parse().unwrap()
    }

    fn mark(seconds: i64, at: &str) -> Grace {
        Grace::Mark {
            seconds,
            deletion_timestamp: at.into(),
        }
    }

    #[test]
    fn a_running_pod_waits_for_its_grace_period() {
        let pod = json!({"metadata": {}, "spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30},
                         "status": {"phase": "Running"}});
        assert_eq!(
            decide(true, &pod, None, now()),
            mark(30, "2026-11-28T12:00:30Z")
        );
        assert_eq!(
            decide(true, &pod, Some(5), now()),
            mark(5, "2026-11-28T12:00:05Z")
        );
        assert_eq!(
            decide(true, &pod, Some(-3), now()),
            mark(1, "2026-11-28T12:00:01Z")
        );
    }

    #[test]
    fn unbound_or_finished_pods_and_other_kinds_go_at_once() {
        let pending = json!({"metadata": {}, "spec": {"terminationGracePeriodSeconds": 30}});
        assert_eq!(
            decide(true, &pending, None, now()),
            mark(0, "2026-11-28T12:00:00Z")
        );
        let done = json!({"metadata": {}, "spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30},
                          "status": {"phase": "Succeeded"}});
        assert_eq!(
            decide(true, &done, Some(10), now()),
            mark(0, "2026-11-28T12:00:00Z")
        );
        assert_eq!(decide(false, &done, Some(10), now()), Grace::Immediate);
    }

    #[test]
    fn a_second_delete_may_only_shorten_the_wait() {
        let terminating = json!({"metadata": {"deletionTimestamp": "2026-11-28T12:00:30Z",
                                               "deletionGracePeriodSeconds": 30},
                                 "spec": {"nodeName": "n"}});
        assert_eq!(decide(true, &terminating, None, now()), Grace::Pending);
        assert_eq!(decide(true, &terminating, Some(60), now()), Grace::Pending);
        // The kubelet's grace 0: the end moves back to when the deletion began.
        assert_eq!(
            decide(true, &terminating, Some(0), now()),
            mark(0, "2026-11-28T12:00:00Z")
        );
        let forced = json!({"metadata": {"deletionTimestamp": "2026-11-28T12:00:30Z"}});
        assert_eq!(decide(true, &forced, None, now()), Grace::Immediate);
    }
}
