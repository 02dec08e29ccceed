"""Start-up cost of naming pre-training shards by content (issue #65, item 3): every process of a C4 run names
each shard by its sha256 (the token cache's key). Before, each process read every shard again; now a shard's
hash is remembered in the cache by (path, size, mtime, inode). This writes N shards of M MB, then times, in
fresh processes as a run's ranks start, the old way (read and hash every shard) against ``file_sha256`` with
the remembered hashes (after one process has hashed them), and prints both and the ratio. Idle machine only:

    python benchmarks/shard_hashes.py --shards 256 --mb 8 --out benchmarks/results/shard_hashes
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OLD = """
import hashlib, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).glob('*.json')):
    digest = hashlib.sha256()
    with path.open('rb') as f:
        for block in iter(lambda: f.read(1 << 22), b''):
            digest.update(block)
"""
NEW = """
import sys
from pathlib import Path
from glue_sparse.common.cache_root import file_sha256
for path in sorted(Path(sys.argv[1]).glob('*.json')):
    file_sha256(path)
"""


def seconds(code: str, folder: Path, env: dict, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, str(folder)], env=env, check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=256)
    parser.add_argument("--mb", type=float, default=8.0, help="size of each shard")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes timed per side (median)")
    parser.add_argument("--out", help="folder for shard_hashes.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        shards, cache = Path(tmp) / "shards", Path(tmp) / "cache"
        shards.mkdir()
        line = json.dumps({"text": "the cat sat on the mat " * 40}) + "\n"
        for i in range(args.shards):
            with (shards / f"c4-train.{i:05d}-of-{args.shards:05d}.json").open("w") as out:
                out.write(line * max(1, int(args.mb * 2**20 / len(line))))
        env = {**os.environ, "GLUE_SPARSE_CACHE": str(cache)}
        subprocess.run([sys.executable, "-c", "import glue_sparse"], env=env, check=True)  # warm imports
        old = seconds(OLD, shards, env, args.runs)
        first = seconds(NEW, shards, env, 1)  # hashes every shard once and remembers them
        new = seconds(NEW, shards, env, args.runs)
    result = {"shards": args.shards, "mb_each": args.mb, "runs": args.runs, "rehash_every_process_s": old,
              "first_process_s": first, "remembered_s": new, "speedup": old / new}
    print(f"{args.shards} shards x {args.mb:g} MB: every process re-hashing {old:.2f} s; first process "
          f"{first:.2f} s; later processes with remembered hashes {new:.2f} s ({old / new:.1f}x faster)")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "shard_hashes.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
