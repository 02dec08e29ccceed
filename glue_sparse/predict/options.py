"""``glue-sparse predict``'s options, in a module that imports no torch (``--help`` is instant)."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.common.option_fields import DeviceOptions, option, required
from glue_sparse_tasks.errors import UserInputError

SPLITS = ("test", "validation")


class PredictInputError(UserInputError):
    """A predict input that cannot make a submission; one line, before any model loads."""


@dataclass(kw_only=True)
class PredictOptions(DeviceOptions):
    """Where the predictions come from, which split, and where the submission goes."""

    output: str = required("folder for the eleven GLUE-server files, submission.zip and predict.json")
    run: str | None = option(None, "fine-tuning run folder (one checkpoint per task, as hf-classifier takes: "
                                   "<run>/<task>/, a plain classifier, a gates adapter or a pruned model)")
    samples: str | None = option(None, "lm-eval --output_path folder (or one samples_*.jsonl file) of glue_sparse_* "
                                       "tasks run with --log_samples or --predict_only")
    split: str = option("test", "test (the server's: unlabelled, the _test tasks) or validation (labelled: "
                                "scored, for the round trip)")
    tasks: str = option("all", "with --run: comma-separated GLUE tasks to predict (default: every task the run "
                               "has a checkpoint for; AX comes with mnli)")
    variant: str | None = option(None, "with --run: 'pruned' predicts with each task's pruned model (<task>/pruned; "
                                       "default: the checkpoint each task kept)")
    base: str | None = option(None, "with --run: base model for adapters whose recorded base moved")
    batch_size: int = option(32, "with --run: documents per forward pass")
    data_dir: str | None = option(None, "local GLUE folder (else $GLUE_SPARSE_DATA_DIR, then the Hub)")
    hub: bool = option(True, "ask the Hugging Face Hub for splits not found locally (--no-hub: never)")
    overwrite: bool = option(False, "replace a submission already in --output (atomically: the old one stays "
                                    "until the new one is complete)")

    def validate(self) -> None:
        """Refuse what cannot make a submission, in one line."""
        if bool(self.run) == bool(self.samples):
            raise PredictInputError("give exactly one of --run (a fine-tuning run folder) or --samples (lm-eval "
                                    "--log_samples output)")
        if self.split not in SPLITS:
            raise PredictInputError(f"--split {self.split!r}: expected one of {', '.join(SPLITS)}")
        if self.samples and (self.tasks != "all" or self.variant or self.base):
            raise PredictInputError("--tasks, --variant and --base choose checkpoints of --run; with --samples the "
                                    "sample files say what was predicted")
