"""What one fine-tuning run is: task, method, regime, seed and every hyperparameter, validated early.

Every default is written once, here: the method tables below and the ``TrainingOptions`` fields (with
their help text). The CLI builds its flags from those fields, and ``defaults_markdown()`` renders the
defaults table in docs/fine-tuning.md, which a test compares with that page.

Gate recipes (``recipe``): ``removal`` (default) closes gates along a cubic ramp to exactly
``target_removal``; the gate logits get their own constant-travel learning rate
(``sparse_models.removal.removal_gate_learning_rate``) unless ``gate_learning_rate`` is given. ``reference`` is the
FineGates GLUE recipe: target sparsity 0.4, lambda 50, AdamW lr 1e-3 for gates, head and gated biases,
weight decay 0, constant schedule without warm-up, no gradient clipping, batch 16 (RECIPE_TRAINING).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from glue_sparse.common.option_fields import DeviceOptions, option, required
from glue_sparse_tasks.data import LIMITED_TRAIN_ROWS
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.method_defaults import (
    REFERENCE_LAMBDA,
    REFERENCE_SIGMA,
    REFERENCE_TARGET_SPARSITY,
    REMOVAL_GATE_TRAVEL,
    REMOVAL_LAMBDA,
)
from glue_sparse_tasks.precisions import PRECISIONS
from glue_sparse_tasks.glue_tasks import GLUE_TASKS

METHODS = ("full", "lora", "gates", "gates+lora", "gates+full", "magnitude", "mask-search")
REGIMES = ("full", "limited")
SELECTIONS = ("last", "best")
#: gates 3e-3 (head, pooler and gated biases; the gate logits have their own lr): with the pooler training,
#: 3e-3 beat 1e-2 and 1e-3 on SST-2 and STS-B and sat between them on MRPC (benchmarks/results/pooler_sweep);
#: the reference recipe keeps 1e-3. gates+lora keeps 1e-3 (not re-swept with the pooler).
#: gates+full trains every weight as full fine-tuning does (its lr and weight decay), gates on top.
#: mask-search trains nothing: its entries are those of the full fine-tune it prunes.
DEFAULT_LR = {"full": 1e-4, "lora": 5e-4, "gates": 3e-3, "gates+lora": 1e-3, "gates+full": 1e-4, "magnitude": 1e-4,
              "mask-search": 1e-4}
DEFAULT_WEIGHT_DECAY = {"full": 0.01, "lora": 0.0, "gates": 0.0, "gates+lora": 0.0, "gates+full": 0.01,
                        "magnitude": 0.01, "mask-search": 0.01}
LORA_DEFAULTS = {"lora_r": 8, "lora_alpha": 16, "lora_dropout": 0.1}
RECIPES = ("removal", "reference")
#: How the removal recipe ranks gates for closing, per method. With the backbone frozen, the logits (which
#: only the task gradient moves, lambda 0) beat Taylor importance at 30% removed, gates over 3 seeds: CoLA MCC
#: 11.3 +- 1.7 vs 2.1 +- 1.3, MRPC 71.9 +- 0.7 vs 69.6 +- 1.3 (benchmarks/results/minilm_converged). Where every weight
#: retrains (gates+full), Taylor stays: CoLA 23.7 vs 19.0 with logits, seed 1 (benchmarks/results/gates_ranking_probe).
#: So the frozen-backbone methods override SparseGatesConfig's ranking; gates+full keeps the config's own (Taylor).
REMOVAL_SCORE = {"gates": "logit", "gates+lora": "logit"}
#: The share of gated weights the removal recipe (and magnitude pruning) removes unless told otherwise.
DEFAULT_TARGET_REMOVAL = 0.3
#: knowledge distillation from a fine-tuned teacher (--distill): the loss is (1 - alpha) * task loss +
#: alpha * T^2 * KL(teacher || student) at temperature T (MSE to the teacher's score for STS-B)
DISTILL_DEFAULTS = {"distill_alpha": 0.5, "distill_temperature": 2.0}
#: mask-search (Kwon et al. 2022): training examples its Fisher and mask tuning read (the paper's 2K sample)
MASK_SEARCH_EXAMPLES = 2048
#: Gate options a FinetuneConfig may set; None means the recipe's default (``gate_defaults``).
GATE_OPTIONS = ("target_removal", "target_sparsity", "sparsity_lambda", "reg_sigma", "gate_learning_rate",
                "removal_score")


def removal_score_default(method: str) -> str:
    """How the removal recipe ranks gates for ``method``: ``REMOVAL_SCORE``, else SparseGatesConfig's default."""
    from sparse_models.sparse_gates.config import SparseGatesConfig  # torch and peft: only when resolving

    return REMOVAL_SCORE.get(method, SparseGatesConfig.removal_score)


