"""A fine-tuned classifier's CPU latency against its pruned model, on the first validation documents of its
task: what the bench times for every cell and ``glue-sparse export`` for a run the bench did not time."""

from __future__ import annotations

import copy
import statistics
from pathlib import Path
from typing import Any

from glue_sparse.common.run_environment import git_state, machine_description
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.glue_tasks import GLUE_TASKS, evaluation_split
from sparse_models.accounting import parameter_accounting
from sparse_models.checkpoints import PRUNED_SUBDIR, describe_checkpoint, load_classifier
from sparse_models.runtime.timing import mean_length, paired_speedup, time_rounds
from sparse_models.trainer import sparse_gates_tuner


def checkpoint_latency(task_dir: Path, task: str, data_dir: str | None, use_hub: bool = True, docs: int = 256,
                       batch_size: int = 32, rounds: int = 3, max_length: int = 128) -> dict[str, Any]:
    """CPU ms per batch on the first ``docs`` validation docs (``max_length`` tokens at most): the dense
    architecture, and the pruned model.

    A gates adapter is pruned here, on the machine that times it (the layout is chosen by timing on
    this machine for the timed batches' token count, see ``layout_costs``); other runs time the pruned
    model they saved. The entry records what the timed model closed and physically removed."""
    import torch
    from transformers import AutoModelForSequenceClassification

    ckpt = describe_checkpoint(task_dir)
    model, tokenizer = load_classifier(ckpt, torch.float32, "cpu")
    split = evaluation_split(task)
    rows, _ = load_glue_rows(task, split, data_dir, limit=docs, use_hub=use_hub)
    fields = GLUE_TASKS[task].text_fields
    bs = batch_size
    batches = [dict(tokenizer(*[[r[f] for r in rows[i:i + bs]] for f in fields], padding=True, truncation=True,
                              max_length=max_length, return_tensors="pt"))
               for i in range(0, len(rows), bs)]
    # the layout is chosen for the token count of the batches it is timed on, as a user would prune for theirs
    layout_tokens = round(statistics.mean(b["input_ids"].numel() for b in batches))
    layout_length = mean_length(batches)
    pruned = None
    if ckpt.kind == "adapter":
        if sparse_gates_tuner(model):
            pruned = copy.deepcopy(model).merge_and_unload(layout_tokens=layout_tokens, layout_length=layout_length)
            model = model.merge_and_unload(prune=False)
        else:
            model = model.merge_and_unload()
    if pruned is None and (task_dir / PRUNED_SUBDIR).is_dir():
        pruned = AutoModelForSequenceClassification.from_pretrained(task_dir / PRUNED_SUBDIR)
    models = [model.eval()] + ([pruned.eval()] if pruned is not None else [])
    samples = time_rounds(models, batches, rounds)
    out = {"docs": len(rows), "batch_size": bs, "batches": len(batches), "threads": torch.get_num_threads(),
           "machine": machine_description(), "dense_ms_per_batch": 1000 * statistics.median(samples[0]) / len(batches),
           "git": git_state()}
    if pruned is not None:
        accounting = parameter_accounting(pruned)
        speedup = paired_speedup(samples[0], samples[1])
        out["pruned_ms_per_batch"] = 1000 * statistics.median(samples[1]) / len(batches)
        out["latency_ratio"] = speedup.median
        out["latency_ratio_range"] = [speedup.low, speedup.high]
        out["closed_share_of_gated"] = accounting.closed_share_of_gated
        out["removed_share_of_gated"] = accounting.removed_share_of_gated
        if ckpt.kind == "adapter":  # pruned here: record the token count its layout was chosen for
            out["layout_tokens"] = layout_tokens
    return out
