//! What kube-apiserver 1.33 fills in when an object is created: upstream's defaulting
//! (`pkg/apis/<group>/v1/defaults.go`), the create strategies that set status, and the
//! admission plugins every cluster runs on pods (ServiceAccount, DefaultTolerationSeconds).
//! One function per kind; [`STATUS_ZEROES`] holds the status fields Go writes even when zero.

use rand::Rng as _;
use serde_json::{Map, Value, json};

/// The status a new object of a kind starts with: its Go status type's fields that have no
/// `omitempty` (written as zero, false or null), and structs Go always writes (`{}`). Kinds
/// with a status not listed here start with `status: {}`. From k8s.io/api v0.33's JSON tags.
pub const STATUS_ZEROES: &[(&str, &str, &str)] = &[
    ("", "ReplicationController", r#"{"replicas":0}"#),
    ("", "Service", r#"{"loadBalancer":{}}"#),
    ("apps", "ReplicaSet", r#"{"replicas":0}"#),
    (
        "apps",
        "StatefulSet",
        r#"{"replicas":0,"availableReplicas":0}"#,
    ),
    (
        "apps",
        "DaemonSet",
        r#"{"currentNumberScheduled":0,"numberMisscheduled":0,"desiredNumberScheduled":0,"numberReady":0}"#,
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        r#"{"currentMetrics":null,"desiredReplicas":0}"#,
    ),
    (
        "policy",
        "PodDisruptionBudget",
        r#"{"disruptionsAllowed":0,"currentHealthy":0,"desiredHealthy":0,"expectedPods":0}"#,
    ),
    (
        "storage.k8s.io",
        "VolumeAttachment",
        r#"{"attached":false}"#,
    ),
    ("networking.k8s.io", "Ingress", r#"{"loadBalancer":{}}"#),
];

/// Returns the status a new object of `group`/`kind` starts with.
pub fn zero_status(group: &str, kind: &str) -> Value {
    STATUS_ZEROES
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
        .and_then(|(_, _, s)| serde_json::from_str(s).ok())
        .unwrap_or_else(|| json!({}))
}

/// What a create knows besides the object.
pub struct CreateContext<'a> {
    /// The object's name (generated names resolved).
    pub name: &'a str,
    /// The creation timestamp the server wrote.
    pub now: &'a str,
}

/// Applies the defaults of a built-in kind to a new object, whose status (for kinds with a
/// status subresource) is already its zero value.
pub fn apply(group: &str, kind: &str, obj: &mut Value, cx: &CreateContext<'_>) {
    match (group, kind) {
        ("", "Namespace") => namespace(obj, cx),
        ("", "Pod") => pod(obj),
        ("", "PodTemplate") => pod_template(obj.get_mut("template")),
        ("", "ReplicationController") => replication_controller(obj),
        ("", "Service") => service(obj),
        ("", "Endpoints") => endpoints(obj),
        ("", "Secret") => secret(obj),
        ("", "PersistentVolumeClaim") => persistent_volume_claim(obj),
        ("", "PersistentVolume") => persistent_volume(obj, cx),
        ("apps", "Deployment") => deployment(obj),
        ("apps", "ReplicaSet") => replica_set(obj),
        ("apps", "StatefulSet") => stateful_set(obj),
        ("apps", "DaemonSet") => daemon_set(obj),
        ("batch", "Job") => job(obj, cx),
        ("batch", "CronJob") => cron_job(obj),
        ("autoscaling", "HorizontalPodAutoscaler") => horizontal_pod_autoscaler(obj),
        ("scheduling.k8s.io", "PriorityClass") => priority_class(obj),
        ("storage.k8s.io", "StorageClass") => storage_class(obj),
        ("storage.k8s.io", "CSIDriver") => csi_driver(obj),
        ("networking.k8s.io", "NetworkPolicy") => network_policy(obj),
        ("discovery.k8s.io", "EndpointSlice") => endpoint_slice(obj),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => role_binding(obj),
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
        ) => webhook_configuration(obj, kind == "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            if let Some(spec) = spec(obj) {
                default(spec, "failurePolicy", json!("Fail"));
                if let Some(m) = object(spec.get_mut("matchConstraints")) {
                    match_resources(m);
                }
            }
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            if let Some(m) = spec(obj).and_then(|s| object(s.get_mut("matchResources"))) {
                match_resources(m);
            }
        }
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => flow_schema(obj),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            priority_level_configuration(obj)
        }
        _ => {}
    }
}

