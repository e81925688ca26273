//! Conversion for kinds served in one version and stored as another resource's objects: a
//! function pair (to and from the storage form) and the field-label mapping, per kind, as
//! upstream's `conversion.go` files register them. Today one kind: `events.k8s.io/v1` Events
//! are core `v1` Events (kube-apiserver keeps one Event resource in etcd and serves it in both
//! groups), after `pkg/apis/events/v1/conversion.go`.

use serde_json::{Map, Value};

/// How one served kind maps onto the resource it is stored as.
#[derive(Debug)]
pub struct Conversion {
    /// The group of the resource the objects are stored in (same plural and version).
    pub storage_group: &'static str,
    /// Served form to storage form (apiVersion is set by the caller).
    pub to_storage: fn(Value) -> Value,
    /// Storage form to served form (apiVersion is set by the caller).
    pub from_storage: fn(Value) -> Value,
    /// A field selector's label in the served version to the stored object's selectable field;
    /// `None`: not supported.
    pub field_label: fn(&str) -> Option<&'static str>,
}

/// The conversion of a served (group, version, kind), if it is stored as another resource.
pub fn for_kind(group: &str, version: &str, kind: &str) -> Option<&'static Conversion> {
    match (group, version, kind) {
        ("events.k8s.io", "v1", "Event") => Some(&EVENTS_V1),
        _ => None,
    }
}

/// `events.k8s.io/v1` Events stored as core `v1` Events.
pub static EVENTS_V1: Conversion = Conversion {
    storage_group: "",
    to_storage: events_to_core,
    from_storage: core_to_events,
    field_label: events_field_label,
};

/// (events.k8s.io/v1, core/v1) names of the same field; the other fields (metadata, eventTime,
/// series, related, reportingInstance, action, reason, type) keep their names.
const EVENT_RENAMES: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    // The internal type's ReportingController is `reportingComponent` in core/v1's JSON.
    ("reportingController", "reportingComponent"),
];

/// Fields Go writes even when unset (no `omitempty`, or a struct under `omitempty`), with the
/// zero value it writes: core/v1 Event.
const CORE_EVENT_ZEROS: [(&str, ZeroValue); 7] = [
    ("involvedObject", ZeroValue::Object),
    ("source", ZeroValue::Object),
    ("firstTimestamp", ZeroValue::Null),
    ("lastTimestamp", ZeroValue::Null),
    ("eventTime", ZeroValue::Null),
    ("reportingComponent", ZeroValue::Empty),
    ("reportingInstance", ZeroValue::Empty),
];

/// The same for events.k8s.io/v1 Event.
const EVENTS_EVENT_ZEROS: [(&str, ZeroValue); 5] = [
    ("eventTime", ZeroValue::Null),
    ("regarding", ZeroValue::Object),
    ("deprecatedSource", ZeroValue::Object),
    ("deprecatedFirstTimestamp", ZeroValue::Null),
    ("deprecatedLastTimestamp", ZeroValue::Null),
];

#[derive(Debug, Clone, Copy)]
enum ZeroValue {
    Null,
    Object,
    Empty,
}

impl ZeroValue {
    fn value(self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Object => Value::Object(Map::new()),
            Self::Empty => Value::String(String::new()),
        }
    }
}

fn events_to_core(v: Value) -> Value {
    convert_event(v, |(served, stored)| (served, stored), &CORE_EVENT_ZEROS)
}

fn core_to_events(v: Value) -> Value {
    let mut v = convert_event(v, |(served, stored)| (stored, served), &EVENTS_EVENT_ZEROS);
    // Always written in core/v1, `omitempty` in events.k8s.io/v1.
    if let Value::Object(obj) = &mut v {
        for field in ["reportingController", "reportingInstance"] {
            if obj.get(field).is_some_and(|s| s == "") {
                obj.remove(field);
            }
        }
    }
    v
}

/// Renames each (from, to) field; a `to` field already present in the input is not part of
/// the input's version and is dropped, as decoding into the Go type drops unknown fields.
fn convert_event(
    v: Value,
    direction: fn((&'static str, &'static str)) -> (&'static str, &'static str),
    zeros: &[(&str, ZeroValue)],
) -> Value {
    let Value::Object(mut obj) = v else {
        return v;
    };
    let moved: Vec<(&str, Option<Value>)> = EVENT_RENAMES
        .iter()
        .map(|&pair| {
            let (from, to) = direction(pair);
            obj.remove(to);
            (to, obj.remove(from))
        })
        .collect();
    for (to, value) in moved {
        if let Some(value) = value {
            obj.insert(to.to_owned(), value);
        }
    }
    for (field, zero) in zeros {
        if !obj.contains_key(*field) {
            obj.insert((*field).to_owned(), zero.value());
        }
    }
    Value::Object(obj)
}

