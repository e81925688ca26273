//! Objects and their lifecycle: what create and update fill in and allow, per-kind defaults,
//! pod priority, built-in kinds decoded as their upstream types, graceful deletion and the
//! garbage collector.

pub mod defaults;
pub mod gc;
pub mod graceful;
pub mod lifecycle;
pub mod priority;
pub mod typed;
