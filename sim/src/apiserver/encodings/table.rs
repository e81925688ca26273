//! Server-side `Table` rendering for `kubectl get`: turns stored objects into the
//! `meta.k8s.io/v1` `Table` that kube-apiserver returns for
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.
//!
//! Built-in kinds follow kube-apiserver's printers (`pkg/printers/internalversion/printers.go`),
//! which the server always runs in wide mode: priority-1 columns are always filled in and
//! kubectl drops them unless `-o wide`. Custom resources follow apiextensions-apiserver's
//! `tableconvertor` with the CRD's `additionalPrinterColumns`. Ages use apimachinery's
//! `duration.HumanDuration`, as the server-side printers do.
//!
//! Everything here is a pure function of the objects and `now`; the caller fills in
//! `metadata.resourceVersion` / `metadata.continue` and does content negotiation.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};

/// Describes one served resource (one group-version-kind) to the table and OpenAPI renderers.
///
/// The server builds it from its resource registry; built-ins leave `printer_columns` empty and
/// `schema` as `None`, custom resources copy both from their CRD version.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceInfo {
    /// API group; `""` for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// Plural resource name, e.g. `pods`.
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Kubernetes verbs served for the resource (`get`, `list`, `create`, `update`, `patch`, ...).
    pub verbs: Vec<String>,
    /// Subresources served: `status`, `scale`, `binding`, `eviction`.
    pub subresources: Vec<String>,
    /// The CRD version's `additionalPrinterColumns`; empty for built-ins.
    pub printer_columns: Vec<PrinterColumn>,
    /// The CRD version's `openAPIV3Schema`; `None` for built-ins.
    pub schema: Option<Value>,
}

/// One entry of a CRD version's `additionalPrinterColumns`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header, e.g. `Replicas`.
    pub name: String,
    /// OpenAPI type: `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: String,
    /// Optional OpenAPI format, passed through to the column definition.
    pub format: Option<String>,
    /// Optional human-readable description.
    pub description: Option<String>,
    /// 0 for standard columns, greater for columns shown only with `-o wide`.
    pub priority: i32,
    /// Kubernetes JSONPath evaluated against each object, e.g. `.spec.replicas`.
    pub json_path: String,
}

/// What each table row carries in `object` (the `?includeObject=` query parameter).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object; the row has cells only.
    None,
    /// A `PartialObjectMetadata` holding the object's metadata (the server's default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

/// The value of `?includeObject=` was not one of `None`, `Metadata` or `Object`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid includeObject {0:?}; use None, Metadata or Object")]
pub struct InvalidIncludeObject(pub String);

impl std::str::FromStr for IncludeObject {
    type Err = InvalidIncludeObject;

    /// Parses the query parameter as kube-apiserver does; an empty value means `Metadata`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "None" => Ok(Self::None),
            "Metadata" | "" => Ok(Self::Metadata),
            "Object" => Ok(Self::Object),
            other => Err(InvalidIncludeObject(other.to_owned())),
        }
    }
}

/// Renders `objects` (all of kind `info`) as a `meta.k8s.io/v1` `Table`.
///
/// Columns and cells follow kube-apiserver for the built-in kinds it knows (see the module
/// docs), the CRD's printer columns for custom resources, and `Name`, `Age` for anything else.
/// `metadata` is left empty for the caller to fill with `resourceVersion` and `continue`.
pub fn render_table(
    info: &ResourceInfo,
    objects: &[&Value],
    include: IncludeObject,
    now: Timestamp,
) -> Value {
    let printer = Printer::for_resource(info);
    let columns: Vec<Value> = printer.columns().iter().map(Column::to_json).collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let row = printer.row(obj, now);
            let mut out = Map::new();
            out.insert("cells".into(), Value::Array(row.cells));
            if let Some(conditions) = row.conditions {
                out.insert("conditions".into(), conditions);
            }
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    out.insert("object".into(), partial_object_metadata(obj));
                }
                IncludeObject::Object => {
                    out.insert("object".into(), (*obj).clone());
                }
            }
            Value::Object(out)
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// Formats a duration as apimachinery's `duration.HumanDuration` does (`5s`, `3m20s`, `45h`):
/// [`telemesh_core::go::human_duration`], which kubectl-telemesh prints with too.
pub fn human_duration(d: SignedDuration) -> String {
    telemesh_core::go::human_duration(d.as_secs())
}

// === impl Printer ===

/// A column definition as it appears in `columnDefinitions`.
#[derive(Debug, Clone)]
struct Column {
    name: String,
    type_: String,
    format: String,
    description: String,
    priority: i32,
}

impl Column {
    fn new(name: &str, type_: &str, description: &str) -> Self {
        Self {
            name: name.to_owned(),
            type_: type_.to_owned(),
            format: String::new(),
            description: description.to_owned(),
            priority: 0,
        }
    }

    /// The `Name` column every printer starts with.
    fn name() -> Self {
        Self {
            format: "name".to_owned(),
            ..Self::new("Name", "string", OBJECT_META_NAME)
        }
    }

    /// The `Age` column built-in printers use.
    fn age() -> Self {
        Self::new("Age", "string", OBJECT_META_CREATION_TIMESTAMP)
    }

    /// A column shown only with `-o wide`.
    fn wide(name: &str, type_: &str, description: &str) -> Self {
        Self {
            priority: 1,
            ..Self::new(name, type_, description)
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// The cells of one row plus its optional row conditions.
struct Row {
    cells: Vec<Value>,
    conditions: Option<Value>,
}

impl From<Vec<Value>> for Row {
    fn from(cells: Vec<Value>) -> Self {
        Self {
            cells,
            conditions: None,
        }
    }
}

type RowFn = fn(&Value, Timestamp) -> Row;

/// A CRD printer column with its JSONPath compiled.
struct CustomColumn {
    type_: String,
    path: Option<serde_json_path::JsonPath>,
}

enum Printer {
    Builtin {
        columns: Vec<Column>,
        row: RowFn,
    },
    Custom {
        columns: Vec<Column>,
        custom: Vec<CustomColumn>,
    },
}

impl Printer {
    fn for_resource(info: &ResourceInfo) -> Self {
        if !info.printer_columns.is_empty() || info.schema.is_some() {
            return Self::custom(&info.printer_columns);
        }
        let (columns, row): (Vec<Column>, RowFn) = match (info.group.as_str(), info.kind.as_str()) {
            ("", "Pod") => (pod_columns(), pod_row),
            ("", "Node") => (node_columns(), node_row),
            ("", "Namespace") => (namespace_columns(), namespace_row),
            ("", "Service") => (service_columns(), service_row),
            ("", "ConfigMap") => (configmap_columns(), configmap_row),
            ("", "Secret") => (secret_columns(), secret_row),
            ("", "ServiceAccount") => (service_account_columns(), service_account_row),
            ("", "PersistentVolumeClaim") => (pvc_columns(), pvc_row),
            ("", "Event") | ("events.k8s.io", "Event") => (event_columns(), event_row),
            ("apps", "Deployment") => (deployment_columns(), deployment_row),
            ("apps", "ReplicaSet") => (replicaset_columns(), replicaset_row),
            ("apps", "StatefulSet") => (statefulset_columns(), statefulset_row),
            ("apps", "DaemonSet") => (daemonset_columns(), daemonset_row),
            ("batch", "Job") => (job_columns(), job_row),
            ("coordination.k8s.io", "Lease") => (lease_columns(), lease_row),
            ("scheduling.k8s.io", "PriorityClass") => {
                (priority_class_columns(), priority_class_row)
            }
            ("policy", "PodDisruptionBudget") => (pdb_columns(), pdb_row),
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                (created_at_columns(), created_at_row)
            }
            _ => (vec![Column::name(), Column::age()], name_age_row),
        };
        Self::Builtin { columns, row }
    }

    /// Builds the printer apiextensions-apiserver uses: `Name`, then the CRD's columns, or
    /// `Age` alone when the CRD lists none (`serveDefaultColumnsIfEmpty`).
    fn custom(printer_columns: &[PrinterColumn]) -> Self {
        let default_age;
        let printer_columns = if printer_columns.is_empty() {
            default_age = [PrinterColumn {
                name: "Age".to_owned(),
                type_: "date".to_owned(),
                format: None,
                description: Some(OBJECT_META_CREATION_TIMESTAMP.to_owned()),
                priority: 0,
                json_path: ".metadata.creationTimestamp".to_owned(),
            }];
            &default_age[..]
        } else {
            printer_columns
        };
        let mut columns = vec![Column::name()];
        let mut custom = Vec::with_capacity(printer_columns.len());
        for pc in printer_columns {
            let description = pc
                .description
                .clone()
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| {
                    format!(
                        "Custom resource definition column (in JSONPath format): {}",
                        pc.json_path
                    )
                });
            columns.push(Column {
                name: pc.name.clone(),
                type_: pc.type_.clone(),
                format: pc.format.clone().unwrap_or_default(),
                description,
                priority: pc.priority,
            });
            custom.push(CustomColumn {
                type_: pc.type_.clone(),
                path: serde_json_path::JsonPath::parse(&kube_jsonpath_to_rfc9535(&pc.json_path))
                    .ok(),
            });
        }
        Self::Custom { columns, custom }
    }

    fn columns(&self) -> &[Column] {
        match self {
            Self::Builtin { columns, .. } | Self::Custom { columns, .. } => columns,
        }
    }

    fn row(&self, obj: &Value, now: Timestamp) -> Row {
        match self {
            Self::Builtin { row, .. } => row(obj, now),
            Self::Custom { custom, .. } => {
                let mut cells = Vec::with_capacity(custom.len() + 1);
                cells.push(Value::from(name(obj)));
                for column in custom {
                    let value = column.path.as_ref().and_then(|p| p.query(obj).first());
                    cells.push(match value {
                        None => Value::Null,
                        Some(v) => custom_cell(&column.type_, v, now),
                    });
                }
                cells.into()
            }
        }
    }
}

/// Converts one JSONPath result to a cell as apiextensions-apiserver's `cellForJSONValue` does;
/// `string` columns print any value (objects and arrays as compact JSON).
fn custom_cell(type_: &str, value: &Value, now: Timestamp) -> Value {
    match (type_, value) {
        (_, Value::Null) => Value::Null,
        ("string", Value::String(s)) => Value::from(s.as_str()),
        ("string", Value::Number(n)) => Value::from(go_number_string(n)),
        ("string", Value::Bool(b)) => Value::from(b.to_string()),
        ("string", other) => Value::from(other.to_string()),
        ("integer", Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::from(i),
            // Go's int64(float64) truncates toward zero (and saturates here).
            #[allow(clippy::cast_possible_truncation)]
            (None, Some(f)) => Value::from(f as i64),
            (None, None) => Value::Null,
        },
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(b)) => Value::from(*b),
        ("date", Value::String(s)) => Value::from(translate_timestamp_since(s, now)),
        _ => Value::Null,
    }
}

