"""Whether removing a layer's closed rows and columns pays for its index work, decided by timing.

Removing the closed columns of a layer whose input arrives at full width costs a gather; removing
closed rows whose output must go back to full width (the residual stream, the attention reshape)
costs a scatter (in BERT-family output layers an add into the residual, timed with that add). On CPU
either can cost more than the smaller matrix saves (at 10-20% removal it does). ``choose_sides``
times every candidate layout of each such layer (the real ``PrunedLinear`` forward, or the plain
matrix when nothing is removed, on random inputs of a nominal token count) and keeps the fastest.
``choose_whole_model`` then times the pruned models such choices and ``remove`` build (with and without
attention narrowed per head) whole against the one with no index work (``keep``) and keeps the fastest. Closed
weights kept as folded zeros give the same output as removing them, so every choice is exact; only
speed differs.

Timings are cached per machine and shape in one JSON file (``$GLUE_SPARSE_CACHE`` or
``~/.cache/glue_sparse``), keyed by a hash of everything that changes them (CPU, torch, threads, the
``PrunedLinear`` source, dtype, device, token count and shapes), so each shape is timed once.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import platform
from itertools import product
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

from glue_sparse_tasks.atomic import write_json_atomic
from glue_sparse_tasks.method_defaults import DEFAULT_ALIGN
from sparse_models.pruned.modeling_sparse_pruned import QueryKeyNarrowedAttention
from sparse_models.pruned.pruned_linear import PrunedLinear
from sparse_models.sparse_gates.pruning import KEEP, REMOVE, ModulePlan, PruningPlan, Side
from sparse_models.runtime.timing import interleaved_rounds

__all__ = ["DEFAULT_LAYOUT_LENGTH", "DEFAULT_LAYOUT_TOKENS", "cache_path", "candidate_sides",
           "choose_sides", "choose_whole_model"]

#: Tokens per forward the choice is made for: a GLUE batch of 32 at about 64 tokens.
DEFAULT_LAYOUT_TOKENS = 2048
#: A layout with more index operations must beat a simpler one by this share per extra operation, so
#: timing noise does not buy index work that saves nothing.
INDEX_OP_MARGIN = 0.02
#: In the whole-model check, a layout with index work must beat the one without by this share: the
#: check's own noise, the spread among identical copies of dense MiniLM it timed, was a median 2.7%
#: (20 rounds, 10 checks; benchmarks/results/whole_model_check_noise). With 1% it returned `remove`
#: (1.00x) at 10% closed where `keep` ran 1.04x (benchmarks/results/pruning_speed/history.md).
WHOLE_MODEL_MARGIN = 0.03
#: Sequence length of the whole-model check's synthetic batches when the caller gives none (GLUE-like).
#: Give the real one where known: at 20% closed the check ranked `remove` 6% ahead of `keep` on 24 x 64
#: ids and 1% behind on 32 x 49, the shape of the SST-2 batches it was then timed on (4% behind).
DEFAULT_LAYOUT_LENGTH = 64
_ROUNDS = 7
_MIN_ROUNDS = 3
#: Rounds of the whole-model check: identical copies of dense MiniLM timed by it differed by a median
#: 9.5% with 7 rounds and 5.6% with 20 (10 checks each; benchmarks/results/whole_model_check_noise).
_WHOLE_MODEL_ROUNDS = 20
#: Seconds the whole-model check may spend timing (beyond its warm-up round): five MiniLM candidates
#: at 2,048 tokens took 0.18-0.22 s a forward on 2 CPU threads, so 20 rounds take ~20 s.
_WHOLE_MODEL_BUDGET_S = 30.0
_CACHE_ENV = "GLUE_SPARSE_CACHE"


def cache_path() -> Path:
    root = os.environ.get(_CACHE_ENV) or Path.home() / ".cache" / "glue_sparse"
    return Path(root) / "layout_timings.json"


@functools.cache
def _implementation() -> str:
    """A hash of the code being timed, so a faster or slower ``PrunedLinear`` or narrowed attention (the
    whole-model check runs it) is timed afresh."""
    source = "".join(inspect.getsource(x) for x in (PrunedLinear, QueryKeyNarrowedAttention))
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def _machine() -> dict[str, str | int]:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "torch": torch.__version__, "threads": torch.get_num_threads(), "code": _implementation()}


def candidate_sides(plan: ModulePlan) -> list[Side]:
    """Every layout of this layer: remove or keep for each side that needs index work."""
    cols = (REMOVE, KEEP) if plan.gather_in else (REMOVE,)
    rows = (REMOVE, KEEP) if plan.scatter_out else (REMOVE,)
    return [Side(c, r) for c, r in product(cols, rows)]


def _shape_key(plan: ModulePlan, tokens: int, dtype: torch.dtype, device: torch.device) -> dict:
    return {"tokens": tokens, "dtype": str(dtype), "device": device.type, "in": plan.in_features,
            "out": plan.out_features, "kept_in": len(plan.kept_in), "kept_out": len(plan.kept_out),
            "gather_in": plan.gather_in, "scatter_out": plan.scatter_out, "bias": plan.has_bias,
            "residual_add": plan.residual_add}


def _index_ops(plan: ModulePlan) -> int:
    return int(plan.gather_in) + int(plan.scatter_out)


@torch.inference_mode()
def _time_layouts(plans: list[ModulePlan], tokens: int, dtype: torch.dtype, device: torch.device) -> list[float]:
    """Fastest of ``_ROUNDS`` forwards for each layout (rounds interleaved, a warm-up round dropped):
    the minimum, as for any micro-benchmark, because noise only ever adds time."""
    generator = torch.Generator().manual_seed(0)
    calls = []
    for plan in plans:
        width = plan.in_features if plan.gather_in or len(plan.kept_in) == plan.in_features else len(plan.kept_in)
        x = torch.randn(tokens, width, generator=generator).to(device=device, dtype=dtype)
        weight = torch.randn(plan.out_features, plan.in_features, generator=generator).to(device=device, dtype=dtype)
        bias = torch.zeros(plan.out_features, device=device, dtype=dtype) if plan.has_bias else None
        layer = (PrunedLinear.from_dense(weight, bias, plan.kept_in.to(device), plan.kept_out.to(device),
                                         plan.gather_in, plan.scatter_out) if plan.changed
                 else lambda inp, w=weight, b=bias: F.linear(inp, w, b))
        if plan.residual_add:  # the add is part of what a row scatter there costs, so time it on both sides
            residual = torch.randn(tokens, plan.out_features, generator=generator).to(device=device, dtype=dtype)
            add = layer.add_to if plan.changed else (lambda inp, r, f=layer: f(inp) + r)
            calls.append((lambda inp, f=add, r=residual: f(inp, r), x))
        else:
            calls.append((layer, x))
    return _fastest_of_rounds(calls, device)


def _fastest_of_rounds(calls: list[tuple[Callable, Any]], device: torch.device,
                       budget_s: float | None = None, max_rounds: int = _ROUNDS) -> list[float]:
    """The fastest of ``max_rounds`` calls of each ``fn(x)`` (``_timed_rounds``)."""
    return [min(s) for s in _timed_rounds(calls, device, budget_s, max_rounds)]


def _timed_rounds(calls: list[tuple[Callable, Any]], device: torch.device,
                  budget_s: float | None = None, max_rounds: int = _ROUNDS) -> list[list[float]]:
    """Seconds of each ``fn(x)`` in every one of ``max_rounds`` rounds (the calls take turns within a round,
    in one order), a warm-up round dropped. With ``budget_s``, fewer rounds (at least ``_MIN_ROUNDS``) when
    the warm-up round says ``max_rounds`` would take longer: a whole causal LM forward on CPU takes seconds."""
    steps = [[(lambda f=fn, a=x: f(a))] for fn, x in calls]
    return interleaved_rounds(steps, max_rounds, [device], alternate=False, budget_s=budget_s,
                              min_rounds=_MIN_ROUNDS)


def choose_sides(plan: PruningPlan, tokens: int = DEFAULT_LAYOUT_TOKENS, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu", cache: Path | None = None) -> dict[str, Side]:
    """The fastest exact layout of every layer with a choice, by timing (cached per machine and shape)."""
    device = torch.device(device)
    cache = cache or cache_path()
    timings = _read_cache(cache)
    machine = _machine()
    fresh = False
    chosen: dict[str, Side] = {}
    for name, module_plan in plan.modules.items():
        sides = candidate_sides(module_plan)
        if len(sides) == 1:
            continue
        layouts = [module_plan.with_side(side) for side in sides]
        keys = [hashlib.sha256(json.dumps({**machine, **_shape_key(p, tokens, dtype, device)},
                                          sort_keys=True).encode()).hexdigest()[:24] for p in layouts]
        missing = [i for i, k in enumerate(keys) if k not in timings]
        if missing:
            for i, seconds in zip(missing, _time_layouts([layouts[i] for i in missing], tokens, dtype, device)):
                timings[keys[i]] = seconds
            fresh = True
        costs = [timings[k] * (1 + INDEX_OP_MARGIN * _index_ops(p)) for k, p in zip(keys, layouts)]
        chosen[name] = sides[min(range(len(sides)), key=costs.__getitem__)]
    if fresh:
        _write_cache(cache, timings)
    return chosen


def _read_cache(cache: Path) -> dict[str, Any]:
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}


def _write_cache(cache: Path, timings: dict[str, Any]) -> None:
    try:
        write_json_atomic(cache, timings)
    except OSError:  # a read-only home still prunes; it just times again next time
        pass


def choose_whole_model(candidates: dict[str, nn.Module], tokens: int = DEFAULT_LAYOUT_TOKENS,
                       cache: Path | None = None, length: int = DEFAULT_LAYOUT_LENGTH) -> str:
    """The name of the fastest of ``candidates`` (pruned models of one gated model, same outputs), timed
    whole at ``tokens`` tokens per forward on synthetic batches of rows of ``length`` ids; the first is
    the simplest (no index work) and wins unless another beats it by ``WHOLE_MODEL_MARGIN``, or when the
    model takes no token ids to time it on.

    Per-layer timings miss what a layer's gather or scatter costs its neighbours (caches, threads): on
    2 CPU threads the per-layer choice ran 3% slower than no index work at 10-20% closed, in the whole
    model. The candidates are timed in one interleaved run (fewer rounds for a model whose forward
    takes seconds) and cached together, keyed by the machine, the batch shape and every candidate's
    pruned shapes, so a pattern is timed once."""
    names = list(candidates)
    first = candidates[names[0]]
    if getattr(first.config.inner_config(), "vocab_size", None) is None:
        return names[0]  # no token ids to time it on (a custom, non-text model): the simplest candidate
    parameter = next(first.parameters())
    device, dtype = parameter.device, parameter.dtype
    key = hashlib.sha256(json.dumps({
        **_machine(), "check": "whole-model", "tokens": tokens, "length": length, "dtype": str(dtype),
        "device": device.type,
        "model_type": first.config.base_config.get("model_type"),
        "candidates": [[m.config.pruned_modules, m.config.attention_head_sizes] for m in candidates.values()],
    }, sort_keys=True).encode()).hexdigest()[:24]
    cache = cache or cache_path()
    timings = _read_cache(cache)
    if key not in timings:
        inner = first.config.inner_config()
        # half the position table at most: RoBERTa's positions start after the padding index
        length = max(1, min(length, tokens, getattr(inner, "max_position_embeddings", tokens) // 2))
        ids = torch.randint(0, inner.vocab_size, (max(1, round(tokens / length)), length),
                            generator=torch.Generator().manual_seed(0)).to(device)
        calls = [(lambda inp, m=model: m(input_ids=inp, attention_mask=torch.ones_like(inp)), ids)
                 for model in candidates.values()]
        with torch.inference_mode():
            timings[key] = _fastest_of_rounds(calls, device, budget_s=_WHOLE_MODEL_BUDGET_S,
                                              max_rounds=_WHOLE_MODEL_ROUNDS)
        _write_cache(cache, timings)
    seconds = timings[key]
    best = min(range(len(names)), key=seconds.__getitem__)
    return names[best] if seconds[best] * (1 + WHOLE_MODEL_MARGIN) < seconds[0] else names[0]
