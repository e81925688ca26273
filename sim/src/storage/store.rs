//! The object store: every object of every resource, one global resourceVersion counter, a
//! bounded event history per resource for watch resumption, and watchers indexed by the field
//! they select on (name, node, namespace) so a change costs only the watchers that may want it,
//! not every watcher of the resource.
//!
//! Objects are kept as their serialized JSON plus the few values selectors read (labels and
//! selectable fields), so lists and watch events are served by copying bytes. All writes happen
//! under one lock, in resourceVersion order, and are dispatched to watchers before the lock is
//! released: each watcher sees every object's events in order.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::storage::registry::{ResourceDef, ResourceId};
use crate::storage::selectors::{FieldSelector, LabelSelector};

/// A resource's objects in key order; cloning is O(1), so it doubles as a snapshot.
pub type Objects = imbl::OrdMap<ObjKey, Arc<Stored>>;

/// Key of an object within its resource: namespace (empty for cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjKey {
    /// Returns the key of `name` in `namespace`.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

/// One stored object version.
#[derive(Debug)]
pub struct Stored {
    /// The object as served, with its resourceVersion set.
    pub json: Bytes,
    /// The resourceVersion of this object version.
    pub rv: u64,
    /// metadata.uid.
    pub uid: String,
    /// metadata.labels.
    pub labels: BTreeMap<String, String>,
    /// Values of the selectable fields (metadata.name, metadata.namespace and the resource's own).
    pub fields: Vec<(String, String)>,
    /// UIDs named in metadata.ownerReferences.
    pub owners: Vec<String>,
}

impl Stored {
    /// Builds a stored version from an object whose metadata.resourceVersion is already `rv`.
    pub fn new(obj: &Value, rv: u64, def: &ResourceDef) -> Self {
        let meta = obj.get("metadata");
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let labels = meta
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let mut fields = vec![
            (
                "metadata.name".to_owned(),
                text(meta.and_then(|m| m.get("name"))),
            ),
            (
                "metadata.namespace".to_owned(),
                text(meta.and_then(|m| m.get("namespace"))),
            ),
        ];
        for f in &def.selectable_fields {
            fields.push((f.clone(), field_value(obj, f)));
        }
        let owners = meta
            .and_then(|m| m.get("ownerReferences"))
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            // Serializing a Value cannot fail: its keys are strings.
            json: Bytes::from(serde_json::to_vec(obj).unwrap_or_default()),
            rv,
            uid: text(meta.and_then(|m| m.get("uid"))),
            labels,
            fields,
            owners,
        }
    }

    /// Parses the stored JSON back into a value.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }

    /// Returns a selectable field's value.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.as_str())
    }

    /// Returns the object's namespace.
    pub fn namespace(&self) -> &str {
        self.field("metadata.namespace").unwrap_or_default()
    }

    /// Returns the object's name.
    pub fn name(&self) -> &str {
        self.field("metadata.name").unwrap_or_default()
    }
}

/// Reads a selectable field as the API server's field-label conversion does: strings as they
/// are, booleans and numbers in their text form, absent as empty.
pub fn field_value(obj: &Value, field: &str) -> String {
    // Events select `source` on source.component, else on the reporting controller (an
    // events.k8s.io Event has no source), as upstream's event ToSelectableFields does.
    let path = if field == "source" {
        if obj
            .pointer("/source/component")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty())
        {
            "source.component"
        } else {
            "reportingComponent"
        }
    } else {
        field
    };
    let mut cur = obj;
    for part in path.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// Kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// ADDED.
    Added,
    /// MODIFIED.
    Modified,
    /// DELETED.
    Deleted,
}

