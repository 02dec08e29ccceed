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
"""Substrings of the names of adapter tensors (gate logits, LoRA matrices, PEFT's head copies): what an
adapter adds to a dense model, so what dense counts leave out and adapter counts include."""


class SparseGatesLayer(BaseTunerLayer):
    """Holds the row and column gate logits per adapter; the wrapped layer stays frozen."""

    adapter_layer_names = ("sparse_gates_row", "sparse_gates_col")
    other_param_names = ("noise_std",)

    def __init__(self, base_layer: nn.Module, **kwargs: Any) -> None:
        self.base_layer = base_layer
        self.sparse_gates_row = nn.ParameterDict({})
        self.sparse_gates_col = nn.ParameterDict({})
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
        self.noise_std[adapter_name] = config.noise_std
        self._move_adapter_to_device_of_base_layer(adapter_name)
        self.set_adapter(self.active_adapters, inference_mode=config.inference_mode)

    def gate_vectors(self, training: bool | None = None,
                     adapters: Optional[list[str]] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(column gates, row gates) of ``adapters`` (default: the active ones), multiplied; noisy only
        in training mode."""
        training = self.training if training is None else training
        col = row = None
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
        if col is None:
            ones_in = torch.ones(self.in_features, device=self.get_base_layer().weight.device)
            ones_out = torch.ones(self.out_features, device=ones_in.device)
            return ones_in, ones_out
        return col, row

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
                inner.bias.data = inner.bias.data * row.to(inner.bias.dtype)
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
        col, row = self.gate_vectors()
        inner = self.base_layer
        if (self.lean_backward and type(inner) is nn.Linear and not inner.weight.requires_grad and not args
                and not kwargs and torch.is_grad_enabled() and (col.requires_grad or row.requires_grad)):
            return gated_frozen_linear(x, inner.weight, inner.bias, col, row)
        result = self.base_layer(x * col.to(x.dtype), *args, **kwargs)
        return result * row.to(result.dtype)

    def __repr__(self) -> str:
        return "sparse_gates." + super().__repr__()
