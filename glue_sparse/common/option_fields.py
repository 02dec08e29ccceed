"""How an experiment option is declared: a dataclass field holding its default and its help text, the
one place both are written. The CLI turns such fields into flags (``glue_sparse.cli.flags``, with
HfArgumentParser's conventions)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glue_sparse_tasks.deprecations import removal_notice


def option(default: Any = None, help: str = "", aliases: tuple[str, ...] = (), **kwargs: Any) -> Any:
    """A dataclass field with ``help`` (and the default appended to it) and optional extra flag names."""
    if default is not None and not isinstance(default, bool) and "default" not in help:
        help = f"{help} (default {default:g})" if isinstance(default, float) else f"{help} (default {default})"
    factory = kwargs.pop("default_factory", None)
    # anything else goes to argparse as is (e.g. action="extend": a repeated flag adds, not replaces)
    metadata = {"help": help, **({"aliases": list(aliases)} if aliases else {}), **kwargs}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def required(help: str, aliases: tuple[str, ...] = (), **kwargs: Any) -> Any:
    """A dataclass field without default: a required flag (``kwargs``: its ``flag`` name, ``deprecated``
    spellings, as ``option`` takes them)."""
    return field(metadata={"help": help, **({"aliases": list(aliases)} if aliases else {}), **kwargs})


@dataclass(kw_only=True)
class DeviceOptions:
    """``--device`` and ``--precision``, the same two flags meaning the same in every command that trains or
    scores (``sparse_models.runtime.devices`` resolves them)."""

    device: str = option("auto", "auto (a CUDA GPU when one is visible, else the CPU), cpu, cuda or cuda:N "
                                 "(training commands: one GPU per process, chosen by CUDA_VISIBLE_DEVICES)")
    precision: str = option("auto", "auto (bf16 autocast on a CUDA device that supports it, fp32 elsewhere), fp32, "
                                    "bf16 or fp16 (autocast: the weights stay fp32)")


@dataclass(kw_only=True)
class SeedsOption:
    """``--seeds``, a list in every command: a command whose options hold one ``seed`` runs once per seed,
    into ``<output>/seed-<s>/`` when there are several (``per_seed``)."""

    seeds: list[int] | None = option(None, "comma-separated seeds, run one after another (default: the command's "
                                           "seed, 0); several write <output>/seed-<s>/ each")


def per_seed(options: Any, seeds: list[int] | None, output_field: str) -> list[Any]:
    """``options`` once per seed (its own ``seed`` when none are given), each with its own output folder when
    there are several."""
    from dataclasses import replace

    if not seeds:
        return [options]
    return [replace(options, seed=seed, **({output_field: str(Path(getattr(options, output_field)) / f"seed-{seed}")}
                                           if len(seeds) > 1 else {})) for seed in seeds]


def result_file(output: str, name: str) -> str:
    """Where a command that writes one results file puts it: ``<output>/<name>`` (``--output`` is a folder
    everywhere). An ``--output`` naming a ``.json`` file (the spelling of older releases) is still honoured,
    with a one-line notice."""
    if output.endswith(".json"):
        print(f"glue-sparse: --output {output}: --output is now a folder ({name} goes inside it); a .json file still "
              f"works, but {removal_notice()}", file=sys.stderr)
        return output
    return str(Path(output) / name)
