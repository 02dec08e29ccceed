"""A mask-search run's one stage in place of training: the seeded sample of training examples, the
search and mask tuning on the gated full fine-tune, its gates closed, and run.json's time and memory
fields as a training run reports them (the search is what this method costs)."""

from __future__ import annotations

from typing import Any

from glue_sparse.common.run_environment import measured_stage
from glue_sparse.finetune.options import MASK_SEARCH_EXAMPLES, FinetuneConfig, FinetuneConfigError
from sparse_models.mask_search import LAYOUTS, close_units, mask_search

#: what the model reads of a tokenised example (the labels feed the Fisher's loss)
BATCH_COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "labels")


def check_architecture(config: FinetuneConfig, base: str) -> None:
    """Refuse, before anything trains, a base model whose heads and channels the search does not know."""
    from transformers import AutoConfig

    model_type = AutoConfig.from_pretrained(base).model_type
    if model_type not in LAYOUTS:
        raise FinetuneConfigError(f"--method mask-search prunes heads and FFN channels of {', '.join(LAYOUTS)} "
                                  f"encoders; {config.base_model or base} is a {model_type!r} model")


def search_batches(trainer: Any, config: FinetuneConfig, hp: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's seeded sample of ``mask_search_examples`` training rows, collated in training batches."""
    data = trainer.train_dataset.shuffle(seed=config.seed)
    data = data.select(range(min(len(data), hp["mask_search_examples"] or MASK_SEARCH_EXAMPLES)))
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
