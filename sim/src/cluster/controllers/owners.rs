//! Ownership between a workload and its children: the controller ownerReference a child gets,
//! which listed objects a controller owns, and the check that closes the race between creating a
//! child and the owner's deletion (the sim's garbage collector only collects dependents of an
//! owner it sees go away, so a child created just after that would be left dangling).

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::core::Selector;
use kube::{Api, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use telemesh_core::selector::SelectorError;

use super::error::{Error, Result};

/// Returns `Kind namespace/name`, how errors and logs name an object.
pub fn describe<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{} {}/{}",
        K::kind(&()),
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

/// Returns the ownerReference a child of `owner` carries: controller and blockOwnerDeletion
/// set, as upstream's controllers write it. `None` when the owner has no name or uid yet.
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> Option<OwnerReference> {
    let mut r = owner.controller_owner_ref(&())?;
    r.block_owner_deletion = Some(true);
    Some(r)
}

/// Returns whether `child`'s controller ownerReference names the object with `uid`.
pub fn is_controlled_by<K: Resource>(child: &K, uid: &str) -> bool {
    child
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// Parses a workload's selector ([`telemesh_core::selector::of_workload`]). An absent or empty
/// selector selects nothing here (upstream refuses such workloads; the sim's validation already
/// does).
pub fn selector<K: Resource<DynamicType = ()>>(
    owner: &K,
    sel: Option<&LabelSelector>,
) -> Result<Option<Selector>> {
    let Some(sel) = sel else { return Ok(None) };
    match telemesh_core::selector::of_workload(sel) {
        Ok(parsed) => Ok(Some(parsed)),
        Err(SelectorError::Empty) => Ok(None),
        Err(source) => Err(Error::Selector {
            object: describe(owner),
            source,
        }),
    }
}

/// Lists the objects in `api` that match `selector` and are controlled by `owner`.
pub async fn list_owned<C, K>(api: &Api<C>, selector: &Selector, owner: &K) -> Result<Vec<C>>
where
    C: Resource + Clone + DeserializeOwned + Debug,
    K: Resource<DynamicType = ()>,
{
    let uid = owner.uid().unwrap_or_default();
    let list = api
        .list(&ListParams::default().labels_from(selector))
        .await
        .map_err(Error::api(format!(
            "listing children of {}",
            describe(owner)
        )))?;
    Ok(list
        .items
        .into_iter()
        .filter(|c| is_controlled_by(c, &uid))
        .collect())
}

/// Gets the current version of `obj`; `None` when it is gone or was replaced (another uid).
pub async fn fresh<K>(api: &Api<K>, obj: &K) -> Result<Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let current = api
        .get_opt(&obj.name_any())
        .await
        .map_err(Error::api(format!("reading {}", describe(obj))))?;
    Ok(current.filter(|c| c.uid() == obj.uid()))
}

/// After creating `created` children of `owner`, deletes them again if the owner has gone
/// meanwhile: the garbage collector may already have swept the owner's dependents.
pub async fn undo_if_owner_gone<K, C>(
    owners: &Api<K>,
    owner: &K,
    children: &Api<C>,
    created: &[String],
) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    C: Resource + Clone + DeserializeOwned + Debug,
{
    if created.is_empty() || fresh(owners, owner).await?.is_some() {
        return Ok(());
    }
    tracing::info!(owner = %describe(owner), count = created.len(), "owner deleted while creating children; deleting them");
    for name in created {
        match children.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::api(format!("deleting orphaned child {name}"))(e)),
        }
    }
    Ok(())
}

/// Returns whether the API server answered 404 Not Found.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.is_not_found())
}

/// Writes `status` through the status subresource (a merge patch). An object deleted meanwhile
/// is not an error: there is nothing left to report on.
pub async fn write_status<K, S>(api: &Api<K>, obj: &K, status: &S) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: serde::Serialize,
{
    let patch = Patch::Merge(serde_json::json!({ "status": status }));
    match api
        .patch_status(&obj.name_any(), &PatchParams::default(), &patch)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(Error::api(format!(
            "writing the status of {}",
            describe(obj)
        ))(e)),
    }
}
