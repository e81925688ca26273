//! Storage: the objects the API server keeps in memory and what it knows about their kinds.
//! The object store ([`store`]: every object, one global resourceVersion counter, event history
//! for watch resumption, watchers), the resource registry ([`registry`]: which kinds are served,
//! under which paths, with which verbs, subresources and selectable fields), the built-in kinds
//! ([`builtins`]: what a default kube-apiserver 1.33 serves, over k8s-openapi's types) and label
//! and field selectors ([`selectors`]: parsed once per request, matched against stored objects).

pub mod builtins;
pub mod registry;
pub mod selectors;
pub mod store;
