"""``SparseGatesModel``: the PEFT tuner that injects gates, exposes the sparsity loss and prunes."""

from __future__ import annotations

import contextlib
import copy
import json
import re
import warnings
from typing import Mapping, Optional

import torch
from peft import LoraConfig, inject_adapter_in_model
from peft.tuners.tuners_utils import BaseTuner, BaseTunerLayer
from torch import nn
from transformers import PreTrainedModel

from sparse_models import gates
from sparse_models.architectures import DEFAULT_TARGET_MODULES, default_target_modules
from sparse_models.modules import unwrap_gated_model
from sparse_models.pruned.modeling_sparse_pruned import replace_module
from sparse_models.sparse_gates.config import SparseGatesConfig
from sparse_models.sparse_gates.layer import ADAPTER_MARKERS, Linear, SparseGatesLayer
from glue_sparse_tasks.method_defaults import DEFAULT_ALIGN
from sparse_models.sparse_gates.layout_costs import (
    DEFAULT_LAYOUT_LENGTH,
    DEFAULT_LAYOUT_TOKENS,
    choose_sides,
    choose_whole_model,
)
from sparse_models.sparse_gates.pruning import (
    AUTO,
    KEEP,
    LAYOUTS,
    PER_LAYER,
    REMOVE,
    PruningPlan,
    Side,
    plan_pruning,
    prune_dense_model,
)


