"""Trainer callbacks of ``glue-sparse pretrain``: the validation curve and the one progress bar."""

from __future__ import annotations

import time
from typing import Any, Sequence

from tqdm.auto import tqdm
from transformers import TrainerCallback

from glue_sparse.perplexity.protocols import packed_perplexity
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
        self.sizes: dict[str, int] | None = None  # the dense counts: fixed for the whole run

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
        self.sizes = self.sizes or parameter_sizes(model)
        tokens = step * self.tokens_per_step
        # N of the 6·N·T training-FLOPs estimate (Kaplan et al.; the attention n_ctx term left out): every dense
        # weight but the input embedding, whose lookup is no matmul. Gates do not cut training compute: a gated
        # twin trains the full matrices, so it is counted as its dense twin.
        flop_parameters = self.sizes["total"] - self.sizes["input_embedding"]
        point = {"step": step, "tokens": tokens, "train_flops": 6 * flop_parameters * tokens,
                 "val_perplexity": result.perplexity, "val_nll": result.mean_nll}
        if sparse_gates_tuner(model) is not None:
            accounting = gate_accounting(model, self.sizes)
            point.update({key: accounting[key] for key in CURVE_ACCOUNTING})
        return point


#: what each curve point records of ``gate_accounting``
CURVE_ACCOUNTING = ("closed_share_of_gated", "removed_share_of_gated", "removed_share_of_nonembedding",
                    "removed_share_of_total", "removed_parameters")


def parameter_sizes(model: Any) -> dict[str, int]:
    """Dense parameter counts: all, the input embedding, both embedding matrices (input and untied
    output), and the rest (non-embedding)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    input_embedding = base.get_input_embeddings().weight
    embeddings = input_embedding.numel()
    head = base.get_output_embeddings()
    if head is not None and head.weight.data_ptr() != input_embedding.data_ptr():
        embeddings += head.weight.numel()
    total = sum(p.numel() for n, p in base.named_parameters() if "sparse_gates_" not in n)
    return {"total": total, "input_embedding": input_embedding.numel(), "embeddings": embeddings,
            "nonembedding": total - embeddings}


def gate_accounting(model: Any, sizes: dict[str, int]) -> dict[str, Any]:
    """``parameter_accounting`` of a gated model, plus the removed share of its non-embedding parameters."""
    accounting = parameter_accounting(model).to_dict()
    accounting["removed_share_of_nonembedding"] = accounting["removed_parameters"] / sizes["nonembedding"]
    return accounting


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