/// Formats a JSON number as Go's `fmt.Print` does for the `int64`/`float64` that Kubernetes'
/// unstructured decoder produces (`%v`: shortest form, exponent below 1e-4 and from 1e21).
fn go_number_string(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let Some(f) = n.as_f64() else {
        return n.to_string();
    };
    if f == 0.0 || !f.is_finite() {
        return format!("{f}");
    }
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return format!("{f}");
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..21).contains(&exp) {
        format!("{f}")
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// Rewrites a Kubernetes JSONPath (`.status.conditions[?(@.type=="Ready")].status`, optionally
/// wrapped in `{}`) as an RFC 9535 query (`$.status.conditions[?(@.type=="Ready")].status`).
///
/// Field names that are not plain identifiers (`app.kubernetes.io/name`, written with `\.` in
/// Kubernetes) become bracketed names; bracket selectors are copied unchanged.
fn kube_jsonpath_to_rfc9535(path: &str) -> String {
    let mut p = path.trim();
    if let Some(inner) = p.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        p = inner.trim();
    }
    let p = p.strip_prefix('$').unwrap_or(p);
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::from("$");
    let mut i = 0;
    while i < chars.len() {
        let mut descendant = false;
        match chars[i] {
            '[' => {
                let end = matching_bracket(&chars, i);
                out.extend(&chars[i..end]);
                i = end;
                continue;
            }
            '.' if chars.get(i + 1) == Some(&'.') => {
                descendant = true;
                i += 2;
            }
            '.' => i += 1,
            _ => {}
        }
        if chars.get(i) == Some(&'[') {
            if descendant {
                out.push_str("..");
            }
            continue;
        }
        let mut name = String::new();
        while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
            if chars[i] == '\\' && i + 1 < chars.len() {
                i += 1;
            }
            name.push(chars[i]);
            i += 1;
        }
        if descendant {
            out.push_str("..");
        }
        if name == "*" {
            out.push_str("[*]");
        } else if is_identifier(&name) {
            if !descendant {
                out.push('.');
            }
            out.push_str(&name);
        } else {
            out.push_str("['");
            for c in name.chars() {
                if c == '\'' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push_str("']");
        }
    }
    out
}

/// Returns the index just past the `]` matching the `[` at `start`, skipping quoted strings.
fn matching_bracket(chars: &[char], start: usize) -> usize {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(_) if c == '\\' => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '[' => depth += 1,
                ']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            },
        }
        i += 1;
    }
    chars.len()
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn partial_object_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

// === value access ===

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(v, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

fn st<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

fn int(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(json_i64).unwrap_or(0)
}

fn json_i64(v: &Value) -> Option<i64> {
    #[allow(clippy::cast_possible_truncation)]
    v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
}

fn arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn map_len(v: &Value, path: &[&str]) -> usize {
    get(v, path).and_then(Value::as_object).map_or(0, Map::len)
}

fn name(obj: &Value) -> &str {
    st(obj, &["metadata", "name"])
}

fn deleting(obj: &Value) -> bool {
    get(obj, &["metadata", "deletionTimestamp"]).is_some()
}

fn parse_time(s: &str) -> Option<Timestamp> {
    s.parse::<Timestamp>().ok()
}

/// Returns the age of an RFC 3339 timestamp as `translateTimestampSince` does.
fn translate_timestamp_since(ts: &str, now: Timestamp) -> String {
    if ts.is_empty() {
        return "<unknown>".to_owned();
    }
    match parse_time(ts) {
        Some(t) => human_duration(now.duration_since(t)),
        None => "<invalid>".to_owned(),
    }
}

fn age(obj: &Value, now: Timestamp) -> Value {
    Value::from(translate_timestamp_since(
        st(obj, &["metadata", "creationTimestamp"]),
        now,
    ))
}

/// `labels.FormatLabels`: sorted `k=v` pairs, or `<none>`.
fn format_labels(labels: Option<&Value>) -> String {
    let pairs: BTreeMap<&str, String> = labels
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), scalar_string(v)))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        return "<none>".to_owned();
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn scalar_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `metav1.LabelSelectorAsSelector(sel).String()`; `None` for selectors the server would reject.
fn label_selector_string(selector: Option<&Value>) -> Option<String> {
    let Some(selector) = selector else {
        return Some(String::new());
    };
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            requirements.push((k.clone(), format!("{k}={}", scalar_string(v))));
        }
    }
    for expr in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let key = st(expr, &["key"]);
        let values: BTreeSet<String> = arr(expr, &["values"]).iter().map(scalar_string).collect();
        let joined = values
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(",");
        let rendered = match st(expr, &["operator"]) {
            "In" if !values.is_empty() => format!("{key} in ({joined})"),
            "NotIn" if !values.is_empty() => format!("{key} notin ({joined})"),
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        };
        requirements.push((key.to_owned(), rendered));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        requirements
            .into_iter()
            .map(|(_, r)| r)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: the selector string, `<none>` when empty, `<error>` if invalid.
fn format_label_selector(selector: Option<&Value>) -> String {
    match label_selector_string(selector) {
        Some(s) if s.is_empty() => "<none>".to_owned(),
        Some(s) => s,
        None => "<error>".to_owned(),
    }
}

/// `layoutContainerCells`: comma-separated container names and images.
fn container_cells(template_spec: Option<&Value>) -> (Value, Value) {
    let containers = template_spec.map_or(&[][..], |s| arr(s, &["containers"]));
    let names: Vec<&str> = containers.iter().map(|c| st(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| st(c, &["image"])).collect();
    (Value::from(names.join(",")), Value::from(images.join(",")))
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".to_owned()
    } else {
        s.to_owned()
    }
}

// === built-in printers ===

fn name_age_row(obj: &Value, now: Timestamp) -> Row {
    vec![Value::from(name(obj)), age(obj, now)].into()
}

fn created_at_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Created At", "date", OBJECT_META_CREATION_TIMESTAMP),
    ]
}

/// The default table convertor (`rest.NewDefaultTableConvertor`): name and UTC creation time.
fn created_at_row(obj: &Value, _now: Timestamp) -> Row {
    let created = parse_time(st(obj, &["metadata", "creationTimestamp"])).map_or_else(
        || "0001-01-01T00:00:00Z".to_owned(),
        |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    );
    vec![Value::from(name(obj)), Value::from(created)].into()
}

