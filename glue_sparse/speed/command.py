"""``glue-sparse speed``: dense vs physically pruned latency on --device. Every flag is a field of ``SpeedOptions``."""

from __future__ import annotations

from glue_sparse.cli.flags import options_from
from glue_sparse.speed.options import SpeedOptions
from glue_sparse_tasks.errors import UserInputError

PARSER_DATACLASSES = (SpeedOptions,)


def run(args) -> int:
    from glue_sparse.speed.causal import run_causal_speed  # torch: only when the command runs
    from glue_sparse.speed.run import run_speed
    from glue_sparse.speed.runtimes import run_runtime_speed

    options = options_from(args, SpeedOptions)
    if options.runtimes not in ("torch", "torch,onnxruntime"):
        raise UserInputError(f"--runtimes {options.runtimes!r}: expected torch or torch,onnxruntime")
    if options.runtimes != "torch" and options.causal:
        raise UserInputError("--runtimes torch,onnxruntime times encoders; --causal runs in torch only")
    (run_causal_speed if options.causal else run_runtime_speed if options.runtimes != "torch" else run_speed)(options)
    return 0
