"""Write a synthetic full trace as raw per-thread files (``t1.bin`` ... ``tN.bin``, the
format `tierlab import raw` reads), for the benchmarks of docs/benchmarks.md.

Each thread's accesses alternate between a Zipf-distributed choice of pages in a shared
2 GiB heap (512 Ki pages, the hot ones far hotter) and a streaming sweep over a private
256 MiB array; a quarter of them are stores. Deterministic: the same arguments give the same
bytes.

    python tools/gen_trace.py --accesses 100000000 --threads 4 DIR
    tierlab import raw DIR/t*.bin -o rec
    tierlab view rec -o view
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

HEAP = 0x7F0000000000
PRIVATE = (0x7F4000000000, 0x560000000000, 0x7FFD00000000)
CHUNK = 5_000_000


def write_thread(path: Path, n: int, thread: int, rng: np.random.Generator) -> None:
    base = np.uint64(PRIVATE[thread % len(PRIVATE)])
    with open(path, "wb") as f:
        for k in range(0, n, CHUNK):
            m = min(CHUNK, n - k)
            half = (m + 1) // 2
            pages = (rng.zipf(1.2, half) % (1 << 19)).astype(np.uint64)
            offset = rng.integers(0, 4096, half, dtype=np.uint64) // np.uint64(8) * np.uint64(8)
            rnd = np.uint64(HEAP) + pages * np.uint64(4096) + offset
            seq = base + (np.arange(k, k + m - half, dtype=np.uint64) * np.uint64(8)) % np.uint64(
                1 << 28
            )
            a = np.empty(m, dtype=np.uint64)
            a[0::2] = rnd
            a[1::2] = seq
            stores = (rng.random(m) < 0.25).astype(np.uint64) << np.uint64(63)
            (a | stores).astype("<u8").tofile(f)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="directory for t1.bin ... tN.bin")
    p.add_argument("--accesses", type=int, default=100_000_000, help="in all threads")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--seed", type=int, default=38)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    per = args.accesses // args.threads
    for t in range(args.threads):
        n = per + (args.accesses - per * args.threads if t == args.threads - 1 else 0)
        write_thread(args.out / f"t{t + 1}.bin", n, t, rng)


if __name__ == "__main__":
    main()