/// Returns the object's `spec`, created empty when absent (Go's non-pointer spec structs).
fn spec(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let o = obj.as_object_mut()?;
    let s = o.entry("spec").or_insert_with(|| json!({}));
    if s.is_null() {
        *s = json!({});
    }
    s.as_object_mut()
}

fn object(v: Option<&mut Value>) -> Option<&mut Map<String, Value>> {
    v.and_then(Value::as_object_mut)
}

/// Returns `map[key]` as an object, created empty when absent.
fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let v = map.entry(key).or_insert_with(|| json!({}));
    if v.is_null() {
        *v = json!({});
    }
    v.as_object_mut()
}

fn each(v: Option<&mut Value>) -> impl Iterator<Item = &mut Map<String, Value>> {
    v.and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn default(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.entry(key).or_insert(value);
}

// === core ===

fn namespace(obj: &mut Value, cx: &CreateContext<'_>) {
    obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(cx.name);
    obj["spec"] = json!({"finalizers": ["kubernetes"]});
    obj["status"] = json!({"phase": "Active"});
}

/// A pod: its spec's defaults, what the ServiceAccount and DefaultTolerationSeconds admission
/// plugins add, and the status a new pod has.
fn pod(obj: &mut Value) {
    if let Some(spec) = spec(obj) {
        pod_spec(spec);
        default(spec, "enableServiceLinks", json!(true));
        let sa = spec
            .get("serviceAccountName")
            .filter(|s| s.as_str().is_some_and(|s| !s.is_empty()))
            .cloned()
            .unwrap_or(json!("default"));
        spec.insert("serviceAccountName".into(), sa.clone());
        default(spec, "serviceAccount", sa);
        let tolerations = spec
            .entry("tolerations")
            .or_insert_with(|| json!([]))
            .as_array_mut();
        if let Some(tolerations) = tolerations {
            for key in [
                "node.kubernetes.io/not-ready",
                "node.kubernetes.io/unreachable",
            ] {
                let tolerated = tolerations.iter().any(|t| {
                    t.get("key").and_then(Value::as_str) == Some(key)
                        || (t.get("operator").and_then(Value::as_str) == Some("Exists")
                            && t.get("key").is_none())
                });
                if !tolerated {
                    tolerations.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
                }
            }
        }
    }
    let qos = qos_class(obj.get("spec").unwrap_or(&Value::Null));
    obj["status"] = json!({"phase": "Pending", "qosClass": qos});
}

/// `SetDefaults_PodSpec` and the container defaults, for pods and pod templates alike.
pub fn pod_spec(spec: &mut Map<String, Value>) {
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "schedulerName", json!("default-scheduler"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "securityContext", json!({}));
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for list in ["containers", "initContainers"] {
        for c in each(spec.get_mut(list)) {
            container(c, host_network);
        }
    }
    for v in each(spec.get_mut("volumes")) {
        volume(v);
    }
}

fn container(c: &mut Map<String, Value>, host_network: bool) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
    let tag_latest = !image.contains('@')
        && (image
            .rsplit('/')
            .next()
            .is_some_and(|last| !last.contains(':'))
            || image.ends_with(":latest"));
    default(
        c,
        "imagePullPolicy",
        json!(if tag_latest { "Always" } else { "IfNotPresent" }),
    );
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    default(c, "resources", json!({}));
    for p in each(c.get_mut("ports")) {
        default(p, "protocol", json!("TCP"));
        if host_network && let Some(port) = p.get("containerPort").cloned() {
            default(p, "hostPort", port);
        }
    }
}

