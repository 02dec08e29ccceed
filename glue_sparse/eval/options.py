"""What a ``glue-sparse eval`` command line asks for, read from lm-eval's own arguments (``--tasks``,
``--metadata``) without lm-eval: the GLUE tasks whose data must exist and the data folder to look in.
lm-eval parses the same arguments again; this reads only what the data check needs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from glue_sparse_tasks import TASKS_DIR
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.glue_tasks import GLUE8, GLUE_TASKS
from glue_sparse_tasks.tasks.utils import TEST_SOURCES


def known_task_names() -> list[str]:
    """Every task and group name our YAML folder defines (read from the files, so never out of date)."""
    names = []
    for path in sorted(Path(TASKS_DIR).rglob("*.yaml")):
        for line in path.read_text().splitlines():
            if line.startswith(("task:", "group:")) and line.split(":", 1)[1].strip():
                names.append(line.split(":", 1)[1].strip())
    return list(dict.fromkeys(names))


def argument_value(argv: list[str], *names: str) -> str | None:
    """The value of the first of ``names`` on the command line (``--name VALUE`` or ``--name=VALUE``)."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def requested_glue_tasks(tasks_arg: str | None) -> list[str]:
    """The glue_task names behind ``--tasks`` (a group expands to its members; a test variant keeps its
    ``_test`` suffix)."""
    out: list[str] = []
    known: list[str] | None = None  # read from the YAMLs once, and only if a name needs checking
    for name in (tasks_arg or "").split(","):
        name = name.strip()
        if name == "glue_sparse":
            out += GLUE8  # the group's members
        elif name == "glue_sparse_test":
            out += [f"{task}_test" for task in TEST_SOURCES]
        elif name.startswith("glue_sparse_"):
            known = known if known is not None else known_task_names()
            if name not in known:
                raise UserInputError(f"--tasks: unknown task {name!r}; our tasks are: {', '.join(known)}")
            glue_task = name[len("glue_sparse_"):]
            if (glue_task in GLUE_TASKS or glue_task in ("mnli_matched", "mnli_mismatched")
                    or glue_task.removesuffix("_test") in TEST_SOURCES):
                out.append(glue_task)
    return list(dict.fromkeys(out))


def metadata_data_dir(metadata: str | None) -> str | None:
    """``data_dir`` of ``--metadata`` (a JSON object, or a file holding one); None when not given."""
    if not metadata:
        return None
    text = Path(metadata).read_text() if Path(metadata).is_file() else metadata
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserInputError(f"--metadata {metadata!r}: not valid JSON ({exc.msg} at character {exc.pos}); "
                             "expected an object such as '{\"data_dir\": \"DIR\"}'") from None
    if not isinstance(meta, dict):
        raise UserInputError(f"--metadata {metadata!r}: expected a JSON object, got {type(meta).__name__}")
    return meta.get("data_dir")


@dataclass(frozen=True)
class EvalRequest:
    """The GLUE tasks an lm-eval command line evaluates and where their data is looked for."""

    glue_tasks: tuple[str, ...]
    data_dir: str | None

    @classmethod
    def from_argv(cls, argv: list[str]) -> EvalRequest:
        return cls(tuple(requested_glue_tasks(argument_value(argv, "--tasks", "-t"))),
                   metadata_data_dir(argument_value(argv, "--metadata")))
