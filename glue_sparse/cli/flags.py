"""Flags from an experiment's option dataclass, and the dataclass back from the parsed flags: one vocabulary
for every subcommand (``docs/cli.md``).

- Every field is one flag, shown dashed (``--train-limit``); ``glue-sparse`` accepts the underscore spelling
  too (``cli.main`` reads ``--train_limit`` as ``--train-limit``). A field's ``flag`` metadata names its flag
  where the field's own name is kept for run identities (``learning_rate`` is ``--lr``).
- A true/false field is a switch: ``--prune`` sets it, ``--no-prune`` clears it; ``--prune yes|no`` (the
  HfArgumentParser form older scripts use) still works, and help shows the switch, not ``[PRUNE]``.
- A list field takes comma-separated values (``--seeds 1,2,3``); space-separated ones still add up.
- A field's ``deprecated`` metadata maps old spellings to it (optionally with a map of old values); ``cli.main``
  rewrites them before parsing and prints a one-line notice (``glue_sparse_tasks.deprecations``).

Building flags here instead of through HfArgumentParser keeps ``glue-sparse <command> --help`` free of
transformers (and so of its 1–2 s import): the CLI imports no ML library until a command runs.
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


class Switch(argparse.Action):
    """A true/false flag: ``--name`` sets it, ``--no-name`` clears it, ``--name yes|no`` sets it as said."""

    def __init__(self, option_strings: list[str], dest: str, default: Any = False, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        kwargs.pop("type", None)
        super().__init__(option_strings, dest, nargs="?", default=default, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        negative = bool(option_string and option_string.startswith("--no-"))
        if negative and values is not None:
            parser.error(f"{option_string} takes no value")
        try:
            value = True if values is None else string_to_bool(values)
        except argparse.ArgumentTypeError as exc:
            parser.error(f"{option_string}: {exc}")
        setattr(namespace, self.dest, not value if negative else value)


class CommaList(argparse.Action):
    """A list flag: comma-separated values (``--seeds 1,2,3``), cast to the field's item type; values given
    space-separated, or the flag given twice, add up."""

    def __init__(self, option_strings: list[str], dest: str, item: type = str, **kwargs: Any) -> None:
        self.item = item
        kwargs.pop("nargs", None)
        kwargs.pop("type", None)
        kwargs.pop("action", None)
        super().__init__(option_strings, dest, nargs="+", **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        items = [v for value in values for v in str(value).split(",") if v]
        try:
            cast = [self.item(v) for v in items]
        except ValueError:
            parser.error(f"{option_string}: expected comma-separated {self.item.__name__} values, got {values}")
        given = getattr(namespace, f"_{self.dest}_given", False)
        setattr(namespace, self.dest, (getattr(namespace, self.dest) if given else []) + cast)
        setattr(namespace, f"_{self.dest}_given", True)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, with switches shown as switches and list flags as ``A,B,...``."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if isinstance(action, Switch):
            return ", ".join(action.option_strings)
        return super()._format_action_invocation(action)

    def _format_args(self, action: argparse.Action, default_metavar: str) -> str:
        if isinstance(action, Switch):
            return ""
        if isinstance(action, CommaList):
            metavar = self._metavar_formatter(action, default_metavar)(1)[0]
            return f"{metavar}[,{metavar}...]"
        return super()._format_args(action, default_metavar)


def _unwrap_optional(annotation: Any) -> Any:
    """``X | None`` -> ``X``; anything else unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"only X | None unions can be flags, got {annotation}")
        return args[0]
    return annotation


def flag_name(field: dataclasses.Field) -> str:
    """The flag a field is shown as: ``--`` and its ``flag`` metadata or name, dashed."""
    return "--" + (field.metadata.get("flag") or field.name).replace("_", "-")


def add_dataclass_flags(parser: argparse.ArgumentParser, options: type) -> None:
    """One flag per init field of the ``options`` dataclass (its default, help and aliases from the field)."""
    hints = typing.get_type_hints(options)
    for field in dataclasses.fields(options):
        if field.init and field.metadata.get("flag", "") is not None:
            _add_field(parser, field, hints[field.name])


def _add_field(parser: argparse.ArgumentParser, field: dataclasses.Field, annotation: Any) -> None:
    kwargs = {k: v for k, v in field.metadata.items() if k not in ("aliases", "flag", "deprecated")}
    names = [flag_name(field), *field.metadata.get("aliases", ())]
    plain = _unwrap_optional(annotation)
    if field.metadata.get("flag"):
        kwargs.setdefault("metavar", field.metadata["flag"].replace("-", "_").upper())
    has_default = field.default is not dataclasses.MISSING
    if field.default_factory is not dataclasses.MISSING:
        kwargs["default"] = field.default_factory()
    elif has_default:
        kwargs["default"] = field.default
    else:
        kwargs["required"] = True
    if plain is bool:
        kwargs.pop("action", None)
        names.append("--no-" + names[0][2:])
        action = parser.add_argument(*names, dest=field.name, action=Switch, **kwargs)
    elif typing.get_origin(plain) is list:
        kwargs.pop("action", None)
        action = parser.add_argument(*names, dest=field.name, action=CommaList, item=typing.get_args(plain)[0],
                                     **kwargs)
    elif plain in (str, int, float):
        action = parser.add_argument(*names, dest=field.name, type=plain, **kwargs)
    else:
        raise TypeError(f"{field.name}: no flag for type {annotation} (str, int, float, bool, list[...], X | None)")
    action.deprecated = dict(field.metadata.get("deprecated") or {})


def options_from(args: argparse.Namespace, options: type[T], **extra: Any) -> T:
    """``options(**flags)`` for every field of the ``options`` dataclass, plus ``extra``."""
    return options(**{f.name: getattr(args, f.name) for f in dataclasses.fields(options)
                      if f.name not in extra and hasattr(args, f.name)}, **extra)
