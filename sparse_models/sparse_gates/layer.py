"""The gated linear layer: y = (W (x * g_c) + b) * g_r, one gate per input column and output row."""

from __future__ import annotations

import warnings
from typing import Any, Optional

import torch
from peft.tuners.tuners_utils import BaseTunerLayer, check_adapters_to_merge
from torch import nn
from transformers.pytorch_utils import Conv1D

from sparse_models import gates
from sparse_models.sparse_gates.config import NON_IDENTITY_INIT_STD, SparseGatesConfig
from sparse_models.sparse_gates.functional import gated_frozen_linear

ADAPTER_MARKERS = ("sparse_gates_", "lora_", ".modules_to_save.")
"""Substrings of the names of adapter tensors (gate logits, bias deltas, LoRA matrices, PEFT's head copies):
what an adapter adds to a dense model, so what dense counts leave out and adapter counts include."""
GATE_LOGIT_NAMES = ("sparse_gates_row", "sparse_gates_col")
"""The gate logits among an adapter's tensors (its bias deltas, ``sparse_gates_bias``, are not gates)."""


class SparseGatesLayer(BaseTunerLayer):
    """Holds the row and column gate logits, and optionally a bias delta, per adapter; the wrapped layer
    stays frozen."""

    adapter_layer_names = (*GATE_LOGIT_NAMES, "sparse_gates_bias")
    other_param_names = ("noise_std",)

    def __init__(self, base_layer: nn.Module, **kwargs: Any) -> None:
        self.base_layer = base_layer
        self.sparse_gates_row = nn.ParameterDict({})
        self.sparse_gates_col = nn.ParameterDict({})
        #: per adapter with ``bias_delta``, added to the wrapped layer's bias before that adapter's row gates
        self.sparse_gates_bias = nn.ParameterDict({})
        self.noise_std: dict[str, float] = {}
        #: per adapter, running sums of |dL/dz * z| per row / column gate while tracking is on (see
        #: ``sparse_models.removal.track_importance``); plain tensors, not saved with the adapter
        self.importance: dict[str, dict[str, torch.Tensor]] = {}
        #: this optimiser step's signed dL/dz * z, until ``sparse_models.removal.flush_importance`` adds its |.|
        self.pending_importance: dict[str, dict[str, torch.Tensor]] = {}
        self.track_importance = False
        self._disable_adapters = False
        self.merged_adapters: list[str] = []
        #: (weight, bias) from before the first merge, which ``unmerge`` restores
        self._before_merge: tuple[torch.Tensor, Optional[torch.Tensor]] | None = None
        inner = self.get_base_layer()
        if isinstance(inner, nn.Linear):
            self.in_features, self.out_features = inner.in_features, inner.out_features
        elif isinstance(inner, Conv1D):
            self.in_features, self.out_features = inner.weight.shape
        else:
            raise TypeError(f"sparse gates support nn.Linear and transformers Conv1D, not {type(inner).__name__}")

    def update_layer(self, adapter_name: str, config: SparseGatesConfig, **kwargs: Any) -> None:
        mean, std = (config.init_mean, config.init_std) if config.init_weights else (0.0, NON_IDENTITY_INIT_STD)
        self.sparse_gates_row[adapter_name] = nn.Parameter(gates.init_gate_logits(self.out_features, mean, std))
        self.sparse_gates_col[adapter_name] = nn.Parameter(gates.init_gate_logits(self.in_features, mean, std))
        base_bias = self.get_base_layer().bias
        if config.bias_delta and base_bias is not None:
            self.sparse_gates_bias[adapter_name] = nn.Parameter(torch.zeros_like(base_bias.detach()))
        self.noise_std[adapter_name] = config.noise_std
        self._move_adapter_to_device_of_base_layer(adapter_name)
        self.set_adapter(self.active_adapters, inference_mode=config.inference_mode)

    def set_adapter(self, adapter_names: str | list[str], inference_mode: bool = False) -> None:
        """PEFT's, and the same for a nested LoRA layer (gates+LoRA), which PEFT's tuner-level
        ``set_adapter`` does not reach: it visits only this method's layer class."""
        super().set_adapter(adapter_names, inference_mode=inference_mode)
        if isinstance(self.base_layer, BaseTunerLayer):
            self.base_layer.set_adapter(adapter_names, inference_mode=inference_mode)

    def delete_adapter(self, adapter_name: str) -> None:
        """PEFT's, and the nested LoRA layer's adapter of that name goes too."""
        super().delete_adapter(adapter_name)
        if isinstance(self.base_layer, BaseTunerLayer):
            self.base_layer.delete_adapter(adapter_name)
            self.base_layer.set_adapter(self.active_adapters)

    def gate_vectors(self, training: bool | None = None,
                     adapters: Optional[list[str]] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(column gates, row gates) of ``adapters`` (default: the active ones), multiplied; noisy only
        in training mode."""
        col, row, _ = self.gates_and_offset(training, adapters)
        return col, row

    def gates_and_offset(self, training: bool | None = None, adapters: Optional[list[str]] = None
                         ) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """(column gates, row gates, output offset) of ``adapters`` applied one after the other:
        y = (...((W (x * c) + b + d_1) * r_1 + d_2) * r_2 ...), so y = (W (x * c) + b) * r + offset, with
        offset = sum_a d_a * prod_{b >= a} r_b over the adapters' bias deltas d (None without any). Merging
        the adapters in the same order folds exactly this, one adapter after the other."""
        training = self.training if training is None else training
        col = row = offset = None
        for name in (self.active_adapters if adapters is None else adapters):
            if name not in self.sparse_gates_row:
                continue
            c = gates.gate_values(self.sparse_gates_col[name], self.noise_std[name], training)
            r = gates.gate_values(self.sparse_gates_row[name], self.noise_std[name], training)
            if training and self.track_importance and torch.is_grad_enabled():
                self._record_importance(name, "col", c)
                self._record_importance(name, "row", r)
            col = c if col is None else col * c
            row = r if row is None else row * r
            delta = self.sparse_gates_bias[name] if name in self.sparse_gates_bias else None
            if offset is not None or delta is not None:
                offset = (delta if offset is None else offset if delta is None else offset + delta) * r
        if col is None:
            ones_in = torch.ones(self.in_features, device=self.get_base_layer().weight.device)
            ones_out = torch.ones(self.out_features, device=ones_in.device)
            return ones_in, ones_out, None
        return col, row, offset

    def _record_importance(self, adapter: str, side: str, value: torch.Tensor) -> None:
        """First-order (Taylor) importance of each gate: |dL/dz * z|, the loss change its closing would
        cause. The gradient is taken at the gate value z, so the clamp that hides it from the logit of
        an open gate does not hide it here."""
        if not value.requires_grad:
            return
        pending = self.pending_importance.setdefault(adapter, {})
        z = value.detach()

        def hook(grad: torch.Tensor) -> None:  # signed: summed over micro-batches (and ranks) before |.|
            term = (grad.detach() * z).float()
            pending[side] = term if side not in pending else pending[side] + term

        value.register_hook(hook)

    def eval_gates(self, adapters: Optional[list[str]] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Deterministic (column, row) gates of ``adapters`` (default: the active ones), detached: what
        merging and pruning fold in."""
        with torch.no_grad():
            col, row = self.gate_vectors(training=False, adapters=adapters)
        return col.detach(), row.detach()

    def live_rows(self, adapters: Optional[list[str]] = None) -> torch.Tensor:
        """Which output rows can be non-zero under ``adapters``' evaluation gates: an open row gate, or a
        bias delta of a later adapter that survives its row gates."""
        with torch.no_grad():
            _, row, offset = self.gates_and_offset(training=False, adapters=adapters)
        return (row > 0) if offset is None else (row > 0) | (offset != 0)


class Linear(nn.Module, SparseGatesLayer):
    """Sparse gates around an ``nn.Linear`` or GPT-2 ``Conv1D`` (possibly already wrapped by LoRA)."""

    #: around a frozen ``nn.Linear``, train through ``GatedFrozenLinear`` (no saved pre-gate output)
    lean_backward: bool = True

    def __init__(self, base_layer: nn.Module, adapter_name: str, config: SparseGatesConfig, **kwargs: Any) -> None:
        super().__init__()
        SparseGatesLayer.__init__(self, base_layer, **kwargs)
        self.fan_in_fan_out = isinstance(self.get_base_layer(), Conv1D)
        self._active_adapter = adapter_name
        self.update_layer(adapter_name, config=config)

    def merge(self, safe_merge: bool = False, adapter_names: Optional[list[str]] = None) -> None:
        """Fold the evaluation gates of ``adapter_names`` (default: the active adapters), and a nested
        LoRA, into the weight: W' = g_r W g_c, b' = g_r b, one adapter after the other. The weights from
        before the first merge are kept, so ``unmerge`` restores them exactly however many merges came."""
        adapter_names = check_adapters_to_merge(self, adapter_names)
        if not adapter_names:
            return
        if isinstance(self.base_layer, BaseTunerLayer):
            self.base_layer.merge(safe_merge=safe_merge, adapter_names=adapter_names)
        inner = self.get_base_layer()
        if self._before_merge is None:
            self._before_merge = (inner.weight.data.clone(), None if inner.bias is None else inner.bias.data.clone())
        for name in adapter_names:
            col, row = self.eval_gates([name])
            weight = inner.weight.data
            w_out_in = weight.T if self.fan_in_fan_out else weight
            folded = (row[:, None].to(weight.dtype) * w_out_in * col[None, :].to(weight.dtype))
            folded = folded.T if self.fan_in_fan_out else folded
            if safe_merge and not torch.isfinite(folded).all():  # PEFT's own wording, which its tests expect
                raise ValueError(f"NaNs detected in the merged weights. The adapter {name} seems to be broken")
            inner.weight.data = folded.contiguous()
            if inner.bias is not None:
                bias = inner.bias.data
                if name in self.sparse_gates_bias:
                    bias = bias + self.sparse_gates_bias[name].detach().to(bias.dtype)
                if safe_merge and not torch.isfinite(bias).all():
                    raise ValueError(f"NaNs detected in the merged weights. The adapter {name} seems to be broken")
                inner.bias.data = bias * row.to(bias.dtype)
            self.merged_adapters.append(name)

    def unmerge(self) -> None:
        """Restore the exact weights saved before the first merge (division by a closed gate would be
        undefined)."""
        if not self.merged:
            warnings.warn("Already unmerged. Nothing to do.")
            return
        inner = self.get_base_layer()
        weight, bias = self._before_merge
        self._before_merge = None
        inner.weight.data = weight
        if bias is not None:
            inner.bias.data = bias
        self.merged_adapters = []
        if isinstance(self.base_layer, BaseTunerLayer) and self.base_layer.merged:
            self.base_layer.unmerge()

    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.disable_adapters:
            if self.merged:
                self.unmerge()
            return self.base_layer(x, *args, **kwargs)
        if self.merged:
            return self.base_layer(x, *args, **kwargs)
        col, row, offset = self.gates_and_offset()
        inner = self.base_layer
        bias = inner.bias if isinstance(inner, nn.Linear) else None
        if offset is not None:
            # one adapter's delta joins the bias inside the fused op (offset = d * r): the op's output is then
            # the very tensor the next activation keeps, so nothing extra is saved for backward
            gated = [name for name in self.active_adapters if name in self.sparse_gates_row]
            bias = bias + self.sparse_gates_bias[gated[0]] if len(gated) == 1 and bias is not None else None
        if (self.lean_backward and type(inner) is nn.Linear and not inner.weight.requires_grad and not args
                and not kwargs and torch.is_grad_enabled() and (col.requires_grad or row.requires_grad)
                and (offset is None or bias is not None)):
            return gated_frozen_linear(x, inner.weight, bias, col, row)
        result = self.base_layer(x * col.to(x.dtype), *args, **kwargs)
        result = result * row.to(result.dtype)
        return result if offset is None else result + offset.to(result.dtype)

    def __repr__(self) -> str:
        return "sparse_gates." + super().__repr__()
