"""Gate post-training of a causal LM on the transformers ``Trainer``: only the unit gates train, the
removal schedule closes units by their accumulated Taylor importance, and the loss is either the plain
LM loss or distillation from the dense model (the same weights with the gates bypassed).

Checkpoints hold only what trains (the gate logits) and the importance sums beside the Trainer's own
optimiser, scheduler, RNG and step, so a resumed run takes the same path as an uninterrupted one.
Multi-GPU (torchrun/accelerate), bf16 and gradient accumulation are the Trainer's; importance sums are
added over ranks before each closing, so every rank closes the same units.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch.nn import functional as F
from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from sparse_models.removal import RemovalSchedule, all_ranks_importance
from sparse_models.trainer import refuse_sharded_training
from sparse_models.structured.unit_gates import (
    close_units,
    gate_plan,
    gates_disabled,
    track_unit_importance,
    unit_gated_modules,
    unit_importance,
)
from sparse_models.structured.units import LayerUnits

__all__ = ["OBJECTIVES", "UnitGatesTrainer", "distillation_loss", "last_checkpoint", "GATES_FILE", "IMPORTANCE_FILE"]

OBJECTIVES = ("lm", "distill")
GATES_FILE = "unit_gates.safetensors"
IMPORTANCE_FILE = "unit_importance.safetensors"


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                      mask: torch.Tensor | None = None) -> torch.Tensor:
    """Token-mean KL(teacher || student) of the next-token distributions."""
    vocab = student_logits.shape[-1]
    student = F.log_softmax(student_logits.float().reshape(-1, vocab), dim=-1)
    teacher = F.log_softmax(teacher_logits.float().reshape(-1, vocab), dim=-1)
    per_token = F.kl_div(student, teacher, log_target=True, reduction="none").sum(-1)
    if mask is None:
        return per_token.mean()
    mask = mask.reshape(-1).to(per_token)
    return (per_token * mask).sum() / mask.sum().clamp_min(1)


class _RemovalCallback(TrainerCallback):
    """Closes units along the cubic ramp at the schedule's event steps; the last one snaps the rest open."""

    def __init__(self, trainer: "UnitGatesTrainer") -> None:
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        trainer = self.trainer
        trainer.schedule = RemovalSchedule(trainer.target_removal, state.max_steps, end=1.0)
        trainer.removed_share = gate_plan(trainer.model, trainer.layers).removed_share()  # a resumed run's state
        track_unit_importance(trainer.model, on=state.global_step < trainer.schedule.final_step)

    def on_step_end(self, args, state, control, **kwargs):
        trainer, step = self.trainer, state.global_step
        if step not in trainer.schedule.event_steps():
            return
        scores = unit_importance(trainer.model, trainer.layers)
        if scores is not None:
            flat = all_ranks_importance({f"{k}.{i}": t for k, ts in zip(("head", "channel"), scores)
                                         for i, t in enumerate(ts)})
            scores = ([flat[f"head.{i}"] for i in range(len(trainer.layers))],
                      [flat[f"channel.{i}"] for i in range(len(trainer.layers))])
        final = step >= trainer.schedule.final_step
        trainer.removed_share = close_units(trainer.model, trainer.layers, trainer.schedule.share_at(step), scores,
                                            snap_open=final)
        if final:
            track_unit_importance(trainer.model, on=False)


class UnitGatesTrainer(Trainer):
    """``Trainer`` for a model gated by ``add_unit_gates``: LM or distillation loss, the removal schedule,
    and gate-only checkpoints."""

    def __init__(self, *args: Any, layers: list[LayerUnits], target_removal: float, objective: str = "lm",
                 **kwargs: Any) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        super().__init__(*args, **kwargs)
        refuse_sharded_training(self)
        self.layers, self.target_removal, self.objective = layers, target_removal, objective
        self.removed_share = 0.0
        self.schedule: RemovalSchedule | None = None
        self.add_callback(_RemovalCallback(self))

    def compute_loss(self, model, inputs, return_outputs: bool = False, num_items_in_batch=None):
        if self.objective == "lm":
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        inputs = {k: v for k, v in inputs.items() if k != "labels"}
        with torch.no_grad(), gates_disabled(model):
            teacher = model(**inputs).logits
        outputs = model(**inputs)
        loss = distillation_loss(outputs.logits[:, :-1], teacher[:, :-1],
                                 None if "attention_mask" not in inputs else inputs["attention_mask"][:, 1:])
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if "loss" in logs:
            logs["removed_share_of_block_linears"] = self.removed_share
        super().log(logs, *args, **kwargs)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """A checkpoint keeps the gate logits and importance sums, not the frozen model's weights."""
        if not self.args.should_save:
            return
        folder = Path(output_dir or self.args.output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        gated = unit_gated_modules(self.accelerator.unwrap_model(self.model))
        save_file({n: m.unit_gate_logits.detach().cpu().contiguous() for n, m in gated.items()},
                  str(folder / GATES_FILE))
        importance = {n: m.importance.detach().cpu().contiguous() for n, m in gated.items() if m.importance is not None}
        if importance:
            save_file(importance, str(folder / IMPORTANCE_FILE))

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: torch.nn.Module | None = None) -> None:
        folder = Path(resume_from_checkpoint)
        gated = unit_gated_modules(self.accelerator.unwrap_model(model or self.model))
        logits = load_file(str(folder / GATES_FILE))
        importance = load_file(str(folder / IMPORTANCE_FILE)) if (folder / IMPORTANCE_FILE).is_file() else {}
        if set(logits) != set(gated):
            raise ValueError(f"{folder / GATES_FILE} gates other modules than this model")
        with torch.no_grad():
            for name, module in gated.items():
                module.unit_gate_logits.copy_(logits[name])
                module.importance = importance[name].to(module.unit_gate_logits.device) if name in importance else None


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete ``checkpoint-N`` folder (one holding the gates file), or None."""
    folders = [p for p in Path(output_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*") if (p / GATES_FILE).is_file()
               and (p / "trainer_state.json").is_file()]
    return str(max(folders, key=lambda p: int(p.name.rpartition("-")[2]))) if folders else None
