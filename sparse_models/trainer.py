"""The transformers ``Trainer`` with the sparse-gate regulariser added to the task loss, and GLUE metrics.

Everything else (accelerate/torchrun multi-GPU, bf16/fp16, gradient accumulation, TensorBoard/W&B,
checkpoint resume, length-grouped sampling) is the Trainer's own.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from transformers import Trainer

from glue_sparse_tasks import scoring


def sparse_gates_tuner(model: torch.nn.Module) -> Any | None:
    """The ``SparseGatesModel`` inside a (possibly accelerate-wrapped) PEFT model, else None."""
    from .sparse_gates import SparseGatesModel

    model = getattr(model, "module", model)  # DDP / accelerate wrappers
    base = getattr(model, "base_model", None)
    return base if isinstance(base, SparseGatesModel) else None


class SparseGatesTrainer(Trainer):
    """Adds ``lambda * sparsity penalty`` to the loss in training steps; logs it beside the loss."""

    def __init__(self, *args: Any, gate_learning_rate: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate_learning_rate = gate_learning_rate
        self._sparsity_sum = 0.0
        self._sparsity_count = 0

    def create_optimizer(self, *args: Any, **kwargs: Any):
        """The Trainer's optimizer, with the gate logits in their own group when they get their own lr."""
        optimizer = super().create_optimizer(*args, **kwargs)
        if self.gate_learning_rate is None or getattr(optimizer, "_gate_group", False):
            return optimizer
        gate_ids = {id(p) for n, p in self.model.named_parameters() if "sparse_gates_" in n and p.requires_grad}
        gate_params = []
        for group in optimizer.param_groups:
            gate_params += [p for p in group["params"] if id(p) in gate_ids]
            group["params"] = [p for p in group["params"] if id(p) not in gate_ids]
        if gate_params:
            optimizer.add_param_group({"params": gate_params, "lr": self.gate_learning_rate, "weight_decay": 0.0})
        optimizer._gate_group = True
        return optimizer

    def compute_loss(self, model, inputs, return_outputs: bool = False, num_items_in_batch=None):
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True,
                                             num_items_in_batch=num_items_in_batch)
        tuner = sparse_gates_tuner(model)
        if tuner is not None and model.training:
            penalty = tuner.sparsity_loss()
            loss = loss + penalty.to(loss.dtype)
            self._sparsity_sum += float(penalty.detach())
            self._sparsity_count += 1
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if self._sparsity_count and "loss" in logs:
            logs["sparsity_loss"] = self._sparsity_sum / self._sparsity_count
            self._sparsity_sum, self._sparsity_count = 0.0, 0
            tuner = sparse_gates_tuner(self.model)
            if tuner is not None:
                from .accounting import parameter_accounting

                acc = parameter_accounting(self.model)
                logs["removed_share_of_gated"] = acc.removed_share_of_gated
        super().log(logs, *args, **kwargs)


def glue_compute_metrics(task: str) -> Callable[[Any], dict[str, float]]:
    """``compute_metrics`` for the Trainer: the shared scoring module on argmax (or regressed) outputs."""

    def compute(eval_pred: Any) -> dict[str, float]:
        logits, labels = eval_pred.predictions, eval_pred.label_ids
        logits = logits[0] if isinstance(logits, tuple) else logits
        if task == "stsb":
            preds = np.asarray(logits).reshape(-1).astype(float).tolist()
        else:
            preds = np.asarray(logits).argmax(-1).tolist()
        return scoring.task_metrics(task, preds, np.asarray(labels).reshape(-1).tolist())

    return compute
