"""``glue-sparse demo``: the README's main job (``scripts/main.sh``)."""

from __future__ import annotations

import argparse

from glue_sparse.experiments.demo import DEMO_EPOCHS, DEMO_TRAIN_ROWS, run_demo


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", default="demo_out", help="folder for the demo bench (default demo_out)")
    p.add_argument("--data-dir", help="GLUE folder (default: $GLUE_SPARSE_DATA_DIR or ../shared/data/glue)")
    p.add_argument("--train-limit", type=int, default=DEMO_TRAIN_ROWS,
                   help=f"training rows per task (default {DEMO_TRAIN_ROWS})")
    p.add_argument("--epochs", type=float, default=DEMO_EPOCHS, help=f"epochs (default {DEMO_EPOCHS:g})")


def run(args: argparse.Namespace) -> int:
    run_demo(args.output, args.data_dir, args.train_limit, args.epochs)
    return 0
