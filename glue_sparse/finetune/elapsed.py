"""Training time that survives a resume: each checkpoint records the training seconds spent up to it, over
every process that trained the run, so a run resumed after a crash reports its whole training time (a bench
cell's train minutes), not the last process's share (a cell resumed after its final checkpoint read 0.0)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from glue_sparse_tasks.atomic import write_json_atomic

#: in each checkpoint folder: {"train_seconds": wall seconds of training up to that checkpoint}
ELAPSED_FILE = "train_seconds.json"


def seconds_before(checkpoint: str | None) -> float | None:
    """Training seconds recorded in the checkpoint a run resumes from: 0.0 for a fresh run, None where the
    checkpoint predates the record (then the earlier processes' time is unknown, and is said to be)."""
    if checkpoint is None:
        return 0.0
    try:
        return float(json.loads((Path(checkpoint) / ELAPSED_FILE).read_text())["train_seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ElapsedOnSave(TrainerCallback):
    """Writes the training seconds so far (``before`` plus this process's) into each checkpoint it saves."""

    def __init__(self, before: float | None) -> None:
        self.before = before
        self.started = time.perf_counter()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if self.before is not None and state.is_world_process_zero and folder.is_dir():
            seconds = self.before + time.perf_counter() - self.started
            write_json_atomic(folder / ELAPSED_FILE, {"train_seconds": seconds})
