"""A mask-search run's one stage in place of training: the seeded sample of training examples, the
search and mask tuning on the gated full fine-tune, its gates closed, and run.json's time and memory
fields as a training run reports them (the search is what this method costs). Also the start of a gate
method with ``--start-from mask-search``: the same search, its units' gates closed softly before training."""

from __future__ import annotations

from typing import Any

from glue_sparse.common.run_environment import measured_stage
from glue_sparse.finetune.options import MASK_SEARCH_EXAMPLES, FinetuneConfig, FinetuneConfigError
from sparse_models.architectures import ENCODER_LAYOUTS
from sparse_models.mask_search import close_units, mask_search, unit_gates
from sparse_models.removal import gate_logits
from sparse_models.gates import eval_gate_values

#: what the model reads of a tokenised example (the labels feed the Fisher's loss)
BATCH_COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "labels")
#: the mask a ``--start-from mask-search`` run started from, in its run folder (read again by a resumed run)
START_MASK_FILE = "start_mask.json"


def check_architecture(config: FinetuneConfig, base: str) -> None:
    """Refuse, before anything trains, a base model whose heads and channels the search does not know."""
    from transformers import AutoConfig

    model_type = AutoConfig.from_pretrained(base).model_type
    if model_type not in ENCODER_LAYOUTS:
        raise FinetuneConfigError(f"mask search prunes heads and FFN channels of {', '.join(ENCODER_LAYOUTS)} "
                                  f"encoders; {config.base_model or base} is a {model_type!r} model")


def search_batches(trainer: Any, config: FinetuneConfig, hp: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's seeded sample of ``mask_search_examples`` training rows, collated in training batches."""
    data = trainer.train_dataset.shuffle(seed=config.seed)
    data = data.select(range(min(len(data), hp.get("mask_search_examples") or MASK_SEARCH_EXAMPLES)))
    columns = [c for c in BATCH_COLUMNS if c in data.column_names]
    size = hp["batch_size"]
    device = trainer.args.device
    return [{k: v.to(device) for k, v in trainer.data_collator(
        [{c: row[c] for c in columns} for row in data.select(range(start, min(start + size, len(data))))]).items()}
        for start in range(0, len(data), size)]


def search_and_measure(trainer: Any, config: FinetuneConfig, hp: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    """Search and tune the masks of ``trainer.model`` and close its removed units' gates; (run.json's time
    and memory fields, the search's own record)."""
    with measured_stage(trainer.args.device) as measured:
        batches = search_batches(trainer, config, hp)
        result = mask_search(trainer.model, batches, hp["target_removal"])
        close_units(trainer.model, result)
    measured.update({"train_runtime_reported": None, "steps_this_process": 0, "eval_seconds_during_training": 0.0,
                     "seconds_per_step": None, "resumed_from_step": None})
    return measured, {"examples": sum(len(b["input_ids"]) for b in batches), **result.to_dict()}


def start_closed(trainer: Any, config: FinetuneConfig, hp: dict[str, Any]) -> dict[str, Any]:
    """Close the gates of the heads and FFN channels that mask search chooses to remove from the run's
    starting weights (the full fine-tune, every gate open), on the same seeded sample a mask-search run of
    this task and seed reads, so both remove the same units. The gates close *softly*: their logits go to
    minus the open gates' initial logit, just inside the closed side of the clamp, so the model starts as
    that pruned model (without the mask tuning) while the task gradient can still reopen a unit; the
    removal schedule then ranks every gate as usual. The weights are not changed. Returns the mask, for
    run.json."""
    gates = trainer.gates_config()
    batches = search_batches(trainer, config, hp)
    result = mask_search(trainer.model, batches, hp["target_removal"], apply=False)
    close_units(trainer.model, result, closed=-gates.init_mean, opened=None)
    return {"examples": sum(len(b["input_ids"]) for b in batches), "heads": result.heads, "channels": result.channels,
            "removed_share": result.removed_share, "closed_logit": -gates.init_mean,
            "seconds": result.seconds}


def start_mask_outcome(start: dict[str, Any], model: Any) -> dict[str, Any]:
    """The start mask beside the trained gates: how many of its gates ended closed, and how many of the
    closed gates it had chosen (1.0 and 1.0: training kept the searched mask exactly)."""
    final = {key: eval_gate_values(p.detach()) == 0 for key, p in gate_logits(model).items()}
    chosen = {key: idx for key, idx in unit_gates(model, start["heads"], start["channels"]).items()}
    started = sum(len(idx) for idx in chosen.values())
    kept = sum(int(final[key][idx.to(final[key].device)].sum()) for key, idx in chosen.items())
    closed = sum(int(v.sum()) for v in final.values())
    return {**{k: start[k] for k in ("heads", "channels", "removed_share", "examples", "closed_logit")},
            "start_gates_still_closed": kept / started if started else None,
            "closed_gates_from_start": kept / closed if closed else None}