fn volume(v: &mut Map<String, Value>) {
    for (source, mode_key) in [
        ("secret", "defaultMode"),
        ("configMap", "defaultMode"),
        ("downwardAPI", "defaultMode"),
        ("projected", "defaultMode"),
    ] {
        if let Some(s) = object(v.get_mut(source)) {
            default(s, mode_key, json!(420));
        }
    }
    if let Some(h) = object(v.get_mut("hostPath")) {
        default(h, "type", json!(""));
    }
}

/// A pod template (PodTemplate, workloads): its pod spec's defaults only (admission plugins
/// act on pods, not templates).
fn pod_template(template: Option<&mut Value>) {
    let Some(template) = object(template) else {
        return;
    };
    template_metadata(template);
    if let Some(spec) = child(template, "spec") {
        pod_spec(spec);
    }
}

/// An embedded ObjectMeta as Go writes it: a struct, so always present, with its zero
/// `creationTimestamp` written as null.
fn template_metadata(template: &mut Map<String, Value>) {
    if let Some(meta) = child(template, "metadata") {
        default(meta, "creationTimestamp", Value::Null);
    }
}

fn replication_controller(obj: &mut Value) {
    let labels = obj.pointer("/spec/template/metadata/labels").cloned();
    if let Some(labels) = labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty())) {
        if let Some(spec) = spec(obj) {
            let empty = spec
                .get("selector")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty);
            if empty {
                spec.insert("selector".into(), labels.clone());
            }
        }
        let meta = obj.get_mut("metadata").and_then(Value::as_object_mut);
        if let Some(meta) = meta {
            let empty = meta
                .get("labels")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty);
            if empty {
                meta.insert("labels".into(), labels);
            }
        }
    }
    if let Some(spec) = spec(obj) {
        default(spec, "replicas", json!(1));
        pod_template(spec.get_mut("template"));
    }
}

fn service(obj: &mut Value) {
    let Some(spec) = spec(obj) else {
        return;
    };
    default(spec, "type", json!("ClusterIP"));
    default(spec, "sessionAffinity", json!("None"));
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if ty == "ExternalName" {
        return;
    }
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    let unset = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .is_empty();
    if !headless && unset {
        let mut rng = rand::rng();
        let ip = format!(
            "10.96.{}.{}",
            rng.random_range(0..=255u8),
            rng.random_range(1..=254u8)
        );
        spec.insert("clusterIP".into(), json!(ip));
    }
    let ip = spec.get("clusterIP").cloned().unwrap_or(json!("None"));
    spec.insert("clusterIPs".into(), json!([ip]));
    default(spec, "ipFamilies", json!(["IPv4"]));
    default(spec, "ipFamilyPolicy", json!("SingleStack"));
    default(spec, "internalTrafficPolicy", json!("Cluster"));
    let external = ty == "NodePort" || ty == "LoadBalancer";
    if external {
        default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    let mut node_port = 30000 + rand::rng().random_range(0..2000u16);
    for p in each(spec.get_mut("ports")) {
        default(p, "protocol", json!("TCP"));
        let port = p.get("port").cloned().unwrap_or(Value::Null);
        default(p, "targetPort", port);
        if external && !p.contains_key("nodePort") {
            p.insert("nodePort".into(), json!(node_port));
            node_port += 1;
        }
    }
}

fn endpoints(obj: &mut Value) {
    for subset in each(obj.get_mut("subsets")) {
        for p in each(subset.get_mut("ports")) {
            default(p, "protocol", json!("TCP"));
        }
    }
}

/// A secret: `stringData` is folded into `data` (base64), as the conversion to the internal
/// type does, and the type defaults to Opaque.
fn secret(obj: &mut Value) {
    use base64::Engine as _;
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(strings)) = o.remove("stringData")
        && let Some(data) = child(o, "data")
    {
        for (k, v) in strings {
            let text = v.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(k, json!(encoded));
        }
    }
    default(o, "type", json!("Opaque"));
}

fn persistent_volume_claim(obj: &mut Value) {
    if let Some(spec) = spec(obj) {
        default(spec, "volumeMode", json!("Filesystem"));
    }
    obj["status"] = json!({"phase": "Pending"});
}

