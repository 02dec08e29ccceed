"""Issue 79: does a fine-tuned model keep its GLUE score in ONNX Runtime, in fp32 and int8 (one weight scale per
matrix, or per output channel)? Full fine-tunes (the packaged MiniLM by default; limited regime, a short budget:
the comparison is between runtimes of one model, not against the converged grid), each exported three ways with
``glue-sparse export --format onnx`` and scored by the same ``glue_sparse_*`` tasks through ``hf-classifier``.
Prints each task's glue_score (x100) per runtime and precision and issue 79's int8 targets (each task within 1.0
of fp32, the average within 0.5); writes ``OUT/summary.md``. Resumable: finished runs, exports and scores are kept.

    python benchmarks/onnx_int8_scores.py --out onnx_int8 --data-dir ../shared/data/glue
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from glue_sparse_tasks.atomic import write_text_atomic

MODELS = {"full": "torch fp32", "onnx-fp32": "ONNX Runtime fp32", "onnx-int8": "ONNX Runtime int8 (per matrix)",
          "onnx-int8-per-channel": "ONNX Runtime int8 (per channel)"}


def scores(folder: Path) -> dict[str, float]:
    results = json.loads(max(folder.rglob("results_*.json")).read_text())["results"]
    return {k.removeprefix("glue_sparse_"): 100 * v["glue_score,none"] for k, v in results.items()
            if k.startswith("glue_sparse_") and "glue_score,none" in v}


def glue_sparse(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "glue_sparse.cli.main", *args], check=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})


def produce(out: Path, tasks: str, data: str, model: str | None, train_limit: int, epochs: float) -> None:
    """The runs, exports and scores that are not there yet (each written aside, then moved into place)."""
    glue_sparse("finetune", "--method", "full", "--tasks", tasks, "--train-limit", str(train_limit), "--epochs",
                str(epochs), "--seeds", "1", "--output", str(out / "full"), "--data-dir", data, "--resume",
                *(["--model", model] if model else []))
    flags = {"onnx-fp32": [], "onnx-int8": ["--quantize", "int8", "--int8-scales", "per-matrix"],
             "onnx-int8-per-channel": ["--quantize", "int8", "--int8-scales", "per-channel"]}
    for name, extra in flags.items():
        if not (out / name).is_dir():
            glue_sparse("export", "--run", str(out / "full"), "--format", "onnx", *extra, "--latency-docs", "0",
                        "--output", str(out / f".{name}"))
            (out / f".{name}").rename(out / name)
    lm_tasks = ",".join(f"glue_sparse_{t}" for t in tasks.split(","))
    for name in MODELS:
        if not (out / "scores" / name).is_dir():
            shutil.rmtree(out / ".scores" / name, ignore_errors=True)
            glue_sparse("eval", "--model", "hf-classifier", "--model_args",
                        f"pretrained={out / name},results_json={out / (name + '.hf_classifier.json')}", "--tasks",
                        lm_tasks, "--device", "cpu", "--metadata", json.dumps({"data_dir": data}), "--output_path",
                        str(out / ".scores" / name))
            (out / "scores").mkdir(exist_ok=True)
            (out / ".scores" / name).rename(out / "scores" / name)


def summary(out: Path) -> str:
    table = {model: scores(out / "scores" / model) for model in MODELS}
    tasks = sorted(table["full"])
    lines = ["| task | " + " | ".join(MODELS.values()) + " | int8 − ONNX fp32 (per matrix / per channel) |",
             "|---|" + "---:|" * (len(MODELS) + 1)]
    averages = {m: sum(table[m][t] for t in tasks) / len(tasks) for m in MODELS}
    for task in [*tasks, "average"]:
        row = averages if task == "average" else {m: table[m][task] for m in MODELS}
        deltas = [row[m] - row["onnx-fp32"] for m in ("onnx-int8", "onnx-int8-per-channel")]
        lines.append(f"| {task} | " + " | ".join(f"{row[m]:.2f}" for m in MODELS)
                     + f" | {deltas[0]:+.2f} / {deltas[1]:+.2f} |")
    for model in ("onnx-int8", "onnx-int8-per-channel"):
        worst = max(abs(table[model][t] - table["onnx-fp32"][t]) for t in tasks)
        average = abs(averages[model] - averages["onnx-fp32"])
        lines.append(f"\n{MODELS[model]}: largest task difference {worst:.2f} (target ≤ 1.0: "
                     f"{'met' if worst <= 1.0 else 'missed'}), average {average:.2f} (target ≤ 0.5: "
                     f"{'met' if average <= 0.5 else 'missed'})")
    fp32 = max(abs(table["onnx-fp32"][t] - table["full"][t]) for t in tasks)
    lines.append(f"\nONNX fp32 against torch fp32: largest task difference {fp32:.2f}")
    text = "\n".join(lines) + "\n"
    write_text_atomic(out / "summary.md", text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tasks", default="rte,mrpc,stsb,cola,sst2")
    parser.add_argument("--data-dir", default=os.environ.get("GLUE_SPARSE_DATA_DIR", "../shared/data/glue"))
    parser.add_argument("--model", default=None, help="encoder folder or Hub name (default: the packaged MiniLM)")
    parser.add_argument("--train-limit", type=int, default=2000)
    parser.add_argument("--epochs", type=float, default=3)
    args = parser.parse_args()
    out = Path(args.out)
    produce(out, args.tasks, args.data_dir, args.model, args.train_limit, args.epochs)
    print(summary(out))


if __name__ == "__main__":
    main()
