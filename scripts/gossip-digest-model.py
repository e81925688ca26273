#!/usr/bin/env python3
"""Bytes of chitchat 0.13's V1 digest per member, by what the member ids look like.

chitchat puts one (ChitchatId, NodeDigest) entry per known member in every Syn and SynAck:
node id (u16 length + bytes), generation (u64), gossip address (tag + IPv4 + port), heartbeat,
last GC version and max version (3 x u64), streamed in 16 KiB blocks each compressed with zstd
at the default level (chitchat's src/digest.rs and src/serialize.rs). This rebuilds that stream
for N members and compresses it with the zstd command line (Debian package `zstd`), so the
choice of node ids and generations can be weighed without a cluster.

Run: scripts/gossip-digest-model.py [N]   (default 1000)
"""
import random
import shutil
import struct
import subprocess
import sys


def compressed_len(raw: bytes) -> int:
    out = 1  # end-of-stream tag
    for i in range(0, len(raw), 16384):
        block = raw[i:i + 16384]
        c = subprocess.run(["zstd", "-3", "-c", "--no-check", "-q"], input=block,
                           capture_output=True, check=True).stdout
        out += 3 + min(len(c), len(block))  # block tag + u16 length
    return out


def entry(name: str, generation: int, ip, port: int, heartbeat: int, max_version: int) -> bytes:
    b = name.encode()
    return (struct.pack("<H", len(b)) + b + struct.pack("<Q", generation) + bytes([4]) + bytes(ip)
            + struct.pack("<HQQQ", port, heartbeat, 0, max_version))


VARIANTS = {
    "AWS names, generation = start in ms": lambda i, r: (
        f"ip-10-0-{i // 250}-{i % 250}.eu-west-1.compute.internal", 1767225600000 + r.randrange(86400000)),
    "AWS names, generation = start in s": lambda i, r: (
        f"ip-10-0-{i // 250}-{i % 250}.eu-west-1.compute.internal", 1767225600 + r.randrange(86400)),
    "GKE names, generation = start in ms": lambda i, r: (
        f"gke-prod-pool-{i // 100}-{r.randrange(1 << 32):08x}-{r.randrange(1 << 16):04x}",
        1767225600000 + r.randrange(86400000)),
    "4-character random ids, start in ms": lambda i, r: (
        "%04x" % r.randrange(1 << 16), 1767225600000 + r.randrange(86400000)),
    "empty ids, generation 0 (the floor)": lambda i, r: ("", 0),
}


def main() -> None:
    if shutil.which("zstd") is None:
        sys.exit("the zstd command is missing: apt-get install zstd")
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print(f"{n} members; heartbeats spread (members started at different times) or alike")
    for label, ids in VARIANTS.items():
        for spread in (True, False):
            r = random.Random(7)
            entries = sorted(ids(i, r) + (i,) for i in range(n))
            raw = b"".join(
                entry(name, gen, [10, 0, i // 250, i % 250], 7946,
                      3000 + (r.randrange(80000) if spread else 100 + r.randrange(3)),
                      30 + r.randrange(200000))
                for name, gen, i in entries)
            c = compressed_len(raw)
            print(f"  {label:<38} {'spread' if spread else 'alike':<6} raw {len(raw) / n:5.1f} B/member, "
                  f"compressed {c / n:5.2f} B/member ({c} B per digest)")


if __name__ == "__main__":
    main()
