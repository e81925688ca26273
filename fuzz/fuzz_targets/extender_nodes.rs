//! Full-node extender bodies (`nodeCacheCapable: false`): the input is one Node object placed
//! in a well-formed ExtenderArgs, so the fuzzer works on the Node parsing rather than on the
//! envelope.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use telemesh_coordinator::extender::{Extender, Settings};

static EXTENDER: LazyLock<Extender> =
    LazyLock::new(|| Extender::new(Default::default(), Default::default(), Settings::default()));

const POD: &str = r#"{"metadata":{"name":"p","namespace":"default","uid":"u","labels":{"telemetry-policy":"p"}},"spec":{"containers":[{"name":"c"}]}}"#;

fuzz_target!(|data: &[u8]| {
    let mut body = Vec::with_capacity(data.len() + 128);
    body.extend_from_slice(br#"{"Pod":"#);
    body.extend_from_slice(POD.as_bytes());
    body.extend_from_slice(br#","Nodes":{"items":["#);
    body.extend_from_slice(data);
    body.extend_from_slice(br#"]},"NodeNames":null}"#);
    let _ = EXTENDER.filter(&body);
    let _ = EXTENDER.prioritize(&body);
});