impl EventType {
    /// Returns the wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// A committed change of one object.
#[derive(Debug, Clone)]
pub struct Change {
    /// What happened.
    pub ty: EventType,
    /// The new version (for a deletion, the last version stamped with the deletion's rv).
    pub obj: Arc<Stored>,
    /// The previous version, for modifications and deletions.
    pub prev: Option<Arc<Stored>>,
}

/// What one watcher selects.
#[derive(Debug, Clone, Default)]
pub struct WatchFilter {
    /// Only objects in this namespace.
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl WatchFilter {
    /// Returns whether a stored object passes the filter.
    pub fn matches(&self, s: &Stored) -> bool {
        if let Some(ns) = &self.namespace
            && s.namespace() != ns
        {
            return false;
        }
        self.labels.matches(&s.labels) && self.fields.matches(|f| s.field(f))
    }

    /// Returns the index bucket this filter can be found under, most selective first.
    fn index_key(&self) -> Option<IndexKey> {
        for field in INDEXED_FIELDS {
            if let Some(v) = self.fields.equality(field) {
                return Some(IndexKey {
                    field,
                    value: v.to_owned(),
                });
            }
        }
        self.namespace.as_ref().map(|ns| IndexKey {
            field: "metadata.namespace",
            value: ns.clone(),
        })
    }
}

/// Fields watchers are indexed by, most selective first.
const INDEXED_FIELDS: [&str; 3] = ["metadata.name", "spec.nodeName", "metadata.namespace"];

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct IndexKey {
    field: &'static str,
    value: String,
}

/// An event as one watcher receives it.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Event type as the watcher sees it (a modification that leaves the filter is a deletion).
    pub ty: EventType,
    /// The object to send.
    pub obj: Arc<Stored>,
    /// When set, the object must be sent with this resourceVersion instead of its own (the
    /// previous version sent as DELETED carries the event's resourceVersion, as upstream).
    pub rv_override: Option<u64>,
}

impl Delivery {
    /// Returns the resourceVersion this delivery stands for.
    pub fn rv(&self) -> u64 {
        self.rv_override.unwrap_or(self.obj.rv)
    }
}

/// Returns what `filter` makes of `change`, if anything.
pub fn deliver(filter: &WatchFilter, change: &Change) -> Option<Delivery> {
    let now = filter.matches(&change.obj);
    match change.ty {
        EventType::Added => now.then(|| Delivery {
            ty: EventType::Added,
            obj: change.obj.clone(),
            rv_override: None,
        }),
        EventType::Deleted => now.then(|| Delivery {
            ty: EventType::Deleted,
            obj: change.obj.clone(),
            rv_override: None,
        }),
        EventType::Modified => {
            let before = change.prev.as_ref().is_some_and(|p| filter.matches(p));
            match (before, now) {
                (true, true) => Some(Delivery {
                    ty: EventType::Modified,
                    obj: change.obj.clone(),
                    rv_override: None,
                }),
                (false, true) => Some(Delivery {
                    ty: EventType::Added,
                    obj: change.obj.clone(),
                    rv_override: None,
                }),
                (true, false) => change.prev.as_ref().map(|p| Delivery {
                    ty: EventType::Deleted,
                    obj: p.clone(),
                    rv_override: Some(change.obj.rv),
                }),
                (false, false) => None,
            }
        }
    }
}

/// Why a watch could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// The requested resourceVersion is older than the retained history: the client must relist.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The version asked for.
        requested: u64,
        /// The oldest version the history can resume from.
        oldest: u64,
    },
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// From the current state: synthetic ADDED events for every matching object first.
    Now,
    /// After this resourceVersion, replaying retained history.
    After(u64),
}

/// A registered watch: initial deliveries, then live ones from the channel.
#[derive(Debug)]
pub struct Watch {
    /// Deliveries to send first (synthetic ADDED or replayed history), in order.
    pub initial: Vec<Delivery>,
    /// Live deliveries; the channel closes when the watcher is dropped for falling behind.
    pub rx: mpsc::Receiver<Delivery>,
    /// The global resourceVersion when the watch was registered.
    pub start_rv: u64,
    /// Unregisters the watcher when dropped.
    pub guard: WatchGuard,
}

/// Unregisters its watcher on drop.
#[derive(Debug)]
pub struct WatchGuard {
    store: Store,
    id: ResourceId,
    watcher: u64,
    index: Option<IndexKey>,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        let mut state = self.store.inner.state.lock();
        if let Some(res) = state.resources.get_mut(&self.id) {
            res.watchers.remove(self.watcher, self.index.as_ref());
        }
    }
}

#[derive(Debug)]
struct WatcherEntry {
    filter: WatchFilter,
    tx: mpsc::Sender<Delivery>,
}

#[derive(Debug, Default)]
struct Watchers {
    next_id: u64,
    indexed: HashMap<IndexKey, HashMap<u64, WatcherEntry>>,
    unindexed: HashMap<u64, WatcherEntry>,
    count: usize,
}

