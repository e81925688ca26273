//! The garbage collector and namespace controller: deletes dependents of deleted owners
//! (background), orphans them (orphan finalizer), deletes them first (foregroundDeletion
//! finalizer), empties terminating namespaces, and drops a deleted CRD's custom resources.
//! It runs as one task fed by the writes that delete or start deleting objects.

use std::sync::{Arc, Weak};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::apiserver::requests::kit::{self, DeleteOptions, Propagation, WriteOptions};
use crate::apiserver::rest::verbs;
use crate::apiserver::server::Server;
use crate::storage::registry::{ResourceDef, ResourceId};
use crate::storage::store::{ObjKey, Stored};

/// Work for the collector.
#[derive(Debug)]
pub enum GcWork {
    /// An object is gone.
    Removed {
        /// Its resource.
        def: Arc<ResourceDef>,
        /// Its last version.
        last: Value,
        /// Its uid.
        uid: String,
        /// The uids of its owners.
        owners: Vec<String>,
    },
    /// An object got a deletionTimestamp and waits on finalizers.
    Terminating {
        /// Its resource.
        def: Arc<ResourceDef>,
        /// Its key.
        key: ObjKey,
    },
}

/// The sending side of the collector's queue.
#[derive(Debug, Clone)]
pub struct GcQueue(mpsc::UnboundedSender<GcWork>);

impl GcQueue {
    /// Returns the queue and the receiver the collector task reads.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<GcWork>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(tx), rx)
    }
}

impl Server {
    /// Tells the collector an object is gone.
    pub fn gc_removed(&self, def: &Arc<ResourceDef>, last: &Stored) {
        let work = GcWork::Removed {
            def: def.clone(),
            last: last.value(),
            uid: last.uid.clone(),
            owners: last.owners.clone(),
        };
        // A closed queue means the server is shutting down.
        let _ = self.gc.0.send(work);
    }

    /// Tells the collector an object started terminating.
    pub fn gc_terminating(&self, def: &Arc<ResourceDef>, s: &Stored) {
        let _ = self.gc.0.send(GcWork::Terminating {
            def: def.clone(),
            key: ObjKey::new(s.namespace(), s.name()),
        });
    }

    /// Reacts to a changed CRD (new or removed versions).
    pub fn crd_changed(self: &Arc<Self>, crd: &Value) {
        crate::apiserver::crds::crd::register(self, crd);
    }
}

/// Starts the collector; it ends when the server is dropped.
pub fn spawn(server: Weak<Server>, mut rx: mpsc::UnboundedReceiver<GcWork>) {
    tokio::spawn(async move {
        while let Some(work) = rx.recv().await {
            let Some(server) = server.upgrade() else {
                break;
            };
            // Deletions cascade synchronously inside; yield between items to stay fair.
            process(&server, work);
            tokio::task::yield_now().await;
        }
    });
}

fn finalizers(v: &Value) -> Vec<String> {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn process(server: &Arc<Server>, work: GcWork) {
    match work {
        GcWork::Removed {
            def,
            last,
            uid,
            owners,
        } => {
            if def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions" {
                drop_custom_resources(server, &last);
            }
            for (id, key) in server.store.dependents(&uid) {
                release_dependent(server, &id, &key, &uid, Propagation::Background);
            }
            for owner in owners {
                recheck_owner(server, &owner);
            }
            let ns = last
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !ns.is_empty() {
                recheck_namespace(server, ns);
            }
        }
        GcWork::Terminating { def, key } => {
            let Some(cur) = server.store.get(&def.id(), &key) else {
                return;
            };
            let obj = cur.value();
            if def.group.is_empty() && def.plural == "namespaces" {
                empty_namespace(server, &key.name);
                recheck_namespace(server, &key.name);
                return;
            }
            let fins = finalizers(&obj);
            if fins.iter().any(|f| f == "orphan") {
                for (id, dkey) in server.store.dependents(&cur.uid) {
                    release_dependent(server, &id, &dkey, &cur.uid, Propagation::Orphan);
                }
                remove_finalizer(server, &def, &key, "orphan");
            }
            if fins.iter().any(|f| f == "foregroundDeletion") {
                for (id, dkey) in server.store.dependents(&cur.uid) {
                    release_dependent(server, &id, &dkey, &cur.uid, Propagation::Foreground);
                }
                recheck_owner(server, &cur.uid);
            }
        }
    }
}

