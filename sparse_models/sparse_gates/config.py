"""``SparseGatesConfig``: the PEFT configuration of FineGates-style row/column gates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from peft.config import PeftConfig

from ._peft_type import SPARSE_GATES

BIAS_CHOICES = ("none", "sparse_gates_only", "all")


@dataclass
class SparseGatesConfig(PeftConfig):
    """Configuration of :class:`SparseGatesModel`.

    Defaults are the FineGates GLUE reference (target sparsity 0.4, lambda 50, logits N(1, 0.1),
    noise std 0.1). ``target_modules=None`` picks the architecture's defaults (see
    ``sparse_models.architectures``). ``lora_config`` (a ``LoraConfig`` or its dict) injects PEFT LoRA
    *inside* every gated layer, so one adapter trains gates and LoRA together: y = ((W + BA)(x*g_c) + b)*g_r.
    """

    target_modules: Optional[Union[list[str], str]] = field(
        default=None,
        metadata={"help": "Module names (suffix match) or a regex of nn.Linear/Conv1D layers to gate."},
    )
    exclude_modules: Optional[Union[list[str], str]] = field(
        default=None, metadata={"help": "Module names or a regex to leave ungated."}
    )
    target_sparsity: float = field(
        default=0.4, metadata={"help": "Fraction of rows and of columns the regulariser pulls closed, in [0, 1)."}
    )
    sparsity_lambda: float = field(default=50.0, metadata={"help": "Weight of the sparsity regulariser."})
    init_mean: float = field(default=1.0, metadata={"help": "Mean of the gate logits at initialisation."})
    init_std: float = field(default=0.1, metadata={"help": "Std of the gate logits at initialisation."})
    noise_std: float = field(default=0.1, metadata={"help": "Std of the Gaussian gate noise in training."})
    reg_sigma: Optional[float] = field(
        default=None,
        metadata={"help": "sigma in P(open) = Phi((mu + 0.5) / sigma); None uses noise_std (the reference)."},
    )
    bias: str = field(
        default="sparse_gates_only",
        metadata={"help": "Which biases train: 'sparse_gates_only' (those of gated layers), 'none' or 'all'."},
    )
    fan_in_fan_out: bool = field(
        default=False, metadata={"help": "Set automatically for GPT-2 Conv1D layers (weight stored as in x out)."}
    )
    modules_to_save: Optional[list[str]] = field(
        default=None, metadata={"help": "Extra modules trained and saved in full (e.g. a classifier head)."}
    )
    lora_config: Optional[dict[str, Any]] = field(
        default=None,
        metadata={"help": "LoraConfig (or its dict) injected inside the gated layers for gates+LoRA."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.peft_type = SPARSE_GATES
        self.target_modules = set(self.target_modules) if isinstance(self.target_modules, list) else self.target_modules
        self.exclude_modules = (
            set(self.exclude_modules) if isinstance(self.exclude_modules, list) else self.exclude_modules
        )
        if not 0.0 <= self.target_sparsity < 1.0:
            raise ValueError(f"target_sparsity must be in [0, 1), got {self.target_sparsity!r}")
        if self.sparsity_lambda < 0:
            raise ValueError(f"sparsity_lambda must be >= 0, got {self.sparsity_lambda!r}")
        for name in ("init_std", "noise_std"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.reg_sigma is not None and self.reg_sigma <= 0:
            raise ValueError(f"reg_sigma must be > 0, got {self.reg_sigma!r}")
        if self.bias not in BIAS_CHOICES:
            raise ValueError(f"bias must be one of {BIAS_CHOICES}, got {self.bias!r}")
        if self.lora_config is not None and not isinstance(self.lora_config, dict):
            self.lora_config = self.lora_config.to_dict()
        if self.lora_config is not None:
            # The nested LoRA always follows the gated layers; its own targeting keys would only confuse.
            for key in ("peft_type", "task_type", "target_modules", "modules_to_save", "base_model_name_or_path",
                        "revision", "inference_mode", "auto_mapping", "exclude_modules", "peft_version"):
                self.lora_config.pop(key, None)
            if isinstance(self.lora_config.get("layers_to_transform"), set):
                self.lora_config["layers_to_transform"] = sorted(self.lora_config["layers_to_transform"])

    @property
    def keep_fraction(self) -> float:
        """The open fraction the regulariser aims for."""
        return 1.0 - self.target_sparsity

    @property
    def penalty_sigma(self) -> float:
        return self.reg_sigma if self.reg_sigma is not None else self.noise_std