impl Watchers {
    fn add(&mut self, entry: WatcherEntry, index: Option<IndexKey>) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        match index {
            Some(k) => {
                self.indexed.entry(k).or_default().insert(id, entry);
            }
            None => {
                self.unindexed.insert(id, entry);
            }
        }
        self.count += 1;
        id
    }

    fn remove(&mut self, id: u64, index: Option<&IndexKey>) {
        let removed = match index {
            Some(k) => {
                let removed = self
                    .indexed
                    .get_mut(k)
                    .and_then(|m| m.remove(&id))
                    .is_some();
                if self.indexed.get(k).is_some_and(HashMap::is_empty) {
                    self.indexed.remove(k);
                }
                removed
            }
            None => self.unindexed.remove(&id).is_some(),
        };
        if removed {
            self.count -= 1;
        }
    }

    /// Sends `change` to every watcher it may concern; drops watchers that fell behind.
    fn dispatch(&mut self, change: &Change) {
        if self.count == 0 {
            return;
        }
        let mut dead: Vec<(u64, Option<IndexKey>)> = Vec::new();
        let mut send = |id: u64, entry: &WatcherEntry, key: Option<&IndexKey>| {
            if let Some(d) = deliver(&entry.filter, change)
                && entry.tx.try_send(d).is_err()
            {
                dead.push((id, key.cloned()));
            }
        };
        for (id, entry) in &self.unindexed {
            send(*id, entry, None);
        }
        if !self.indexed.is_empty() {
            for field in INDEXED_FIELDS {
                let new = change.obj.field(field);
                let old = change.prev.as_ref().and_then(|p| p.field(field));
                for value in [new, old.filter(|o| Some(*o) != new)].into_iter().flatten() {
                    let key = IndexKey {
                        field,
                        value: value.to_owned(),
                    };
                    if let Some(bucket) = self.indexed.get(&key) {
                        for (id, entry) in bucket {
                            send(*id, entry, Some(&key));
                        }
                    }
                }
            }
        }
        for (id, key) in dead {
            tracing::debug!(watcher = id, "watcher fell behind; closing its watch");
            self.remove(id, key.as_ref());
        }
    }
}

#[derive(Debug, Default)]
struct ResourceStore {
    objects: imbl::OrdMap<ObjKey, Arc<Stored>>,
    history: VecDeque<Change>,
    /// Every change with a resourceVersion above this one is in `history`.
    compacted_rv: u64,
    watchers: Watchers,
}

#[derive(Debug)]
struct State {
    rv: u64,
    resources: HashMap<ResourceId, ResourceStore>,
    /// Owner uid → dependents, for garbage collection.
    dependents: HashMap<String, Vec<(ResourceId, ObjKey)>>,
    /// Object uid → where it is, so the collector can tell whether an owner still exists.
    uids: HashMap<String, (ResourceId, ObjKey)>,
    history_capacity: usize,
    watch_buffer: usize,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    snapshots: Mutex<VecDeque<(ResourceId, u64, Objects)>>,
}

/// The shared object store. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

/// How many list snapshots are kept for paginated lists (continue tokens).
const SNAPSHOTS: usize = 32;

