#!/usr/bin/env python3
"""Bytes of chitchat 0.13's delta per member that changed, for the lower bound of loaded gossip.

A delta carries, per member with news, a node op (tag, node id, generation, gossip address,
last GC version, from-version), one key/value op per changed key (tag, key, value, version,
status) and a max-version op, streamed in 16 KiB blocks each compressed with zstd at the default
level (chitchat's src/delta.rs, src/serialize.rs, src/types.rs). This builds the delta that one
exchange would send if it carried the changes of all N members (the best case: no member twice,
the whole stream compressed together), with the gossip benchmark's names and load
(runtime/benches/gossip.rs: ten metrics in five families change, values like `53.7`), and prints
the compressed bytes per member and per family value (docs/scale.md, "Under load").

Run: scripts/gossip-delta-model.py [N]   (default 1000; needs the zstd command)
"""
import random
import shutil
import struct
import subprocess
import sys

# The families the benchmark's load changes and their suffixes (the whole group is republished).
FAMILIES = {
    "M:node_cpu_": ["utilization_ratio"],
    "M:node_": ["load1", "load15", "load5"],
    "M:node_memory_": ["utilization_ratio"],
    "M:node_disk_": ["read_bytes_per_second", "reads_per_second", "write_bytes_per_second",
                     "writes_per_second"],
    "M:node_network_": ["receive_bytes_per_second", "transmit_bytes_per_second"],
}


def compressed_len(raw: bytes) -> int:
    out = 1  # end-of-stream tag
    for i in range(0, len(raw), 16384):
        block = raw[i:i + 16384]
        c = subprocess.run(["zstd", "-3", "-c", "--no-check", "-q"], input=block,
                           capture_output=True, check=True).stdout
        out += 3 + min(len(c), len(block))  # block tag + u16 length
    return out


def string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def member_delta(i: int, r: random.Random, families: int) -> bytes:
    name = f"ip-10-0-{i // 250}-{i % 250}.eu-west-1.compute.internal"
    generation = 1767225600000 + r.randrange(1000)
    version = 1000 + r.randrange(100)
    out = (bytes([0]) + string(name) + struct.pack("<Q", generation) + bytes([4, 127, 0, 0, 1])
           + struct.pack("<HQQ", 30000 + i, 0, version))
    for k, (key, suffixes) in enumerate(list(FAMILIES.items())[:families]):
        stamp = 1767225600000 + r.randrange(100000)
        value = f"{stamp};" + ";".join(f"{s}={r.randrange(1000) / 10:g}" for s in suffixes)
        out += bytes([1]) + string(key) + string(value) + struct.pack("<Q", version + k + 1) + b"\0"
    return out + bytes([2]) + struct.pack("<Q", version + families)


def main() -> None:
    if shutil.which("zstd") is None:
        sys.exit("the zstd command is missing: apt-get install zstd")
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    for families in (1, len(FAMILIES)):
        r = random.Random(1)
        raw = b"".join(member_delta(i, r, families) for i in range(n))
        c = compressed_len(raw)
        print(f"{n} members, {families} changed families each: {len(raw)} B raw, {c} B "
              f"compressed, {c / n:.1f} B per member, {c / n / families:.1f} B per family value")


if __name__ == "__main__":
    main()
