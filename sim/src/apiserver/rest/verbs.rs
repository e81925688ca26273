//! The object verbs as the API server runs them for every caller (the HTTP handlers, the
//! subresources, the controllers and garbage collection): create, update, patch and delete of
//! one object, each one transaction on the store with admission and the lifecycle's rules.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{Value, json};

use super::patch;
use crate::apiserver::crds::vap;
use crate::apiserver::objects::graceful;
use crate::apiserver::objects::lifecycle;
use crate::apiserver::requests::auth::{Attributes, UserInfo};
use crate::apiserver::requests::error::{ApiError, ApiResult};
use crate::apiserver::requests::kit::{
    DeleteOptions, PatchType, Propagation, WriteOptions, key, object_value,
};
use crate::apiserver::server::Server;
use crate::storage::registry::ResourceDef;
use crate::storage::store::{ObjKey, Stored, Txn};

/// Resources whose DELETE answers with the deleted object rather than a Status (as upstream).
pub(in crate::apiserver) fn returns_deleted_object(def: &ResourceDef) -> bool {
    def.is_custom()
        || (def.group.is_empty() && matches!(def.plural.as_str(), "pods" | "namespaces" | "nodes"))
}

pub(in crate::apiserver) fn check_kind(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !kind.is_empty() && kind != def.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            def.kind
        )));
    }
    if !api_version.is_empty() && api_version != def.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            def.api_version()
        )));
    }
    // Stored in the storage version (of the stored resource, for a converted kind).
    if let Some(conversion) = def.conversion {
        *obj = (conversion.to_storage)(std::mem::take(obj));
    }
    obj["apiVersion"] = json!(def.storage_api_version());
    obj["kind"] = json!(def.kind);
    Ok(())
}

/// Runs the admission policies on a client's write of `def` (its `sub`resource); the sim's own
/// writes (no requester) pass. Returns the warnings to answer.
#[allow(clippy::too_many_arguments)]
pub(in crate::apiserver) fn admit(
    server: &Server,
    txn: &Txn<'_>,
    def: &ResourceDef,
    sub: Option<&str>,
    operation: vap::Operation,
    object: Option<&Value>,
    old: Option<&Value>,
    opts: &WriteOptions,
) -> ApiResult<Vec<String>> {
    let Some(user) = &opts.requester else {
        return Ok(Vec::new());
    };
    let request = admission_request(def, sub, operation, object, old, user, opts.dry_run);
    vap::admit(&server.vap, txn, &request)
}

/// The admission request of a write of `def` (its `sub`resource) whose objects are of the
/// resource's own kind; the namespace and name are the objects'.
pub fn admission_request<'a>(
    def: &ResourceDef,
    sub: Option<&'a str>,
    operation: vap::Operation,
    object: Option<&'a Value>,
    old: Option<&'a Value>,
    user: &'a UserInfo,
    dry_run: bool,
) -> vap::Request<'a> {
    let meta = |field: &str| -> &'a str {
        object
            .or(old)
            .and_then(|o| o.pointer(&format!("/metadata/{field}")))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let name = meta("name");
    // kube-apiserver gives a Namespace's own name as the namespace of requests about it.
    let is_namespace = def.group.is_empty() && def.plural == "namespaces";
    vap::Request {
        operation,
        resource: vap::GroupVersion::new(&def.group, &def.version, &def.plural),
        subresource: sub.unwrap_or_default(),
        kind: vap::GroupVersion::new(&def.group, &def.version, &def.kind),
        namespace: if is_namespace {
            name
        } else {
            meta("namespace")
        },
        name,
        object,
        old_object: old,
        user,
        dry_run,
    }
}

/// Creates an object through the full create path (defaults, validation, namespace checks);
/// for the sim's own controllers and set-up.
pub fn create_object(
    server: &Arc<Server>,
    group: &str,
    version: &str,
    plural: &str,
    ns: Option<&str>,
    obj: Value,
    opts: &WriteOptions,
) -> ApiResult<Arc<Stored>> {
    let def = server
        .registry
        .read()
        .get(group, version, plural)
        .ok_or_else(|| ApiError::no_route(plural))?;
    create_with(server, &def, ns, obj, opts).map(|(s, _)| s)
}