impl Store {
    /// Returns an empty store keeping `history_capacity` events per resource and buffering
    /// `watch_buffer` events per watcher before dropping a watcher that does not keep up.
    pub fn new(history_capacity: usize, watch_buffer: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    rv: 1,
                    resources: HashMap::new(),
                    dependents: HashMap::new(),
                    uids: HashMap::new(),
                    history_capacity: history_capacity.max(1),
                    watch_buffer: watch_buffer.max(1),
                }),
                snapshots: Mutex::new(VecDeque::new()),
            }),
        }
    }

    /// Returns the current global resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.inner.state.lock().rv
    }

    /// Returns one object.
    pub fn get(&self, id: &ResourceId, key: &ObjKey) -> Option<Arc<Stored>> {
        self.inner
            .state
            .lock()
            .resources
            .get(id)
            .and_then(|r| r.objects.get(key).cloned())
    }

    /// Returns a consistent snapshot of a resource's objects and the resourceVersion it is at.
    pub fn snapshot(&self, id: &ResourceId) -> (imbl::OrdMap<ObjKey, Arc<Stored>>, u64) {
        let state = self.inner.state.lock();
        let objects = state
            .resources
            .get(id)
            .map(|r| r.objects.clone())
            .unwrap_or_default();
        (objects, state.rv)
    }

    /// Keeps a snapshot so a paginated list can continue from it.
    pub fn keep_snapshot(
        &self,
        id: &ResourceId,
        rv: u64,
        objects: imbl::OrdMap<ObjKey, Arc<Stored>>,
    ) {
        let mut snaps = self.inner.snapshots.lock();
        if snaps.iter().any(|(i, r, _)| i == id && *r == rv) {
            return;
        }
        if snaps.len() >= SNAPSHOTS {
            snaps.pop_front();
        }
        snaps.push_back((id.clone(), rv, objects));
    }

    /// Returns the snapshot of `id` at `rv`, if kept, or the current state if nothing changed since.
    pub fn snapshot_at(
        &self,
        id: &ResourceId,
        rv: u64,
    ) -> Option<imbl::OrdMap<ObjKey, Arc<Stored>>> {
        if let Some((_, _, objs)) = self
            .inner
            .snapshots
            .lock()
            .iter()
            .find(|(i, r, _)| i == id && *r == rv)
        {
            return Some(objs.clone());
        }
        let state = self.inner.state.lock();
        let res = state.resources.get(id);
        let last_change = res
            .and_then(|r| r.history.back().map(|c| c.obj.rv))
            .unwrap_or(0);
        (last_change <= rv && rv <= state.rv)
            .then(|| res.map(|r| r.objects.clone()).unwrap_or_default())
    }

    /// Returns the dependents recorded for an owner uid.
    pub fn dependents(&self, owner_uid: &str) -> Vec<(ResourceId, ObjKey)> {
        self.inner
            .state
            .lock()
            .dependents
            .get(owner_uid)
            .cloned()
            .unwrap_or_default()
    }

    /// Returns where the object with this uid is, if it exists.
    pub fn locate_uid(&self, uid: &str) -> Option<(ResourceId, ObjKey)> {
        self.inner.state.lock().uids.get(uid).cloned()
    }

    /// Returns the number of watchers registered on a resource.
    pub fn watcher_count(&self, id: &ResourceId) -> usize {
        self.inner
            .state
            .lock()
            .resources
            .get(id)
            .map_or(0, |r| r.watchers.count)
    }

    /// Runs `f` with exclusive access: reads and writes in it are atomic, and its changes
    /// reach watchers in order before any other write.
    pub fn write<R>(&self, f: impl FnOnce(&mut Txn<'_>) -> R) -> R {
        let mut state = self.inner.state.lock();
        let mut txn = Txn { state: &mut state };
        f(&mut txn)
    }

    /// Registers a watcher on a resource.
    pub fn watch(
        &self,
        id: &ResourceId,
        filter: WatchFilter,
        start: WatchStart,
    ) -> Result<Watch, WatchError> {
        let mut state = self.inner.state.lock();
        let start_rv = state.rv;
        let buffer = state.watch_buffer;
        let res = state.resources.entry(id.clone()).or_default();
        let initial = match start {
            WatchStart::Now => res
                .objects
                .values()
                .filter(|s| filter.matches(s))
                .map(|s| Delivery {
                    ty: EventType::Added,
                    obj: s.clone(),
                    rv_override: None,
                })
                .collect(),
            WatchStart::After(rv) => {
                if rv < res.compacted_rv {
                    return Err(WatchError::Expired {
                        requested: rv,
                        oldest: res.compacted_rv,
                    });
                }
                res.history
                    .iter()
                    .filter(|c| c.obj.rv > rv)
                    .filter_map(|c| deliver(&filter, c))
                    .collect()
            }
        };
        let (tx, rx) = mpsc::channel(buffer);
        let index = filter.index_key();
        let watcher = res.watchers.add(WatcherEntry { filter, tx }, index.clone());
        drop(state);
        Ok(Watch {
            initial,
            rx,
            start_rv,
            guard: WatchGuard {
                store: self.clone(),
                id: id.clone(),
                watcher,
                index,
            },
        })
    }
}

/// Exclusive access to the store within [`Store::write`].
pub struct Txn<'a> {
    state: &'a mut State,
}