def gate_defaults(recipe: str | None) -> dict[str, Any]:
    """Each gate option's default under ``recipe`` (None: not a gate method, all None): the method's own
    numbers (``glue_sparse_tasks.method_defaults``); the removal ranking None means ``REMOVAL_SCORE``, the gate
    lr None the recipe's rule."""
    if recipe is None:
        return dict.fromkeys(GATE_OPTIONS)
    removal = recipe == "removal"
    return {"target_removal": DEFAULT_TARGET_REMOVAL if removal else None,
            "target_sparsity": None if removal else REFERENCE_TARGET_SPARSITY,
            "sparsity_lambda": REMOVAL_LAMBDA if removal else REFERENCE_LAMBDA, "reg_sigma": REFERENCE_SIGMA,
            "gate_learning_rate": None, "removal_score": None}


#: Training settings a recipe fixes (anything not here uses the general defaults).
RECIPE_TRAINING = {
    "removal": {},
    "reference": {"batch_size": 16, "learning_rate": 1e-3, "weight_decay": 0.0, "lr_scheduler": "constant",
                  "warmup_ratio": 0.0, "max_grad_norm": 0.0},
}
GENERAL_TRAINING = {"batch_size": 32, "lr_scheduler": "linear", "warmup_ratio": 0.06, "max_grad_norm": 1.0}
LORA_METHODS = ("lora", "gates+lora")
GATE_METHODS = ("gates", "gates+lora", "gates+full")
REMOVAL_METHODS = ("gates", "gates+lora", "gates+full", "magnitude", "mask-search")
#: Methods that train every base weight (saved as a plain model with closed rows/columns folded in).
BACKBONE_METHODS = ("gates+full", "magnitude")
#: Methods that prune a full fine-tune (``--from``, or one trained first): magnitude re-fine-tunes it, mask-search not.
SOURCE_METHODS = ("magnitude", "mask-search")
WHOLE_MODEL_METHODS = (*BACKBONE_METHODS, "mask-search")  # saved as plain models, closed rows/columns folded in
#: Methods whose base weights stay frozen: only the adapter and the task head train.
ADAPTER_METHODS = ("lora", "gates", "gates+lora")
#: Where a gate method starts (``start_from``; docs/fine-tuning.md): the pre-trained model (default), the full
#: fine-tune with every gate open, or that fine-tune with mask search's units starting (softly) closed.
START_POINTS = ("pretrained", "full", "mask-search")


class FinetuneConfigError(UserInputError):
    """An option that cannot work; raised before any model or data is loaded."""


