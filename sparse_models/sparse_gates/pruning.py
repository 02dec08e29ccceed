"""Pruning plans from evaluation gates, and physical removal of closed rows and columns.

``plan_pruning`` is the single place that decides what goes: parameter accounting and
``merge_and_unload`` both read its plan, so the reported removal is exactly what is removed.

A plan keeps two things apart: which rows and columns are *closed* (their gate is 0, or a chain makes
them dead: ``alive_out``/``alive_in``) and which are *physically removed* (``kept_out``/``kept_in``).
Removing a closed row or column costs nothing when the neighbour is narrowed with it (the FFN chain);
elsewhere it costs a gather from, or a scatter back into, a full-width tensor. ``with_layout`` decides,
per such side, whether to remove (pay the index work) or keep the closed weights as folded zeros (no
index work, same output): ``"remove"`` always removes, ``"keep"`` never pays index work, and a mapping
from module name to ``Side`` choices (see ``sparse_models.sparse_gates.layout_costs``) picks per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.pytorch_utils import Conv1D

from sparse_models.architectures import HEAD_NARROWING_TYPES, Chain, activation_name, chains_for  # noqa: F401
from sparse_models.pruned.modeling_sparse_pruned import set_attention_head_sizes, wrap_pruned
from sparse_models.modules import unwrap_gated_model
from sparse_models.pruned.modeling_sparse_pruned import replace_module
from sparse_models.pruned.pruned_linear import PrunedLinear
from sparse_models.pruned.residual_add import adds_into_residual
from sparse_models.sparse_gates.layer import SparseGatesLayer

__all__ = ["LAYOUTS", "ModulePlan", "PruningPlan", "Side", "plan_pruning", "prune_dense_model"]


#: Layout choices for one side of one layer whose removal needs index work.
REMOVE, KEEP = "remove", "keep"
#: Layouts chosen by timing: each layer alone (``per-layer``), then also the whole model (``auto``).
PER_LAYER, AUTO = "per-layer", "auto"
LAYOUTS = (REMOVE, KEEP, PER_LAYER, AUTO)


@dataclass(frozen=True)
class Side:
    """How one layer treats its closed inputs (``cols``) and outputs (``rows``): ``remove`` or ``keep``."""

    cols: str = REMOVE
    rows: str = REMOVE


@dataclass
class ModulePlan:
    """What one linear layer keeps. Indices are sorted; counts are what the accounting reads.

    ``alive_out``/``alive_in`` count the rows/columns that are not closed; ``kept_out``/``kept_in`` are
    the ones physically kept (a superset, when the layout keeps closed ones as folded zeros).
    """

    name: str
    out_features: int
    in_features: int
    kept_out: torch.Tensor
    kept_in: torch.Tensor
    gather_in: bool
    scatter_out: bool
    has_bias: bool
    gated: bool
    alive_out: int = -1  # -1: same as kept (set in __post_init__; ``replace`` then carries it over)
    alive_in: int = -1
    head_narrowed: bool = False  # rows (q, k, v) or columns (attention output) laid out per attention head
    residual_add: bool = False  # a row scatter here is an add into the residual (``sparse_models.pruned.residual_add``)

    def __post_init__(self) -> None:
        if self.alive_out < 0:
            self.alive_out = len(self.kept_out)
        if self.alive_in < 0:
            self.alive_in = len(self.kept_in)

    @property
    def changed(self) -> bool:
        return len(self.kept_out) < self.out_features or len(self.kept_in) < self.in_features

    def record(self) -> dict[str, Any]:
        """The JSON-able shape record stored in ``SparsePrunedConfig.pruned_modules``."""
        return {
            "out_features": self.out_features,
            "in_features": self.in_features,
            "kept_out": len(self.kept_out),
            "kept_in": len(self.kept_in),
            "alive_out": self.alive_out,
            "alive_in": self.alive_in,
            "gather_in": self.gather_in,
            "scatter_out": self.scatter_out,
            "bias": self.has_bias,
            "gated": self.gated,
        }

    def aligned(self, multiple: int) -> "ModulePlan":
        """This plan keeping enough closed rows/columns (as folded zeros) that every kept count is a
        multiple of ``multiple`` (or the full width): CPU matrix kernels measured up to 1.4x slower on
        odd widths (1,481 rows against 1,480). The padding is the lowest closed indices, a function
        of the kept set alone, so the two ends of a narrowed chain pad alike."""
        if self.head_narrowed:  # the per-head layout fixes one side; pad only a residual-side input
            kept_in = _pad(self.kept_in, self.in_features, multiple) if self.gather_in else self.kept_in
            return replace(self, kept_in=kept_in, gather_in=self.gather_in and len(kept_in) < self.in_features)
        kept_out = _pad(self.kept_out, self.out_features, multiple)
        kept_in = _pad(self.kept_in, self.in_features, multiple)
        return replace(self, kept_out=kept_out, kept_in=kept_in,
                       gather_in=self.gather_in and len(kept_in) < self.in_features,
                       scatter_out=self.scatter_out and len(kept_out) < self.out_features)

    def with_side(self, side: Side) -> "ModulePlan":
        """This plan with closed columns (rows) kept as folded zeros where ``side`` says ``keep``; only
        sides that need index work can be kept (a narrowed chain side has none to save)."""
        kept_in, gather_in = self.kept_in, self.gather_in
        if side.cols == KEEP and self.gather_in:
            kept_in, gather_in = torch.arange(self.in_features), False
        kept_out, scatter_out = self.kept_out, self.scatter_out
        if side.rows == KEEP and self.scatter_out:
            kept_out, scatter_out = torch.arange(self.out_features), False
        return replace(self, kept_in=kept_in, gather_in=gather_in, kept_out=kept_out, scatter_out=scatter_out)


@dataclass
class PruningPlan:
    """Per-module plans plus gate-level counts (rows/columns whose own gate is closed)."""

    modules: dict[str, ModulePlan]
    closed_rows: int
    total_rows: int
    closed_cols: int
    total_cols: int
    model_type: str
    #: attention module name -> {"query_key": size, "value": size}, for attention narrowed per head
    #: (``with_narrow_heads``)
    attention_head_sizes: dict[str, dict[str, int]] = field(default_factory=dict)

    def with_narrow_heads(self, model: nn.Module) -> "PruningPlan":
        """Query and key, and value, narrowed per head to reduced head sizes, so attention runs on
        narrow tensors and the row scatters (and the attention-output gather) disappear.

        Query/key and value get a size each: the largest number of open dimensions of any head (trained
        gates close most query/key dimensions of early layers but few value ones). A head with fewer
        keeps some closed ones as folded zeros, so outputs are unchanged (a closed query/key dimension
        adds 0 to every score, a closed value dimension writes 0). The attention keeps its original
        scaling. BERT-style encoders only: rotary or fused attention cannot be narrowed this way, and
        other model types are returned unchanged."""
        if self.model_type not in HEAD_NARROWING_TYPES:
            return self
        config = unwrap_gated_model(model).config
        heads = config.num_attention_heads
        head_dim = config.hidden_size // heads
        modules, sizes = dict(self.modules), dict(self.attention_head_sizes)
        for name in self.modules:
            if not name.endswith(".attention.self.query"):
                continue
            block = name[: -len("query")]
            q, k, v = name, block + "key", block + "value"
            o = block[: -len("self.")] + "output.dense"
            if not all(n in modules for n in (q, k, v, o)):
                continue
            per_head_qk = _per_head(modules[q].kept_out, heads, head_dim)
            per_head_v = _per_head(modules[v].kept_out, heads, head_dim)
            size_qk = max(1, max(len(x) for x in per_head_qk))  # a 0-wide head cannot be reshaped into
            size_v = max(1, max(len(x) for x in per_head_v))
            if size_qk >= head_dim and size_v >= head_dim:
                continue  # some head is fully open on both sides: nothing to narrow
            if size_qk < head_dim:
                qk_rows = _padded_heads(per_head_qk, head_dim, size_qk)
                for member in (q, k):
                    modules[member] = replace(modules[member], kept_out=qk_rows, scatter_out=False, head_narrowed=True)
            if size_v < head_dim:
                v_rows = _padded_heads(per_head_v, head_dim, size_v)
                modules[v] = replace(modules[v], kept_out=v_rows, scatter_out=False, head_narrowed=True)
                modules[o] = replace(modules[o], kept_in=v_rows, gather_in=False, head_narrowed=True)
            sizes[block[:-1]] = {"query_key": min(size_qk, head_dim), "value": min(size_v, head_dim)}
        return replace(self, modules=modules, attention_head_sizes=sizes)

    def records(self) -> dict[str, dict[str, Any]]:
        """Every module's shape record (``ModulePlan.record``): what the pruned config stores, and what
        tells two plans that build the same shapes apart."""
        return {name: p.record() for name, p in self.modules.items()}

    def aligned(self, multiple: int) -> "PruningPlan":
        """Every module's kept counts rounded up to ``multiple`` with closed rows/columns (see
        ``ModulePlan.aligned``); ``multiple=1`` changes nothing."""
        if multiple < 1:
            raise ValueError(f"align must be a positive number of rows/columns, got {multiple}")
        return replace(self, modules={name: p.aligned(multiple) for name, p in self.modules.items()})

    def with_layout(self, layout: str | Mapping[str, Side]) -> "PruningPlan":
        """This plan with every index-work side removed (``"remove"``), kept as folded zeros
        (``"keep"``), or chosen per module (a mapping name -> ``Side``; missing names: remove)."""
        if isinstance(layout, str):
            if layout not in (REMOVE, KEEP):
                raise ValueError(f"layout must be 'remove', 'keep' or a per-module mapping, got {layout!r}")
            sides = {name: Side(layout, layout) for name in self.modules}
        else:
            sides = dict(layout)
        modules = {name: plan.with_side(sides.get(name, Side())) for name, plan in self.modules.items()}
        return replace(self, modules=modules)



def _weight_out_in(module: nn.Module) -> torch.Tensor:
    """The (out, in) weight of an ``nn.Linear`` or a GPT-2 ``Conv1D`` (which stores in x out)."""
    return module.weight.T if isinstance(module, Conv1D) else module.weight


def _activation_maps_zero_to_zero(config: Any) -> bool:
    name = activation_name(config)
    if not isinstance(name, str) or name not in ACT2FN:
        return False
    return bool(ACT2FN[name](torch.zeros(1)).abs().max() == 0)


def _linear_shape(module: nn.Module) -> tuple[int, int] | None:
    if isinstance(module, SparseGatesLayer):
        return module.out_features, module.in_features
    if isinstance(module, nn.Linear):
        return module.out_features, module.in_features
    if isinstance(module, Conv1D):
        in_features, out_features = module.weight.shape
        return out_features, in_features
    return None


def plan_pruning(model: nn.Module) -> PruningPlan:
    """Decide, from the deterministic evaluation gates, which rows and columns every layer keeps.

    A row or column goes when its own gate is exactly 0, or when a chain makes it dead: a consumer
    column fed only by a closed producer row, or (for narrow FFN chains) a producer row that the
    consumer no longer reads.
    """

    model = unwrap_gated_model(model)
    named = dict(model.named_modules())
    gated = {n: m for n, m in named.items() if isinstance(m, SparseGatesLayer)}
    out_mask: dict[str, torch.Tensor] = {}
    in_mask: dict[str, torch.Tensor] = {}
    closed_rows = total_rows = closed_cols = total_cols = 0
    for name, layer in gated.items():
        col, row = layer.eval_gates()
        live = layer.live_rows()
        out_mask[name], in_mask[name] = live.cpu(), (col > 0).cpu()
        closed_rows += int((~live).sum())
        closed_cols += int((col == 0).sum())
        total_rows += row.numel()
        total_cols += col.numel()

    model_type = getattr(getattr(model, "config", None), "model_type", "unknown")
    zero_act = _activation_maps_zero_to_zero(getattr(model, "config", None))
    narrow_out: set[str] = set()
    narrow_in: set[str] = set()
    for chain in chains_for(model_type):
        if chain.needs_zero_activation and not zero_act:
            continue
        for consumer in _chain_consumers(named, chain):
            prefix = consumer[: len(consumer) - len(chain.consumer)]
            producers = [prefix + p for p in chain.producers]
            members = [*producers, consumer]
            if any(_linear_shape(named.get(m)) is None for m in members if m in named) or any(
                m not in named for m in members
            ):
                continue
            if not any(m in gated for m in members):
                continue
            for m in members:
                if m not in out_mask:
                    out_features, in_features = _linear_shape(named[m])
                    out_mask[m] = torch.ones(out_features, dtype=torch.bool)
                    in_mask[m] = torch.ones(in_features, dtype=torch.bool)
            if chain.mutual:
                (key,) = producers
                q_width, k_width = len(out_mask[consumer]), len(out_mask[key])
                key_for_query = _expand_to_query_heads(out_mask[key], q_width, model.config)
                out_mask[consumer] = out_mask[consumer] & key_for_query
                if q_width == k_width:
                    out_mask[key] = out_mask[key] & out_mask[consumer]
            elif chain.narrow:
                keep = in_mask[consumer].clone()
                for p in producers:
                    keep &= out_mask[p]
                for p in producers:
                    out_mask[p] = keep.clone()
                    narrow_out.add(p)
                in_mask[consumer] = keep
                narrow_in.add(consumer)
            else:
                for p in producers:
                    dead_source = _expand_to_query_heads(out_mask[p], len(in_mask[consumer]), model.config)
                    in_mask[consumer] = in_mask[consumer] & dead_source

    plans: dict[str, ModulePlan] = {}
    for name in out_mask:
        module = named[name]
        out_features, in_features = _linear_shape(module)
        base = module.get_base_layer() if isinstance(module, SparseGatesLayer) else module
        kept_out = torch.nonzero(out_mask[name]).flatten()
        kept_in = torch.nonzero(in_mask[name]).flatten()
        plans[name] = ModulePlan(
            name=name,
            out_features=out_features,
            in_features=in_features,
            kept_out=kept_out,
            kept_in=kept_in,
            gather_in=name not in narrow_in and len(kept_in) < in_features,
            scatter_out=name not in narrow_out and len(kept_out) < out_features,
            has_bias=getattr(base, "bias", None) is not None,
            gated=name in gated,
            residual_add=adds_into_residual(model_type, name, named.get(name.rpartition(".")[0])),
        )
    return PruningPlan(plans, closed_rows, total_rows, closed_cols, total_cols, model_type)


def _per_head(kept: torch.Tensor, heads: int, head_dim: int) -> list[torch.Tensor]:
    """Kept row indices split by head, each relative to its head's first row."""
    return [kept[(kept >= h * head_dim) & (kept < (h + 1) * head_dim)] - h * head_dim for h in range(heads)]


