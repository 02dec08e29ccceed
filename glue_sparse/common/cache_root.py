"""Where glue-sparse keeps derived data (``$GLUE_SPARSE_CACHE``, default ``~/.cache/glue_sparse``), and the
content hash of a file remembered there by its path, size, modification time and inode: a pre-training start
over a thousand C4 shards names each by its sha256 without reading it again in every process (a changed file
is hashed again)."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import time
from pathlib import Path

from glue_sparse_tasks.atomic import write_text_atomic

CACHE_ENV = "GLUE_SPARSE_CACHE"
#: the remembered hashes, one JSON file in the cache root
HASHES_FILE = "file_hashes.json"
#: at most one rewrite of the file per this many seconds; the rest waits for the next one or the process's end
#: (a 1,024-shard start would otherwise rewrite a growing file, fsynced, once per shard)
REMEMBER_EVERY_S = 1.0
_memory: dict[str, list] | None = None  # this process's copy of the file, read once
_unwritten: dict[Path, dict[str, list]] = {}  # hashed here, not yet in the file, by the file they go to
_last_written = float("-inf")


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "glue_sparse"))


def sha256_of(path: Path) -> str:
    """sha256 of a file's bytes, read now, through one reused 4 MiB buffer (a fresh ``read()`` block per step
    costs a fresh mapping and its page faults: 1.6x the time over 2 GB of shards)."""
    digest = hashlib.sha256()
    buffer = bytearray(1 << 22)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as handle:
        while size := handle.readinto(buffer):
            digest.update(view[:size])
    return digest.hexdigest()


def _remembered() -> dict[str, list]:
    global _memory
    if _memory is None:
        try:
            _memory = json.loads((cache_root() / HASHES_FILE).read_text())
        except (OSError, ValueError):
            _memory = {}
    return _memory


def file_sha256(path: str | Path, remember: bool = True) -> str:
    """sha256 of a file's bytes, read once per (real path, size, mtime, inode); ``remember`` keeps new ones in
    the cache for other processes (a read-only cache only remembers them in this process)."""
    real = os.path.realpath(path)
    stat = os.stat(real)
    key = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
    known = _remembered().get(real)
    if known and known[:3] == key:
        return known[3]
    digest = sha256_of(Path(real))
    _remembered()[real] = [*key, digest]
    if remember:
        _unwritten.setdefault(cache_root() / HASHES_FILE, {})[real] = [*key, digest]
        if time.monotonic() - _last_written >= REMEMBER_EVERY_S:
            write_remembered()
    return digest


@atexit.register
def write_remembered() -> None:
    """Merge this process's new hashes into the cache's file (with what other processes remembered meanwhile);
    a cache that cannot be written keeps them in this process only."""
    global _last_written
    for path, hashes in _unwritten.items():
        try:
            on_disk = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError):
            on_disk = {}
        try:
            write_text_atomic(path, json.dumps({**on_disk, **hashes}))
        except OSError:
            pass
    _unwritten.clear()
    _last_written = time.monotonic()
