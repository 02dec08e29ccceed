"""Trainer callbacks of ``glue-sparse pretrain``: the validation curve and the one progress bar."""

from __future__ import annotations

import time
from typing import Any, Sequence

from tqdm.auto import tqdm
from transformers import TrainerCallback

from glue_sparse.experiments.perplexity import packed_perplexity
from sparse_models.accounting import parameter_accounting
from sparse_models.trainer import QuietProgressCallback, sparse_gates_tuner


class ValidationCallback(TrainerCallback):
    """Validation perplexity (``packed`` protocol, exact token budget, gates deterministic) every
    ``every`` steps and at the last. Each point goes into ``state.log_history``, which the Trainer saves
    with every checkpoint and restores on resume: the curve of a resumed run is the uninterrupted one's.
    Evaluation draws no random numbers, so it does not move the training run either."""

    def __init__(self, texts: Sequence[str], tokenizer: Any, seqlen: int, tokens: int, batch_size: int, every: int,
                 tokens_per_step: int) -> None:
        self.texts, self.tokenizer, self.seqlen, self.tokens = list(texts), tokenizer, seqlen, tokens
        self.batch_size, self.every, self.tokens_per_step = batch_size, every, tokens_per_step
        self.last: dict[str, Any] | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        points = [e for e in state.log_history if "val_perplexity" in e]
        self.last = points[-1] if points else None

    def on_step_end(self, args, state, control, model=None, **kwargs):
        step = state.global_step
        if step % self.every and step != state.max_steps:
            return
        point = self.evaluate(model, step)
        state.log_history.append(point)
        self.last = point

    def evaluate(self, model: Any, step: int) -> dict[str, Any]:
        was_training = model.training
        model.eval()
        result = packed_perplexity(model, self.tokenizer, self.texts, self.seqlen, self.tokens, self.batch_size,
                                   device=str(next(model.parameters()).device))
        model.train(was_training)
        tokens = step * self.tokens_per_step
        point = {"step": step, "tokens": tokens, "train_flops": 6 * _flop_parameters(model) * tokens,
                 "val_perplexity": result.perplexity, "val_nll": result.mean_nll}
        if sparse_gates_tuner(model) is not None:
            accounting = parameter_accounting(model)
            point.update(closed_share_of_gated=accounting.closed_share_of_gated,
                         removed_share_of_gated=accounting.removed_share_of_gated,
                         removed_share_of_nonembedding=accounting.removed_parameters
                         / parameter_sizes(model)["nonembedding"],
                         removed_share_of_total=accounting.removed_share_of_total,
                         removed_parameters=accounting.removed_parameters)
        return point


def _flop_parameters(model: Any) -> int:
    """N of the 6·N·T training-FLOPs estimate (Kaplan et al.; the attention n_ctx term left out): every
    dense weight but the input embedding, whose lookup is no matmul. Gates do not cut training compute:
    a gated twin trains the full matrices, so it is counted as its dense twin."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    embedding = base.get_input_embeddings().weight
    return sum(p.numel() for n, p in base.named_parameters() if "sparse_gates_" not in n and p is not embedding)


def parameter_sizes(model: Any) -> dict[str, int]:
    """Dense parameter counts: all, the two embedding matrices (input and untied output), the rest."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    embeddings = base.get_input_embeddings().weight.numel()
    head = base.get_output_embeddings()
    if head is not None and head.weight.data_ptr() != base.get_input_embeddings().weight.data_ptr():
        embeddings += head.weight.numel()
    total = sum(p.numel() for n, p in base.named_parameters() if "sparse_gates_" not in n)
    return {"total": total, "embeddings": embeddings, "nonembedding": total - embeddings}


class PretrainProgressCallback(QuietProgressCallback):
    """One bar of optimiser steps with the training loss, tokens/s and the latest validation perplexity."""

    def __init__(self, tokens_per_step: int, validation: ValidationCallback) -> None:
        super().__init__()
        self.tokens_per_step, self.validation = tokens_per_step, validation
        self.postfix: dict[str, str] = {}

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.training_bar = tqdm(total=state.max_steps, initial=state.global_step, unit="step",
                                     dynamic_ncols=True, disable=False)
        self.current_step, self.first_step, self.started = state.global_step, state.global_step, time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or self.training_bar is None:
            return
        self.training_bar.update(state.global_step - self.current_step)
        self.current_step = state.global_step
        elapsed = time.perf_counter() - self.started
        tokens = (state.global_step - self.first_step) * self.tokens_per_step
        self.postfix["tok/s"] = f"{tokens / max(elapsed, 1e-9):.0f}"
        if self.validation.last is not None:
            self.postfix["val_ppl"] = f"{self.validation.last['val_perplexity']:.2f}"
        self.training_bar.set_postfix(self.postfix, refresh=False)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs and "loss" in logs:
            self.postfix["loss"] = f"{logs['loss']:.4g}"
            self.training_bar.set_postfix(self.postfix, refresh=False)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None:
            self.training_bar.close()
            self.training_bar = None
