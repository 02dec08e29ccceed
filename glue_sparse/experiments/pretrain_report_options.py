"""``glue-sparse pretrain-report``'s options, in a module that imports no torch (``--help`` is instant);
the report is ``pretrain_report.py``."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.experiments.option_fields import option, required


@dataclass(kw_only=True)
class PretrainReportOptions:
    """Which runs, where the report goes, how speed is timed, and the targets the table states."""

    runs: str = required("comma-separated run folders (each with run.json and model/); the first dense one is "
                         "the reference")
    out: str = required("folder for results.md, results.json and curves.png")
    speed: bool = option(True, "time each saved model's forward pass against the dense one (--no-speed: skip)")
    speed_batch_size: int = option(8, "timing: blocks per forward")
    speed_batches: int = option(4, "timing: batches per round")
    speed_rounds: int = option(7, "timing: interleaved rounds (median)")
    threads: int = option(2, "timing: torch threads")
    removal_level: float = option(0.4, "the removal level the perplexity target is checked at")
    target_ppl_ratio: float = option(1.10, "target: gated perplexity at most this times dense at equal tokens")
    target_speedup: float = option(1.15, "target: pruned forward tokens/s at least this times dense")
