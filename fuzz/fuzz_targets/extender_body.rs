//! Extender request bodies, both modes (`NodeNames` with `nodeCacheCapable: true`, full
//! `Nodes` without), through the three verbs exactly as the HTTP handlers call them, on an
//! empty cluster view and policy cache.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use telemesh_coordinator::extender::{Extender, Settings};

static EXTENDER: LazyLock<Extender> =
    LazyLock::new(|| Extender::new(Default::default(), Default::default(), Settings::default()));

fuzz_target!(|data: &[u8]| {
    let _ = EXTENDER.filter(data);
    let _ = EXTENDER.prioritize(data);
    let _ = EXTENDER.preempt(data);
});