fn pod_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new(
            "Ready",
            "string",
            "The aggregate readiness state of this pod for accepting traffic.",
        ),
        Column::new(
            "Status",
            "string",
            "The aggregate status of the containers in this pod.",
        ),
        Column::new(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
        Column::age(),
        Column::wide("IP", "string", POD_STATUS_POD_IP),
        Column::wide("Node", "string", POD_SPEC_NODE_NAME),
        Column::wide("Nominated Node", "string", POD_STATUS_NOMINATED_NODE_NAME),
        Column::wide("Readiness Gates", "string", POD_SPEC_READINESS_GATES),
    ]
}

fn condition_is_true(obj: &Value, conditions: &[&str], type_: &str) -> bool {
    arr(obj, conditions)
        .iter()
        .any(|c| st(c, &["type"]) == type_ && st(c, &["status"]) == "True")
}

/// Keeps the later of two optional `finishedAt` times (Go compares against the zero time).
fn later(current: Option<Timestamp>, container_status: &Value) -> Option<Timestamp> {
    let finished = parse_time(st(
        container_status,
        &["lastState", "terminated", "finishedAt"],
    ));
    match (current, finished) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Ports `printPod`: READY counts, the STATUS reason precedence (pod reason, init containers,
/// then containers from last to first, then `Terminating`), and RESTARTS with its last restart.
fn pod_row(pod: &Value, now: Timestamp) -> Row {
    let init_specs = arr(pod, &["spec", "initContainers"]);
    // Sidecars: init containers with restartPolicy Always count as regular containers.
    let restartable: HashSet<&str> = init_specs
        .iter()
        .filter(|c| st(c, &["restartPolicy"]) == "Always")
        .map(|c| st(c, &["name"]))
        .collect();
    let total = arr(pod, &["spec", "containers"]).len() + restartable.len();
    let phase = st(pod, &["status", "phase"]);
    let status_reason = st(pod, &["status", "reason"]);
    let mut reason = if status_reason.is_empty() {
        phase.to_owned()
    } else {
        status_reason.to_owned()
    };
    for condition in arr(pod, &["status", "conditions"]) {
        if st(condition, &["type"]) == "PodScheduled"
            && st(condition, &["reason"]) == "SchedulingGated"
        {
            reason = "SchedulingGated".to_owned();
        }
    }

    let mut restarts = 0;
    let mut sidecar_restarts = 0;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_sidecar_restart: Option<Timestamp> = None;
    let mut ready = 0;
    let mut initializing = false;
    for (i, c) in arr(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        restarts += int(c, &["restartCount"]);
        last_restart = later(last_restart, c);
        let is_sidecar = restartable.contains(st(c, &["name"]));
        if is_sidecar {
            sidecar_restarts += int(c, &["restartCount"]);
            last_sidecar_restart = later(last_sidecar_restart, c);
        }
        let terminated = get(c, &["state", "terminated"]);
        let waiting_reason = st(c, &["state", "waiting", "reason"]);
        if terminated.is_some_and(|t| int(t, &["exitCode"]) == 0) {
            continue;
        }
        if is_sidecar && get(c, &["started"]).and_then(Value::as_bool) == Some(true) {
            if get(c, &["ready"]).and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(t) = terminated {
            let r = st(t, &["reason"]);
            if !r.is_empty() {
                format!("Init:{r}")
            } else if int(t, &["signal"]) != 0 {
                format!("Init:Signal:{}", int(t, &["signal"]))
            } else {
                format!("Init:ExitCode:{}", int(t, &["exitCode"]))
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }

    if !initializing || condition_is_true(pod, &["status", "conditions"], "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for c in arr(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int(c, &["restartCount"]);
            last_restart = later(last_restart, c);
            let waiting_reason = st(c, &["state", "waiting", "reason"]);
            let terminated = get(c, &["state", "terminated"]);
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_owned();
            } else if let Some(t) = terminated {
                let r = st(t, &["reason"]);
                reason = if !r.is_empty() {
                    r.to_owned()
                } else if int(t, &["signal"]) != 0 {
                    format!("Signal:{}", int(t, &["signal"]))
                } else {
                    format!("ExitCode:{}", int(t, &["exitCode"]))
                };
            } else if get(c, &["ready"]).and_then(Value::as_bool) == Some(true)
                && get(c, &["state", "running"]).is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition_is_true(pod, &["status", "conditions"], "Ready") {
                "Running".to_owned()
            } else {
                "NotReady".to_owned()
            };
        }
    }

    if deleting(pod) && status_reason == "NodeLost" {
        reason = "Unknown".to_owned();
    } else if deleting(pod) && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_owned();
    }

    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => {
            format!("{restarts} ({} ago)", human_duration(now.duration_since(t)))
        }
        _ => restarts.to_string(),
    };

    // v1 -> internal conversion fills podIPs from podIP when only the latter is set.
    let pod_ip = arr(pod, &["status", "podIPs"])
        .first()
        .map_or_else(|| st(pod, &["status", "podIP"]), |ip| st(ip, &["ip"]));
    let gates = arr(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let conditions = arr(pod, &["status", "conditions"]);
        let true_count = gates
            .iter()
            .filter(|gate| {
                let wanted = st(gate, &["conditionType"]);
                conditions
                    .iter()
                    .find(|c| st(c, &["type"]) == wanted)
                    .is_some_and(|c| st(c, &["status"]) == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };

    let conditions = match phase {
        "Succeeded" => Some(json!([{
            "type": "Completed", "status": "True", "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }])),
        "Failed" => Some(json!([{
            "type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed.",
        }])),
        _ => None,
    };
    Row {
        cells: vec![
            Value::from(name(pod)),
            Value::from(format!("{ready}/{total}")),
            Value::from(reason),
            Value::from(restarts_cell),
            age(pod, now),
            Value::from(or_none(pod_ip)),
            Value::from(or_none(st(pod, &["spec", "nodeName"]))),
            Value::from(or_none(st(pod, &["status", "nominatedNodeName"]))),
            Value::from(readiness_gates),
        ],
        conditions,
    }
}

fn node_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Status", "string", "The status of the node"),
        Column::new("Roles", "string", "The roles of the node"),
        Column::age(),
        Column::new("Version", "string", NODE_SYSTEM_INFO_KUBELET_VERSION),
        Column::wide("Internal-IP", "string", NODE_STATUS_ADDRESSES),
        Column::wide("External-IP", "string", NODE_STATUS_ADDRESSES),
        Column::wide("OS-Image", "string", NODE_SYSTEM_INFO_OS_IMAGE),
        Column::wide("Kernel-Version", "string", NODE_SYSTEM_INFO_KERNEL_VERSION),
        Column::wide(
            "Container-Runtime",
            "string",
            NODE_SYSTEM_INFO_CONTAINER_RUNTIME_VERSION,
        ),
    ]
}

fn node_row(node: &Value, now: Timestamp) -> Row {
    let ready = arr(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| st(c, &["type"]) == "Ready");
    let mut status = match ready {
        Some(c) if st(c, &["status"]) == "True" => "Ready".to_owned(),
        Some(_) => "NotReady".to_owned(),
        None => "Unknown".to_owned(),
    };
    if get(node, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }

    let mut roles = BTreeSet::new();
    if let Some(labels) = get(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_owned());
                }
            } else if k == "kubernetes.io/role" && v.as_str().is_some_and(|v| !v.is_empty()) {
                roles.insert(scalar_string(v));
            }
        }
    }
    let roles = if roles.is_empty() {
        "<none>".to_owned()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };

    let address = |type_: &str| {
        arr(node, &["status", "addresses"])
            .iter()
            .find(|a| st(a, &["type"]) == type_)
            .map_or_else(|| "<none>".to_owned(), |a| st(a, &["address"]).to_owned())
    };
    let info = |field: &str| {
        let v = st(node, &["status", "nodeInfo", field]);
        if v.is_empty() {
            "<unknown>".to_owned()
        } else {
            v.to_owned()
        }
    };
    vec![
        Value::from(name(node)),
        Value::from(status),
        Value::from(roles),
        age(node, now),
        Value::from(st(node, &["status", "nodeInfo", "kubeletVersion"])),
        Value::from(address("InternalIP")),
        Value::from(address("ExternalIP")),
        Value::from(info("osImage")),
        Value::from(info("kernelVersion")),
        Value::from(info("containerRuntimeVersion")),
    ]
    .into()
}

fn namespace_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Status", "string", "The status of the namespace"),
        Column::age(),
    ]
}

