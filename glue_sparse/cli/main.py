"""The ``glue-sparse`` command: the CLI boundary (one error line, exit codes, ``-v``) and the parser,
assembled from one module per subcommand. Each subcommand module has ``HELP`` and ``run``, and
``add_arguments`` for flags of its own; ``PARSER_DATACLASSES``, where present, are option dataclasses
whose fields become flags (``HfArgumentParser``), so their defaults and help are written once, in the
experiment layer."""

from __future__ import annotations

import argparse
import json
import sys
import traceback

from transformers import HfArgumentParser

from glue_sparse.cli import bench, data, demo, finetune, perplexity, posttrain, pretrain, pretrain_report, report, speed
from glue_sparse_tasks.console import configure_console
from glue_sparse_tasks.errors import UserInputError

SUBCOMMANDS = {"data": data, "finetune": finetune, "bench": bench, "report": report, "demo": demo,
               "perplexity": perplexity, "posttrain": posttrain, "pretrain": pretrain,
               "pretrain-report": pretrain_report, "speed": speed}
DESCRIPTION = ("GLUE evaluation through lm-eval, sparse gates that physically prune, fine-tuning and benchmarks "
               "(-v or --verbose anywhere: library logging and full tracebacks)")
EVAL_HELP = "lm-eval run with glue_sparse tasks and models registered (same arguments as `lm_eval run`)"


def cmd_eval(argv: list[str]) -> int:
    """Run lm-eval's ``run`` with our tasks and models registered; data checked before the model."""
    from glue_sparse.cli.eval import run_lm_eval  # lm-eval's CLI: loaded only for `glue-sparse eval`

    return run_lm_eval(argv)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glue-sparse", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=HfArgumentParser)
    for name, module in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP,
                           dataclass_types=getattr(module, "PARSER_DATACLASSES", None),
                           formatter_class=argparse.HelpFormatter)
        if hasattr(module, "add_arguments"):
            module.add_arguments(p)
        p.set_defaults(func=module.run)
    sub.add_parser("eval", help=EVAL_HELP, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand behind the CLI boundary: a user error is one line on stderr and exit 2,
    Ctrl-C exit 130, anything unexpected one line and exit 1 (the traceback with ``-v``/``--verbose``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = any(a in ("-v", "--verbose") for a in argv)
    argv = [a for a in argv if a not in ("-v", "--verbose")]
    configure_console(verbose)
    try:
        if argv[:1] == ["eval"]:
            return cmd_eval(argv[1:])
        args = build_parser().parse_args(argv)
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
