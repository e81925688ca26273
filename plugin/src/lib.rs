//! `kubectl telemesh`, a kubectl plugin (krew's naming: the binary `kubectl-telemesh` on PATH):
//! the cluster as Telemesh's coordinators see it, seconds old (`top nodes`, `why POD`,
//! `rewards`, `jobs`), WorkloadActions (`actions [-w]`), and actions through the coordinators'
//! `/rpc` (`move`, `swap`, `scale`).
//!
//! Kubernetes objects come through the kubeconfig as kubectl's do; the view comes from a
//! coordinator's JSON API at `--coordinator` (docs/kubectl-plugin.md says why not the API
//! server's service proxy). Pure modules decide and format ([`top`], [`why`], [`rewards`],
//! [`actions`], [`act`], [`jobs`], [`table`]); [`coordinator`], [`kubeconf`] and `run` are the
//! plumbing.

pub mod act;
pub mod actions;
pub mod cli;
pub mod coordinator;
pub mod jobs;
pub mod kubeconf;
pub mod output;
pub mod rewards;
mod run;
pub mod table;
pub mod top;
pub mod why;

pub use run::{Outcome, run};