fn namespace_row(ns: &Value, now: Timestamp) -> Row {
    vec![
        Value::from(name(ns)),
        Value::from(st(ns, &["status", "phase"])),
        age(ns, now),
    ]
    .into()
}

fn service_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Type", "string", SERVICE_SPEC_TYPE),
        Column::new("Cluster-IP", "string", SERVICE_SPEC_CLUSTER_IP),
        Column::new("External-IP", "string", SERVICE_SPEC_EXTERNAL_IPS),
        Column::new("Port(s)", "string", SERVICE_SPEC_PORTS),
        Column::age(),
        Column::wide("Selector", "string", SERVICE_SPEC_SELECTOR),
    ]
}

fn service_row(svc: &Value, now: Timestamp) -> Row {
    let type_ = match st(svc, &["spec", "type"]) {
        "" => "ClusterIP",
        t => t,
    };
    let cluster_ip = arr(svc, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .unwrap_or_else(|| st(svc, &["spec", "clusterIP"]));
    let external_ips: Vec<String> = arr(svc, &["spec", "externalIPs"])
        .iter()
        .map(scalar_string)
        .collect();
    let external = match type_ {
        "ClusterIP" | "NodePort" if !external_ips.is_empty() => external_ips.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_owned(),
        "LoadBalancer" => {
            let lb: BTreeSet<&str> = arr(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|i| {
                    let ip = st(i, &["ip"]);
                    let host = st(i, &["hostname"]);
                    if !ip.is_empty() {
                        Some(ip)
                    } else if !host.is_empty() {
                        Some(host)
                    } else {
                        None
                    }
                })
                .collect();
            let mut all: Vec<String> = lb.into_iter().map(str::to_owned).collect();
            all.extend(external_ips);
            if all.is_empty() {
                "<pending>".to_owned()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => st(svc, &["spec", "externalName"]).to_owned(),
        _ => "<unknown>".to_owned(),
    };
    let ports: Vec<String> = arr(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let protocol = match st(p, &["protocol"]) {
                "" => "TCP",
                proto => proto,
            };
            let node_port = int(p, &["nodePort"]);
            if node_port > 0 {
                format!("{}:{node_port}/{protocol}", int(p, &["port"]))
            } else {
                format!("{}/{protocol}", int(p, &["port"]))
            }
        })
        .collect();
    vec![
        Value::from(name(svc)),
        Value::from(type_),
        Value::from(or_none(cluster_ip)),
        Value::from(external),
        Value::from(or_none(&ports.join(","))),
        age(svc, now),
        Value::from(format_labels(get(svc, &["spec", "selector"]))),
    ]
    .into()
}

fn configmap_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Data", "string", CONFIG_MAP_DATA),
        Column::age(),
    ]
}

fn configmap_row(cm: &Value, now: Timestamp) -> Row {
    let data = map_len(cm, &["data"]) + map_len(cm, &["binaryData"]);
    vec![Value::from(name(cm)), Value::from(data), age(cm, now)].into()
}

fn secret_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Type", "string", SECRET_TYPE),
        Column::new("Data", "string", SECRET_DATA),
        Column::age(),
    ]
}

fn secret_row(secret: &Value, now: Timestamp) -> Row {
    let type_ = match st(secret, &["type"]) {
        "" => "Opaque",
        t => t,
    };
    vec![
        Value::from(name(secret)),
        Value::from(type_),
        Value::from(map_len(secret, &["data"])),
        age(secret, now),
    ]
    .into()
}

fn service_account_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Secrets", "string", SERVICE_ACCOUNT_SECRETS),
        Column::age(),
    ]
}

fn service_account_row(sa: &Value, now: Timestamp) -> Row {
    vec![
        Value::from(name(sa)),
        Value::from(arr(sa, &["secrets"]).len()),
        age(sa, now),
    ]
    .into()
}

fn pvc_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Status", "string", PERSISTENT_VOLUME_CLAIM_STATUS_PHASE),
        Column::new("Volume", "string", PERSISTENT_VOLUME_CLAIM_SPEC_VOLUME_NAME),
        Column::new(
            "Capacity",
            "string",
            PERSISTENT_VOLUME_CLAIM_STATUS_CAPACITY,
        ),
        Column::new(
            "Access Modes",
            "string",
            PERSISTENT_VOLUME_CLAIM_STATUS_ACCESS_MODES,
        ),
        Column::new("StorageClass", "string", "StorageClass of the pvc"),
        Column::new(
            "VolumeAttributesClass",
            "string",
            "VolumeAttributesClass of the pvc",
        ),
        Column::age(),
        Column::wide(
            "VolumeMode",
            "string",
            PERSISTENT_VOLUME_CLAIM_SPEC_VOLUME_MODE,
        ),
    ]
}

/// `helper.GetAccessModesAsString`: RWO, ROX, RWX, RWOP in that order, without duplicates.
fn access_modes(modes: &[Value]) -> String {
    let present: HashSet<&str> = modes.iter().filter_map(Value::as_str).collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| present.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

fn pvc_row(pvc: &Value, now: Timestamp) -> Row {
    let phase = if deleting(pvc) {
        "Terminating"
    } else {
        st(pvc, &["status", "phase"])
    };
    let volume = st(pvc, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            get(pvc, &["status", "capacity", "storage"])
                .map(scalar_string)
                .unwrap_or_else(|| "0".to_owned()),
            access_modes(arr(pvc, &["status", "accessModes"])),
        )
    };
    let class = get(
        pvc,
        &[
            "metadata",
            "annotations",
            "volume.beta.kubernetes.io/storage-class",
        ],
    )
    .and_then(Value::as_str)
    .unwrap_or_else(|| st(pvc, &["spec", "storageClassName"]));
    let unset = |s: &str| {
        if s.is_empty() {
            "<unset>".to_owned()
        } else {
            s.to_owned()
        }
    };
    vec![
        Value::from(name(pvc)),
        Value::from(phase),
        Value::from(volume),
        Value::from(capacity),
        Value::from(modes),
        Value::from(class),
        Value::from(unset(st(pvc, &["spec", "volumeAttributesClassName"]))),
        age(pvc, now),
        Value::from(unset(st(pvc, &["spec", "volumeMode"]))),
    ]
    .into()
}

fn event_columns() -> Vec<Column> {
    vec![
        Column::new("Last Seen", "string", EVENT_LAST_TIMESTAMP),
        Column::new("Type", "string", EVENT_TYPE),
        Column::new("Reason", "string", EVENT_REASON),
        Column::new("Object", "string", EVENT_INVOLVED_OBJECT),
        Column::wide("Subobject", "string", OBJECT_REFERENCE_FIELD_PATH),
        Column::wide("Source", "string", EVENT_SOURCE),
        Column::new("Message", "string", EVENT_MESSAGE),
        Column::wide("First Seen", "string", EVENT_FIRST_TIMESTAMP),
        Column::wide("Count", "string", EVENT_COUNT),
        Column {
            format: "name".to_owned(),
            ..Column::wide("Name", "string", OBJECT_META_NAME)
        },
    ]
}

