//! What replay protection costs per received datagram: opening a sealed 1,400-byte frame
//! (ChaCha20-Poly1305) alone, and with the replay check against a cache holding 6,000 nonces
//! (a member's expected traffic over the 10-minute span of the default window) and 65,536 (the
//! cache's bound).
//!
//! Run: `cargo bench -p telemesh-runtime --bench seal`.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use telemesh_runtime::gossip::Keyring;
use telemesh_runtime::gossip::replay::{ReplayConfig, ReplayGuard};
use telemesh_runtime::gossip::seal::Sealer;

const NOW: u64 = 1_767_225_600_000;

fn open_and_check(c: &mut Criterion) {
    let sealer = Sealer::new(Keyring::from_keys(&[[1; 32]]).unwrap(), "telemesh");
    let plain = vec![7u8; 1_400];
    let mut frame = Vec::new();
    sealer.seal(&plain, NOW, &mut frame).unwrap();
    let mut out = Vec::with_capacity(65_536);
    let mut group = c.benchmark_group("receive");
    group.bench_function("open", |b| {
        b.iter(|| {
            sealer
                .open(black_box(&frame), &mut out)
                .unwrap()
                .plain
                .len()
        })
    });
    for held in [6_000u64, 65_536] {
        let mut guard = ReplayGuard::new(ReplayConfig {
            window: Duration::from_secs(300),
            capacity: 65_536,
        });
        // Spread over the window so expiry has nothing to do at `NOW`.
        for i in 0..held {
            guard.check(NOW - 290_000 + i * 4, u128::from(i), NOW);
        }
        let mut nonce = u128::from(held);
        group.bench_with_input(
            BenchmarkId::new("open+replay_check", held),
            &held,
            |b, _| {
                b.iter(|| {
                    nonce += 1;
                    let opened = sealer.open(black_box(&frame), &mut out).unwrap();
                    let sent = opened.stamp.unwrap().sent_ms;
                    guard.check(sent, nonce, NOW)
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, open_and_check);
criterion_main!(benches);
