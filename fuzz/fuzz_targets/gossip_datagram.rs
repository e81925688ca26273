//! Gossip datagrams as the relay receives them (`gossip::relay`): a sealed frame opened with the
//! keyring. The first byte picks: 0 seals the rest and opens it again (the round trip must give
//! the rest back), anything else opens the rest as a received frame.
//!
//! What an opened or unsealed datagram holds goes to chitchat, whose message decoding is private
//! to it (reachable only through its UDP socket); the state it carries is decoded by our schema,
//! which `gossip_state` fuzzes.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use telemesh_runtime::gossip::keyring::Keyring;
use telemesh_runtime::gossip::seal::Sealer;

static SEALER: LazyLock<Sealer> = LazyLock::new(|| {
    let keyring = Keyring::from_keys(&[[7; 32], [9; 32]]).expect("two valid keys");
    Sealer::new(keyring, "fuzz-cluster")
});

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut opened = Vec::new();
    if mode == 0 {
        let mut frame = Vec::new();
        if SEALER.seal(rest, 1_764_000_000_000, &mut frame).is_ok() {
            let opened = SEALER
                .open(&frame, &mut opened)
                .expect("a sealed frame opens");
            assert_eq!(opened.plain, rest);
        }
    } else {
        let _ = SEALER.open(rest, &mut opened);
    }
});