@dataclass(kw_only=True)
class TrainingOptions(DeviceOptions):
    """Every knob of one fine-tune except what it trains on (task, seed, base model). ``None`` means
    "the method's or recipe's default", resolved by ``FinetuneConfig.resolved()``."""

    method: str = option("gates", ", ".join(METHODS))
    regime: str = option("limited", "full or limited (the first --train-limit training rows)")
    train_limit: int | None = option(None, f"rows of the limited regime (default {LIMITED_TRAIN_ROWS})")
    learning_rate: float | None = option(
        None, "learning rate (default per method: " + ", ".join(f"{m} {lr:g}" for m, lr in DEFAULT_LR.items())
        + "; 1e-3 for --recipe reference)", flag="lr", deprecated={"--learning-rate": None})
    weight_decay: float | None = option(None, "weight decay (default per method: " + ", ".join(
        f"{m} {wd:g}" for m, wd in DEFAULT_WEIGHT_DECAY.items()) + ")")
    epochs: float = option(5.0, "training epochs")
    max_steps: int | None = option(None, "stop after this many optimiser steps (overrides --epochs)")
    batch_size: int | None = option(None, f"per-device batch (default {GENERAL_TRAINING['batch_size']}; "
                                           f"{RECIPE_TRAINING['reference']['batch_size']} for --recipe reference)")
    eval_batch_size: int = option(64, "evaluation batch size")
    max_length: int = option(128, "tokens per example (capped by the model's position table)")
    warmup_ratio: float | None = option(None, f"share of steps of linear warm-up (default "
                                               f"{GENERAL_TRAINING['warmup_ratio']:g}; 0 for --recipe reference)")
    lr_scheduler: str | None = option(None, "Trainer schedule name (default linear; constant for --recipe reference)")
    max_grad_norm: float | None = option(None, f"gradient clipping (default {GENERAL_TRAINING['max_grad_norm']:g}; "
                                                "0 = none, as --recipe reference)")
    gradient_accumulation_steps: int = option(1, "optimiser steps accumulate this many batches",
                                               aliases=("--grad-accum",))
    train_pooler: bool = option(
        True, "lora and gate methods also train the base model's pooler (BERT family: the dense layer between [CLS] "
              "and the classifier, the part of the task head RoBERTa keeps in its classifier); --no_train_pooler "
              "freezes it, as PEFT does by default")
    lora_r: int | None = option(None, f"LoRA rank (default {LORA_DEFAULTS['lora_r']})")
    lora_alpha: int | None = option(None, f"LoRA alpha (default {LORA_DEFAULTS['lora_alpha']})")
    lora_dropout: float | None = option(None, f"LoRA dropout (default {LORA_DEFAULTS['lora_dropout']:g})")
    recipe: str | None = option(None, "gate methods: 'removal' (default; removes --target-removal exactly) or "
                                       "'reference' (the FineGates GLUE recipe, steered by --target-sparsity)")
    target_removal: float | None = option(
        None, "share of gated weights to remove, in (0, 1) (" + ", ".join(REMOVAL_METHODS) + "; default "
              f"{DEFAULT_TARGET_REMOVAL:g})")
    target_sparsity: float | None = option(
        None, f"reference recipe: share of rows and columns whose P(open) is pulled down (default "
              f"{REFERENCE_TARGET_SPARSITY:g}, the reference's); not the removed share")
    sparsity_lambda: float | None = option(
        None, f"weight of the sparsity regulariser (default {REMOVAL_LAMBDA:g} for the removal recipe: no pull; "
              f"{REFERENCE_LAMBDA:g}, the FineGates GLUE recipe's, for --recipe reference)")
    reg_sigma: float | None = option(
        None, f"sigma of P(open) in the regulariser (default {REFERENCE_SIGMA:g}, the reference code's)")
    gate_learning_rate: float | None = option(
        None, f"learning rate of the gate logits (default {REMOVAL_GATE_TRAVEL:g} / removal steps for the removal "
              "recipe, so a gate can travel from open to closed within the budget; the learning rate for the "
              "reference recipe)",
        aliases=("--gate-lr",))
    removal_score: str | None = option(
        None, "removal recipe: rank gates for closing by 'taylor' (accumulated |dL/dz * z|), 'logit' or 'random' "
              "(seeded; the control); default " + ", ".join(f"{m} {s}" for m, s in REMOVAL_SCORE.items())
              + ", gates+full SparseGatesConfig's default")
    start_from: str | None = option(
        None, "gate methods: where training starts: 'pretrained' (default: the base model with a fresh head), 'full' "
              "(the full fine-tune of this task and seed, every gate open) or 'mask-search' (that fine-tune with the "
              "heads and FFN channels mask search would remove starting closed; the schedule may revise them)")
    from_run: str | None = option(None, "magnitude, mask-search, and gate methods with --start-from full or "
                                         "mask-search: a finished full run folder to start from (default: train a "
                                         "full run first, with this run's training options, under "
                                         "<output>/magnitude-source/)", aliases=("--from",))
    model_selection: str = option("last", "final model: 'last' epoch or 'best' validation epoch (optimistic)",
                                   aliases=("--select",))
    prune: bool = option(False, "also save the physically pruned model (gates, magnitude, mask-search)")
    mask_search_examples: int | None = option(
        None, f"mask-search: training examples (seeded sample) for the mask Fisher and the least-squares mask tuning "
              f"(default {MASK_SEARCH_EXAMPLES})")
    distill: bool = option(False, "add knowledge distillation from a fine-tuned teacher to the task loss (any "
                                  "method)")
    teacher: str | None = option(None, "with --distill: a fine-tuned checkpoint of the same task and tokenizer (a "
                                       "run's task folder or a classifier folder; default: a full fine-tune with "
                                       "this run's data, budget and seed, trained first under "
                                       "<output>/magnitude-source/); its logits are cached")
    distill_alpha: float | None = option(
        None, "with --distill: weight of the distillation loss, in (0, 1] (default "
              f"{DISTILL_DEFAULTS['distill_alpha']:g})")
    distill_temperature: float | None = option(
        None, "with --distill: softmax temperature of the KL term (default "
              f"{DISTILL_DEFAULTS['distill_temperature']:g})")
    distill_hidden: float | None = option(
        None, "with --distill: weight of CoFi's layer-wise term, the MSE between the student's and the teacher's "
              "hidden states layer by layer (same depth and width, mapped one to one; the teacher then runs beside "
              "every training step); default 0: the prediction layer only")
    save_steps: int | None = option(None, "checkpoint every N steps (default: every epoch)")
    logging_steps: int = option(10, "log the loss every N steps")
    report_to: list[str] = option(help="Trainer loggers (tensorboard, wandb; default none)", default_factory=list)


