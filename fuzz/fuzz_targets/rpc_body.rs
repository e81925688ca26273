//! `POST /rpc` bodies: the JSON-RPC parser (both dialects, batches) and the pure part of each
//! call (method, params, the action's request, idempotency key and callback, or the lookup),
//! then the reply encoder, as `coordinator::actions::rpc` runs them before any I/O.
#![no_main]

use libfuzzer_sys::fuzz_target;
use telemesh_coordinator::actions::rpc::wire::{self, Body};
use telemesh_coordinator::actions::rpc::{check, wire::Call};

fn call(call: &Call) {
    let mut target = None;
    let outcome = check(call, None, &mut target)
        .map(|checked| serde_json::Value::String(format!("{checked:?}")));
    let _ = wire::reply(call.dialect, call.id.as_ref(), &outcome);
}

fuzz_target!(|data: &[u8]| {
    match wire::parse(data) {
        Body::Single(Ok(c)) => call(&c),
        Body::Single(Err(bad)) => {
            let _ = wire::reply(bad.dialect, bad.id.as_ref(), &Err(bad.error.clone()));
        }
        Body::Batch(items) => {
            for item in items.iter().flatten() {
                call(item);
            }
        }
    }
});