pub(in crate::apiserver) fn create_with(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    mut obj: Value,
    opts: &WriteOptions,
) -> ApiResult<(Arc<Stored>, Vec<String>)> {
    check_kind(def, &mut obj)?;
    let now = lifecycle::now();
    lifecycle::prepare_create(def, &mut obj, ns, &now)?;
    let mut warnings = lifecycle::validate_fields(def, &mut obj, None, opts.field_validation)?;
    if def.group == "apiextensions.k8s.io" {
        crate::apiserver::crds::crd::prepare(&mut obj)?;
    }
    server.vap.validate(def, &obj)?;
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let k = key(
        def,
        obj.pointer("/metadata/namespace").and_then(Value::as_str),
        &name,
    );
    obj = patch::record_update(
        &json!({}),
        &obj,
        &opts.field_manager,
        &now,
        &def.api_version(),
        &*lifecycle::list_meta(def),
    );
    let stored = server.store.write(|txn| -> ApiResult<Arc<Stored>> {
        if def.namespaced {
            lifecycle::check_namespace_open(txn, &k.namespace)?;
        }
        if txn.get(&def.id(), &k).is_some() {
            return Err(ApiError::already_exists(&def.group, &def.plural, &name));
        }
        lifecycle::create_in_txn(txn, def, &mut obj)?;
        warnings.extend(admit(
            server,
            txn,
            def,
            None,
            vap::Operation::Create,
            Some(&obj),
            None,
            opts,
        )?);
        if opts.dry_run {
            return Ok(Arc::new(Stored::new(&obj, txn.current_rv(), def)));
        }
        Ok(txn.put(def, k.clone(), obj))
    })?;
    if def.group == "apiextensions.k8s.io" && !opts.dry_run {
        crate::apiserver::crds::crd::register(server, &stored.value());
    }
    Ok((stored, warnings))
}

/// Replaces an object (PUT), or its status with `sub = Some("status")`.
pub fn update_object(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    mut obj: Value,
    opts: &WriteOptions,
) -> ApiResult<(Arc<Stored>, Vec<String>)> {
    check_kind(def, &mut obj)?;
    let body_name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if def.namespaced
        && let Some(body_ns) = obj.pointer("/metadata/namespace").and_then(Value::as_str)
        && !body_ns.is_empty()
        && Some(body_ns) != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let k = key(def, ns, name);
    let mut warnings = Vec::new();
    let stored = server.store.write(|txn| -> ApiResult<Arc<Stored>> {
        let cur = txn
            .get(&def.id(), &k)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        let requested_rv = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        lifecycle::check_precondition_rv(def, &cur, &requested_rv, name)?;
        let (s, w) = commit_update(server, txn, def, &k, &cur, obj, sub, opts)?;
        warnings = w;
        Ok(s)
    })?;
    Ok((stored, warnings))
}

