"""How an experiment option is declared: a dataclass field holding its default and its help text, the
one place both are written. The CLI turns such fields into flags (``glue_sparse.cli.flags``, with
HfArgumentParser's conventions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


def required(help: str, aliases: tuple[str, ...] = ()) -> Any:
    """A dataclass field without default: a required flag."""
    return field(metadata={"help": help, **({"aliases": list(aliases)} if aliases else {})})


@dataclass(kw_only=True)
class DeviceOptions:
    """``--device`` and ``--precision``, the same two flags meaning the same in every command that trains or
    scores (``sparse_models.runtime.devices`` resolves them)."""

    device: str = option("auto", "auto (a CUDA GPU when one is visible, else the CPU), cpu, cuda or cuda:N "
                                 "(training commands: one GPU per process, chosen by CUDA_VISIBLE_DEVICES)")
    precision: str = option("auto", "auto (bf16 autocast on a CUDA device that supports it, fp32 elsewhere), fp32, "
                                    "bf16 or fp16 (autocast: the weights stay fp32)")
