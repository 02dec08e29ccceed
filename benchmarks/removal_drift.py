"""Removal share against the gate learning rate (issue #51): a tiny random BERT fine-tuned on fixture RTE
rows with the removal recipe at ``--target-removal``, once per gate learning rate and ranking; prints the
share of gated weights each run removed beside the one asked.

    python benchmarks/removal_drift.py --out runs/removal_drift --gate-lrs 0.01 1 5

At a high gate lr training drives gates shut before the schedule asks; the removal must stay at the
target anyway. To see the code before that fix, run this file with the older package first on the path:
``git worktree add /tmp/before fa59d50`` and ``PYTHONPATH=/tmp/before python benchmarks/removal_drift.py ...``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if not os.environ.get("PYTHONPATH"):  # this checkout, unless the command chose another package to measure
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from glue_sparse_tasks.console import configure_console, quiet_environment  # noqa: E402

quiet_environment(verbose=False)  # before the libraries load: one table, no library chatter
from glue_sparse.finetune.options import FinetuneConfig  # noqa: E402
from glue_sparse.finetune.run import run_finetune  # noqa: E402
from tests.conftest import fixture_rows, write_jsonl  # noqa: E402
from tests.tiny_models import save_tiny_classifier  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="scratch folder (tiny model, fixture data, runs)")
    parser.add_argument("--gate-lrs", type=float, nargs="+", default=[0.01, 1.0, 5.0])
    parser.add_argument("--scores", nargs="+", default=["logit", "taylor"])
    parser.add_argument("--target-removal", type=float, default=0.3)
    parser.add_argument("--train-rows", type=int, default=24)
    parser.add_argument("--epochs", type=float, default=4.0)
    args = parser.parse_args(argv)
    configure_console()
    out = Path(args.out)
    base = str(save_tiny_classifier(out / "base", 2, seed=11))
    data = out / "data"
    write_jsonl(data / "rte" / "train.jsonl", fixture_rows("rte", 40, 3))
    write_jsonl(data / "rte" / "validation.jsonl", fixture_rows("rte", 24))
    print(f"{'gate lr':>8} {'ranking':<8} {'asked':>6} {'removed':>8}")
    for lr in args.gate_lrs:
        for score in args.scores:
            config = FinetuneConfig(task="rte", method="gates", base_model=base, target_removal=args.target_removal,
                                    train_limit=args.train_rows, epochs=args.epochs, batch_size=8,
                                    eval_batch_size=16, max_length=32, logging_steps=4, gate_learning_rate=lr,
                                    removal_score=score)
            record = run_finetune(config, out / f"lr{lr:g}-{score}", data_dir=str(data), use_hub=False, overwrite=True)
            print(f"{lr:>8g} {score:<8} {args.target_removal:>6.3f} "
                  f"{record['accounting']['removed_share_of_gated']:>8.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