/// Ports `printEvent` for both `v1` and `events.k8s.io/v1` events (the latter's `regarding`,
/// `note` and `deprecated*` fields map onto the core ones, as the server's conversion does).
fn event_row(ev: &Value, now: Timestamp) -> Row {
    let is_core = ev.get("involvedObject").is_some() || ev.get("regarding").is_none();
    let (involved, message, source, first, last, count, controller) = if is_core {
        (
            "involvedObject",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "reportingComponent",
        )
    } else {
        (
            "regarding",
            "note",
            "deprecatedSource",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
            "reportingController",
        )
    };
    let first_seen = match st(ev, &[first]) {
        "" => translate_timestamp_since(st(ev, &["eventTime"]), now),
        ts => translate_timestamp_since(ts, now),
    };
    let mut last_seen = match st(ev, &[last]) {
        "" => first_seen.clone(),
        ts => translate_timestamp_since(ts, now),
    };
    let mut count = int(ev, &[count]);
    if let Some(series) = get(ev, &["series"]) {
        last_seen = translate_timestamp_since(st(series, &["lastObservedTime"]), now);
        count = int(series, &["count"]);
    } else if count == 0 {
        count = 1;
    }
    let kind = st(ev, &[involved, "kind"]).to_lowercase();
    let target = match st(ev, &[involved, "name"]) {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = match st(ev, &[source, "component"]) {
        "" => st(ev, &[controller]),
        c => c,
    };
    let instance = match st(ev, &[source, "host"]) {
        "" => st(ev, &["reportingInstance"]),
        h => h,
    };
    let source = if instance.is_empty() {
        component.to_owned()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        Value::from(last_seen),
        Value::from(st(ev, &["type"])),
        Value::from(st(ev, &["reason"])),
        Value::from(target),
        Value::from(st(ev, &[involved, "fieldPath"])),
        Value::from(source),
        Value::from(st(ev, &[message]).trim()),
        Value::from(first_seen),
        Value::from(count),
        Value::from(name(ev)),
    ]
    .into()
}

fn template_columns(selector: &str) -> [Column; 3] {
    [
        Column::wide(
            "Containers",
            "string",
            "Names of each container in the template.",
        ),
        Column::wide(
            "Images",
            "string",
            "Images referenced by each container in the template.",
        ),
        Column::wide("Selector", "string", selector),
    ]
}

fn deployment_columns() -> Vec<Column> {
    let mut columns = vec![
        Column::name(),
        Column::new("Ready", "string", "Number of the pod with ready state"),
        Column::new("Up-to-date", "string", DEPLOYMENT_STATUS_UPDATED_REPLICAS),
        Column::new("Available", "string", DEPLOYMENT_STATUS_AVAILABLE_REPLICAS),
        Column::age(),
    ];
    columns.extend(template_columns(DEPLOYMENT_SPEC_SELECTOR));
    columns
}

/// `spec.replicas`, defaulting to 1 as the API server's defaulting does.
fn desired_replicas(obj: &Value) -> i64 {
    get(obj, &["spec", "replicas"])
        .and_then(json_i64)
        .unwrap_or(1)
}

fn deployment_row(d: &Value, now: Timestamp) -> Row {
    let (containers, images) = container_cells(get(d, &["spec", "template", "spec"]));
    let selector = label_selector_string(get(d, &["spec", "selector"]))
        .unwrap_or_else(|| "<invalid>".to_owned());
    vec![
        Value::from(name(d)),
        Value::from(format!(
            "{}/{}",
            int(d, &["status", "readyReplicas"]),
            desired_replicas(d)
        )),
        Value::from(int(d, &["status", "updatedReplicas"])),
        Value::from(int(d, &["status", "availableReplicas"])),
        age(d, now),
        containers,
        images,
        Value::from(selector),
    ]
    .into()
}

fn replicaset_columns() -> Vec<Column> {
    let mut columns = vec![
        Column::name(),
        Column::new("Desired", "integer", REPLICA_SET_SPEC_REPLICAS),
        Column::new("Current", "integer", REPLICA_SET_STATUS_REPLICAS),
        Column::new("Ready", "integer", REPLICA_SET_STATUS_READY_REPLICAS),
        Column::age(),
    ];
    columns.extend(template_columns(REPLICA_SET_SPEC_SELECTOR));
    columns
}

fn replicaset_row(rs: &Value, now: Timestamp) -> Row {
    let (containers, images) = container_cells(get(rs, &["spec", "template", "spec"]));
    vec![
        Value::from(name(rs)),
        Value::from(desired_replicas(rs)),
        Value::from(int(rs, &["status", "replicas"])),
        Value::from(int(rs, &["status", "readyReplicas"])),
        age(rs, now),
        containers,
        images,
        Value::from(format_label_selector(get(rs, &["spec", "selector"]))),
    ]
    .into()
}

fn statefulset_columns() -> Vec<Column> {
    let [containers, images, _] = template_columns("");
    vec![
        Column::name(),
        Column::new("Ready", "string", "Number of the pod with ready state"),
        Column::age(),
        containers,
        images,
    ]
}

fn statefulset_row(ss: &Value, now: Timestamp) -> Row {
    let (containers, images) = container_cells(get(ss, &["spec", "template", "spec"]));
    vec![
        Value::from(name(ss)),
        Value::from(format!(
            "{}/{}",
            int(ss, &["status", "readyReplicas"]),
            desired_replicas(ss)
        )),
        age(ss, now),
        containers,
        images,
    ]
    .into()
}

fn daemonset_columns() -> Vec<Column> {
    let mut columns = vec![
        Column::name(),
        Column::new(
            "Desired",
            "integer",
            DAEMON_SET_STATUS_DESIRED_NUMBER_SCHEDULED,
        ),
        Column::new(
            "Current",
            "integer",
            DAEMON_SET_STATUS_CURRENT_NUMBER_SCHEDULED,
        ),
        Column::new("Ready", "integer", DAEMON_SET_STATUS_NUMBER_READY),
        Column::new(
            "Up-to-date",
            "integer",
            DAEMON_SET_STATUS_UPDATED_NUMBER_SCHEDULED,
        ),
        Column::new("Available", "integer", DAEMON_SET_STATUS_NUMBER_AVAILABLE),
        Column::new("Node Selector", "string", POD_SPEC_NODE_SELECTOR),
        Column::age(),
    ];
    columns.extend(template_columns(DAEMON_SET_SPEC_SELECTOR));
    columns
}

fn daemonset_row(ds: &Value, now: Timestamp) -> Row {
    let template_spec = get(ds, &["spec", "template", "spec"]);
    let (containers, images) = container_cells(template_spec);
    vec![
        Value::from(name(ds)),
        Value::from(int(ds, &["status", "desiredNumberScheduled"])),
        Value::from(int(ds, &["status", "currentNumberScheduled"])),
        Value::from(int(ds, &["status", "numberReady"])),
        Value::from(int(ds, &["status", "updatedNumberScheduled"])),
        Value::from(int(ds, &["status", "numberAvailable"])),
        Value::from(format_labels(
            template_spec.and_then(|s| get(s, &["nodeSelector"])),
        )),
        age(ds, now),
        containers,
        images,
        Value::from(format_label_selector(get(ds, &["spec", "selector"]))),
    ]
    .into()
}

fn job_columns() -> Vec<Column> {
    let mut columns = vec![
        Column::name(),
        Column::new("Status", "string", "Status of the job."),
        Column::new("Completions", "string", JOB_STATUS_SUCCEEDED),
        Column::new("Duration", "string", "Time required to complete the job."),
        Column::age(),
    ];
    columns.extend(template_columns(JOB_SPEC_SELECTOR));
    columns
}

/// `hasJobCondition`: the first condition of that type decides.
fn job_condition(job: &Value, type_: &str) -> bool {
    arr(job, &["status", "conditions"])
        .iter()
        .find(|c| st(c, &["type"]) == type_)
        .is_some_and(|c| st(c, &["status"]) == "True")
}

fn job_row(job: &Value, now: Timestamp) -> Row {
    let succeeded = int(job, &["status", "succeeded"]);
    let completions = match get(job, &["spec", "completions"]).and_then(json_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match int(job, &["spec", "parallelism"]) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match parse_time(st(job, &["status", "startTime"])) {
        None => String::new(),
        Some(start) => match parse_time(st(job, &["status", "completionTime"])) {
            None => human_duration(now.duration_since(start)),
            Some(end) => human_duration(end.duration_since(start)),
        },
    };
    let status = if job_condition(job, "Complete") {
        "Complete"
    } else if job_condition(job, "Failed") {
        "Failed"
    } else if deleting(job) {
        "Terminating"
    } else if job_condition(job, "Suspended") {
        "Suspended"
    } else if job_condition(job, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (containers, images) = container_cells(get(job, &["spec", "template", "spec"]));
    vec![
        Value::from(name(job)),
        Value::from(status),
        Value::from(completions),
        Value::from(duration),
        age(job, now),
        containers,
        images,
        Value::from(format_label_selector(get(job, &["spec", "selector"]))),
    ]
    .into()
}

fn lease_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Holder", "string", LEASE_SPEC_HOLDER_IDENTITY),
        Column::age(),
    ]
}

fn lease_row(lease: &Value, now: Timestamp) -> Row {
    vec![
        Value::from(name(lease)),
        Value::from(st(lease, &["spec", "holderIdentity"])),
        age(lease, now),
    ]
    .into()
}

fn priority_class_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Value", "integer", PRIORITY_CLASS_VALUE),
        Column::new("Global-Default", "boolean", PRIORITY_CLASS_GLOBAL_DEFAULT),
        Column::age(),
        Column::wide(
            "PreemptionPolicy",
            "string",
            PRIORITY_CLASS_PREEMPTION_POLICY,
        ),
    ]
}

