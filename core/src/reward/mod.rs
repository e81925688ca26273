//! Rewards: what a node does to the pods of one type, learnt at run time (kubeRL's idea, done
//! right). Three pure parts:
//! - [`pod_type`](mod@pod_type): which type a pod is (an explicit label, kubeRL's labels, else its workload);
//! - [`signal`]: what an observation of a pod is worth (a reward in [0, 1] and a weight);
//! - [`estimate`]: per (type, node), a Beta posterior whose counts halve every half-life, so
//!   few or old observations weigh little, a node that stopped failing is tried again, and the
//!   score carries an optimism bonus for uncertainty (exploration).
//!
//! The agent observes the pods on its node and gossips one [`Estimate`] per type; the
//! coordinator scores candidate nodes from them.

pub mod estimate;
pub mod pod_type;
pub mod signal;

pub use estimate::{Estimate, ParseEstimateError, RewardModel};
pub use pod_type::{POD_TYPE_LABEL, pod_type};
pub use signal::{Observation, REWARD_ANNOTATION, Signal, SignalSettings};
