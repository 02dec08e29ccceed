"""The defaults table of docs/fine-tuning.md, rendered from the one source of every default
(``glue_sparse.finetune.options``); a test compares it with that page."""

from __future__ import annotations

from glue_sparse.finetune.options import (
    DEFAULT_LR,
    DEFAULT_TARGET_REMOVAL,
    DEFAULT_WEIGHT_DECAY,
    GATE_METHODS,
    GENERAL_TRAINING,
    LORA_DEFAULTS,
    MASK_SEARCH_EXAMPLES,
    METHODS,
    RECIPE_TRAINING,
    TrainingOptions,
    removal_score_default,
)
from glue_sparse_tasks.data import LIMITED_TRAIN_ROWS

METHOD_NOTES = {
    "full": "every weight",
    "lora": "r {lora_r}, alpha {lora_alpha}, dropout {lora_dropout:g} on query/value (PEFT's BERT default), and the "
            "head (classifier and, `--train_pooler`, BERT's pooler)",
    "gates": "head (as LoRA's) and gated biases; recipe `removal`: remove `--target-removal` ({target_removal:g}) "
             "of gated weights, exactly, closing the gates ranked lowest by `{ranking}`",
    "gates+lora": "gates as above (ranked by `{ranking}`) plus LoRA r {lora_r}, alpha {lora_alpha} inside every gated "
                  "layer",
    "gates+full": "gates as above, ranked by `{ranking}`, while every weight fine-tunes (structured pruning during "
                  "full fine-tuning)",
    "magnitude": "structured magnitude pruning of a full fine-tune at `--target-removal`, then every weight "
                 "re-fine-tuned with the masks held",
    "mask-search": "nothing (post-training): heads and FFN channels of a full fine-tune removed at `--target-removal` "
                   "by the Fisher of their masks, the kept masks tuned by least squares on "
                   f"{MASK_SEARCH_EXAMPLES} training examples (Kwon et al. 2022)",
}


def _ranking(method: str) -> str | None:
    return removal_score_default(method) if method in GATE_METHODS else None


def defaults_markdown() -> str:
    """The defaults table of docs/fine-tuning.md, rendered from the one source (this module)."""
    notes = {**LORA_DEFAULTS, "target_removal": DEFAULT_TARGET_REMOVAL}
    general = TrainingOptions()
    lines = ["| method | learning rate | weight decay | trains |", "|---|---|---|---|"]
    lines += [f"| {m} | {DEFAULT_LR[m]:g} | {DEFAULT_WEIGHT_DECAY[m]:g} | "
              f"{METHOD_NOTES[m].format(**notes, ranking=_ranking(m))} |" for m in METHODS]
    lines += ["", f"All methods: batch {GENERAL_TRAINING['batch_size']}, {general.epochs:g} epochs, max length "
              f"{general.max_length}, {GENERAL_TRAINING['lr_scheduler']} schedule with "
              f"{GENERAL_TRAINING['warmup_ratio']:.0%} warm-up, gradient clipping "
              f"{GENERAL_TRAINING['max_grad_norm']:g}, "
              f"evaluation every epoch, model selection `{general.model_selection}`; the limited regime keeps the "
              f"first {LIMITED_TRAIN_ROWS:,} training rows. The `reference` gate recipe: batch "
              f"{RECIPE_TRAINING['reference']['batch_size']}, lr {RECIPE_TRAINING['reference']['learning_rate']:g}, "
              f"{RECIPE_TRAINING['reference']['lr_scheduler']} schedule, no warm-up, no clipping."]
    return "\n".join(lines)