fn persistent_volume(obj: &mut Value, cx: &CreateContext<'_>) {
    if let Some(spec) = spec(obj) {
        default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        if let Some(h) = object(spec.get_mut("hostPath")) {
            default(h, "type", json!(""));
        }
        default(spec, "volumeMode", json!("Filesystem"));
    }
    obj["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": cx.now});
}

// === apps ===

fn deployment(obj: &mut Value) {
    let Some(spec) = spec(obj) else {
        return;
    };
    default(spec, "replicas", json!(1));
    if let Some(strategy) = child(spec, "strategy") {
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = child(strategy, "rollingUpdate")
        {
            default(ru, "maxUnavailable", json!("25%"));
            default(ru, "maxSurge", json!("25%"));
        }
    }
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    pod_template(spec.get_mut("template"));
}

fn replica_set(obj: &mut Value) {
    if let Some(spec) = spec(obj) {
        default(spec, "replicas", json!(1));
        pod_template(spec.get_mut("template"));
    }
}

fn stateful_set(obj: &mut Value) {
    let Some(spec) = spec(obj) else {
        return;
    };
    default(spec, "podManagementPolicy", json!("OrderedReady"));
    if let Some(strategy) = child(spec, "updateStrategy") {
        if !strategy.contains_key("type") {
            strategy.insert("type".into(), json!("RollingUpdate"));
            default(strategy, "rollingUpdate", json!({}));
        }
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = object(strategy.get_mut("rollingUpdate"))
        {
            default(ru, "partition", json!(0));
        }
    }
    if let Some(policy) = child(spec, "persistentVolumeClaimRetentionPolicy") {
        default(policy, "whenDeleted", json!("Retain"));
        default(policy, "whenScaled", json!("Retain"));
    }
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    pod_template(spec.get_mut("template"));
    for pvc in each(spec.get_mut("volumeClaimTemplates")) {
        template_metadata(pvc);
        default(pvc, "apiVersion", json!("v1"));
        default(pvc, "kind", json!("PersistentVolumeClaim"));
        if let Some(s) = child(pvc, "spec") {
            default(s, "volumeMode", json!("Filesystem"));
        }
        default(pvc, "status", json!({"phase": "Pending"}));
    }
}

fn daemon_set(obj: &mut Value) {
    let Some(spec) = spec(obj) else {
        return;
    };
    if let Some(strategy) = child(spec, "updateStrategy") {
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = child(strategy, "rollingUpdate")
        {
            default(ru, "maxUnavailable", json!(1));
            default(ru, "maxSurge", json!(0));
        }
    }
    default(spec, "revisionHistoryLimit", json!(10));
    pod_template(spec.get_mut("template"));
}

// === batch ===

fn job(obj: &mut Value, cx: &CreateContext<'_>) {
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(spec) = spec(obj) else {
        return;
    };
    // SetDefaults_Job: completions defaults to 1 only when parallelism is unset too; a Job
    // with parallelism alone is a work queue (completions null).
    if !spec.contains_key("completions") && !spec.contains_key("parallelism") {
        spec.insert("completions".into(), json!(1));
    }
    default(spec, "parallelism", json!(1));
    default(spec, "completionMode", json!("NonIndexed"));
    let per_index = spec.contains_key("backoffLimitPerIndex");
    default(
        spec,
        "backoffLimit",
        json!(if per_index { i32::MAX } else { 6 }),
    );
    default(spec, "suspend", json!(false));
    let replacement = if spec.contains_key("podFailurePolicy") {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    default(spec, "podReplacementPolicy", json!(replacement));
    let manual = spec
        .get("manualSelector")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if !manual {
        // The Job's strategy: its pods are selected by its uid.
        spec.insert(
            "selector".into(),
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
        );
        let labels = child(spec, "template")
            .and_then(|t| child(t, "metadata"))
            .and_then(|m| child(m, "labels"));
        if let Some(l) = labels {
            l.insert("batch.kubernetes.io/controller-uid".into(), json!(uid));
            l.insert("batch.kubernetes.io/job-name".into(), json!(cx.name));
            l.insert("controller-uid".into(), json!(uid));
            l.insert("job-name".into(), json!(cx.name));
        }
    }
    pod_template(spec.get_mut("template"));
}

fn cron_job(obj: &mut Value) {
    let Some(spec) = spec(obj) else {
        return;
    };
    default(spec, "concurrencyPolicy", json!("Allow"));
    default(spec, "suspend", json!(false));
    default(spec, "successfulJobsHistoryLimit", json!(3));
    default(spec, "failedJobsHistoryLimit", json!(1));
    let Some(job_template) = child(spec, "jobTemplate") else {
        return;
    };
    template_metadata(job_template);
    pod_template(object(job_template.get_mut("spec")).and_then(|s| s.get_mut("template")));
}

// === the other groups ===

fn horizontal_pod_autoscaler(obj: &mut Value) {
    let Some(spec) = spec(obj) else {
        return;
    };
    default(spec, "minReplicas", json!(1));
    let no_metrics = spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_metrics {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(behavior) = object(spec.get_mut("behavior")) {
        if let Some(up) = child(behavior, "scaleUp") {
            default(up, "stabilizationWindowSeconds", json!(0));
            default(up, "selectPolicy", json!("Max"));
            default(
                up,
                "policies",
                json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]),
            );
        }
        if let Some(down) = child(behavior, "scaleDown") {
            default(down, "selectPolicy", json!("Max"));
            default(
                down,
                "policies",
                json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
            );
        }
    }
}

