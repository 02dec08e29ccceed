"""Turning parsed flags back into an experiment's option dataclass (whose fields made the flags)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def options_from(args: argparse.Namespace, options: type[T], **extra: Any) -> T:
    """``options(**flags)`` for every field of the ``options`` dataclass, plus ``extra``."""
    return options(**{f.name: getattr(args, f.name) for f in dataclasses.fields(options) if f.name not in extra},
                   **extra)
