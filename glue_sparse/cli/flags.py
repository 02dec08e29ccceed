"""Flags from an experiment's option dataclass, and the dataclass back from the parsed flags.

The flags follow ``transformers.HfArgumentParser``'s conventions exactly (``--name`` and ``--name-with-
dashes``; a bool takes an optional yes/no value and, when its default is True, a ``--no_name`` /
``--no-name`` complement; a list takes one or more values; the field's metadata goes to argparse), and
``tests/test_cli_flags.py`` holds that against HfArgumentParser itself, field by field. Building them
here instead of through HfArgumentParser keeps ``glue-sparse <command> --help`` free of transformers
(and so of its 1–2 s import): the CLI imports no ML library until a command runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")
TRUE_WORDS, FALSE_WORDS = ("yes", "true", "t", "y", "1"), ("no", "false", "f", "n", "0")


def string_to_bool(value: str | bool) -> bool:
    """A flag's yes/no word as a bool (the words HfArgumentParser accepts)."""
    if isinstance(value, bool):
        return value
    if value.lower() in TRUE_WORDS:
        return True
    if value.lower() in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(f"expected one of yes/no, true/false, t/f, y/n, 1/0; got {value!r}")


def _unwrap_optional(annotation: Any) -> Any:
    """``X | None`` -> ``X``; anything else unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"only X | None unions can be flags, got {annotation}")
        return args[0]
    return annotation


def add_dataclass_flags(parser: argparse.ArgumentParser, options: type) -> None:
    """One flag per init field of the ``options`` dataclass (its default, help and aliases from the field)."""
    hints = typing.get_type_hints(options)
    for field in dataclasses.fields(options):
        if field.init:
            _add_field(parser, field, hints[field.name])


def _add_field(parser: argparse.ArgumentParser, field: dataclasses.Field, annotation: Any) -> None:
    names = [f"--{field.name}"] + ([f"--{field.name.replace('_', '-')}"] if "_" in field.name else [])
    kwargs = dict(field.metadata)
    aliases = kwargs.pop("aliases", [])
    plain = _unwrap_optional(annotation)
    has_default = field.default is not dataclasses.MISSING
    bool_kwargs = dict(kwargs)
    if plain is bool:
        kwargs.update(type=string_to_bool, default=field.default if has_default else False, nargs="?", const=True)
        if annotation is not bool and field.default is None:  # bool | None = None: a plain optional value
            kwargs.pop("nargs"), kwargs.pop("const"), kwargs.pop("default")
    elif typing.get_origin(plain) is list:
        kwargs.update(type=typing.get_args(plain)[0], nargs=kwargs.get("nargs", "+"))
        if field.default_factory is not dataclasses.MISSING:
            kwargs["default"] = field.default_factory()
        elif not has_default:
            kwargs["required"] = True
    elif plain in (str, int, float):
        kwargs["type"] = plain
        if has_default:
            kwargs["default"] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            kwargs["default"] = field.default_factory()
        else:
            kwargs["required"] = True
    else:
        raise TypeError(f"{field.name}: no flag for type {annotation} (str, int, float, bool, list[...], X | None)")
    parser.add_argument(*names, *aliases, **kwargs)
    if plain is bool and field.default is True:
        parser.add_argument(f"--no_{field.name}", f"--no-{field.name.replace('_', '-')}", action="store_false",
                            dest=field.name, **{**bool_kwargs, "default": False})


def options_from(args: argparse.Namespace, options: type[T], **extra: Any) -> T:
    """``options(**flags)`` for every field of the ``options`` dataclass, plus ``extra``."""
    return options(**{f.name: getattr(args, f.name) for f in dataclasses.fields(options) if f.name not in extra},
                   **extra)