fn priority_class(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        default(o, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
}

fn storage_class(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        default(o, "reclaimPolicy", json!("Delete"));
        default(o, "volumeBindingMode", json!("Immediate"));
    }
}

fn csi_driver(obj: &mut Value) {
    if let Some(spec) = spec(obj) {
        default(spec, "attachRequired", json!(true));
        default(spec, "podInfoOnMount", json!(false));
        default(spec, "storageCapacity", json!(false));
        default(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
        default(spec, "requiresRepublish", json!(false));
        default(spec, "volumeLifecycleModes", json!(["Persistent"]));
        default(spec, "seLinuxMount", json!(false));
    }
}

fn network_policy(obj: &mut Value) {
    let Some(spec) = spec(obj) else {
        return;
    };
    for rule_list in ["ingress", "egress"] {
        for rule in each(spec.get_mut(rule_list)) {
            for p in each(rule.get_mut("ports")) {
                default(p, "protocol", json!("TCP"));
            }
        }
    }
    if !spec.contains_key("policyTypes") {
        let mut types = vec![json!("Ingress")];
        if spec.get("egress").and_then(Value::as_array).is_some() {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
}

fn endpoint_slice(obj: &mut Value) {
    for p in each(obj.get_mut("ports")) {
        default(p, "name", json!(""));
        default(p, "protocol", json!("TCP"));
    }
}

fn role_binding(obj: &mut Value) {
    for s in each(obj.get_mut("subjects")) {
        // ServiceAccount subjects keep the core group, which Go omits when empty.
        if matches!(
            s.get("kind").and_then(Value::as_str),
            Some("User" | "Group")
        ) {
            default(s, "apiGroup", json!("rbac.authorization.k8s.io"));
        }
    }
}

fn webhook_configuration(obj: &mut Value, mutating: bool) {
    for w in each(obj.get_mut("webhooks")) {
        default(w, "failurePolicy", json!("Fail"));
        default(w, "matchPolicy", json!("Equivalent"));
        default(w, "namespaceSelector", json!({}));
        default(w, "objectSelector", json!({}));
        default(w, "timeoutSeconds", json!(10));
        if mutating {
            default(w, "reinvocationPolicy", json!("Never"));
        }
        for r in each(w.get_mut("rules")) {
            default(r, "scope", json!("*"));
        }
        let service = object(w.get_mut("clientConfig")).and_then(|c| object(c.get_mut("service")));
        if let Some(service) = service {
            default(service, "port", json!(443));
        }
    }
}

/// `MatchResources` of admission policies and their bindings, and the rules in them.
fn match_resources(m: &mut Map<String, Value>) {
    default(m, "matchPolicy", json!("Equivalent"));
    default(m, "namespaceSelector", json!({}));
    default(m, "objectSelector", json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        for r in each(m.get_mut(key)) {
            default(r, "scope", json!("*"));
        }
    }
}

fn flow_schema(obj: &mut Value) {
    if let Some(spec) = spec(obj) {
        default(spec, "matchingPrecedence", json!(1000));
    }
}

fn priority_level_configuration(obj: &mut Value) {
    let Some(limited) = spec(obj).and_then(|s| object(s.get_mut("limited"))) else {
        return;
    };
    default(limited, "nominalConcurrencyShares", json!(30));
    default(limited, "lendablePercent", json!(0));
    let queuing = object(limited.get_mut("limitResponse")).and_then(|r| {
        (r.get("type").and_then(Value::as_str) == Some("Queue"))
            .then(|| child(r, "queuing"))
            .flatten()
    });
    if let Some(q) = queuing {
        default(q, "queues", json!(64));
        default(q, "handSize", json!(8));
        default(q, "queueLengthLimit", json!(50));
    }
}

/// Returns the pod's QoS class: Guaranteed, Burstable or BestEffort, by upstream's rules.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| spec.get(*l).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in &containers {
        let req = c.pointer("/resources/requests").and_then(Value::as_object);
        let lim = c.pointer("/resources/limits").and_then(Value::as_object);
        for r in ["cpu", "memory"] {
            let l = lim.and_then(|m| m.get(r));
            let q = req.and_then(|m| m.get(r)).or(l);
            if q.is_some() || l.is_some() {
                any = true;
            }
            if l.is_none() || q != l {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_classes_follow_upstream_rules() {
        let be = json!({"containers": [{"name": "a", "image": "x"}]});
        assert_eq!(qos_class(&be), "BestEffort");
        let g = json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]});
        assert_eq!(qos_class(&b), "Burstable");
    }

    fn created(group: &str, kind: &str, mut obj: Value) -> Value {
        let cx = CreateContext {
            name: "x",
            now: "2026-01-01T00:00:00Z",
        };
        apply(group, kind, &mut obj, &cx);
        obj
    }

    #[test]
    fn replica_sets_get_replicas_but_no_revision_history_limit() {
        let rs = created("apps", "ReplicaSet", json!({"spec": {}}));
        assert_eq!(rs["spec"], json!({"replicas": 1}));
        let d = created("apps", "Deployment", json!({"spec": {}}));
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    }

    #[test]
    fn status_zeroes_follow_the_go_json_tags() {
        assert_eq!(
            zero_status("apps", "StatefulSet"),
            json!({"replicas": 0, "availableReplicas": 0})
        );
        assert_eq!(zero_status("apps", "Deployment"), json!({}));
        for (g, k, s) in STATUS_ZEROES {
            assert!(
                serde_json::from_str::<Value>(s).is_ok(),
                "{g}/{k}: {s} is not JSON"
            );
        }
    }

    #[test]
    fn vap_policies_and_bindings_get_match_resource_defaults() {
        let rules = json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}]);
        let defaulted = json!({"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"], "scope": "*"}]});
        let p = created(
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicy",
            json!({"spec": {"matchConstraints": {"resourceRules": rules}}}),
        );
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(p["spec"]["matchConstraints"], defaulted);
        let b = created(
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicyBinding",
            json!({"spec": {"policyName": "p", "matchResources": {"resourceRules": rules}}}),
        );
        assert_eq!(b["spec"]["matchResources"], defaulted);
    }

    #[test]
    fn templates_get_spec_defaults_but_not_the_pod_admission_fields() {
        let d = created(
            "apps",
            "Deployment",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x:1"}]}}}}),
        );
        let spec = &d["spec"]["template"]["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert!(spec.get("serviceAccountName").is_none());
        assert!(spec.get("tolerations").is_none());
        let p = created(
            "",
            "Pod",
            json!({"spec": {"containers": [{"name": "c", "image": "x:1"}]}}),
        );
        assert_eq!(p["spec"]["serviceAccountName"], "default");
        assert_eq!(p["spec"]["tolerations"].as_array().map(Vec::len), Some(2));
    }
}