/// Upstream's `AddFieldLabelConversionsForEvent`: events.k8s.io/v1 labels onto the core Event's
/// selectable fields.
fn events_field_label(label: &str) -> Option<&'static str> {
    Some(match label {
        "metadata.name" => "metadata.name",
        "metadata.namespace" => "metadata.namespace",
        "reason" => "reason",
        "regarding.kind" => "involvedObject.kind",
        "regarding.namespace" => "involvedObject.namespace",
        "regarding.name" => "involvedObject.name",
        "regarding.uid" => "involvedObject.uid",
        "regarding.apiVersion" => "involvedObject.apiVersion",
        "regarding.resourceVersion" => "involvedObject.resourceVersion",
        "regarding.fieldPath" => "involvedObject.fieldPath",
        "reportingController" => "reportingComponent",
        "source" => "source",
        "type" => "type",
        _ => return None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_events_api_event_reads_as_a_core_event_and_back() {
        let served = json!({
            "metadata": {"name": "p.1", "namespace": "default"},
            "eventTime": "2026-11-24T10:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-11-24T10:00:05.000000Z"},
            "reportingController": "default-scheduler",
            "reportingInstance": "default-scheduler-host",
            "action": "Scheduling",
            "reason": "FailedScheduling",
            "regarding": {"kind": "Pod", "namespace": "default", "name": "p"},
            "related": {"kind": "Node", "name": "n1"},
            "note": "0/3 nodes are available",
            "type": "Warning",
            "deprecatedCount": 3,
        });
        let stored = (EVENTS_V1.to_storage)(served.clone());
        assert_eq!(
            stored,
            json!({
                "metadata": {"name": "p.1", "namespace": "default"},
                "eventTime": "2026-11-24T10:00:00.000000Z",
                "series": {"count": 2, "lastObservedTime": "2026-11-24T10:00:05.000000Z"},
                "reportingComponent": "default-scheduler",
                "reportingInstance": "default-scheduler-host",
                "action": "Scheduling",
                "reason": "FailedScheduling",
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
                "related": {"kind": "Node", "name": "n1"},
                "message": "0/3 nodes are available",
                "type": "Warning",
                "count": 3,
                "source": {},
                "firstTimestamp": null,
                "lastTimestamp": null,
            })
        );
        let mut back = served;
        back["deprecatedSource"] = json!({});
        back["deprecatedFirstTimestamp"] = Value::Null;
        back["deprecatedLastTimestamp"] = Value::Null;
        assert_eq!((EVENTS_V1.from_storage)(stored), back);
    }

    #[test]
    fn a_core_event_reads_with_the_events_api_names() {
        let core = json!({
            "metadata": {"name": "p.2"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2026-11-24T10:00:00Z",
            "lastTimestamp": "2026-11-24T10:00:09Z",
            "count": 4,
            "message": "Pulled",
            "reportingComponent": "",
            "reportingInstance": "",
        });
        let served = (EVENTS_V1.from_storage)(core);
        assert_eq!(
            served,
            json!({
                "metadata": {"name": "p.2"},
                "regarding": {"kind": "Pod", "name": "p"},
                "deprecatedSource": {"component": "kubelet", "host": "n1"},
                "deprecatedFirstTimestamp": "2026-11-24T10:00:00Z",
                "deprecatedLastTimestamp": "2026-11-24T10:00:09Z",
                "deprecatedCount": 4,
                "note": "Pulled",
                "eventTime": null,
            })
        );
    }

    #[test]
    fn field_labels_map_onto_the_core_selectable_fields() {
        assert_eq!(
            (EVENTS_V1.field_label)("regarding.name"),
            Some("involvedObject.name")
        );
        assert_eq!(
            (EVENTS_V1.field_label)("reportingController"),
            Some("reportingComponent")
        );
        assert_eq!((EVENTS_V1.field_label)("involvedObject.name"), None);
        assert_eq!((EVENTS_V1.field_label)("note"), None);
    }
}
