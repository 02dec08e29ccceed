"""Packaged SmolLM2-135M on every glue_sparse task with local data, through the literal `lm_eval` CLI.

For each task: wall time of one `lm_eval run --model hf ... --limit N` process (model load and
lm-eval's task indexing included), the task's metrics, and the chance level on the same docs
(majority-class accuracy; 0 for MCC and Pearson). QQP has no local data and is skipped.
Run: python benchmarks/smollm2_glue.py [--limit 200] [--data-dir ../shared/data/glue]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from glue_sparse.common.packaged import smollm2_path
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.tasks.utils import data_source

TASKS = ("sst2", "cola", "mrpc", "stsb", "mnli", "qnli", "rte", "wnli")


def chance(task: str, data_dir: str, limit: int) -> str:
    name, split = data_source(task)
    rows, _ = load_glue_rows(name, split, data_dir=data_dir, limit=limit, use_hub=False)
    if task in ("stsb", "cola"):
        return "0 (pearson)" if task == "stsb" else "0 (mcc)"
    counts = collections.Counter(r["label"] for r in rows)
    return f"{max(counts.values()) / len(rows):.3f} (majority acc)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--data-dir", default=os.environ.get("GLUE_SPARSE_DATA_DIR", "../shared/data/glue"))
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--batch-size", default="16")
    args = ap.parse_args()
    model = smollm2_path()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for task in args.tasks.split(","):
            start = time.perf_counter()
            subprocess.run(
                ["lm_eval", "run", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
                 "--tasks", f"glue_sparse_{task}", "--limit", str(args.limit), "--device", "cpu",
                 "--batch_size", args.batch_size, "--output_path", f"{out}/{task}",
                 "--metadata", json.dumps({"data_dir": str(Path(args.data_dir).resolve())})],
                check=True, capture_output=True, env=env,
            )
            wall = time.perf_counter() - start
            result = json.loads(next(Path(out, task).rglob("results_*.json")).read_text())
            metrics = {k.split(",")[0]: v for k, v in result["results"][f"glue_sparse_{task}"].items()
                       if k.endswith(",none") and "stderr" not in k}
            shown = " ".join(f"{k}={v:.3f}" for k, v in metrics.items())
            rows.append((task, wall, shown, chance(task, args.data_dir, args.limit)))
            print(f"{task:6} {wall:6.1f} s  {shown}  | chance {rows[-1][3]}", flush=True)
    print(f"\nSmolLM2-135M (packaged GGUF -> fp32), --limit {args.limit}, CPU")
    print("| task | wall s | metrics | chance on same docs |\n|---|---:|---|---|")
    for task, wall, shown, ch in rows:
        print(f"| {task} | {wall:.1f} | {shown} | {ch} |")


if __name__ == "__main__":
    main()
