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
RESULTS_FOLDER = "benchmarks/results"  # committed outputs, written by the runs themselves


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_state(path: str | Path | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the checkout holding this package (None outside a git checkout). Dirty means
    a tracked file differs from the commit outside ``benchmarks/results/``: a benchmark part merges its rows
    into a results store there, which must not mark the next part's rows, run from the same code, as dirty."""
    folder = Path(path) if path else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10)
        if commit.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no", "--",
                                 ":/", f":(top,exclude){RESULTS_FOLDER}"], capture_output=True, text=True, timeout=10)
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


#: the environment variable that carries the ``glue-sparse`` command line into the processes it starts (a
#: bench's fine-tunes), so a run records the command a user typed, not a worker's
COMMAND_ENV = "GLUE_SPARSE_COMMAND"


def record_command(argv: list[str]) -> None:
    """Remember ``glue-sparse ARGV`` as the command that made what this process (and its children) write,
    unless a parent process already did."""
    import os
    import shlex

    os.environ.setdefault(COMMAND_ENV, shlex.join(["glue-sparse", *argv]))


def invoking_command() -> str | None:
    """The ``glue-sparse`` command line that started this work (None from the Python API)."""
    import os

    return os.environ.get(COMMAND_ENV)


def machine_description() -> str:
    """The machine a timing ran on, in words: processor model, cores and torch's intra-op threads."""
    import os
    import platform

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    return f"{model}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