class SparseGatesModel(BaseTuner):
    """FineGates row/column gates on the target linear layers of any transformers model.

    Use through PEFT: ``get_peft_model(model, SparseGatesConfig(...))``. Add
    ``peft_model.sparsity_loss()`` to the task loss while training; ``merge_and_unload()`` returns
    the physically pruned ``SparsePruned*`` model (``prune=False`` keeps the dense architecture
    with the gates folded in).
    """

    prefix: str = "sparse_gates_"
    tuner_layer_cls = SparseGatesLayer
    target_module_mapping = {k: list(v) for k, v in DEFAULT_TARGET_MODULES.items()}

    def _prepare_adapter_config(self, peft_config: SparseGatesConfig, model_config: dict) -> SparseGatesConfig:
        if peft_config.target_modules is None:
            peft_config.target_modules = set(default_target_modules(model_config.get("model_type", "unknown"),
                                                                    getattr(self, "model", None)))
        return peft_config

    def _prepare_model(self, peft_config: SparseGatesConfig, model: nn.Module) -> None:
        """For gates+LoRA, inject PEFT's own LoRA first so each gate wraps a LoRA layer. A later adapter's
        LoRA joins the LoRA layer already inside a gate (one gate layer over one LoRA layer, each holding
        every adapter), not a new stack around the gate."""
        if not peft_config.lora_config:
            return
        lora = LoraConfig(
            target_modules=peft_config.target_modules,
            exclude_modules=peft_config.exclude_modules,
            **peft_config.lora_config,
        )
        gated = [(name, module) for name, module in model.named_modules() if isinstance(module, SparseGatesLayer)]
        for name, layer in gated:  # let LoRA see (and extend) what the gate wraps
            replace_module(model, name, layer.base_layer)
        # PEFT's tuners share their config dict with the model they wrap (model.peft_config): the nested
        # LoRA would write its LoraConfig into ours, replacing the gates config of a second adapter
        shared = model.__dict__.pop("peft_config", None)
        try:
            inject_adapter_in_model(lora, model, adapter_name=self._injecting)
        finally:
            if shared is not None:
                model.peft_config = shared
            for name, layer in gated:
                layer.base_layer = model.get_submodule(name)  # the LoRA layer, now with this adapter too
                replace_module(model, name, layer)

    def inject_adapter(self, model: nn.Module, adapter_name: str, *args, **kwargs) -> None:
        """PEFT's injection, remembering which adapter it injects: ``_prepare_model`` names the nested LoRA
        after it (one config object may serve several adapters, so the config cannot say)."""
        self._injecting = adapter_name
        try:
            super().inject_adapter(model, adapter_name, *args, **kwargs)
        finally:
            self._injecting = None

    def _create_and_replace(
        self,
        peft_config: SparseGatesConfig,
        adapter_name: str,
        target: nn.Module,
        target_name: str,
        parent: nn.Module,
        current_key: str,
        parameter_name: Optional[str] = None,
    ) -> None:
        if isinstance(target, SparseGatesLayer):
            target.update_layer(adapter_name, config=peft_config)
            return
        new_module = Linear(target, adapter_name, config=peft_config)
        new_module.train(target.training)  # a layer gated on a model in eval mode starts in eval mode
        if adapter_name not in self.active_adapters:
            new_module.requires_grad_(False)
        self._replace_module(parent, target_name, new_module, target)

    def _replace_module(self, parent: nn.Module, child_name: str, new_module: nn.Module, child: nn.Module) -> None:
        if not isinstance(new_module, SparseGatesLayer):
            # Unloading puts back a base layer or a saved head (e.g. RobertaClassificationHead, which has
            # no .weight for PEFT's generic weight hand-over): nothing to transfer.
            setattr(parent, child_name, new_module)
            return
        super()._replace_module(parent, child_name, new_module, child)

    def _mark_only_adapters_as_trainable(self, model: nn.Module) -> None:
        super()._mark_only_adapters_as_trainable(model)
        # Nested LoRA layers are tuner layers too; keep their A/B matrices trainable.
        for module in model.modules():
            if isinstance(module, BaseTunerLayer) and not isinstance(module, SparseGatesLayer):
                for name, param in module.named_parameters():
                    if name.startswith("lora_"):
                        param.requires_grad = True

    def _post_injection_hook(self, model: nn.Module, config: SparseGatesConfig, adapter_name: str) -> None:
        """PEFT restores the pre-existing requires_grad flags after injection; with a nested LoRA that
        would freeze the gated biases again, so the bias rule is applied once more here."""
        super()._post_injection_hook(model, config, adapter_name)
        if config.inference_mode or config.bias == "none":
            return
        for name, param in model.named_parameters():
            if config.bias == "all" and name.endswith("bias"):
                param.requires_grad = True
        if config.bias == "sparse_gates_only":
            for module in model.modules():
                if isinstance(module, SparseGatesLayer) and module.bias is not None:
                    module.bias.requires_grad = True

    @classmethod
    def _remap_adapter_state_dict_for_load(
        cls, model: nn.Module, config: SparseGatesConfig, adapter_name: str, state_dict: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Refuse, naming the module, gates saved for a base whose layer shapes differ."""
        remapped = super()._remap_adapter_state_dict_for_load(model, config, adapter_name, state_dict)
        current = model.state_dict()
        for key, tensor in remapped.items():
            if key in current and current[key].shape != tensor.shape:
                name = key.removeprefix("base_model.model.")
                module = re.split(r"\.(?:base_layer|sparse_gates_|lora_|modules_to_save)", name)[0]
                raise ValueError(
                    f"Sparse-gate adapter does not fit this base model: module {module!r} has "
                    f"{name[len(module) + 1:]!r} "
                    f"of shape {tuple(current[key].shape)} in the base model but {tuple(tensor.shape)} in the "
                    "checkpoint. Load the adapter onto the base it was trained on (see base_model_name_or_path "
                    "in adapter_config.json)."
                )
        return remapped

    # ----------------------------------------------------------------------------------- training
    def gated_layers(self) -> dict[str, SparseGatesLayer]:
        """Module name (relative to the transformers model) -> gated layer."""
        return {n: m for n, m in self.model.named_modules() if isinstance(m, SparseGatesLayer)}

    def sparsity_loss(self, adapter_name: Optional[str] = None) -> torch.Tensor:
        """lambda * mean over gated layers of one layer term.

        Reference mode: mean(|mean P(row open) - keep|, |mean P(col open) - keep|), as in FineGates.
        Removal mode (``target_removal``): mean(mean P(row open), mean P(col open)), a steady pull whose
        only job is to let undefended gates sink; the schedule then closes the lowest ones exactly.
        """
        name = adapter_name or self.active_adapters[0]
        config: SparseGatesConfig = self.peft_config[name]
        if config.target_removal is None:
            def term(row: torch.Tensor, col: torch.Tensor) -> torch.Tensor:
                return gates.keep_penalty(row, col, config.keep_fraction, config.reg_sigma)
        else:
            def term(row: torch.Tensor, col: torch.Tensor) -> torch.Tensor:
                return gates.open_pressure(row, col, config.reg_sigma)
        penalties = [
            term(layer.sparse_gates_row[name], layer.sparse_gates_col[name])
            for layer in self.gated_layers().values()
            if name in layer.sparse_gates_row
        ]
        if not penalties:
            raise ValueError(f"adapter {name!r} gates no layer")
        return config.sparsity_lambda * torch.stack(penalties).mean()

    # ----------------------------------------------------------------------------------- merging
    def merge_and_unload(
        self,
        progressbar: bool = False,
        safe_merge: bool = False,
        adapter_names: Optional[list[str]] = None,
        prune: bool = True,
        layout: str | Mapping[str, Side] = "auto",
        layout_tokens: int = DEFAULT_LAYOUT_TOKENS,
        align: int = DEFAULT_ALIGN,
        narrow_heads: bool | None = None,
        layout_length: int = DEFAULT_LAYOUT_LENGTH,
    ) -> nn.Module:
        """Fold the evaluation gates into the weights and, with ``prune=True``, remove closed rows/columns.

        ``layout`` says what happens to closed rows/columns whose removal needs index work (a gather from
        or scatter into a full-width tensor): ``"remove"`` always removes them, ``"keep"`` keeps them as
        folded zeros, and ``"per-layer"`` and ``"auto"`` (default) measure. ``"per-layer"`` times both ways
        per layer at ``layout_tokens`` tokens per forward on this machine and keeps the faster; ``"auto"``
        then also times the pruned models that choice and ``"remove"`` build (without and, where it
        applies, with attention narrowed per head) whole against ``"keep"`` and returns the fastest (all
        cached; see ``layout_costs``; the check holds a copy of the model per candidate for a moment, so for a model
        too large for that, use ``"per-layer"``). Every layout gives the same outputs; the pruned config
        records what was closed and what was removed. ``align`` rounds every kept row/column count up to
        a multiple of it with closed ones (folded zeros): matrix kernels are slower on odd widths.
        ``layout="remove", align=1`` removes exactly what the gates closed. ``narrow_heads=True``
        (BERT-style encoders) narrows query/key and value per head to reduced head sizes
        (``PruningPlan.with_narrow_heads``), ``False`` never does, ``None`` (default) lets ``"auto"`` try
        both (other layouts: off). ``layout_length``: the sequence length of the whole-model check's batches
        (``layout_tokens`` ids in rows of it); pass the length the model will run at, since the ranking of
        candidates moves with the batch shape.

        A model in training mode is merged with its deterministic evaluation gates (a warning says so):
        noisy training gates are never folded.
        """
        if self.model.training:
            warnings.warn(
                "merge_and_unload() called on a model in training mode: using the deterministic evaluation "
                "gates clamp(tanh(logit) + 0.5, 0, 1), not noisy training gates.",
                UserWarning,
                stacklevel=2,
            )
        was_training = self.model.training
        self.model.eval()
        if prune and not isinstance(self.model, PreTrainedModel):
            warnings.warn(f"merge_and_unload(): {type(self.model).__name__} is no transformers PreTrainedModel, so "
                          "there is no pruned model class for it; the gates are folded into each matrix (closed "
                          "rows and columns stay as zeros), as PEFT's LoRA merges", UserWarning, stacklevel=2)
            prune = False
        if not prune:
            merged = self._unload_and_optionally_merge(
                progressbar=progressbar, safe_merge=safe_merge, adapter_names=adapter_names
            )
            merged.train(was_training)
            return merged

        if isinstance(layout, str) and layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS} or a per-module mapping, got {layout!r}")
        with _planning_adapters(self.model, adapter_names):  # plan the named adapters, not the active ones
            candidates = self._pruning_candidates(layout, layout_tokens, align, narrow_heads)
        trainable = trained_parameter_count(self)  # before unloading: the adapter's own tensors
        dense = self._unload_and_optionally_merge(
            progressbar=progressbar, safe_merge=safe_merge, adapter_names=adapter_names
        )
        names = list(candidates)
        pruned = {name: prune_dense_model(dense if name == names[-1] else copy.deepcopy(dense), candidates[name],
                                          trainable) for name in names}
        if len(pruned) == 1:
            return pruned[names[0]]
        return pruned[choose_whole_model(pruned, layout_tokens, length=layout_length)]

    def _pruning_candidates(self, layout: str | Mapping[str, Side], tokens: int, align: int,
                            narrow_heads: bool | None) -> dict[str, PruningPlan]:
        """The plans ``merge_and_unload`` may build, simplest first: the given layout alone, the per-layer
        choice, or for ``"auto"`` keep (no index work), then the per-layer choice and every closed side
        removed, each without and with heads narrowed. Plans that would build the same shapes appear
        once."""
        plan = plan_pruning(self.model)
        bases = {"": plan.with_narrow_heads(self.model) if narrow_heads else plan}
        if layout == AUTO and narrow_heads is None:
            if (narrowed := plan.with_narrow_heads(self.model)).attention_head_sizes:
                bases["+heads"] = narrowed
        bases = {suffix: base.aligned(align) for suffix, base in bases.items()}
        if layout not in (AUTO, PER_LAYER):
            return {"given": bases[""].with_layout(layout)}
        weight = next(self.model.parameters())
        per_layer = {PER_LAYER + suffix: base.with_layout(choose_sides(base, tokens, dtype=weight.dtype,
                                                                       device=weight.device))
                     for suffix, base in bases.items()}
        if layout == PER_LAYER:
            return per_layer
        # every side removed, too: per-layer timings miss what index work costs in the whole model, and
        # at 40% closed (MiniLM, 2 CPU threads) `remove` ran 2% faster than the per-layer choice in 3 of 3
        # paired repeats (benchmarks/results/timing_interleave_ab)
        removed = {REMOVE + suffix: base.with_layout(REMOVE) for suffix, base in bases.items()}
        candidates = {KEEP: bases[""].with_layout(KEEP), **per_layer, **removed}
        distinct: dict[str, str] = {}
        for name, candidate in candidates.items():
            distinct.setdefault(json.dumps([candidate.records(), candidate.attention_head_sizes], sort_keys=True),
                                name)
        return {name: candidates[name] for name in distinct.values()}

@contextlib.contextmanager
def _planning_adapters(model: nn.Module, adapter_names: Optional[list[str]]):
    """Every gated layer answers for ``adapter_names`` while the pruning plan reads its gates."""
    layers = [m for m in model.modules() if isinstance(m, SparseGatesLayer)] if adapter_names else []
    saved = [layer._active_adapter for layer in layers]
    for layer in layers:
        layer._active_adapter = list(adapter_names)
    try:
        yield
    finally:
        for layer, active in zip(layers, saved):
            layer._active_adapter = active


def trained_parameter_count(model: nn.Module) -> int:
    """What a gates (or gates+LoRA) adapter trains and saves, counted from the structure, so a
    reloaded inference adapter (everything frozen) reports the same number as during training:
    gate logits, LoRA matrices, PEFT's head copies, and the biases its ``bias`` rule trains."""

    inner = unwrap_gated_model(model)
    configs = getattr(inner, "peft_config", None) or getattr(model, "peft_config", {}) or {}
    bias_rule = next(iter(configs.values())).bias if configs else "sparse_gates_only"
    total = sum(p.numel() for n, p in inner.named_parameters() if any(m in n for m in ADAPTER_MARKERS))
    if bias_rule == "sparse_gates_only":
        total += sum(m.bias.numel() for m in inner.modules() if isinstance(m, SparseGatesLayer) and m.bias is not None)
    elif bias_rule == "all":
        total += sum(p.numel() for n, p in inner.named_parameters()
                     if n.endswith("bias") and not any(m in n for m in ADAPTER_MARKERS))
    return total
