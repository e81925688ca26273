//! The REST verbs and their dispatch: the HTTP handlers, the verbs every caller runs, watch
//! streams, the subresources with behaviour of their own, and patch and apply.

pub mod handlers;
pub mod patch;
pub mod subresources;
pub mod verbs;
pub mod watch;