fn priority_class_row(pc: &Value, now: Timestamp) -> Row {
    vec![
        Value::from(name(pc)),
        Value::from(int(pc, &["value"])),
        Value::from(
            get(pc, &["globalDefault"])
                .and_then(Value::as_bool)
                .unwrap_or(false),
        ),
        age(pc, now),
        Value::from(st(pc, &["preemptionPolicy"])),
    ]
    .into()
}

fn pdb_columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new(
            "Min Available",
            "string",
            "The minimum number of pods that must be available.",
        ),
        Column::new(
            "Max Unavailable",
            "string",
            "The maximum number of pods that may be unavailable.",
        ),
        Column::new(
            "Allowed Disruptions",
            "integer",
            "Calculated number of pods that may be disrupted at this time.",
        ),
        Column::age(),
    ]
}

fn pdb_row(pdb: &Value, now: Timestamp) -> Row {
    let int_or_string =
        |field: &str| get(pdb, &["spec", field]).map_or_else(|| "N/A".to_owned(), scalar_string);
    vec![
        Value::from(name(pdb)),
        Value::from(int_or_string("minAvailable")),
        Value::from(int_or_string("maxUnavailable")),
        Value::from(int(pdb, &["status", "disruptionsAllowed"])),
        age(pdb, now),
    ]
    .into()
}

// === column descriptions (the upstream SwaggerDoc texts, as k8s-openapi v1_33 carries them) ===

const OBJECT_META_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const OBJECT_META_CREATION_TIMESTAMP: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const POD_STATUS_POD_IP: &str = "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.";
const POD_STATUS_NOMINATED_NODE_NAME: &str = "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.";
const POD_SPEC_NODE_NAME: &str = "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename";
const POD_SPEC_READINESS_GATES: &str = "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates";
const POD_SPEC_NODE_SELECTOR: &str = "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/";
const NODE_SYSTEM_INFO_KUBELET_VERSION: &str = "Kubelet Version reported by the node.";
const NODE_SYSTEM_INFO_OS_IMAGE: &str =
    "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).";
const NODE_SYSTEM_INFO_KERNEL_VERSION: &str =
    "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).";
const NODE_SYSTEM_INFO_CONTAINER_RUNTIME_VERSION: &str = "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).";
const NODE_STATUS_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
const EVENT_LAST_TIMESTAMP: &str =
    "The time at which the most recent occurrence of this event was recorded.";
const EVENT_TYPE: &str =
    "Type of this event (Normal, Warning), new types could be added in the future";
const EVENT_REASON: &str = "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.";
const EVENT_INVOLVED_OBJECT: &str = "The object that this event is about.";
const EVENT_SOURCE: &str =
    "The component reporting this event. Should be a short machine understandable string.";
const EVENT_MESSAGE: &str = "A human-readable description of the status of this operation.";
const EVENT_FIRST_TIMESTAMP: &str =
    "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)";
const EVENT_COUNT: &str = "The number of times this event has occurred.";
const OBJECT_REFERENCE_FIELD_PATH: &str = "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.";
const SECRET_TYPE: &str = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
const SECRET_DATA: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";
const SERVICE_ACCOUNT_SECRETS: &str = "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret";
const CONFIG_MAP_DATA: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
const PERSISTENT_VOLUME_CLAIM_STATUS_PHASE: &str =
    "phase represents the current phase of PersistentVolumeClaim.";
const PERSISTENT_VOLUME_CLAIM_STATUS_CAPACITY: &str =
    "capacity represents the actual resources of the underlying volume.";
const PERSISTENT_VOLUME_CLAIM_STATUS_ACCESS_MODES: &str = "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1";
const PERSISTENT_VOLUME_CLAIM_SPEC_VOLUME_NAME: &str =
    "volumeName is the binding reference to the PersistentVolume backing this claim.";
const PERSISTENT_VOLUME_CLAIM_SPEC_VOLUME_MODE: &str = "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.";
const DEPLOYMENT_STATUS_UPDATED_REPLICAS: &str = "Total number of non-terminating pods targeted by this deployment that have the desired template spec.";
const DEPLOYMENT_STATUS_AVAILABLE_REPLICAS: &str = "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.";
const DEPLOYMENT_SPEC_SELECTOR: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.";
const REPLICA_SET_SPEC_REPLICAS: &str = "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset";
const REPLICA_SET_SPEC_SELECTOR: &str = "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const REPLICA_SET_STATUS_REPLICAS: &str = "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset";
const REPLICA_SET_STATUS_READY_REPLICAS: &str =
    "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.";
const DAEMON_SET_STATUS_DESIRED_NUMBER_SCHEDULED: &str = "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
const DAEMON_SET_STATUS_CURRENT_NUMBER_SCHEDULED: &str = "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
const DAEMON_SET_STATUS_NUMBER_READY: &str = "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.";
const DAEMON_SET_STATUS_UPDATED_NUMBER_SCHEDULED: &str =
    "The total number of nodes that are running updated daemon pod";
