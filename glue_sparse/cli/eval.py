"""``glue-sparse eval``: ``lm_eval run`` with our tasks and models registered explicitly.

It also checks that every requested ``glue_sparse_*`` task has data *before* lm-eval builds the
model (lm-eval itself loads data only after the model), so a missing split fails in a second.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from glue_sparse_tasks import TASKS_DIR
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.glue_tasks import GLUE8, GLUE_TASKS
from glue_sparse_tasks.lm_eval_hook import activate
from glue_sparse_tasks.local_formats import GlueDataError
from glue_sparse_tasks.tasks.utils import data_source


def known_task_names() -> list[str]:
    """Every task and group name our YAML folder defines (read from the files, so never out of date)."""

    names = []
    for path in sorted(Path(TASKS_DIR).rglob("*.yaml")):
        for line in path.read_text().splitlines():
            if line.startswith(("task:", "group:")) and line.split(":", 1)[1].strip():
                names.append(line.split(":", 1)[1].strip())
    return list(dict.fromkeys(names))


def _option(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def requested_glue_tasks(tasks_arg: str | None) -> list[str]:
    """The glue_task names behind ``--tasks`` (the group expands to its eight members)."""
    out: list[str] = []
    known: list[str] | None = None  # read from the YAMLs once, and only if a name needs checking
    for name in (tasks_arg or "").split(","):
        name = name.strip()
        if name == "glue_sparse":
            out += GLUE8  # the group's members
        elif name.startswith("glue_sparse_"):
            known = known if known is not None else known_task_names()
            if name not in known:
                raise UserInputError(f"--tasks: unknown task {name!r}; our tasks are: {', '.join(known)}")
            glue_task = name[len("glue_sparse_"):]
            if glue_task in GLUE_TASKS or glue_task in ("mnli_matched", "mnli_mismatched"):
                out.append(glue_task)
    return list(dict.fromkeys(out))


def precheck_data(argv: list[str]) -> None:
    """Raise ``GlueDataError`` naming the task and every place looked if any data is missing."""

    metadata = _option(argv, "--metadata")
    data_dir = None
    if metadata:
        text = Path(metadata).read_text() if Path(metadata).is_file() else metadata
        try:
            meta = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserInputError(f"--metadata {metadata!r}: not valid JSON ({exc.msg} at character {exc.pos}); "
                                 "expected an object such as '{\"data_dir\": \"DIR\"}'") from None
        if not isinstance(meta, dict):
            raise UserInputError(f"--metadata {metadata!r}: expected a JSON object, got {type(meta).__name__}")
        data_dir = meta.get("data_dir")
    for glue_task in requested_glue_tasks(_option(argv, "--tasks", "-t")):
        task, split = data_source(glue_task)
        try:
            load_glue_rows(task, split, data_dir=data_dir)
        except GlueDataError as exc:
            raise GlueDataError(f"task glue_sparse_{glue_task}: {exc}") from None


def run_lm_eval(argv: list[str]) -> int:

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
