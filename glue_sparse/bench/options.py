"""``BenchConfig``: what a bench grid runs (tasks, methods, regimes, seeds, fine-tuning overrides,
evaluation and latency settings), read from JSON/YAML or flags, validated before anything trains."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterator, Mapping, Sequence

from glue_sparse.common.option_fields import option, required
from glue_sparse.common.targets import BenchTargets
from glue_sparse.finetune.options import (
    REMOVAL_METHODS,
    SOURCE_METHODS,
    FinetuneConfig,
    builds_on_run,
    full_source_config,
)
from glue_sparse_tasks.errors import UserInputError

#: Per-method grid overrides in a bench config (everything else in a method entry is a fine-tuning option).
GRID_OVERRIDES = ("seeds", "regimes", "tasks")
LATENCY_TIMINGS = ("cell", "after")
#: A part of the grid: each ``only_*`` list of a bench config and the cell key it filters.
PART_FILTERS = (("only_tasks", "task"), ("only_seeds", "seed"), ("only_regimes", "regime"), ("only_arms", "label"))


def arm_folder(label: str) -> str:
    """An arm's folder name under ``runs/``: its label with blanks as dashes (``gates r0.3`` -> ``gates-r0.3``),
    so no shell user has to quote a run path."""
    return "-".join(label.split())


class BenchConfigError(UserInputError):
    """A bench configuration that cannot run; names the field."""


def in_part(part: Any, cell: Mapping[str, Any]) -> bool:
    """Whether a grid cell, or a row of one (same keys), is in the part that ``part``'s ``only_*`` lists name
    (everything where they are empty): one rule for the part a bench runs and the part a report shows."""
    return all(not getattr(part, name) or cell[key] in getattr(part, name) for name, key in PART_FILTERS)


def check_part(part: Any, cells: Sequence[Mapping[str, Any]], what: str, source: str,
               flags: Collection[str] = ()) -> None:
    """Name ``part.only_arms`` by label (an arm may be given by its folder name, blanks as dashes), and refuse
    in one line an ``only_*`` value that names none of ``cells`` (a typo would otherwise select nothing);
    ``flags``: the lists the user gave as flags, called by their flag (``--only-seeds``), not their config
    field, so the error names what the user typed."""
    if part.only_arms:
        by_folder = {arm_folder(cell["label"]): cell["label"] for cell in cells}
        part.only_arms = [by_folder.get(arm_folder(arm), arm) for arm in part.only_arms]
    for name, key in PART_FILTERS:
        outside = sorted(set(getattr(part, name) or ()) - {cell[key] for cell in cells}, key=str)
        if outside:
            shown = "--" + name.replace("_", "-") if name in flags else name
            raise BenchConfigError(f"{source}: {shown} {outside} names no {what}; the {key}s there are "
                                   f"{sorted({cell[key] for cell in cells}, key=str)}")


@dataclass
class MethodSpec:
    """One method line of the bench: a FineGates/LoRA/full method plus option overrides."""

    method: str
    label: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    seeds: list[int] | None = None  # None: the bench's; e.g. 3 seeds for headline arms, 1 for the rest
    regimes: list[str] | None = None
    tasks: list[str] | None = None

    def __post_init__(self) -> None:
        self.label = self.label or self.method


@dataclass
class BenchConfig:
    tasks: list[str]
    methods: list[MethodSpec]
    regimes: list[str] = field(default_factory=lambda: ["limited"])
    seeds: list[int] = field(default_factory=lambda: [1])
    base_model: str | None = None
    finetune: dict[str, Any] = field(default_factory=dict)  # shared FinetuneConfig overrides
    eval_limit: int | None = None  # validation docs per task for lm-eval (None: all)
    latency_docs: int = 256
    latency_batch_size: int = 32
    latency_rounds: int = 3
    latency_timing: str = "cell"  # "after": time every model once the grid is done, one at a time (parallel grids)
    data_dir: str | None = None
    use_hub: bool = True
    cpus_per_cell: float = 1.0  # Ray resources of one grid cell (executor "ray")
    gpus_per_cell: float = 0.0
    # A part of the grid to run now (None: all of it), for a grid longer than one working stretch. A
    # part's rows are the whole grid's own (same keys), and other parts' rows in the store stay.
    only_tasks: list[str] | None = None
    only_seeds: list[int] | None = None
    only_regimes: list[str] | None = None
    only_arms: list[str] | None = None  # method labels or their folder names, e.g. "gates-r0.3"
    #: the report's targets for this grid, over targets.json's bench ones (e.g. {"gates_gap_to_full": 3.0})
    targets: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "bench config",
                  flags: Collection[str] = ()) -> "BenchConfig":
        """``flags``: the fields of ``raw`` the user gave as command-line flags (errors then name the flag)."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(raw) - known)
        if unknown:
            raise BenchConfigError(f"{source}: unknown field(s) {unknown}; known: {sorted(known)}")
        if "tasks" not in raw or "methods" not in raw:
            raise BenchConfigError(f"{source}: 'tasks' and 'methods' are required")
        methods = []
        for i, m in enumerate(raw["methods"]):
            if isinstance(m, str):
                methods.append(MethodSpec(m))
            elif isinstance(m, dict) and "method" in m:
                opts = {k: v for k, v in m.items() if k not in ("method", "label") + GRID_OVERRIDES}
                methods.append(MethodSpec(m["method"], m.get("label", ""), opts,
                                          **{k: m[k] for k in GRID_OVERRIDES if k in m}))
            else:
                raise BenchConfigError(f"{source}: methods[{i}] must be a method name or "
                                       f"{{'method': ..., 'label': ..., options}}, got {m!r}")
        config = cls(**{**raw, "methods": methods})
        config.validate(source, flags)
        return config

    @classmethod
    def load(cls, path: str | Path) -> "BenchConfig":
        text = Path(path).read_text()
        try:
            if str(path).endswith((".yaml", ".yml")):
                import yaml

                raw = yaml.safe_load(text)
            else:
                raw = json.loads(text)
        except Exception as exc:  # noqa: BLE001  (yaml and json raise different types)
            raise BenchConfigError(f"{path}: cannot parse ({exc})") from None
        if not isinstance(raw, dict):
            raise BenchConfigError(f"{path}: expected a mapping at the top level")
        return cls.from_dict(raw, str(path))

    def goals(self, source: str = "bench config") -> BenchTargets:
        """The targets the report judges this grid by."""
        return BenchTargets.load(self.targets, f"{source}: targets")

    def validate(self, source: str = "bench config", flags: Collection[str] = ()) -> None:
        self.goals(source)
        if self.latency_timing not in LATENCY_TIMINGS:
            raise BenchConfigError(f"{source}: latency_timing must be one of {LATENCY_TIMINGS}, got "
                                   f"{self.latency_timing!r}")
        cells = [(m.label, r) for m in self.methods for r in (m.regimes or self.regimes)]
        if len(set(cells)) != len(cells):
            raise BenchConfigError(f"{source}: method labels must be unique within a regime, got {cells}")
        try:  # every combination must be a valid fine-tuning config
            grid = list(self.runs(whole=True))
        except ValueError as exc:
            raise BenchConfigError(f"{source}: {exc}") from None
        check_part(self, grid, "cell of this grid", source, flags)

    def in_part(self, cell: Mapping[str, Any]) -> bool:
        """Whether a cell (or a row of it: same keys) belongs to the part to run (the ``only_*`` lists;
        everything without)."""
        return in_part(self, cell)

    def covers(self, spec: MethodSpec, task: str, regime: str, seed: int) -> bool:
        """Whether the arm ``spec`` has a cell for this task, regime and seed (its own lists, else the bench's)."""
        return (seed in (spec.seeds or self.seeds) and regime in (spec.regimes or self.regimes)
                and task in (spec.tasks or self.tasks))

    def cell_config(self, spec: MethodSpec, task: str, regime: str, seed: int) -> FinetuneConfig:
        """One cell's fine-tune: the bench's shared options, then the arm's own; removal methods also save
        the pruned model."""
        options = {**self.finetune, **spec.options}
        if spec.method in REMOVAL_METHODS:
            options["prune"] = True
        return FinetuneConfig(task=task, method=spec.method, regime=regime, seed=seed, base_model=self.base_model,
                              **options)

    def full_label(self, config: FinetuneConfig) -> str | None:
        """The full arm whose cell (same task, regime and seed) trains the very run the magnitude (or mask-search) cell
        ``config`` prunes, or the distilled cell learns from, or None (the cell then trains its own)."""
        if config.from_run:
            return None
        source, where = full_source_config(config), (config.task, config.regime, config.seed)
        return next((m.label for m in self.methods if m.method == "full" and self.covers(m, *where)
                     and self.cell_config(m, *where) == source), None)

    def runs(self, whole: bool = False) -> Iterator[dict[str, Any]]:
        """The cells of the part to run (``whole``: of the whole grid); magnitude, mask-search and distilled cells come
        after all others, since they prune or learn from the full arm's run of their task and seed (a part
        without that arm trains it where the full arm's cell will find it finished)."""
        cells = []
        for seed in sorted({s for m in self.methods for s in (m.seeds or self.seeds)}):
            for regime in self.regimes + sorted({r for m in self.methods for r in m.regimes or ()} - set(self.regimes)):
                for spec in self.methods:
                    for task in spec.tasks or self.tasks:
                        cell = {"task": task, "label": spec.label, "method": spec.method, "regime": regime,
                                "seed": seed}
                        if not self.covers(spec, task, regime, seed) or not (whole or self.in_part(cell)):
                            continue
                        config = cell["config"] = self.cell_config(spec, task, regime, seed)
                        builds_on_full = builds_on_run(config) or (config.distill and not config.teacher)
                        cell["full_label"] = self.full_label(config) if builds_on_full else None
                        cells.append(cell)
        yield from sorted(cells, key=lambda cell: cell["method"] in SOURCE_METHODS or bool(cell["full_label"]))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(kw_only=True)
