"""The ``glue-sparse`` command: the CLI boundary (one error line, exit codes, ``-v``) and the parser.
Subcommands are listed in ``commands.SUBCOMMANDS``; only the one being run is imported. Each such
module has ``run``, and ``add_arguments`` for flags of its own; ``PARSER_DATACLASSES``, where present,
are option dataclasses whose fields become flags (``flags.py``, one vocabulary: ``vocabulary.py``), so their
defaults and help are written once, in the experiment layer. ``glue-sparse --help`` imports none of the
command modules, and a command module imports no ML library until its ``run``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from collections.abc import Collection

import glue_sparse_tasks

from glue_sparse.cli.commands import SUBCOMMANDS
from glue_sparse.cli.flags import HelpFormatter, add_dataclass_flags
from glue_sparse.cli.vocabulary import normalise
from glue_sparse.common.run_environment import record_command
from glue_sparse.eval import command as eval_command
from glue_sparse_tasks.console import configure_console
from glue_sparse_tasks.errors import UserInputError

DESCRIPTION = ("GLUE evaluation through lm-eval, sparse gates that physically prune, fine-tuning and benchmarks "
               "(-v or --verbose anywhere: library logging and full tracebacks; -q or --quiet: no progress bars)")


def build_parser(loaded: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser. Only the subcommands in ``loaded`` (default: all) are imported and given their flags;
    the others are listed by name and help alone, enough for ``--help`` and for argparse's 'invalid
    choice' message."""
    parser = argparse.ArgumentParser(prog="glue-sparse", description=DESCRIPTION, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"glue-sparse {glue_sparse_tasks.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if loaded is not None and name not in loaded:
            sub.add_parser(name, help=help_text)
            continue
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
        for options in getattr(module, "PARSER_DATACLASSES", ()):
            add_dataclass_flags(p, options)
        if hasattr(module, "add_arguments"):
            module.add_arguments(p)
        p.set_defaults(func=module.run)
    sub.add_parser("eval", help=eval_command.HELP, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand behind the CLI boundary: a user error is one line on stderr and exit 2,
    Ctrl-C exit 130, anything unexpected one line and exit 1 (the traceback with ``-v``/``--verbose``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = any(a in ("-v", "--verbose") for a in argv)
    quiet = any(a in ("-q", "--quiet") for a in argv)
    argv = [a for a in argv if a not in ("-v", "--verbose", "-q", "--quiet")]
    configure_console(verbose, quiet=quiet)
    record_command(argv)
    try:
        if argv[:1] == ["eval"]:
            return eval_command.run(argv[1:])  # lm-eval's own spellings, passed through as they are
        command = next((a for a in argv if not a.startswith("-")), None)
        parser = build_parser([command] if command else [])
        args = parser.parse_args(normalise(argv, parser, command))
        return args.func(args)
    except KeyboardInterrupt:
        print("\ninterrupted (Ctrl-C); finished results are kept, unfinished runs continue with --resume",
              file=sys.stderr)
        return 130
    except (UserInputError, json.JSONDecodeError) as exc:
        return _fail(f"error: {exc}", verbose, 2)
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(f"error:{where}: {exc.strerror or exc} (check the path exists and is writable)", verbose, 2)
    except Exception as exc:  # noqa: BLE001 - the boundary: one line unless --verbose
        return _fail(f"error: unexpected {type(exc).__name__}: {exc} (run again with --verbose for the traceback)",
                     verbose, 1)


def _fail(message: str, verbose: bool, code: int) -> int:
    if verbose:
        traceback.print_exc()
    print(message, file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
