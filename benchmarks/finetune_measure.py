"""Issue #6 measurement: MiniLM, limited regime, RTE and SST-2, one seed, methods full / lora / gates.

Each run is its own ``glue-sparse finetune`` process (so peak RSS is that run's own) writing
``runs/finetune_measure/<method>/<task>/run.json``; finished runs are reused. The table goes to
``benchmarks/results/finetune_minilm_limited.{json,md}``.

    python benchmarks/finetune_measure.py --data-dir ../shared/data/glue [--epochs-rte 3 --epochs-sst2 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from glue_sparse_tasks.atomic import write_json_atomic, write_text_atomic

METHODS = ("full", "lora", "gates")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data/glue")
    parser.add_argument("--runs", default="runs/finetune_measure")
    parser.add_argument("--epochs-rte", type=float, default=3.0)
    parser.add_argument("--epochs-sst2", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/results/finetune_minilm_limited")
    args = parser.parse_args()
    epochs = {"rte": args.epochs_rte, "sst2": args.epochs_sst2}
    records = []
    for task in ("rte", "sst2"):
        for method in METHODS:
            out = Path(args.runs) / method
            cmd = [sys.executable, "-m", "glue_sparse.cli.main", "finetune", "--tasks", task, "--method", method,
                   "--regime", "limited", "--seeds", str(args.seed), "--epochs", str(epochs[task]),
                   "--output", str(out), "--data-dir", args.data_dir, "--no-hub", "--resume"]
            print("$", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            records.append(json.loads((out / task / "run.json").read_text()))
    rows = []
    for r in records:
        accounting = r["accounting"]
        rows.append({
            "task": r["task"], "method": r["method"], "epochs": r["hyperparameters"]["epochs"],
            "train_rows": r["data"]["train"]["rows"], "metric": r["primary_metric"], "score": r["final_score"],
            "trainable_parameters": accounting["trainable_parameters"],
            "dense_parameters": accounting["dense_parameters"],
            "removed_share_of_gated": accounting["removed_share_of_gated"],
            "removed_share_of_total": accounting["removed_share_of_total"],
            "seconds_per_step": r["seconds_per_step"], "train_steps": r["train_steps"],
            "peak_rss_mb": r["peak_rss_bytes"] / 2**20, "saved_mb": r["saved_bytes"] / 2**20,
            "threads": r["threads"], "git": r["git"],
        })
    write_json_atomic(args.out + ".json", {"model": records[0]["base_model"], "seed": args.seed, "rows": rows})
    lines = [
        "# MiniLM-L6, limited regime (first 10,000 train rows), seed "
        f"{args.seed}, CPU ({rows[0]['threads']} threads)",
        "",
        f"RTE {args.epochs_rte:g} epochs, SST-2 {args.epochs_sst2:g} epoch(s); batch 32, max length 128, "
        "method defaults from `glue_sparse/experiments/finetune_config.py`; last-epoch model; validation set.",
        "",
        "| task | method | metric | score | trainable | removed (gated) | removed (total) | s/step | peak RSS MB |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['task']} | {r['method']} | {r['metric']} | {r['score']:.4f} | "
                     f"{r['trainable_parameters']:,} | {r['removed_share_of_gated']:.1%} | "
                     f"{r['removed_share_of_total']:.1%} | {r['seconds_per_step']:.2f} | {r['peak_rss_mb']:.0f} |")
    write_text_atomic(args.out + ".md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