/// Deals with one dependent of a deleted (or deleting) owner: orphaning removes the reference;
/// otherwise the dependent is deleted unless another owner of it still exists.
fn release_dependent(
    server: &Arc<Server>,
    id: &ResourceId,
    key: &ObjKey,
    owner_uid: &str,
    how: Propagation,
) {
    let Some(def) = kit::storage_def(server, id) else {
        return;
    };
    let Some(dep) = server.store.get(id, key) else {
        return;
    };
    let other_owner_alive = dep
        .owners
        .iter()
        .any(|o| o != owner_uid && server.store.locate_uid(o).is_some());
    if how == Propagation::Orphan || other_owner_alive {
        let _ = server.store.write(|txn| {
            let Some(cur) = txn.get(id, key) else {
                return Ok(());
            };
            let mut v = cur.value();
            if let Some(refs) = v
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
                if refs.is_empty()
                    && let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
                {
                    m.remove("ownerReferences");
                }
            }
            verbs::commit_update(
                server,
                txn,
                &def,
                key,
                &cur,
                v,
                None,
                &WriteOptions::internal(),
            )
            .map(|_| ())
        });
        return;
    }
    let ns = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
    let opts = DeleteOptions {
        propagation: Some(Propagation::Background),
        ..Default::default()
    };
    if let Err(e) = verbs::delete_object(server, &def, ns, &key.name, &opts)
        && e.code != 404
    {
        tracing::warn!(resource = %id.qualified(), name = %key.name, error = %e.message, "garbage collector could not delete a dependent");
    }
}

/// Completes a foreground deletion once the owner has no dependents left.
fn recheck_owner(server: &Arc<Server>, owner_uid: &str) {
    let Some((id, key)) = server.store.locate_uid(owner_uid) else {
        return;
    };
    let Some(def) = kit::storage_def(server, &id) else {
        return;
    };
    let Some(owner) = server.store.get(&id, &key) else {
        return;
    };
    if !finalizers(&owner.value())
        .iter()
        .any(|f| f == "foregroundDeletion")
    {
        return;
    }
    if server.store.dependents(owner_uid).is_empty() {
        remove_finalizer(server, &def, &key, "foregroundDeletion");
    }
}

fn remove_finalizer(server: &Arc<Server>, def: &Arc<ResourceDef>, key: &ObjKey, finalizer: &str) {
    let _ = server.store.write(|txn| {
        let Some(cur) = txn.get(&def.id(), key) else {
            return Ok(());
        };
        let mut v = cur.value();
        let fins: Vec<String> = finalizers(&v)
            .into_iter()
            .filter(|f| f != finalizer)
            .collect();
        v["metadata"]["finalizers"] = json!(fins);
        verbs::commit_update(
            server,
            txn,
            def,
            key,
            &cur,
            v,
            None,
            &WriteOptions::internal(),
        )
        .map(|_| ())
    });
}

/// Deletes everything in a terminating namespace.
fn empty_namespace(server: &Arc<Server>, ns: &str) {
    let defs: Vec<Arc<ResourceDef>> = {
        let reg = server.registry.read();
        let mut defs = Vec::new();
        for (g, versions) in reg.groups() {
            for v in versions {
                for d in reg.resources(&g, &v) {
                    if d.namespaced && d.is_stored() && d.serves_storage_form() {
                        defs.push(d);
                    }
                }
            }
        }
        defs
    };
    for def in defs {
        let (objs, _) = server.store.snapshot(&def.id());
        let names: Vec<String> = objs
            .range(ObjKey::new(ns, "")..)
            .take_while(|(k, _)| k.namespace == ns)
            .map(|(k, _)| k.name.clone())
            .collect();
        for name in names {
            let _ = verbs::delete_object(server, &def, Some(ns), &name, &DeleteOptions::default());
        }
    }
}

/// Removes a terminating namespace once it holds nothing.
fn recheck_namespace(server: &Arc<Server>, ns: &str) {
    let ns_id = ResourceId::new("", "namespaces");
    let Some(nsobj) = server.store.get(&ns_id, &ObjKey::new("", ns)) else {
        return;
    };
    if nsobj
        .value()
        .pointer("/metadata/deletionTimestamp")
        .is_none()
    {
        return;
    }
    let registry = server.registry.read().clone();
    let empty = registry.groups().iter().all(|(g, versions)| {
        versions.iter().all(|v| {
            registry
                .resources(g, v)
                .iter()
                .filter(|d| d.namespaced)
                .all(|d| {
                    let (objs, _) = server.store.snapshot(&d.id());
                    objs.range(ObjKey::new(ns, "")..)
                        .next()
                        .is_none_or(|(k, _)| k.namespace != ns)
                })
        })
    });
    if !empty {
        return;
    }
    let Some(def) = registry.get("", "v1", "namespaces") else {
        return;
    };
    let removed = server.store.write(|txn| {
        let fins = txn
            .get(&ns_id, &ObjKey::new("", ns))
            .map(|n| finalizers(&n.value()))
            .unwrap_or_default();
        if fins.is_empty() {
            txn.remove(&def, &ObjKey::new("", ns))
        } else {
            None
        }
    });
    if removed.is_some() {
        tracing::debug!(namespace = ns, "namespace deleted");
    }
}

/// Deletes every custom resource of a deleted CRD and stops serving it.
fn drop_custom_resources(server: &Arc<Server>, crd: &Value) {
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let id = ResourceId::new(&group, &plural);
    if let Some(def) = kit::storage_def(server, &id) {
        let (objs, _) = server.store.snapshot(&id);
        server.store.write(|txn| {
            for k in objs.keys() {
                txn.remove(&def, k);
            }
            txn.drop_resource(&id);
        });
    }
    crate::apiserver::crds::crd::unregister(server, crd);
}
