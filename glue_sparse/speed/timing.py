"""What one comparison of dense and pruned models measures: random closed patterns at a removed share,
FLOPs and index work, the timed passes (``sparse_models.runtime.timing``), the ideal speed-up, and one
``SpeedRow`` per layout. ``glue-sparse speed`` (``run.py``) runs it over shares and batch sizes."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import torch
from torch import nn

from glue_sparse_tasks.method_defaults import DEFAULT_ALIGN
from sparse_models.accounting import parameter_accounting
from sparse_models.pruned.pruned_linear import PrunedLinear
from sparse_models.runtime.timing import interleaved_rounds, paired_speedup, time_rounds


@dataclass
class SpeedRow:
    level: str
    removed_share_of_gated: float  # physically removed (what the layout took out of the matrices)
    removed_share_of_total: float
    batch_size: int
    batches: int
    tokens: int
    dense_ms: float
    pruned_ms: float
    latency_ratio: float  # median over rounds of the per-round dense / pruned time (``paired_speedup``)
    flop_ratio: float
    ideal_ms: float | None = None  # same shapes, no index work (see ``ideal_seconds``)
    closed_share_of_gated: float | None = None  # closed by the gates (removed or kept as folded zeros)
    layout: str = "auto"
    latency_ratio_low: float | None = None  # slowest and fastest round of the paired ratio (``Speedup``)
    latency_ratio_high: float | None = None
    index_ops: int | None = None  # gathers plus scatters the pruned model runs per forward (``index_work``)
    heads_narrowed: bool | None = None  # attention laid out per head at reduced head sizes

    @property
    def share_of_ideal(self) -> float | None:
        """pruned speed-up / ideal speed-up: 1.0 means no index overhead left."""
        return self.latency_ratio * self.ideal_ms / self.dense_ms if self.ideal_ms else None

    @property
    def share_of_flop_speedup(self) -> float:
        """latency ratio / FLOP ratio: 1.0 means the pruned model is as fast as its FLOPs promise."""
        return self.latency_ratio / self.flop_ratio

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "share_of_flop_speedup": self.share_of_flop_speedup,
                "share_of_ideal": self.share_of_ideal}


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


def index_work(model: nn.Module) -> tuple[int, bool]:
    """What a pruned model pays beyond its matrices: the number of gathers and scatters per forward, and
    whether its attention runs narrowed per head. It shows which candidate ``auto`` built."""
    ops = sum(int(m.gather_in) + int(m.scatter_out) for m in model.modules() if isinstance(m, PrunedLinear))
    return ops, bool(getattr(model.config, "attention_head_sizes", None))


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
def _linear_seconds(shape_sets: Sequence[Sequence[tuple[int, int, int]]], rounds: int,
                    device: torch.device = torch.device("cpu"), dtype: torch.dtype = torch.float32) -> list[float]:
    """Median seconds of one pass of plain, contiguous ``F.linear`` calls of (tokens, in) x (out, in), for
    each set of shapes (all sets list the same matrices, at different widths), on the pruned model's device
    and dtype; like ``time_rounds`` the sets take turns call by call, in reversed order every other round."""
    generator = torch.Generator().manual_seed(0)

    def tensor(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)

    steps = [[(lambda x=tensor(t, i), w=tensor(o, i), b=torch.zeros(o, device=device, dtype=dtype):
               nn.functional.linear(x, w, b)) for t, i, o in shapes] for shapes in shape_sets]
    return [statistics.median(s) for s in interleaved_rounds(steps, rounds, [device])]


def ideal_seconds(dense: nn.Module, pruned: nn.Module, batches: Sequence[dict], dense_seconds: float,
                  rounds: int, align: int = DEFAULT_ALIGN) -> float:
    """The limit pruning can reach: the dense forward with every pruned matrix's time replaced by that of
    the same matrix shrunk to its open rows and columns (everything the gates closed gone, whatever the
    layout kept), fed contiguous inputs (no gather, no scatter). The shrunk matrices are timed twice,
    at their exact open counts and at those counts rounded up to ``align`` (odd widths can hit slow
    kernels), and the faster set counts, so the ideal is not understated by a kernel cliff. All matrix
    timings run here, interleaved, on the token counts of ``batches``, so they share the machine state."""
    records = pruned.config.pruned_modules
    kept = {name: (r.get("alive_out", r["kept_out"]), r.get("alive_in", r["kept_in"])) for name, r in records.items()}

    def rounded(n: int, full: int) -> int:
        return min(full, -(-n // align) * align) if n else 0

    full, exact, aligned = [], [], []
    for name, module in dense.named_modules():
        match = next((k for k in kept if k == name or k.endswith("." + name) or name.endswith("." + k)), None)
        if match is None or not isinstance(module, nn.Linear):
            continue
        alive_out, alive_in = kept[match]
        for batch in batches:
            tokens = batch["input_ids"].numel()
            full.append((tokens, module.in_features, module.out_features))
            exact.append((tokens, alive_in, alive_out))
            aligned.append((tokens, rounded(alive_in, module.in_features), rounded(alive_out, module.out_features)))
    weight = next(pruned.parameters())
    full_s, exact_s, aligned_s = _linear_seconds([full, exact, aligned], rounds, weight.device, weight.dtype)
    return dense_seconds - full_s + min(exact_s, aligned_s)


def compare_layouts(
    dense: nn.Module,
    pruned: dict[str, nn.Module],
    batches: Sequence[dict],
    level: str,
    rounds: int = 5,
    align: int = DEFAULT_ALIGN,
) -> list[SpeedRow]:
    """One table row per pruned model (keyed by layout): latency and FLOP ratios over ``dense`` on the
    same batches. Dense and every pruned model are timed round by round in one loop, and the latency
    ratio is paired per round (``paired_speedup``), so a change in the machine's state hits both sides
    of a ratio alike; the ideal is computed once (it depends only on what the gates closed)."""
    layouts = list(pruned)
    samples = time_rounds([dense.eval(), *(pruned[layout].eval() for layout in layouts)], batches, rounds)
    dense_s = statistics.median(samples[0])
    shapes = [tuple(b["input_ids"].shape) for b in batches]
    dense_flops = sum(forward_flops(dense, b, l) for b, l in shapes)
    ideal_s = ideal_seconds(dense, pruned[layouts[0]], batches, dense_s, rounds, align)
    rows = []
    for layout, pruned_samples in zip(layouts, samples[1:]):
        accounting = parameter_accounting(pruned[layout])
        speedup = paired_speedup(samples[0], pruned_samples)
        index_ops, heads_narrowed = index_work(pruned[layout])
        rows.append(SpeedRow(
            level=level,
            removed_share_of_gated=accounting.removed_share_of_gated,
            removed_share_of_total=accounting.removed_share_of_total,
            batch_size=shapes[0][0],
            batches=len(batches),
            tokens=sum(b * l for b, l in shapes),
            dense_ms=1000 * dense_s / len(batches),
            pruned_ms=1000 * statistics.median(pruned_samples) / len(batches),
            latency_ratio=speedup.median,
            flop_ratio=dense_flops / sum(forward_flops(pruned[layout], b, l) for b, l in shapes),
            ideal_ms=1000 * ideal_s / len(batches),
            closed_share_of_gated=accounting.closed_share_of_gated,
            layout=layout,
            latency_ratio_low=speedup.low,
            latency_ratio_high=speedup.high,
            index_ops=index_ops,
            heads_narrowed=heads_narrowed,
        ))
    return rows