/// Applies the update rules to `new` and stores it; removes the object when its last finalizer
/// went away during deletion. Shared by PUT, PATCH and the subresources.
#[allow(clippy::too_many_arguments)]
pub fn commit_update(
    server: &Arc<Server>,
    txn: &mut Txn<'_>,
    def: &Arc<ResourceDef>,
    k: &ObjKey,
    cur: &Arc<Stored>,
    new: Value,
    sub: Option<&str>,
    opts: &WriteOptions,
) -> ApiResult<(Arc<Stored>, Vec<String>)> {
    let old = cur.value();
    let now = lifecycle::now();
    let mut new = new;
    lifecycle::update_in_txn(txn, def, &old, &mut new)?;
    let mut new = lifecycle::prepare_update(def, &old, new, sub)?;
    let mut warnings =
        lifecycle::validate_fields_of(def, &mut new, Some(&old), opts.field_validation, sub)?;
    if def.group == "apiextensions.k8s.io" {
        crate::apiserver::crds::crd::prepare(&mut new)?;
    }
    server.vap.validate(def, &new)?;
    warnings.extend(admit(
        server,
        txn,
        def,
        sub,
        vap::Operation::Update,
        Some(&new),
        Some(&old),
        opts,
    )?);
    if lifecycle::same_object(&old, &new) {
        return Ok((cur.clone(), warnings));
    }
    new = patch::record_update(
        &old,
        &new,
        &opts.field_manager,
        &now,
        &def.api_version(),
        &*lifecycle::list_meta(def),
    );
    if opts.dry_run {
        return Ok((Arc::new(Stored::new(&new, cur.rv, def)), warnings));
    }
    if lifecycle::deletion_complete(&new) {
        let last = txn
            .remove(def, k)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, &k.name))?;
        server.gc_removed(def, &last);
        return Ok((last, warnings));
    }
    let stored = txn.put(def, k.clone(), new);
    if def.group == "apiextensions.k8s.io" {
        server.crd_changed(&stored.value());
    }
    Ok((stored, warnings))
}

/// Patches an object (or its status). Server-side apply creates an absent object (201).
#[allow(clippy::too_many_arguments)]
pub fn patch_object(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    ty: PatchType,
    body: &Value,
    opts: &WriteOptions,
) -> ApiResult<(StatusCode, Arc<Stored>)> {
    let k = key(def, ns, name);
    let meta = lifecycle::list_meta(def);
    if ty == PatchType::Strategic && def.is_custom() {
        return Err(ApiError::unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    let existing = server.store.get(&def.id(), &k);
    // An apply that creates the object must name it; one to an existing object may leave
    // metadata out (kube-apiserver merges into the live object, which has its name:
    // kube-lease-manager renews Leases this way).
    if ty == PatchType::Apply
        && existing.is_none()
        && !opts.field_manager.is_empty()
        && body.get("metadata").is_none()
    {
        return Err(ApiError::bad_request(
            "metadata.name: Required value: name is required for apply",
        ));
    }
    let apply_opts = |now: &str| patch::ApplyOptions {
        manager: opts.field_manager.clone(),
        force: opts.force,
        now: now.to_owned(),
        api_version: def.api_version(),
        subresource: sub.map(str::to_owned),
    };
    if existing.is_none() {
        if ty != PatchType::Apply || sub.is_some() {
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        }
        // An apply that creates the object is authorized as a create too, before admission
        // (kube-apiserver's patch handler, `withAuthorization`): `patch` alone creates nothing.
        if let Some(user) = &opts.requester {
            let attributes = Attributes {
                verb: "create".into(),
                group: def.group.clone(),
                resource: def.plural.clone(),
                subresource: String::new(),
                namespace: ns.unwrap_or_default().to_owned(),
                name: name.to_owned(),
            };
            server.audit.record(&server.auth, user, attributes.clone());
            server.auth.authorize(Some(user), &attributes)?;
        }
        let now = lifecycle::now();
        let mut obj = patch::apply(None, body, &apply_opts(&now), &*meta).map_err(patch_error)?;
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("name".into(), json!(name));
        }
        // The object is owned by the apply that created it: an empty manager makes the create
        // path keep the managedFields apply wrote instead of recording an Update entry, so the
        // object is written once (one ADDED event, as upstream).
        let mut create_opts = opts.clone();
        create_opts.field_manager = String::new();
        let (stored, _) = match create_with(server, def, ns, obj, &create_opts) {
            // A concurrent create won: apply to what exists instead.
            Err(e) if e.code == 409 && e.reason == "AlreadyExists" => {
                return patch_object(server, def, ns, name, sub, ty, body, opts);
            }
            other => other?,
        };
        return Ok((StatusCode::CREATED, stored));
    }
    let stored = server.store.write(|txn| -> ApiResult<Arc<Stored>> {
        let cur = txn
            .get(&def.id(), &k)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        let old = object_value(def, &cur);
        let now = lifecycle::now();
        let mut new = match ty {
            PatchType::Merge => patch::merge_patch(&old, body),
            PatchType::Json => patch::json_patch(&old, body).map_err(json_patch_error)?,
            PatchType::Strategic => {
                patch::strategic_merge_patch(&old, body, &*meta).map_err(patch_error)?
            }
            PatchType::Apply => {
                patch::apply(Some(&old), body, &apply_opts(&now), &*meta).map_err(patch_error)?
            }
        };
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the patch did not result in an object",
            ));
        }
        check_kind(def, &mut new)?;
        // A patch may carry a resourceVersion precondition; otherwise it applies to the latest.
        let requested_rv = new
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let patch_rv = body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        if patch_rv.is_some() || ty == PatchType::Json {
            lifecycle::check_precondition_rv(def, &cur, &requested_rv, name)?;
        }
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), json!(cur.rv.to_string()));
            if m.get("name").and_then(Value::as_str) != Some(name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object does not match the name on the URL ({name})"
                )));
            }
        }
        let mut write_opts = opts.clone();
        if ty == PatchType::Apply {
            // Apply has recorded its own managedFields; keep them as they are.
            write_opts.field_manager = String::new();
        }
        commit_update(server, txn, def, &k, &cur, new, sub, &write_opts).map(|(s, _)| s)
    })?;
    Ok((StatusCode::OK, stored))
}

