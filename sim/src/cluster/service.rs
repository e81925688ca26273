//! A loopback stand-in for the coordinator Service: a TCP proxy that spreads connections over the
//! replicas round-robin and skips one that refuses, as kube-proxy and a readiness-gated Service
//! would. The scheduler's extender registration points at it (the dev cluster's, and the fault
//! suite's kube-scheduler: tests/tests/faults.rs).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Serves until `stop`.
pub async fn serve(listener: TcpListener, backends: Vec<SocketAddr>, stop: CancellationToken) {
    let next = Arc::new(AtomicUsize::new(0));
    let backends = Arc::new(backends);
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((mut inbound, _)) = accepted else {
            continue;
        };
        let (next, backends) = (next.clone(), backends.clone());
        tokio::spawn(async move {
            let first = next.fetch_add(1, Ordering::Relaxed);
            for i in 0..backends.len() {
                let backend = backends[(first + i) % backends.len()];
                if let Ok(mut outbound) = TcpStream::connect(backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    return;
                }
            }
            tracing::debug!("no coordinator replica accepted the connection");
        });
    }
}
