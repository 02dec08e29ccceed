"""The targets the reports judge, read from ``targets.json`` (the one place their numbers are written),
with a bench config's ``targets`` block overriding the bench ones for its grid. Import-light: the bench
config validates its block before anything loads."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from glue_sparse_tasks.errors import UserInputError

TARGETS_FILE = Path(__file__).with_name("targets.json")


class TargetsError(UserInputError):
    """A ``targets`` block that names an unknown target or gives a value of the wrong kind."""


def _section(name: str) -> dict[str, Any]:
    return json.loads(TARGETS_FILE.read_text())[name]


@dataclass(frozen=True)
class BenchTargets:
    """What ``glue-sparse report`` states as met or missed under its table."""

    convergence_floor: float
    convergence_floor_tasks: tuple[str, ...]
    gates_gap_to_full: float
    gates_margin_over_magnitude: float
    removal_tolerance: float
    latency_target: float
    latency_target_removal: float
    best_gated_gap_to_full: float
    distilled_gates_margin_over_lora: float
    best_gated_margin_over_baselines: float

    @classmethod
    def load(cls, overrides: Mapping[str, Any] | None = None, source: str = "targets") -> "BenchTargets":
        """targets.json's bench targets, with ``overrides`` (a bench config's ``targets`` block) on top."""
        merged = {**_section("bench"), **(overrides or {})}
        unknown = sorted(set(merged) - {f.name for f in fields(cls)})
        if unknown:
            raise TargetsError(f"{source}: unknown target(s) {unknown}; known: {sorted(f.name for f in fields(cls))}")
        try:
            merged = {k: tuple(map(str, v)) if k == "convergence_floor_tasks" else float(v) for k, v in merged.items()}
        except (TypeError, ValueError) as exc:
            raise TargetsError(f"{source}: targets must be numbers (convergence_floor_tasks: task names): {exc}") \
                from None
        return cls(**merged)


@dataclass(frozen=True)
class SpeedTargets:
    """What ``glue-sparse speed`` states under its table (random closed patterns, batch 32)."""

    never_slower_levels: tuple[float, ...]
    speedup_level: float
    speedup_target: float
    ideal_share_levels: tuple[float, ...]
    ideal_share_target: float

    @classmethod
    def load(cls) -> "SpeedTargets":
        raw = _section("speed")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})


DEFAULT_BENCH_TARGETS = BenchTargets.load()
DEFAULT_SPEED_TARGETS = SpeedTargets.load()
