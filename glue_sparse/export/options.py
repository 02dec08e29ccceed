"""``glue-sparse export``'s options: which run, tasks and variant to export, and where."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.common.option_fields import option, required

#: what of a task's run folder is exported: the checkpoint the run kept (an adapter merged into a plain
#: model), or its physically pruned model (``pruned/``, with its code)
VARIANTS = ("checkpoint", "pruned")


@dataclass(kw_only=True)
class ExportOptions:
    """One run's tasks as Hub-ready folders (each field is a flag of ``glue-sparse export``)."""

    run: str = required("a fine-tuning run folder (one <task>/ per task, as finetune and bench write them) or one "
                        "task's folder")
    output: str = required("folder to write, one Hub-ready <task>/ folder inside per exported task")
    task: str | None = option(None, "comma-separated tasks to export (default: every task the run holds)")
    variant: str = option("checkpoint", "checkpoint (the model the run kept; an adapter is merged into a plain "
                                        "model) or pruned (its physically pruned model, with its code)")
    data_dir: str | None = option(None, "local GLUE folder, for timing a model the run did not time (else "
                                        "$GLUE_SPARSE_DATA_DIR, then the Hub)")
    latency_docs: int = option(256, "validation documents timed where the run recorded no latency (0: none)")
