"""``lm_eval run`` with our tasks and models registered explicitly, after checking that every requested
``glue_sparse_*`` task has data: lm-eval itself loads data only after the model, so a missing split would
fail minutes in instead of in a second."""

from __future__ import annotations

import sys

from glue_sparse.eval.options import EvalRequest
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.lm_eval_hook import activate
from glue_sparse_tasks.local_formats import GlueDataError
from glue_sparse_tasks.tasks.utils import data_source


def precheck_data(argv: list[str]) -> None:
    """Raise ``GlueDataError`` naming the task and every place looked if any data is missing."""
    request = EvalRequest.from_argv(argv)
    for glue_task in request.glue_tasks:
        name = glue_task.removesuffix("_test")
        task, split = data_source(name, "test" if name != glue_task else "validation")
        try:
            load_glue_rows(task, split, data_dir=request.data_dir)
        except GlueDataError as exc:
            raise GlueDataError(f"task glue_sparse_{glue_task}: {exc}") from None


def run_lm_eval(argv: list[str]) -> int:
    """lm-eval's own CLI on ``argv`` (``run`` optional), our tasks and models registered; exit 2 on bad data."""
    if argv[:1] == ["run"]:
        argv = argv[1:]
    if "-h" not in argv and "--help" not in argv:
        try:
            precheck_data(argv)
        except UserInputError as exc:
            print(f"glue-sparse eval: {exc}", file=sys.stderr)
            return 2
    activate()
    from lm_eval.__main__ import cli_evaluate

    sys.argv = ["lm_eval", "run", *argv]
    cli_evaluate()
    return 0
