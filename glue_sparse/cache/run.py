"""``glue-sparse cache``'s work: list the entries of ``$GLUE_SPARSE_CACHE`` by kind (size, age, what made
them), verify each one's files against its manifest, and clear what ``--kind`` and ``--older-than`` name."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from glue_sparse.cache.options import CacheOptions
from glue_sparse.common.cache import KINDS, MANIFEST, damage, entries, manifest
from glue_sparse.common.cache_root import cache_root
from glue_sparse_tasks.errors import UserInputError

_UNITS = {"d": 86400, "h": 3600, "m": 60}


def _seconds(text: str) -> float:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([dhm]?)\s*", text or "")
    if not match:
        raise UserInputError(f"--older-than {text!r}: expected an age such as 7d, 12h or 30m")
    return float(match.group(1)) * _UNITS[match.group(2) or "d"]


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _built(folder: Path) -> float:
    try:
        return float(manifest(folder)["created"])
    except (OSError, ValueError, KeyError):
        return folder.stat().st_mtime


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _age(seconds: float) -> str:
    return f"{seconds / 86400:.1f} d" if seconds >= 86400 else f"{seconds / 3600:.1f} h"


def _chosen(options: CacheOptions) -> list[tuple[str, Path]]:
    if options.kind is not None and options.kind not in KINDS:
        raise UserInputError(f"--kind {options.kind!r}: expected one of {', '.join(KINDS)}")
    return entries(options.kind)


def list_entries(options: CacheOptions) -> int:
    chosen = _chosen(options)
    print(f"{cache_root()}: {len(chosen)} entr{'y' if len(chosen) == 1 else 'ies'}")
    for kind in dict.fromkeys(k for k, _ in chosen):
        folders = [f for k, f in chosen if k == kind]
        print(f"\n{kind} ({KINDS[kind]}): {len(folders)}, {_human(sum(map(_size, folders)))}")
        for folder in folders:
            made = manifest(folder).get("made_by", "?") if (folder / MANIFEST).is_file() else "unfinished"
            print(f"  {folder.name:<48} {_human(_size(folder)):>9} {_age(time.time() - _built(folder)):>8}  {made}")
    return 0


def verify_entries(options: CacheOptions) -> int:
    damaged = 0
    for kind, folder in _chosen(options):
        problem = damage(folder, check="content")
        if problem:
            damaged += 1
            print(f"DAMAGED {kind}/{folder.name}: {problem}")
    total = len(_chosen(options))
    print(f"{total - damaged} of {total} entries whole" + (f"; {damaged} damaged (the next run that needs one builds "
                                                          "it again; glue-sparse cache clear removes them)"
                                                          if damaged else ""))
    return 1 if damaged else 0


def clear_entries(options: CacheOptions) -> int:
    limit = _seconds(options.older_than) if options.older_than else None
    removed = 0
    for kind, folder in _chosen(options):
        if limit is not None and time.time() - _built(folder) <= limit:
            continue
        shutil.rmtree(folder)
        removed += 1
        print(f"removed {kind}/{folder.name}")
    print(f"{removed} entr{'y' if removed == 1 else 'ies'} removed")
    return 0


def run_cache(action: str, options: CacheOptions) -> int:
    return {"list": list_entries, "verify": verify_entries, "clear": clear_entries}[action](options)
