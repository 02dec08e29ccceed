"""Parameter accounting: the one function every report, log and results file uses."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from torch import nn

from sparse_models.pruned.modeling_sparse_pruned import SparsePrunedPreTrainedModel
from sparse_models.modules import unwrap_gated_model
from sparse_models.sparse_gates.layer import ADAPTER_MARKERS, SparseGatesLayer
from sparse_models.sparse_gates.model import trained_parameter_count
from sparse_models.sparse_gates.pruning import plan_pruning

__all__ = ["ParameterAccounting", "parameter_accounting"]

@dataclass(frozen=True)
class ParameterAccounting:
    """Counts for one model. Removal uses kept-rows x kept-columns arithmetic per matrix.

    Two counts are kept apart: *closed* weights (their row or column is closed, so they add nothing)
    and *removed* weights (physically gone from the pruned model's matrices). They differ where the
    pruning layout keeps closed weights as folded zeros because removing them would cost more index
    work than it saves. A gated (unmerged) model is counted as if every closed weight were removed.
    ``*_share_of_gated`` is relative to the weights of gated matrices; ``*_share_of_total`` to every
    parameter of the dense model (embeddings and head included). Closing 40% of rows and 40% of
    columns removes 64% of a matrix: target sparsity is not parameter removal.
    """

    dense_parameters: int
    remaining_parameters: int
    trainable_parameters: int | None
    gated_modules: int
    gated_weights: int
    removed_weights: int
    removed_gated_weights: int
    removed_parameters: int
    closed_rows: int
    total_rows: int
    closed_cols: int
    total_cols: int
    closed_gated_weights: int = -1  # -1: as removed (a plan or config from before the two were told apart)
    closed_parameters: int = -1
    added_parameters: int = 0  # what the pruning method added (FLAP's compensation biases)

    def __post_init__(self) -> None:
        if self.closed_gated_weights < 0:
            object.__setattr__(self, "closed_gated_weights", self.removed_gated_weights)
        if self.closed_parameters < 0:
            object.__setattr__(self, "closed_parameters", self.removed_parameters)

    @property
    def closed_share_of_gated(self) -> float:
        """Gated weights whose row or column is closed (gate 0, or dead through a chain): what the
        gates took out of the computation, whether or not the layout physically removed them."""
        return self.closed_gated_weights / self.gated_weights if self.gated_weights else 0.0

    @property
    def closed_share_of_total(self) -> float:
        return self.closed_parameters / self.dense_parameters if self.dense_parameters else 0.0

    @property
    def closed_row_fraction(self) -> float:
        return self.closed_rows / self.total_rows if self.total_rows else 0.0

    @property
    def closed_col_fraction(self) -> float:
        return self.closed_cols / self.total_cols if self.total_cols else 0.0

    @property
    def removed_share_of_gated(self) -> float:
        return self.removed_gated_weights / self.gated_weights if self.gated_weights else 0.0

    @property
    def removed_share_of_total(self) -> float:
        return self.removed_parameters / self.dense_parameters if self.dense_parameters else 0.0

    @property
    def net_removed_share_of_total(self) -> float:
        """Removed minus added parameters, of all dense parameters: what the model really shrank by."""
        if not self.dense_parameters:
            return 0.0
        return (self.removed_parameters - self.added_parameters) / self.dense_parameters

    @property
    def trainable_share(self) -> float | None:
        if self.trainable_parameters is None or not self.dense_parameters:
            return None
        return self.trainable_parameters / self.dense_parameters

    def to_dict(self) -> dict[str, Any]:
        """Raw counts plus every derived share, ready for JSON."""
        out = asdict(self)
        for name in ("closed_row_fraction", "closed_col_fraction", "removed_share_of_gated",
                     "removed_share_of_total", "closed_share_of_gated", "closed_share_of_total",
                     "net_removed_share_of_total", "trainable_share"):
            out[name] = getattr(self, name)
        return out


def _from_records(
    records: Mapping[str, Mapping[str, Any]],
    dense_parameters: int,
    trainable: int | None,
    gate_counts: Mapping[str, int],
) -> ParameterAccounting:
    gated = [r for r in records.values() if r["gated"]]

    def gone(recs, out_key: str, in_key: str) -> tuple[int, int]:  # weights, biases outside out x in kept
        recs = list(recs)
        return (sum(r["out_features"] * r["in_features"] - r.get(out_key, r["kept_out"]) * r.get(in_key, r["kept_in"])
                    for r in recs),
                sum(r["out_features"] - r.get(out_key, r["kept_out"]) for r in recs if r["bias"]))

    removed_weights, removed_bias = gone(records.values(), "kept_out", "kept_in")
    removed_gated, _ = gone(gated, "kept_out", "kept_in")
    closed_weights, closed_bias = gone(records.values(), "alive_out", "alive_in")
    closed_gated, _ = gone(gated, "alive_out", "alive_in")
    removed = removed_weights + removed_bias
    added = sum(r["kept_out"] for r in records.values() if r.get("added_bias"))
    return ParameterAccounting(
        added_parameters=added,
        closed_gated_weights=closed_gated,
        closed_parameters=closed_weights + closed_bias,
        dense_parameters=dense_parameters,
        remaining_parameters=dense_parameters - removed + added,
        trainable_parameters=trainable,
        gated_modules=len(gated),
        gated_weights=sum(r["out_features"] * r["in_features"] for r in gated),
        removed_weights=removed_weights,
        removed_gated_weights=removed_gated,
        removed_parameters=removed,
        closed_rows=int(gate_counts.get("closed_rows", 0)),
        total_rows=int(gate_counts.get("total_rows", 0)),
        closed_cols=int(gate_counts.get("closed_cols", 0)),
        total_cols=int(gate_counts.get("total_cols", 0)),
    )


def _dense_parameter_count(model: nn.Module) -> int:
    """Parameters of the underlying dense model: adapter tensors and PEFT's head copies excluded."""
    seen: set[int] = set()
    total = 0
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen or any(marker in name for marker in ADAPTER_MARKERS):
            continue
        seen.add(id(param))
        total += param.numel()
    return total


def parameter_accounting(model: nn.Module, trainable_parameters: int | None = None) -> ParameterAccounting:
    """Accounting for a gated PEFT model, a pruned ``SparsePruned*`` model or any plain model.

    For a gated model the removal is what ``merge_and_unload()`` would remove (same plan). For a
    pruned model it is read from its config. ``trainable_parameters`` overrides the count of
    parameters with ``requires_grad`` (a pruned model records the count from its training run).
    """

    if isinstance(model, SparsePrunedPreTrainedModel):
        config = model.config
        trainable = trainable_parameters if trainable_parameters is not None else config.trainable_parameters
        return _from_records(config.pruned_modules, config.dense_parameters, trainable, config.gate_counts)

    dense = _dense_parameter_count(model)
    inner = unwrap_gated_model(model)
    if not any(isinstance(m, SparseGatesLayer) for m in inner.modules()):
        if trainable_parameters is None:
            trainable_parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
        return _from_records({}, dense, trainable_parameters, {})
    trainable = trainable_parameters if trainable_parameters is not None else trained_parameter_count(model)
    plan = plan_pruning(inner)
    gate_counts = {"closed_rows": plan.closed_rows, "total_rows": plan.total_rows,
                   "closed_cols": plan.closed_cols, "total_cols": plan.total_cols}
    return _from_records({n: p.record() for n, p in plan.modules.items()}, dense, trainable, gate_counts)
