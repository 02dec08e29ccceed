"""Runs one fine-tuning and kills its own process with SIGKILL at an optimiser step.

A real kill: no evaluation, no checkpoint and no clean-up run after it, unlike a callback's graceful
stop. ``python -m tests.kill_at_step CONFIG_JSON OUTPUT DATA_DIR STEP``.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from transformers import TrainerCallback

from glue_sparse.finetune.options import FinetuneConfig
from glue_sparse.finetune.run import run_finetune


class KillAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:  # before the Trainer saves or evaluates this step
            os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    config, output, data_dir, step = sys.argv[1:]
    run_finetune(FinetuneConfig(**json.loads(config)), output, data_dir=data_dir, callbacks=[KillAt(int(step))],
                 use_hub=False)
    sys.exit("the run ended without being killed")
