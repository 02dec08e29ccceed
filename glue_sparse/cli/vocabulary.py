"""One spelling per concept, for every subcommand: the vocabulary the flags use, and the reading of a command
line before it is parsed: ``--a_b`` is ``--a-b`` everywhere, and a spelling an older release used is read
as today's with a one-line notice (it goes in ``glue_sparse_tasks.deprecations``). ``eval`` is left alone:
it passes lm-eval's own arguments through."""

from __future__ import annotations

import argparse
import sys

from glue_sparse_tasks.deprecations import removal_notice

#: canonical flag -> what it means in every command, and the synonyms no command may show instead of it
VOCABULARY: dict[str, tuple[str, tuple[str, ...]]] = {
    "--output": ("the folder results are written to (a single-file result goes inside it)",
                 ("--out", "--out-dir", "--output-dir", "--output-path")),
    "--data-dir": ("a local GLUE (or C4/WikiText) folder, else $GLUE_SPARSE_DATA_DIR, then the Hub", ("--data",)),
    "--model": ("a model: a folder or a Hub name (default: the command's packaged model)",
                ("--base-model", "--model-path")),
    "--seeds": ("comma-separated seeds; several run one after another", ("--seed",)),
    "--lr": ("the learning rate", ("--learning-rate",)),
    "--target-removal": ("the share of gated weights to remove: a comma-separated list where a command sweeps "
                         "levels, one value where it cannot", ("--removed", "--removal")),
    "--precision": ("auto, fp32, bf16 or fp16", ("--dtype",)),
    "--device": ("auto, cpu, cuda or cuda:N", ()),
}


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(command)
    return None


def deprecated_spellings(parser: argparse.ArgumentParser) -> dict[str, tuple[str, dict | None]]:
    """{old spelling: (today's flag, a map of old values or None)} of one subcommand's parser."""
    out = {}
    for action in parser._actions:
        for old, values in (getattr(action, "deprecated", None) or {}).items():
            out[old] = (action.option_strings[0], values)
    return out


def normalise(argv: list[str], parser: argparse.ArgumentParser, command: str | None) -> list[str]:
    """``argv`` with every ``--flag`` dashed and old spellings replaced by today's (a notice for each)."""
    sub = _subparser(parser, command)
    old = deprecated_spellings(sub) if sub is not None else {}
    out: list[str] = []
    values_of: dict | None = None
    for token in argv:
        if values_of is not None:
            out.append(values_of.get(token, token))
            values_of = None
            continue
        if not token.startswith("--") or token == "--":
            out.append(token)
            continue
        name, eq, value = token.partition("=")
        name = "--" + name[2:].replace("_", "-")
        if name in old:
            new, values = old[name]
            print(f"glue-sparse {command}: {name} is now {new}; the old spelling still works, but {removal_notice()}",
                  file=sys.stderr)
            name = new
            if values and eq:
                value = values.get(value, value)
            elif values:
                values_of = values
        out.append(name + eq + value)
    return out
