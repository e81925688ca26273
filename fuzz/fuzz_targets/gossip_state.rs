//! A member's gossiped key-values as the schema decodes them (`NodeState::from_key_values`):
//! the input is `key=value` lines.
#![no_main]

use libfuzzer_sys::fuzz_target;
use telemesh_core::gossip::NodeState;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let pairs = text
        .lines()
        .map(|line| line.split_once('=').unwrap_or((line, "")));
    let state = NodeState::from_key_values(pairs);
    let _ = state.is_agent();
});