const DAEMON_SET_STATUS_NUMBER_AVAILABLE: &str = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)";
const DAEMON_SET_SPEC_SELECTOR: &str = "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const JOB_STATUS_SUCCEEDED: &str = "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.";
const JOB_SPEC_SELECTOR: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const SERVICE_SPEC_TYPE: &str = "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types";
const SERVICE_SPEC_CLUSTER_IP: &str = "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const SERVICE_SPEC_EXTERNAL_IPS: &str = "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.";
const SERVICE_SPEC_PORTS: &str = "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const SERVICE_SPEC_SELECTOR: &str = "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/";
const LEASE_SPEC_HOLDER_IDENTITY: &str = "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.";
const PRIORITY_CLASS_VALUE: &str = "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.";
const PRIORITY_CLASS_GLOBAL_DEFAULT: &str = "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.";
const PRIORITY_CLASS_PREEMPTION_POLICY: &str = "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.";

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const NOW: &str = "2025-06-01T12:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    /// Returns the RFC 3339 time `secs` seconds before `NOW`.
    fn ago(secs: i64) -> String {
        now()
            .checked_sub(SignedDuration::from_secs(secs))
            .unwrap()
            .to_string()
    }

    fn builtin(group: &str, kind: &str) -> ResourceInfo {
        ResourceInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            ..Default::default()
        }
    }

    fn cells(info: &ResourceInfo, obj: &Value) -> Vec<Value> {
        let table = render_table(info, &[obj], IncludeObject::None, now());
        table["rows"][0]["cells"].as_array().unwrap().clone()
    }

    fn column_names(table: &Value) -> Vec<String> {
        table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn pod(status: Value) -> Value {
        json!({
            "metadata": {"name": "web-0", "namespace": "default", "creationTimestamp": ago(200)},
            "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "nginx"}]},
            "status": status,
        })
    }

    #[test]
    fn human_duration_matches_apimachinery_at_several_magnitudes() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (200, "3m20s"),
            (300, "5m"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 30 * 60, "5h30m"),
            (45 * 3600, "45h"),
            (48 * 3600, "2d"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (30 * 86400, "30d"),
            (800 * 86400, "2y70d"),
            (3 * 365 * 86400, "3y"),
            (10 * 365 * 86400, "10y"),
        ];
        for (secs, want) in cases {
            assert_eq!(
                human_duration(SignedDuration::from_secs(secs)),
                want,
                "{secs}s"
            );
        }
    }

    #[test]
    fn table_has_meta_envelope_and_pod_columns() {
        let table = render_table(&builtin("", "Pod"), &[], IncludeObject::Metadata, now());
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(table["metadata"], json!({}));
        assert_eq!(table["rows"], json!([]));
        assert_eq!(
            column_names(&table),
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        let defs = table["columnDefinitions"].as_array().unwrap();
        assert_eq!(defs[0]["format"], "name");
        assert_eq!(defs[0]["priority"], 0);
        assert_eq!(defs[5]["priority"], 1);
        assert_eq!(defs[3]["type"], "string");
    }

    #[test]
    fn running_pod_shows_ready_running_and_wide_cells() {
        let p = pod(json!({
            "phase": "Running",
            "podIP": "10.0.0.7",
            "podIPs": [{"ip": "10.0.0.7"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": ago(100)}}}],
        }));
        assert_eq!(
            cells(&builtin("", "Pod"), &p),
            json!([
                "web-0", "1/1", "Running", "0", "3m20s", "10.0.0.7", "node-a", "<none>", "<none>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
    }

    #[test]
    fn pending_pod_without_statuses_shows_pending_and_none_ip() {
        let mut p = pod(json!({"phase": "Pending"}));
        p["spec"]["nodeName"] = Value::Null;
        assert_eq!(
            cells(&builtin("", "Pod"), &p),
            json!([
                "web-0", "0/1", "Pending", "0", "3m20s", "<none>", "<none>", "<none>", "<none>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
    }

    #[test]
    fn crash_looping_pod_shows_waiting_reason_and_last_restart() {
        let p = pod(json!({
            "phase": "Running",
            "containerStatuses": [{
                "name": "app", "ready": false, "restartCount": 5,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(30)}},
            }],
        }));
        let c = cells(&builtin("", "Pod"), &p);
        assert_eq!(c[1], "0/1");
        assert_eq!(c[2], "CrashLoopBackOff");
        assert_eq!(c[3], "5 (30s ago)");
    }

    #[test]
    fn deleted_running_pod_shows_terminating() {
        let mut p = pod(json!({
            "phase": "Running",
            "containerStatuses": [{"name": "app", "ready": true, "state": {"running": {}}}],
        }));
        p["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(cells(&builtin("", "Pod"), &p)[2], "Terminating");
    }

    #[test]
    fn deleted_pod_on_lost_node_shows_unknown() {
        let mut p = pod(json!({"phase": "Running", "reason": "NodeLost"}));
        p["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(cells(&builtin("", "Pod"), &p)[2], "Unknown");
    }

    #[test]
    fn pod_with_pending_init_container_shows_init_progress() {
        let mut p = pod(json!({
            "phase": "Pending",
            "initContainerStatuses": [{"name": "setup", "state": {"waiting": {"reason": "PodInitializing"}}}],
            "containerStatuses": [{"name": "app", "state": {"waiting": {"reason": "PodInitializing"}}}],
        }));
        p["spec"]["initContainers"] = json!([{"name": "setup", "image": "busybox"}]);
        assert_eq!(cells(&builtin("", "Pod"), &p)[2], "Init:0/1");
    }

    #[test]
    fn completed_container_in_failed_init_shows_init_reason() {
        let mut p = pod(json!({
            "phase": "Pending",
            "initContainerStatuses": [{"name": "setup", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}],
        }));
        p["spec"]["initContainers"] = json!([{"name": "setup", "image": "busybox"}]);
        assert_eq!(cells(&builtin("", "Pod"), &p)[2], "Init:Error");
    }

    #[test]
    fn sidecar_counts_towards_ready_containers() {
        let mut p = pod(json!({
            "phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
            "initContainerStatuses": [{"name": "proxy", "started": true, "ready": true, "state": {"running": {}}}],
            "containerStatuses": [{"name": "app", "ready": true, "state": {"running": {}}}],
        }));
        p["spec"]["initContainers"] =
            json!([{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]);
        let c = cells(&builtin("", "Pod"), &p);
        assert_eq!(c[1], "2/2");
        assert_eq!(c[2], "Running");
    }

    #[test]
    fn succeeded_pod_row_carries_completed_condition() {
        let p = pod(json!({
            "phase": "Succeeded",
            "containerStatuses": [{"name": "app", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
        }));
        let table = render_table(&builtin("", "Pod"), &[&p], IncludeObject::None, now());
        assert_eq!(table["rows"][0]["cells"][2], "Completed");
        assert_eq!(table["rows"][0]["conditions"][0]["type"], "Completed");
        assert_eq!(table["rows"][0]["conditions"][0]["reason"], "Succeeded");
    }

    #[test]
    fn readiness_gates_count_true_conditions() {
        let mut p = pod(json!({
            "phase": "Running",
            "conditions": [{"type": "example.com/lb", "status": "True"}, {"type": "example.com/dns", "status": "False"}],
        }));
        p["spec"]["readinessGates"] =
            json!([{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]);
        assert_eq!(cells(&builtin("", "Pod"), &p)[8], "1/2");
    }

    fn node(ready: Option<&str>, unschedulable: bool, labels: Value) -> Value {
        let conditions =
            ready.map_or_else(|| json!([]), |s| json!([{"type": "Ready", "status": s}]));
        json!({
            "metadata": {"name": "node-a", "creationTimestamp": ago(45 * 3600), "labels": labels},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "conditions": conditions,
                "addresses": [{"type": "InternalIP", "address": "192.168.0.10"}],
                "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Telemesh", "containerRuntimeVersion": "sim://1"},
            },
        })
    }

    #[test]
    fn ready_control_plane_node_shows_roles_and_wide_cells() {
        let n = node(
            Some("True"),
            false,
            json!({"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/etcd": "true", "kubernetes.io/hostname": "node-a"}),
        );
        assert_eq!(
            cells(&builtin("", "Node"), &n),
            json!([
                "node-a",
                "Ready",
                "control-plane,etcd",
                "45h",
                "v1.33.0",
                "192.168.0.10",
                "<none>",
                "Telemesh",
                "<unknown>",
                "sim://1"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
    }

    #[test]
    fn not_ready_node_without_roles_shows_none() {
        let c = cells(&builtin("", "Node"), &node(Some("False"), false, json!({})));
        assert_eq!(c[1], "NotReady");
        assert_eq!(c[2], "<none>");
    }

    #[test]
    fn cordoned_node_shows_scheduling_disabled() {
        let c = cells(
            &builtin("", "Node"),
            &node(Some("True"), true, json!({"kubernetes.io/role": "worker"})),
        );
        assert_eq!(c[1], "Ready,SchedulingDisabled");
        assert_eq!(c[2], "worker");
        let c = cells(&builtin("", "Node"), &node(None, true, json!({})));
        assert_eq!(c[1], "Unknown,SchedulingDisabled");
    }

    fn widget_info(columns: Vec<PrinterColumn>) -> ResourceInfo {
        ResourceInfo {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            namespaced: true,
            printer_columns: columns,
            schema: Some(json!({"type": "object"})),
            ..Default::default()
        }
    }

    fn column(name: &str, type_: &str, json_path: &str) -> PrinterColumn {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            json_path: json_path.into(),
            ..Default::default()
        }
    }

    fn widget() -> Value {
        json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w1", "creationTimestamp": ago(90), "labels": {"app.kubernetes.io/name": "demo"}},
            "spec": {"replicas": 3, "ratio": 1.5, "enabled": true, "tags": ["a", "b"]},
            "status": {
                "lastSeen": ago(600),
                "conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}],
            },
        })
    }

    #[test]
    fn custom_resource_uses_printer_columns_with_filter_and_missing_field() {
        let info = widget_info(vec![
            column("Replicas", "integer", ".spec.replicas"),
            column(
                "Ready",
                "string",
                r#".status.conditions[?(@.type=="Ready")].status"#,
            ),
            column("Owner", "string", ".spec.owner"),
            PrinterColumn {
                priority: 1,
                ..column("Seen", "date", ".status.lastSeen")
            },
        ]);
        let table = render_table(&info, &[&widget()], IncludeObject::None, now());
        assert_eq!(
            column_names(&table),
            ["Name", "Replicas", "Ready", "Owner", "Seen"]
        );
        assert_eq!(table["columnDefinitions"][4]["priority"], 1);
        assert_eq!(
            table["columnDefinitions"][1]["description"],
            "Custom resource definition column (in JSONPath format): .spec.replicas"
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["w1", 3, "True", null, "10m"])
        );
    }

    #[test]
    fn custom_resource_string_columns_print_any_json_value() {
        let info = widget_info(vec![
            column("Replicas", "string", ".spec.replicas"),
            column("Ratio", "number", ".spec.ratio"),
            column("On", "boolean", ".spec.enabled"),
            column("Tags", "string", ".spec.tags"),
            column(
                "App",
                "string",
                r".metadata.labels.app\.kubernetes\.io/name",
            ),
            column("Created", "date", "{.metadata.creationTimestamp}"),
        ]);
        assert_eq!(
            cells(&info, &widget()),
            json!(["w1", "3", 1.5, true, r#"["a","b"]"#, "demo", "90s"])
                .as_array()
                .unwrap()
                .clone()
        );
    }

    #[test]
    fn custom_resource_without_printer_columns_shows_name_and_age() {
        let table = render_table(
            &widget_info(vec![]),
            &[&widget()],
            IncludeObject::None,
            now(),
        );
        assert_eq!(column_names(&table), ["Name", "Age"]);
        assert_eq!(table["columnDefinitions"][1]["type"], "date");
        assert_eq!(table["rows"][0]["cells"], json!(["w1", "90s"]));
    }

    #[test]
    fn custom_resource_with_printer_columns_has_no_implicit_age() {
        let table = render_table(
            &widget_info(vec![column("Replicas", "integer", ".spec.replicas")]),
            &[],
            IncludeObject::None,
            now(),
        );
        assert_eq!(column_names(&table), ["Name", "Replicas"]);
    }

    #[test]
    fn kube_jsonpaths_become_rfc9535_queries() {
        let cases = [
            (".spec.replicas", "$.spec.replicas"),
            ("{.spec.replicas}", "$.spec.replicas"),
            (
                r#".status.conditions[?(@.type=="Ready")].status"#,
                r#"$.status.conditions[?(@.type=="Ready")].status"#,
            ),
            (
                r".metadata.labels.app\.kubernetes\.io/name",
                "$.metadata.labels['app.kubernetes.io/name']",
            ),
            (".spec.containers[*].image", "$.spec.containers[*].image"),
            ("..name", "$..name"),
            (".spec.items[0]['x-y']", "$.spec.items[0]['x-y']"),
        ];
        for (input, want) in cases {
            let got = kube_jsonpath_to_rfc9535(input);
            assert_eq!(got, want);
            assert!(
                serde_json_path::JsonPath::parse(&got).is_ok(),
                "{got} does not parse"
            );
        }
    }

    #[test]
    fn go_number_formatting_matches_fmt_print() {
        let n = |v: Value| go_number_string(v.as_number().unwrap());
        assert_eq!(n(json!(3)), "3");
        assert_eq!(n(json!(1.5)), "1.5");
        assert_eq!(n(json!(0.0001)), "0.0001");
        assert_eq!(n(json!(0.00001)), "1e-05");
        assert_eq!(n(json!(1e21)), "1e+21");
    }

    #[test]
    fn include_object_controls_row_object() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "creationTimestamp": ago(5)}, "data": {"a": "1"}});
        let info = builtin("", "ConfigMap");
        let table = render_table(&info, &[&cm], IncludeObject::Metadata, now());
        assert_eq!(
            table["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": cm["metadata"]})
        );
        assert_eq!(
            render_table(&info, &[&cm], IncludeObject::Object, now())["rows"][0]["object"],
            cm
        );
        assert!(
            render_table(&info, &[&cm], IncludeObject::None, now())["rows"][0]
                .get("object")
                .is_none()
        );
    }

    #[test]
    fn include_object_parses_query_values() {
        assert_eq!("".parse::<IncludeObject>(), Ok(IncludeObject::Metadata));
        assert_eq!("Object".parse::<IncludeObject>(), Ok(IncludeObject::Object));
        assert_eq!("None".parse::<IncludeObject>(), Ok(IncludeObject::None));
        assert_eq!(
            "all".parse::<IncludeObject>(),
            Err(InvalidIncludeObject("all".into()))
        );
    }

    #[test]
    fn configmap_and_secret_count_data_keys() {
        let cm = json!({"metadata": {"name": "cfg", "creationTimestamp": ago(5)}, "data": {"a": "1"}, "binaryData": {"b": "AA=="}});
        assert_eq!(
            cells(&builtin("", "ConfigMap"), &cm),
            json!(["cfg", 2, "5s"]).as_array().unwrap().clone()
        );
        let secret = json!({"metadata": {"name": "tok", "creationTimestamp": ago(5)}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(
            cells(&builtin("", "Secret"), &secret),
            json!(["tok", "kubernetes.io/tls", 2, "5s"])
                .as_array()
                .unwrap()
                .clone()
        );
    }

    #[test]
    fn namespace_and_lease_rows() {
        let ns = json!({"metadata": {"name": "default", "creationTimestamp": ago(2 * 86400)}, "status": {"phase": "Active"}});
        assert_eq!(
            cells(&builtin("", "Namespace"), &ns),
            json!(["default", "Active", "2d"])
                .as_array()
                .unwrap()
                .clone()
        );
        let lease = json!({"metadata": {"name": "leader", "creationTimestamp": ago(5)}, "spec": {"holderIdentity": "coord-1"}});
        assert_eq!(
            cells(&builtin("coordination.k8s.io", "Lease"), &lease),
            json!(["leader", "coord-1", "5s"])
                .as_array()
                .unwrap()
                .clone()
        );
    }

    #[test]
    fn deployment_row_shows_ready_fraction_and_selector() {
        let d = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(60)},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"]}]},
                "template": {"spec": {"containers": [{"name": "app", "image": "nginx"}, {"name": "log", "image": "fluentbit"}]}},
            },
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
        });
        assert_eq!(
            cells(&builtin("apps", "Deployment"), &d),
            json!([
                "web",
                "2/3",
                3,
                2,
                "60s",
                "app,log",
                "nginx,fluentbit",
                "app=web,tier in (edge,front)"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
    }

    #[test]
    fn job_row_shows_status_completions_and_duration() {
        let job = json!({
            "metadata": {"name": "migrate", "creationTimestamp": ago(400)},
            "spec": {"completions": 1, "template": {"spec": {"containers": [{"name": "m", "image": "tool"}]}}},
            "status": {"succeeded": 1, "startTime": ago(390), "completionTime": ago(300), "conditions": [{"type": "Complete", "status": "True"}]},
        });
        let c = cells(&builtin("batch", "Job"), &job);
        assert_eq!(
            c[..5],
            json!(["migrate", "Complete", "1/1", "90s", "6m40s"])
                .as_array()
                .unwrap()[..]
        );
        assert_eq!(c[7], "<none>");
    }

    #[test]
    fn service_row_formats_ports_and_external_ip() {
        let svc = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(5)},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}], "selector": {"app": "web"}},
        });
        assert_eq!(
            cells(&builtin("", "Service"), &svc),
            json!([
                "web",
                "NodePort",
                "10.96.0.10",
                "<none>",
                "80:30080/TCP,53/UDP",
                "5s",
                "app=web"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
    }

    #[test]
    fn events_from_both_groups_render_alike() {
        let core = json!({
            "metadata": {"name": "web-0.1", "creationTimestamp": ago(10)},
            "involvedObject": {"kind": "Pod", "name": "web-0"},
            "type": "Normal", "reason": "Scheduled", "message": "assigned ",
            "source": {"component": "default-scheduler"},
            "firstTimestamp": ago(10), "lastTimestamp": ago(5), "count": 2,
        });
        let new = json!({
            "metadata": {"name": "web-0.1", "creationTimestamp": ago(10)},
            "regarding": {"kind": "Pod", "name": "web-0"},
            "type": "Normal", "reason": "Scheduled", "note": "assigned ",
            "reportingController": "default-scheduler",
            "eventTime": ago(10), "series": {"count": 2, "lastObservedTime": ago(5)},
        });
        let want = json!([
            "5s",
            "Normal",
            "Scheduled",
            "pod/web-0",
            "",
            "default-scheduler",
            "assigned",
            "10s",
            2,
            "web-0.1"
        ]);
        assert_eq!(
            cells(&builtin("", "Event"), &core),
            want.as_array().unwrap().clone()
        );
        assert_eq!(
            cells(&builtin("events.k8s.io", "Event"), &new),
            want.as_array().unwrap().clone()
        );
    }

    #[test]
    fn crds_show_created_at_timestamp() {
        let crd = json!({"metadata": {"name": "widgets.example.com", "creationTimestamp": "2025-01-02T03:04:05Z"}});
        let table = render_table(
            &builtin("apiextensions.k8s.io", "CustomResourceDefinition"),
            &[&crd],
            IncludeObject::None,
            now(),
        );
        assert_eq!(column_names(&table), ["Name", "Created At"]);
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["widgets.example.com", "2025-01-02T03:04:05Z"])
        );
    }

    #[test]
    fn unknown_kinds_show_name_and_age() {
        let obj = json!({"metadata": {"name": "x"}});
        let table = render_table(
            &builtin("example.io", "Thing"),
            &[&obj],
            IncludeObject::None,
            now(),
        );
        assert_eq!(column_names(&table), ["Name", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["x", "<unknown>"]));
    }

    #[test]
    fn pdb_and_priority_class_rows() {
        let pdb = json!({"metadata": {"name": "web", "creationTimestamp": ago(5)}, "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}});
        assert_eq!(
            cells(&builtin("policy", "PodDisruptionBudget"), &pdb),
            json!(["web", "50%", "N/A", 1, "5s"])
                .as_array()
                .unwrap()
                .clone()
        );
        let pc = json!({"metadata": {"name": "high", "creationTimestamp": ago(5)}, "value": 1000, "preemptionPolicy": "Never"});
        assert_eq!(
            cells(&builtin("scheduling.k8s.io", "PriorityClass"), &pc),
            json!(["high", 1000, false, "5s", "Never"])
                .as_array()
                .unwrap()
                .clone()
        );
    }
}