impl Txn<'_> {
    /// Returns one object.
    pub fn get(&self, id: &ResourceId, key: &ObjKey) -> Option<Arc<Stored>> {
        self.state
            .resources
            .get(id)
            .and_then(|r| r.objects.get(key).cloned())
    }

    /// Returns all objects of a resource (a cheap snapshot).
    pub fn objects(&self, id: &ResourceId) -> imbl::OrdMap<ObjKey, Arc<Stored>> {
        self.state
            .resources
            .get(id)
            .map(|r| r.objects.clone())
            .unwrap_or_default()
    }

    /// Returns the current global resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.state.rv
    }

    /// Returns the dependents recorded for an owner uid.
    pub fn dependents(&self, owner_uid: &str) -> Vec<(ResourceId, ObjKey)> {
        self.state
            .dependents
            .get(owner_uid)
            .cloned()
            .unwrap_or_default()
    }

    /// Stores `obj` (new or replacing) under the next resourceVersion, which it returns the
    /// object stamped with. `metadata.resourceVersion` is set here.
    pub fn put(&mut self, def: &ResourceDef, key: ObjKey, mut obj: Value) -> Arc<Stored> {
        self.state.rv += 1;
        let rv = self.state.rv;
        set_rv(&mut obj, rv);
        let stored = Arc::new(Stored::new(&obj, rv, def));
        let id = def.id();
        let prev = self
            .state
            .resources
            .entry(id.clone())
            .or_default()
            .objects
            .insert(key.clone(), stored.clone());
        self.reindex_owners(&id, &key, prev.as_deref(), Some(&stored));
        if !stored.uid.is_empty() {
            self.state
                .uids
                .insert(stored.uid.clone(), (id.clone(), key.clone()));
        }
        let ty = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.commit(
            &id,
            Change {
                ty,
                obj: stored.clone(),
                prev,
            },
        );
        stored
    }

    /// Removes an object; the DELETED event carries a new resourceVersion. Returns the final
    /// version, or None if it did not exist.
    pub fn remove(&mut self, def: &ResourceDef, key: &ObjKey) -> Option<Arc<Stored>> {
        let id = def.id();
        let prev = self.state.resources.get_mut(&id)?.objects.remove(key)?;
        self.state.rv += 1;
        let rv = self.state.rv;
        let mut obj = prev.value();
        set_rv(&mut obj, rv);
        let last = Arc::new(Stored::new(&obj, rv, def));
        self.reindex_owners(&id, key, Some(&prev), None);
        self.state.uids.remove(&prev.uid);
        self.commit(
            &id,
            Change {
                ty: EventType::Deleted,
                obj: last.clone(),
                prev: Some(prev),
            },
        );
        Some(last)
    }

    fn commit(&mut self, id: &ResourceId, change: Change) {
        let cap = self.state.history_capacity;
        let res = self.state.resources.entry(id.clone()).or_default();
        res.watchers.dispatch(&change);
        res.history.push_back(change);
        while res.history.len() > cap {
            if let Some(old) = res.history.pop_front() {
                res.compacted_rv = old.obj.rv;
            }
        }
    }

    fn reindex_owners(
        &mut self,
        id: &ResourceId,
        key: &ObjKey,
        prev: Option<&Stored>,
        new: Option<&Stored>,
    ) {
        let old_owners = prev.map(|p| p.owners.as_slice()).unwrap_or_default();
        let new_owners = new.map(|n| n.owners.as_slice()).unwrap_or_default();
        if old_owners == new_owners {
            return;
        }
        for uid in old_owners {
            if let Some(deps) = self.state.dependents.get_mut(uid) {
                deps.retain(|(i, k)| !(i == id && k == key));
                if deps.is_empty() {
                    self.state.dependents.remove(uid);
                }
            }
        }
        for uid in new_owners {
            self.state
                .dependents
                .entry(uid.clone())
                .or_default()
                .push((id.clone(), key.clone()));
        }
    }

    /// Drops every object and watcher of a resource (its CRD was deleted).
    pub fn drop_resource(&mut self, id: &ResourceId) {
        self.state.resources.remove(id);
        self.state.uids.retain(|_, (i, _)| i != id);
    }
}