class BenchCommandOptions:
    """``glue-sparse bench``'s flags: a config file and the fields each flag overrides, the part of the grid to
    run now, where to write and how to run the cells (each field is a flag)."""

    config: str | None = option(None, "JSON or YAML bench config (the flags below override its fields)")
    tasks: list[str] | None = option(None, "comma-separated GLUE tasks")
    methods: list[str] | None = option(None, "comma-separated methods: full, lora, gates, gates+lora, gates+full, "
                                              "magnitude, mask-search")
    regimes: list[str] | None = option(None, "comma-separated: full, limited")
    seeds: list[int] | None = option(None, "comma-separated seeds")
    only_tasks: list[str] | None = option(None, "run only this part of the grid: comma-separated tasks (its rows are "
                                                "the whole grid's; for a grid longer than one working stretch)")
    only_seeds: list[int] | None = option(None, "run only this part of the grid: comma-separated seeds")
    only_regimes: list[str] | None = option(None, "run only this part of the grid: comma-separated regimes")
    only_arms: list[str] | None = option(None, "run only this part of the grid: comma-separated method labels "
                                               "(e.g. 'full,gates-r0.3'; a label's blanks may be dashes)")
    model: str | None = option(None, "encoder folder or Hub name (default: the config's, else the packaged MiniLM)")
    epochs: float | None = option(None, "training epochs of every cell (default: the config's, else 5)")
    max_steps: int | None = option(None, "stop every cell after this many optimiser steps (default: --epochs)")
    batch_size: int | None = option(None, "per-device batch of every cell (default: the config's, else 32)")
    eval_limit: int | None = option(None, "validation docs per task for lm-eval (default: all)")
    latency_docs: int | None = option(None, "validation docs each latency timing runs (default: the config's, else "
                                            "256)")
    data_dir: str | None = option(None, "local GLUE folder (else $GLUE_SPARSE_DATA_DIR, then the Hub)")
    hub: bool | None = option(None, "ask the Hugging Face Hub for GLUE data not found locally (default: the "
                                    "config's, else yes; --no-hub: never)")
    convention: str = option("default", "GLUE-average convention of the report: default, leaderboard or bert_paper")
    output: str = required("bench folder: results.jsonl, runs/, report/")
    executor: str = option("local", "local: cells one after another here; ray: each cell a Ray task")
    address: str | None = option(None, "Ray cluster address (default: start a local Ray for this run)")
    retries: int = option(2, "Ray: retries of a failed or killed cell")
    cpus_per_cell: float | None = option(None, "Ray: CPUs a cell asks for (default: the config's, else 1)")
    gpus_per_cell: float | None = option(None, "Ray: GPUs a cell asks for (default: the config's, else 0)")
    retime_latency: bool = option(False, "re-time the latency of the part's finished rows that other code (another "
                                         "commit or a dirty tree) timed; trains nothing again (run with nothing "
                                         "else on the machine)")


@dataclass(kw_only=True)
class ReportOptions:
    """``glue-sparse report``'s flags: which stores, where the tables and plots go, how they are judged."""

    results: list[str] = required("bench results.jsonl file(s), comma-separated (or space-separated, as a shell "
                                  "glob gives them); several report the parts of one grid together")
    output: str = required("folder for report.md, report.csv and the plots", deprecated={"--out": None})
    convention: str = option("default", "GLUE-average convention: default, leaderboard or bert_paper")
    title: str = option("glue-sparse benchmark", "the report's heading")
    config: str | None = option(None, "the bench config whose targets to judge by (default: targets.json's)")
    only_tasks: list[str] | None = option(None, "report only this part of the rows: comma-separated tasks")
    only_seeds: list[int] | None = option(None, "report only this part of the rows: comma-separated seeds (e.g. "
                                                "one seed of a store that holds three)")
    only_regimes: list[str] | None = option(None, "report only this part of the rows: comma-separated regimes")
    only_arms: list[str] | None = option(None, "report only this part of the rows: comma-separated method labels "
                                               "(a label's blanks may be dashes)")