def _padded_heads(per_head: list[torch.Tensor], head_dim: int, size: int) -> torch.Tensor:
    """Absolute row indices: every head's kept rows padded to ``size`` with its lowest closed ones."""
    return torch.cat([h * head_dim + _pad_to(rows, head_dim, size) for h, rows in enumerate(per_head)])


def _pad(kept: torch.Tensor, width: int, multiple: int) -> torch.Tensor:
    """``kept`` plus the lowest missing indices, up to the next multiple of ``multiple`` (at most ``width``)."""
    return _pad_to(kept, width, min(width, -(-len(kept) // multiple) * multiple))


def _pad_to(kept: torch.Tensor, width: int, target: int) -> torch.Tensor:
    """``kept`` plus the lowest missing indices below ``width``, up to ``target`` indices, sorted."""
    if target <= len(kept):
        return kept
    missing = torch.ones(width, dtype=torch.bool)
    missing[kept] = False
    extra = torch.nonzero(missing).flatten()[: target - len(kept)]
    return torch.sort(torch.cat([kept, extra])).values


def _expand_to_query_heads(value_mask: torch.Tensor, width: int, config: Any) -> torch.Tensor:
    """Map a value-row mask to the attention-output columns it feeds (grouped-query attention repeats
    each key/value head for several query heads)."""
    if len(value_mask) == width:
        return value_mask
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = len(value_mask) // head_dim
    if kv_heads * head_dim != len(value_mask) or width % len(value_mask):
        return torch.ones(width, dtype=torch.bool)  # unknown layout: remove nothing extra
    return value_mask.view(kv_heads, head_dim).repeat_interleave(width // len(value_mask), dim=0).flatten()


def _chain_consumers(named: dict[str, nn.Module], chain: Chain) -> list[str]:
    return [n for n in named if n == chain.consumer or n.endswith("." + chain.consumer)]



@torch.no_grad()
def prune_dense_model(dense: nn.Module, plan: PruningPlan, trainable_parameters: int | None = None) -> nn.Module:
    """Swap every changed layer of the (gate-folded) dense model for a ``PrunedLinear``, then wrap it
    in the matching ``SparsePruned*`` class whose config records what was kept."""

    dense_parameters = sum(p.numel() for p in dense.parameters())
    for module_plan in plan.modules.values():
        if not module_plan.changed:
            continue
        module = dense.get_submodule(module_plan.name)
        pruned = PrunedLinear.from_dense(
            _weight_out_in(module).detach(),
            None if module.bias is None else module.bias.detach(),
            module_plan.kept_in.to(module.weight.device),
            module_plan.kept_out.to(module.weight.device),
            module_plan.gather_in,
            module_plan.scatter_out,
        )
        replace_module(dense, module_plan.name, pruned)
    set_attention_head_sizes(dense, plan.attention_head_sizes)
    return wrap_pruned(dense, plan, dense_parameters, trainable_parameters)