/// Sets metadata.resourceVersion.
pub fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::storage::registry::Registry;

    fn pod(name: &str, node: &str, app: &str) -> Value {
        json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":"default","labels":{"app":app}},"spec":{"nodeName":node}})
    }

    fn pods_def() -> Arc<ResourceDef> {
        Registry::with_builtins().get("", "v1", "pods").unwrap()
    }

    #[test]
    fn writes_bump_the_global_resource_version() {
        let store = Store::new(100, 10);
        let def = pods_def();
        let a = store.write(|t| t.put(&def, ObjKey::new("default", "a"), pod("a", "n1", "x")));
        let b = store.write(|t| t.put(&def, ObjKey::new("default", "b"), pod("b", "n1", "x")));
        assert_eq!(b.rv, a.rv + 1);
        assert_eq!(store.current_rv(), b.rv);
        assert_eq!(
            a.value()["metadata"]["resourceVersion"],
            json!(a.rv.to_string())
        );
    }

    #[test]
    fn node_indexed_watchers_get_only_their_node_and_moves_become_add_and_delete() {
        let store = Store::new(100, 10);
        let def = pods_def();
        let filter = |node: &str| WatchFilter {
            fields: FieldSelector::parse(&format!("spec.nodeName={node}")).unwrap(),
            ..Default::default()
        };
        let mut w1 = store
            .watch(&def.id(), filter("n1"), WatchStart::Now)
            .unwrap();
        let mut w2 = store
            .watch(&def.id(), filter("n2"), WatchStart::Now)
            .unwrap();
        store.write(|t| t.put(&def, ObjKey::new("default", "a"), pod("a", "n1", "x")));
        assert_eq!(w1.rx.try_recv().unwrap().ty, EventType::Added);
        assert!(w2.rx.try_recv().is_err());
        // Moving the pod to n2: n1's watcher sees it leave, n2's sees it arrive.
        let moved = store.write(|t| t.put(&def, ObjKey::new("default", "a"), pod("a", "n2", "x")));
        let gone = w1.rx.try_recv().unwrap();
        assert_eq!((gone.ty, gone.rv()), (EventType::Deleted, moved.rv));
        assert_eq!(w2.rx.try_recv().unwrap().ty, EventType::Added);
    }

    #[test]
    fn watch_resumes_from_history_and_expires_past_it() {
        let store = Store::new(2, 10);
        let def = pods_def();
        let first = store.write(|t| t.put(&def, ObjKey::new("default", "a"), pod("a", "n1", "x")));
        for i in 0..3 {
            store.write(|t| {
                t.put(
                    &def,
                    ObjKey::new("default", "a"),
                    pod("a", "n1", &format!("v{i}")),
                )
            });
        }
        assert!(matches!(
            store.watch(
                &def.id(),
                WatchFilter::default(),
                WatchStart::After(first.rv)
            ),
            Err(WatchError::Expired { .. })
        ));
        let w = store
            .watch(
                &def.id(),
                WatchFilter::default(),
                WatchStart::After(first.rv + 2),
            )
            .unwrap();
        assert_eq!(w.initial.len(), 1);
        assert_eq!(w.initial[0].obj.labels["app"], "v2");
    }

    #[test]
    fn a_watcher_that_falls_behind_is_dropped_and_unregistered() {
        let store = Store::new(100, 1);
        let def = pods_def();
        let mut w = store
            .watch(&def.id(), WatchFilter::default(), WatchStart::Now)
            .unwrap();
        store.write(|t| t.put(&def, ObjKey::new("default", "a"), pod("a", "n1", "x")));
        store.write(|t| t.put(&def, ObjKey::new("default", "b"), pod("b", "n1", "x")));
        assert_eq!(store.watcher_count(&def.id()), 0);
        assert!(w.rx.try_recv().is_ok());
        assert!(w.rx.try_recv().is_err());
    }

    #[test]
    fn dropping_the_guard_unregisters_the_watcher() {
        let store = Store::new(100, 10);
        let def = pods_def();
        let w = store
            .watch(&def.id(), WatchFilter::default(), WatchStart::Now)
            .unwrap();
        assert_eq!(store.watcher_count(&def.id()), 1);
        drop(w);
        assert_eq!(store.watcher_count(&def.id()), 0);
    }

    #[test]
    fn owner_index_follows_owner_references() {
        let store = Store::new(100, 10);
        let def = pods_def();
        let mut p = pod("a", "n1", "x");
        p["metadata"]["ownerReferences"] = json!([{"uid": "owner-1", "kind": "ReplicaSet", "name": "rs", "apiVersion": "apps/v1"}]);
        store.write(|t| t.put(&def, ObjKey::new("default", "a"), p));
        assert_eq!(
            store.dependents("owner-1"),
            vec![(def.id(), ObjKey::new("default", "a"))]
        );
        store.write(|t| t.remove(&def, &ObjKey::new("default", "a")));
        assert!(store.dependents("owner-1").is_empty());
    }
}
