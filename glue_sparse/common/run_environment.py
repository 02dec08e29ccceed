"""Facts about the running environment that every results record carries: versions, git, memory."""

from __future__ import annotations

import resource
import subprocess
import time
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

PACKAGES = ("glue-sparse", "torch", "transformers", "peft", "accelerate", "datasets", "lm_eval", "evaluate",
            "scikit-learn")


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_state(path: str | Path | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the checkout holding this package (None outside a git checkout)."""
    folder = Path(path) if path else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10)
        if commit.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
        return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux ``clear_refs`` 5) so a later peak is this phase's own."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def peak_rss_bytes() -> int:
    """Peak resident memory since the last reset (VmHWM), else since process start (ru_maxrss)."""
    kib = _status_kib("VmHWM")
    return (kib if kib is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def current_rss_bytes() -> int:
    return (_status_kib("VmRSS") or 0) * 1024


@contextmanager
def measured_stage(device: Any) -> Iterator[dict[str, Any]]:
    """Measure the with-block as run.json reports a training stage: its wall time, the RSS it started at,
    its own peak RSS and, on a GPU, its peak GPU memory allocated. The dict is filled when the block ends."""
    import torch

    measured: dict[str, Any] = {"rss_before_training_bytes": current_rss_bytes()}
    reset_peak_rss()
    on_gpu = getattr(device, "type", None) == "cuda"
    if on_gpu:
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    yield measured
    measured["train_seconds"] = time.perf_counter() - started
    measured["peak_rss_bytes"] = peak_rss_bytes()
    measured["peak_gpu_bytes"] = torch.cuda.max_memory_allocated(device) if on_gpu else None
