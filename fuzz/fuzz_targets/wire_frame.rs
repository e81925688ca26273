//! QUIC stream frames (length header, version, postcard message) as the agent's server reads a
//! request and the coordinator's client reads a response.
#![no_main]

use libfuzzer_sys::fuzz_target;
use telemesh_core::wire::{
    HEADER_LEN, MAX_FRAME_LEN, Request, Response, decode_frame, decode_payload, frame_len,
};

fuzz_target!(|data: &[u8]| {
    if let Some(header) = data.get(..HEADER_LEN) {
        let mut h = [0; HEADER_LEN];
        h.copy_from_slice(header);
        let _ = frame_len(h, MAX_FRAME_LEN);
    }
    let _ = decode_frame::<Request>(data);
    let _ = decode_frame::<Response>(data);
    let _ = decode_payload::<Request>(data);
    let _ = decode_payload::<Response>(data);
});