/// kube-apiserver's message for a JSON patch that does not apply.
pub const JSON_PATCH_REFUSED: &str =
    "the server rejected our request due to an error in our request";

/// The error of a JSON patch: kube-apiserver answers every one that does not apply (a failed
/// `test`, a path that is not there, an unknown `op`) with one generic 422, an empty `details`
/// and not the JSON patch library's reason (`NewGenericServerResponse`); sim logs that reason at
/// debug. Checked against kube-apiserver by tests/tests/compare.rs.
pub(in crate::apiserver) fn json_patch_error(e: patch::PatchError) -> ApiError {
    match e {
        patch::PatchError::Invalid(why) => {
            tracing::debug!(reason = %why, "a JSON patch does not apply");
            ApiError::new(422, "Invalid", JSON_PATCH_REFUSED).with_details(json!({}))
        }
        other => patch_error(other),
    }
}

pub(in crate::apiserver) fn patch_error(e: patch::PatchError) -> ApiError {
    let code = e.http_status();
    let mut err = ApiError::new(code, e.reason(), e.to_string());
    if code == 422 {
        err = ApiError::new(422, "Invalid", e.to_string());
    }
    err
}

/// What a delete did.
#[derive(Debug)]
pub enum DeleteOutcome {
    /// The object is gone; this is its last version.
    Deleted(Arc<Stored>),
    /// The object is terminating (finalizers, foreground or orphan propagation, namespace contents).
    Pending(Arc<Stored>),
}

/// The default propagation: batch/v1 Jobs orphan their pods unless told otherwise (as upstream,
/// for compatibility); everything else is Background.
pub(in crate::apiserver) fn default_propagation(def: &ResourceDef) -> Propagation {
    if def.group == "batch" && def.plural == "jobs" {
        Propagation::Orphan
    } else {
        Propagation::Background
    }
}

