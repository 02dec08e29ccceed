"""The ``glue-sparse`` command: ``data`` (what GLUE data is where), ``eval`` (lm-eval, registered) and
``finetune``, ``bench``, ``report``,
``demo``, ``perplexity``, ``posttrain`` and ``speed``."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import traceback
from collections import Counter

from glue_sparse_tasks.console import configure_console
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.glue_tasks import GLUE_TASKS, POOLED_SPLIT

SUMMARY_SPLITS = ("train", "validation", "validation_matched", "validation_mismatched", POOLED_SPLIT)


def _splits_to_show(task: str) -> list[str]:
    return [s for s in GLUE_TASKS[task].splits if s in SUMMARY_SPLITS]


def _label_counts(rows: list[dict], is_regression: bool) -> str:
    labels = [r["label"] for r in rows]
    if is_regression:
        return f"mean {sum(labels) / len(labels):.3f} in [{min(labels):g}, {max(labels):g}]"
    counts = Counter(labels)
    return " ".join(f"{k}:{counts[k]}" for k in sorted(counts))


def cmd_data(args: argparse.Namespace) -> int:
    """Print rows, label counts, source and fingerprint of every split; mark what is missing."""
    from glue_sparse_tasks.data import load_glue_rows
    from glue_sparse_tasks.local_formats import GlueDataError, GlueSplitNotFound

    if args.data_dir and not os.path.isdir(args.data_dir):
        raise UserInputError(f"--data-dir {args.data_dir}: not a directory; give the folder that holds the "
                             "GLUE task folders (or its parent holding glue/)")
    tasks = list(GLUE_TASKS) if args.tasks == "all" else args.tasks.split(",")
    unknown = [t for t in tasks if t not in GLUE_TASKS]
    if unknown:
        raise UserInputError(f"unknown GLUE task(s) {unknown}; valid tasks are: {', '.join(GLUE_TASKS)}")
    records = []
    missing = broken = 0
    for task in tasks:
        spec = GLUE_TASKS[task]
        for split in _splits_to_show(task):
            try:
                rows, prov = load_glue_rows(task, split, args.data_dir, use_hub=args.hub)
            except GlueSplitNotFound as exc:
                missing += 1
                records.append({"task": task, "split": split, "missing": True,
                                "why": str(exc).splitlines()[0]})
                continue
            except GlueDataError as exc:  # present but unreadable: show the error, not "missing"
                broken += 1
                records.append({"task": task, "split": split, "missing": False, "error": str(exc)})
                continue
            records.append({**prov.to_dict(), "missing": False,
                            "labels": _label_counts(rows, spec.is_regression)})
    if args.json:
        print(json.dumps(records, indent=2))
        return 2 if broken else 0
    print(f"{'task':<6} {'split':<22} {'rows':>7}  {'labels':<34} {'sha256':<12}  source")
    for r in records:
        if r["missing"]:
            print(f"{r['task']:<6} {r['split']:<22} {'MISSING':>7}  (not found locally"
                  f"{' or on the Hub' if args.hub else ''})")
        elif "error" in r:
            print(f"{r['task']:<6} {r['split']:<22} {'ERROR':>7}  {r['error']}")
        else:
            print(f"{r['task']:<6} {r['split']:<22} {r['rows']:>7}  {r['labels']:<34} "
                  f"{r['sha256'][:12]}  {r['source']}")
    print(f"\n{len(records) - missing - broken} splits found, {missing} missing, {broken} unreadable.")
    return 2 if broken else 0


def cmd_eval(argv: list[str]) -> int:
    """Run lm-eval's ``run`` with our tasks and models registered; data checked before the model."""
    from glue_sparse_tasks.eval_cli import run_lm_eval

    return run_lm_eval(argv)


SUBCOMMANDS = (  # name, module, add-arguments function, run function, help
    ("finetune", "finetune_cli", "add_arguments", "run",
     "fine-tune an encoder on GLUE tasks (full, lora, gates, gates+lora)"),
    ("bench", "bench_cli", "add_bench_arguments", "run_bench_cmd",
     "fine-tune, evaluate through lm-eval and time methods x regimes x seeds"),
    ("report", "bench_cli", "add_report_arguments", "run_report_cmd",
     "markdown/CSV tables and plots from a bench results store"),
    ("demo", "bench_cli", "add_demo_arguments", "run_demo_cmd",
     "a smoke-sized offline bench on the packaged MiniLM (the main job)"),
    ("perplexity", "perplexity_cli", "add_perplexity_arguments", "run_perplexity",
     "causal-LM token perplexity under named protocols (sparsegpt, galore)"),
    ("posttrain", "perplexity_cli", "add_posttrain_arguments", "run_posttrain",
     "sparse-gate post-training of a causal LM, dense vs gated vs pruned"),
    ("speed", "speed_cli", "add_arguments", "run",
     "dense vs physically pruned CPU latency and FLOP ratios (default: packaged MiniLM)"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glue-sparse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("data", help="show which GLUE splits are available, with rows, labels, "
                                    "source and fingerprint")
    p.add_argument("--data-dir", help="local GLUE folder (else $GLUE_SPARSE_DATA_DIR, then the Hub)")
    p.add_argument("--tasks", default="all", help="comma-separated task names, or 'all'")
    p.add_argument("--no-hub", dest="hub", action="store_false",
                   help="never ask the Hugging Face Hub (faster offline)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=cmd_data)
    for name, module, add, run, help_text in SUBCOMMANDS:
        p = sub.add_parser(name, help=help_text)
        mod = importlib.import_module(f"glue_sparse_tasks.{module}")
        getattr(mod, add)(p)
        p.set_defaults(func=getattr(mod, run))
    sub.add_parser("eval", help="lm-eval run with glue_sparse tasks and models registered "
                                "(same arguments as `lm_eval run`)", add_help=False)
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