@dataclass(kw_only=True)
class FinetuneCommandOptions:
    """What ``glue-sparse finetune`` adds to ``TrainingOptions``: what to train on, where to write, how to resume."""
    tasks: str = required("comma-separated GLUE tasks, or 'all' (the 8 GLUE-average tasks that have training data; "
                          "wnli only by name)")
    seeds: list[int] = option(help="comma-separated seeds, run one after another (default 1)",
                              default_factory=lambda: [1])
    model: str | None = option(None, "encoder folder or Hub name (default: the packaged MiniLM)")
    output: str = required("output folder: <output>/<task>/ (one seed) or <output>/seed-<s>/<task>/ (several)")
    data_dir: str | None = option(None, "local GLUE folder (else $GLUE_SPARSE_DATA_DIR, then the Hub)")
    hub: bool = option(True, "ask the Hugging Face Hub for GLUE data not found locally (--no-hub: never)")
    overwrite: bool = option(False, "replace a different run in the output folder")
    resume: bool = option(False, "continue unfinished runs from their last checkpoint")
    keep_checkpoints: bool = option(False, "keep Trainer checkpoints after success")


@dataclass(kw_only=True)
class FinetuneConfig(TrainingOptions):
    """One fine-tuning run: what it trains on plus every training option, validated on creation (before
    any model or data is loaded)."""

    task: str
    seed: int = 1
    base_model: str | None = None  # None: the packaged MiniLM

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
        if self.precision not in PRECISIONS:
            raise FinetuneConfigError(f"--precision {self.precision!r}: expected one of {', '.join(PRECISIONS)}")
        if self.train_limit is not None and self.train_limit <= 0:
            raise FinetuneConfigError(f"train limit must be a positive number of rows, got {self.train_limit}")
        if self.train_limit is not None and self.regime == "full":
            raise FinetuneConfigError("a train limit only applies to the limited regime (regime='limited')")
        for name in ("batch_size", "eval_batch_size", "max_length", "gradient_accumulation_steps"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise FinetuneConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps <= 0:
            raise FinetuneConfigError(f"max_steps must be positive, got {self.max_steps}")
        if self.epochs <= 0:
            raise FinetuneConfigError(f"epochs must be positive, got {self.epochs}")
        given_lora = [k for k in LORA_DEFAULTS if getattr(self, k) is not None]
        if given_lora and self.method not in LORA_METHODS:
            raise FinetuneConfigError(f"LoRA options {given_lora} were given with method {self.method!r}; "
                                      f"they apply to {' and '.join(LORA_METHODS)}")
        self._validate_sparsity_options()
        self._validate_distill_options()
        if self.prune and self.method not in REMOVAL_METHODS:
            raise FinetuneConfigError(f"prune needs sparse gates or magnitude pruning; method {self.method!r} has none")
        if self.base_model and self.base_model.startswith((".", "/", "~")) and not Path(
                self.base_model).expanduser().exists():
            raise FinetuneConfigError(f"base model path {self.base_model!r} does not exist")

    def _validate_distill_options(self) -> None:
        given = [k for k in ("teacher", *DISTILL_DEFAULTS, "distill_hidden") if getattr(self, k) is not None]
        if given and not self.distill:
            raise FinetuneConfigError(f"{', '.join('--' + k.replace('_', '-') for k in given)} apply with --distill")
        if self.distill and self.method == "mask-search":
            raise FinetuneConfigError("--distill: method mask-search trains nothing, so there is no loss to "
                                      "distil into")
        if self.teacher and not Path(self.teacher).expanduser().exists():
            raise FinetuneConfigError(f"--teacher {self.teacher}: no such checkpoint folder")
        if self.distill_alpha is not None and not 0.0 < self.distill_alpha <= 1.0:
            raise FinetuneConfigError(f"--distill-alpha must be in (0, 1], got {self.distill_alpha}")
        if self.distill_temperature is not None and self.distill_temperature <= 0:
            raise FinetuneConfigError(f"--distill-temperature must be positive, got {self.distill_temperature}")
        if self.distill_hidden is not None and self.distill_hidden < 0:
            raise FinetuneConfigError(f"--distill-hidden must be 0 or more (a loss weight), got {self.distill_hidden}")

    def _validate_sparsity_options(self) -> None:
        if self.target_removal is not None and not 0.0 < self.target_removal < 1.0:
            raise FinetuneConfigError(f"--target-removal must be in (0, 1) (a share of gated weights), got "
                                      f"{self.target_removal}")
        if self.recipe is not None and self.recipe not in RECIPES:
            raise FinetuneConfigError(f"unknown recipe {self.recipe!r}; valid recipes are: {', '.join(RECIPES)}")
        from sparse_models.sparse_gates.config import REMOVAL_SCORES  # torch: only when a config is made

        if self.removal_score is not None and self.removal_score not in REMOVAL_SCORES:
            raise FinetuneConfigError(f"unknown removal score {self.removal_score!r}; valid scores are: "
                                      f"{', '.join(REMOVAL_SCORES)}")
        gate_keys = [k for k in GATE_OPTIONS if k != "target_removal"] + ["recipe"]
        given_gates = [k for k in gate_keys if getattr(self, k) is not None]
        if given_gates and self.method not in GATE_METHODS:
            raise FinetuneConfigError(f"gate options {given_gates} were given with method {self.method!r}; "
                                      f"they apply to {' and '.join(GATE_METHODS)}")
        if self.target_removal is not None and self.method not in REMOVAL_METHODS:
            raise FinetuneConfigError(f"--target-removal was given with method {self.method!r}; it applies to "
                                      f"{', '.join(REMOVAL_METHODS)}")
        if self.start_from is not None and self.start_from not in START_POINTS:
            raise FinetuneConfigError(f"--start-from {self.start_from!r}: expected one of {', '.join(START_POINTS)}")
        if self.start_from not in (None, "pretrained") and self.method not in GATE_METHODS:
            raise FinetuneConfigError(f"--start-from {self.start_from} applies to methods {', '.join(GATE_METHODS)}, "
                                      f"not {self.method!r}")
        if self.from_run is not None and not builds_on_run(self):
            raise FinetuneConfigError(f"--from applies to methods {', '.join(SOURCE_METHODS)} and to gate methods "
                                      f"with --start-from full or mask-search, not {self.method!r}"
                                      + (" starting from the pre-trained model" if self.method in GATE_METHODS
                                         else ""))
        if self.mask_search_examples is not None and (self.method != "mask-search" or self.mask_search_examples <= 0):
            raise FinetuneConfigError(f"--mask-search-examples {self.mask_search_examples}: a positive count, for "
                                      f"method mask-search (this run: {self.method!r})")
        if self.method in GATE_METHODS:
            recipe = self.recipe or "removal"
            if recipe == "reference" and self.target_removal is not None:
                raise FinetuneConfigError("the reference recipe cannot honour --target-removal (it steers only the "
                                          "open probability, via --target-sparsity); use --recipe removal for a "
                                          "removal you can ask for")
            if recipe == "reference" and self.removal_score is not None:
                raise FinetuneConfigError("--removal-score belongs to the removal recipe; the reference recipe "
                                          "closes no gate by ranking")
            if recipe == "reference" and self.start_from == "mask-search":
                raise FinetuneConfigError("--start-from mask-search closes units to the requested removal, which the "
                                          "reference recipe cannot ask for; use --recipe removal")
            if recipe == "removal" and self.target_sparsity is not None:
                raise FinetuneConfigError("--target-sparsity is the reference regulariser's knob; the removal "
                                          "recipe is steered by --target-removal alone (pass --recipe reference "
                                          "to use --target-sparsity)")

    def resolved(self) -> dict[str, Any]:
        """Every hyperparameter with method defaults filled in: what run.json records and caches key on."""
        out = asdict(self)
        out["learning_rate"] = self.learning_rate if self.learning_rate is not None else DEFAULT_LR[self.method]
        out["weight_decay"] = (self.weight_decay if self.weight_decay is not None
                               else DEFAULT_WEIGHT_DECAY[self.method])
        out["train_limit"] = (self.train_limit or LIMITED_TRAIN_ROWS) if self.regime == "limited" else None
        recipe = (self.recipe or "removal") if self.method in GATE_METHODS else None
        out["recipe"] = recipe
        training = {**GENERAL_TRAINING, **RECIPE_TRAINING.get(recipe, {})}
        for key, value in training.items():
            out[key] = getattr(self, key) if getattr(self, key) is not None else value
        if recipe == "reference" and self.learning_rate is None:
            out["learning_rate"] = training["learning_rate"]
        if recipe == "reference" and self.weight_decay is None:
            out["weight_decay"] = training["weight_decay"]
        for key, value in LORA_DEFAULTS.items():
            out[key] = (getattr(self, key) if getattr(self, key) is not None else value) \
                if self.method in LORA_METHODS else None
        for key, value in gate_defaults(recipe).items():
            out[key] = getattr(self, key) if getattr(self, key) is not None else value
        if recipe == "removal" and self.removal_score is None:
            out["removal_score"] = removal_score_default(self.method)
        if self.method not in ADAPTER_METHODS:
            del out["train_pooler"]  # every weight trains anyway; their identity (and finished runs) stay as before
        if self.start_from in (None, "pretrained"):  # runs from the pre-trained model keep the identity they had
            del out["start_from"]
        if self.method in SOURCE_METHODS:
            out["target_removal"] = self.target_removal if self.target_removal is not None else DEFAULT_TARGET_REMOVAL
        for key, value in DISTILL_DEFAULTS.items():
            out[key] = getattr(self, key) if getattr(self, key) is not None else value
        if self.method == "mask-search":
            out["mask_search_examples"] = self.mask_search_examples or MASK_SEARCH_EXAMPLES
        else:  # other methods keep the identity (and finished runs) they had
            del out["mask_search_examples"]
        if not self.distill_hidden:  # prediction-layer runs keep the identity (and finished runs) they had
            del out["distill_hidden"]
        if not self.distill:  # runs without distillation keep the identity (and finished runs) they had
            for key in ("distill", "teacher", *DISTILL_DEFAULTS):
                del out[key]
        return out

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def builds_on_run(config: TrainingOptions) -> bool:
    """Whether the run starts from a full fine-tune (``from_run``, or one trained first): magnitude and
    mask-search always, a gate method with ``start_from`` full or mask-search."""
    return config.method in SOURCE_METHODS or (config.method in GATE_METHODS
                                                and config.start_from in ("full", "mask-search"))


def saves_whole_model(config: TrainingOptions) -> bool:
    """Whether the run is saved as a plain model with its masks folded in (not as an adapter): every method that
    trains or prunes the backbone, and a gate adapter over another run's weights (an adapter file would point
    at that run's folder, which need not travel with it)."""
    return config.method in WHOLE_MODEL_METHODS or (config.method in GATE_METHODS and builds_on_run(config))


def full_source_config(config: FinetuneConfig) -> FinetuneConfig:
    """The full fine-tune a run is built on when it names none: the run a magnitude run prunes (no
    ``from_run``) and the teacher of a distilled run (no ``teacher``). The same data, budget, seed and
    training options (a bench's full arm, given the bench's shared options, is then that very run), method
    full: no gate, LoRA or distillation option, and a method's own learning rate and weight decay are
    full's defaults again (magnitude's are the full run's own: it re-fine-tunes that run)."""
    own = {key: None for key in (*GATE_OPTIONS, "recipe", *LORA_DEFAULTS, *DISTILL_DEFAULTS)}
    if config.method not in ("full", "magnitude"):
        own.update(learning_rate=None, weight_decay=None)
    return replace(config, method="full", prune=False, from_run=None, distill=False, teacher=None,
                   distill_hidden=None, mask_search_examples=None, start_from=None, **own)