/// Deletes an object with the API server's finalizer and propagation rules.
pub fn delete_object(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<DeleteOutcome> {
    let k = key(def, ns, name);
    let propagation = opts.propagation.unwrap_or_else(|| default_propagation(def));
    let outcome = server.store.write(|txn| -> ApiResult<DeleteOutcome> {
        let cur = txn.get(&def.id(), &k).ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        if let Some(uid) = &opts.uid
            && *uid != cur.uid
        {
            return Err(ApiError::conflict(&def.group, &def.plural, name, &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", cur.uid)));
        }
        if let Some(rv) = &opts.resource_version
            && *rv != cur.rv.to_string()
        {
            return Err(ApiError::conflict(&def.group, &def.plural, name, &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", cur.rv)));
        }
        let mut obj = cur.value();
        if let Some(user) = &opts.requester {
            let request = admission_request(
                def,
                None,
                vap::Operation::Delete,
                None,
                Some(&obj),
                user,
                opts.dry_run,
            );
            vap::admit(&server.vap, txn, &request)?;
        }
        let mut finalizers: Vec<String> = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| f.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let already_terminating = obj.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        let is_namespace = def.group.is_empty() && def.plural == "namespaces";
        let is_pod = def.group.is_empty() && def.plural == "pods";
        let grace = graceful::decide(is_pod, &obj, opts.grace_period_seconds, jiff::Timestamp::now());
        if grace == graceful::Grace::Pending {
            return Ok(DeleteOutcome::Pending(cur));
        }
        let extra = match propagation {
            Propagation::Orphan if !cur.uid.is_empty() && !txn.dependents(&cur.uid).is_empty() => Some("orphan"),
            Propagation::Foreground if !txn.dependents(&cur.uid).is_empty() => Some("foregroundDeletion"),
            _ => None,
        };
        if let Some(f) = extra
            && !already_terminating
            && !finalizers.iter().any(|x| x == f)
        {
            finalizers.push(f.to_owned());
        }
        let waits = matches!(grace, graceful::Grace::Mark { seconds, .. } if seconds > 0);
        if finalizers.is_empty() && !is_namespace && !waits {
            if opts.dry_run {
                return Ok(DeleteOutcome::Deleted(cur));
            }
            let last = txn.remove(def, &k).ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
            // A pod deleted at once is answered as kube-apiserver answers it: marked, grace 0.
            if let graceful::Grace::Mark { seconds, deletion_timestamp } = &grace {
                let mut marked = last.value();
                marked["metadata"]["deletionTimestamp"] = json!(deletion_timestamp);
                marked["metadata"]["deletionGracePeriodSeconds"] = json!(seconds);
                return Ok(DeleteOutcome::Deleted(Arc::new(Stored::new(&marked, last.rv, def))));
            }
            return Ok(DeleteOutcome::Deleted(last));
        }
        if let (true, graceful::Grace::Mark { seconds, deletion_timestamp }) = (already_terminating, &grace) {
            // A shorter grace period for a pod already terminating (its finalizers hold it).
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                m.insert("deletionTimestamp".into(), json!(deletion_timestamp));
                m.insert("deletionGracePeriodSeconds".into(), json!(seconds));
            }
            if opts.dry_run {
                return Ok(DeleteOutcome::Pending(cur));
            }
            return Ok(DeleteOutcome::Pending(txn.put(def, k.clone(), obj)));
        }
        if already_terminating {
            return Ok(DeleteOutcome::Pending(cur));
        }
        let (deletion_timestamp, grace_seconds) = match grace {
            graceful::Grace::Mark { seconds, deletion_timestamp } => (deletion_timestamp, seconds),
            _ => (lifecycle::now(), opts.grace_period_seconds.unwrap_or(0)),
        };
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("deletionTimestamp".into(), json!(deletion_timestamp));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace_seconds));
            m.insert("finalizers".into(), json!(finalizers));
            if let Some(g) = m.get("generation").and_then(Value::as_i64) {
                m.insert("generation".into(), json!(g + 1));
            }
        }
        if is_namespace {
            obj["status"]["phase"] = json!("Terminating");
        }
        if opts.dry_run {
            return Ok(DeleteOutcome::Pending(cur));
        }
        Ok(DeleteOutcome::Pending(txn.put(def, k.clone(), obj)))
    })?;
    if !opts.dry_run {
        match &outcome {
            DeleteOutcome::Deleted(last) => server.gc_removed(def, last),
            DeleteOutcome::Pending(s) => server.gc_terminating(def, s),
        }
    }
    Ok(outcome)
}
