"""Dense vs physically pruned CPU forward latency, beside the FLOP ratio of the same batches.

Both sides run in one process on the same batches, interleaved round by round so machine noise hits
them alike; each side's time is the median over rounds after a warm-up round that is discarded.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import torch
from torch import nn

from .accounting import parameter_accounting
from .pruned_linear import PrunedLinear

__all__ = ["SpeedRow", "set_random_gate_pattern", "calibrate_closed_fraction", "forward_flops",
           "time_forwards", "compare_dense_pruned"]


@dataclass
class SpeedRow:
    level: str
    removed_share_of_gated: float
    removed_share_of_total: float
    batch_size: int
    batches: int
    tokens: int
    dense_ms: float
    pruned_ms: float
    latency_ratio: float
    flop_ratio: float

    @property
    def share_of_flop_speedup(self) -> float:
        """latency ratio / FLOP ratio: 1.0 means the pruned model is as fast as its FLOPs promise."""
        return self.latency_ratio / self.flop_ratio

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "share_of_flop_speedup": self.share_of_flop_speedup}


def set_random_gate_pattern(peft_model: nn.Module, closed_fraction: float, seed: int = 0) -> None:
    """Close a random ``closed_fraction`` of every gated layer's rows and of its columns (rest open)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in peft_model.base_model.gated_layers().values():
            for logits in (layer.sparse_gates_row["default"], layer.sparse_gates_col["default"]):
                closed = torch.rand(logits.shape, generator=generator) < closed_fraction
                logits.copy_(torch.where(closed, torch.full_like(logits, -3.0), torch.full_like(logits, 3.0)))


def calibrate_closed_fraction(peft_model: nn.Module, removed_share: float, seed: int = 0) -> float:
    """The closed row/column fraction whose random pattern removes ``removed_share`` of gated weights."""
    low, high = 0.0, 1.0
    for _ in range(20):
        mid = (low + high) / 2
        set_random_gate_pattern(peft_model, mid, seed)
        if parameter_accounting(peft_model).removed_share_of_gated < removed_share:
            low = mid
        else:
            high = mid
    set_random_gate_pattern(peft_model, (low + high) / 2, seed)
    return (low + high) / 2


def forward_flops(model: nn.Module, batch_size: int, seq_len: int) -> int:
    """Multiply-add FLOPs of the encoder's linear layers plus attention scores and mixing."""
    tokens = batch_size * seq_len
    flops = 0
    for module in model.modules():
        if isinstance(module, PrunedLinear):
            flops += 2 * tokens * module.weight.shape[0] * module.weight.shape[1]
        elif isinstance(module, nn.Linear):
            flops += 2 * tokens * module.in_features * module.out_features
    config = model.config.inner_config() if hasattr(model.config, "inner_config") else model.config
    flops += config.num_hidden_layers * 4 * batch_size * seq_len * seq_len * config.hidden_size
    return flops


@torch.inference_mode()
def time_forwards(models: Sequence[nn.Module], batches: Sequence[dict], rounds: int) -> list[float]:
    """Median seconds per pass over ``batches`` for each model, rounds interleaved, first round dropped."""
    samples: list[list[float]] = [[] for _ in models]
    for round_index in range(rounds + 1):
        for i, model in enumerate(models):
            start = time.perf_counter()
            for batch in batches:
                model(**batch)
            if round_index:
                samples[i].append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


def compare_dense_pruned(
    dense: nn.Module,
    pruned: nn.Module,
    batches: Sequence[dict],
    level: str,
    rounds: int = 5,
) -> SpeedRow:
    """One table row: latency and FLOP ratios of ``dense`` over ``pruned`` on the same batches."""
    acc = parameter_accounting(pruned)
    dense_s, pruned_s = time_forwards([dense.eval(), pruned.eval()], batches, rounds)
    shapes = [tuple(b["input_ids"].shape) for b in batches]
    dense_flops = sum(forward_flops(dense, b, l) for b, l in shapes)
    pruned_flops = sum(forward_flops(pruned, b, l) for b, l in shapes)
    return SpeedRow(
        level=level,
        removed_share_of_gated=acc.removed_share_of_gated,
        removed_share_of_total=acc.removed_share_of_total,
        batch_size=shapes[0][0],
        batches=len(batches),
        tokens=sum(b * l for b, l in shapes),
        dense_ms=1000 * dense_s / len(batches),
        pruned_ms=1000 * pruned_s / len(batches),
        latency_ratio=dense_s / pruned_s,
        flop_ratio=dense_flops / pruned_flops,
    )


def tokenized_batches(tokenizer: Any, texts: Iterable[str], batch_size: int, n_batches: int,
                      max_length: int = 128) -> list[dict]:
    """GLUE-like batches: consecutive texts, padded to the longest in each batch (dynamic length)."""
    texts = list(texts)[: batch_size * n_batches]
    return [
        dict(tokenizer(texts[i:i + batch_size], padding="longest", truncation=True, max_length=max_length,
                       return_tensors="pt"))
        for i in range(0, len(texts), batch_size)
    ]
