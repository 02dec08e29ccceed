"""What one fine-tuning run is: task, method, regime, seed and every hyperparameter, validated early.

Documented defaults per method (the README repeats them):

| method | learning rate | extra |
|---|---|---|
| full | 2e-5 | weight decay 0.01 |
| lora | 5e-4 | r 8, alpha 16, dropout 0.1 on query/value (PEFT's BERT default) |
| gates | 1e-3 | target sparsity 0.4, lambda 50 (FineGates reference) |
| gates+lora | 1e-3 | gates as above plus LoRA r 8, alpha 16 inside every gated layer |

Gate methods also take ``reg_sigma`` (sigma of P(open) in the regulariser) and
``gate_learning_rate`` (a learning rate for the gate logits alone); both default to the reference.

All methods: batch 32, 3 epochs, max length 128, linear schedule with 6% warm-up, evaluation every
epoch, model selection ``last``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from glue_sparse_tasks.data import LIMITED_TRAIN_ROWS
from glue_sparse_tasks.glue_tasks import GLUE_TASKS

METHODS = ("full", "lora", "gates", "gates+lora")
REGIMES = ("full", "limited")
SELECTIONS = ("last", "best")
DEFAULT_LR = {"full": 2e-5, "lora": 5e-4, "gates": 1e-3, "gates+lora": 1e-3}
DEFAULT_WEIGHT_DECAY = {"full": 0.01, "lora": 0.0, "gates": 0.0, "gates+lora": 0.0}
LORA_DEFAULTS = {"lora_r": 8, "lora_alpha": 16, "lora_dropout": 0.1}
GATE_DEFAULTS = {"target_sparsity": 0.4, "sparsity_lambda": 50.0, "reg_sigma": None, "gate_learning_rate": None}
LORA_METHODS = ("lora", "gates+lora")
GATE_METHODS = ("gates", "gates+lora")


class FinetuneConfigError(ValueError):
    """An option that cannot work; raised before any model or data is loaded."""


@dataclass
class FinetuneConfig:
    task: str
    method: str = "gates"
    regime: str = "limited"
    seed: int = 1
    base_model: str | None = None  # None: the packaged MiniLM
    train_limit: int | None = None  # None: LIMITED_TRAIN_ROWS in the limited regime
    learning_rate: float | None = None
    weight_decay: float | None = None
    epochs: float = 3.0
    max_steps: int | None = None
    batch_size: int = 32
    eval_batch_size: int = 64
    max_length: int = 128
    warmup_ratio: float = 0.06
    gradient_accumulation_steps: int = 1
    lora_r: int | None = None
    lora_alpha: int | None = None
    lora_dropout: float | None = None
    target_sparsity: float | None = None
    sparsity_lambda: float | None = None
    reg_sigma: float | None = None  # None: the gate noise std (FineGates reference)
    gate_learning_rate: float | None = None  # None: learning_rate for the gate logits too
    model_selection: str = "last"
    prune: bool = False
    precision: str = "fp32"  # fp32, bf16 or fp16
    save_steps: int | None = None  # None: a checkpoint every epoch
    logging_steps: int = 10
    report_to: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.task not in GLUE_TASKS:
            raise FinetuneConfigError(f"unknown task {self.task!r}; valid tasks are: {', '.join(GLUE_TASKS)}")
        if self.method not in METHODS:
            raise FinetuneConfigError(f"unknown method {self.method!r}; valid methods are: {', '.join(METHODS)}")
        if self.regime not in REGIMES:
            raise FinetuneConfigError(f"unknown regime {self.regime!r}; valid regimes are: {', '.join(REGIMES)}")
        if self.model_selection not in SELECTIONS:
            raise FinetuneConfigError(f"model_selection must be one of {SELECTIONS}, got {self.model_selection!r}")
        if self.precision not in ("fp32", "bf16", "fp16"):
            raise FinetuneConfigError(f"precision must be fp32, bf16 or fp16, got {self.precision!r}")
        if self.train_limit is not None and self.train_limit <= 0:
            raise FinetuneConfigError(f"train limit must be a positive number of rows, got {self.train_limit}")
        if self.train_limit is not None and self.regime == "full":
            raise FinetuneConfigError("a train limit only applies to the limited regime (regime='limited')")
        for name in ("batch_size", "eval_batch_size", "max_length", "gradient_accumulation_steps"):
            if getattr(self, name) <= 0:
                raise FinetuneConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps <= 0:
            raise FinetuneConfigError(f"max_steps must be positive, got {self.max_steps}")
        if self.epochs <= 0:
            raise FinetuneConfigError(f"epochs must be positive, got {self.epochs}")
        given_lora = [k for k in LORA_DEFAULTS if getattr(self, k) is not None]
        if given_lora and self.method not in LORA_METHODS:
            raise FinetuneConfigError(f"LoRA options {given_lora} were given with method {self.method!r}; "
                                      f"they apply to {' and '.join(LORA_METHODS)}")
        given_gates = [k for k in GATE_DEFAULTS if getattr(self, k) is not None]
        if given_gates and self.method not in GATE_METHODS:
            raise FinetuneConfigError(f"gate options {given_gates} were given with method {self.method!r}; "
                                      f"they apply to {' and '.join(GATE_METHODS)}")
        if self.prune and self.method not in GATE_METHODS:
            raise FinetuneConfigError(f"prune needs sparse gates; method {self.method!r} has none")
        if self.base_model and self.base_model.startswith((".", "/", "~")) and not Path(
                self.base_model).expanduser().exists():
            raise FinetuneConfigError(f"base model path {self.base_model!r} does not exist")

    def resolved(self) -> dict[str, Any]:
        """Every hyperparameter with method defaults filled in: what run.json records and caches key on."""
        out = asdict(self)
        out["learning_rate"] = self.learning_rate if self.learning_rate is not None else DEFAULT_LR[self.method]
        out["weight_decay"] = (self.weight_decay if self.weight_decay is not None
                               else DEFAULT_WEIGHT_DECAY[self.method])
        out["train_limit"] = (self.train_limit or LIMITED_TRAIN_ROWS) if self.regime == "limited" else None
        for defaults, methods in ((LORA_DEFAULTS, LORA_METHODS), (GATE_DEFAULTS, GATE_METHODS)):
            for key, value in defaults.items():
                out[key] = (getattr(self, key) if getattr(self, key) is not None else value) \
                    if self.method in methods else None
        return out

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]
