"""Issue 79: runtime x precision x removal for MiniLM on the CPU, in one interleaved run.

Subjects: the packaged MiniLM classifier dense and with 30 / 50 / 70% of its gated weights closed by structured
magnitude and pruned (``merge_and_unload()``, its default ``auto`` layout), each run three ways: torch eager fp32
(the pruned model as the package builds it), ONNX Runtime fp32 and ONNX Runtime int8 (``export_onnx``: the
regular form, fused by ONNX Runtime's transformer optimizer; int8 by dynamic quantisation). Every subject runs
the same SST-2 validation batches, taking turns batch by batch (``interleaved_rounds``), threads pinned. Printed
and written: ms per batch, speed-up over dense torch fp32 and over dense in the same runtime and precision, and
the share of eager torch's speed-up the ONNX graph keeps. Speed only: the head is untrained.

    python benchmarks/onnx_speed.py --data-dir ../shared/data/glue --output benchmarks/results/onnx_speed
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import tempfile
from pathlib import Path

import onnxruntime as ort
import peft
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from glue_sparse.common.packaged import minilm_path, model_identity
from glue_sparse.speed.run import timing_texts, tokenized_batches
from glue_sparse_tasks.atomic import write_json_atomic, write_text_atomic
from sparse_models import SparseGatesConfig, parameter_accounting
from sparse_models.deploy.onnx_classifier import OnnxClassifier
from sparse_models.deploy.onnx_export import export_onnx
from sparse_models.removal import close_lowest, magnitude_scores
from sparse_models.runtime.timing import interleaved_rounds

INSTRUCTION_SETS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def instruction_sets() -> list[str]:
    """The CPU's vector instruction sets that decide int8 speed (VNNI: int8 dot products)."""
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return []
    present = set(flags.split(":", 1)[1].split())
    return [name for name in INSTRUCTION_SETS if name in present]


def magnitude_pruned(dense: torch.nn.Module, removal: float) -> torch.nn.Module:
    gated = peft.get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS", target_removal=removal,
                                                                          bias_delta=False))
    close_lowest(gated, removal, scores=magnitude_scores(gated), snap_open=True)
    return gated.merge_and_unload().eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--levels", default="0.3,0.5,0.7")
    parser.add_argument("--batch-sizes", default="32,1")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    path = minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(0)
    dense = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).eval()
    models = {"dense": dense, **{f"{float(r):.0%}": magnitude_pruned(dense, float(r)) for r in args.levels.split(",")}}
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    texts, source = timing_texts(args.data_dir, max(batch_sizes) * args.batches)
    subjects, removed = {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, model in models.items():
            removed[name] = parameter_accounting(model).to_dict().get("removed_share_of_gated") or 0.0
            subjects[(name, "torch", "fp32")] = model
            sample = dict(tokenizer(texts[:4], padding=True, return_tensors="pt"))
            for quantize in ("none", "int8"):
                folder = Path(scratch) / f"{name}-{quantize}"
                folder.mkdir()
                export_onnx(model, sample, folder, quantize=quantize)
                subjects[(name, "onnxruntime", "int8" if quantize == "int8" else "fp32")] = OnnxClassifier(
                    folder, threads=args.threads)
        rows = []
        for batch_size in batch_sizes:
            batches = tokenized_batches(tokenizer, texts, batch_size, args.batches)
            keys = list(subjects)

            def step(model, batch):
                def run():
                    with torch.inference_mode():
                        model(**batch)
                return run

            samples = interleaved_rounds([[step(subjects[k], b) for b in batches] for k in keys], args.rounds)
            ms = {k: 1000 * statistics.median(s) / len(batches) for k, s in zip(keys, samples)}
            for (name, runtime, precision), value in ms.items():
                rows.append({"model": name, "removed_share_of_gated": removed[name], "runtime": runtime,
                             "precision": precision, "batch_size": batch_size, "ms_per_batch": value,
                             "x_dense_torch_fp32": ms[("dense", "torch", "fp32")] / value,
                             "x_dense_same_runtime": ms[("dense", runtime, precision)] / value})
    eager = {(r["model"], r["batch_size"]): r["x_dense_torch_fp32"] for r in rows if r["runtime"] == "torch"}
    for row in rows:
        if row["runtime"] == "onnxruntime" and row["model"] != "dense":
            gain, eager_gain = row["x_dense_same_runtime"] - 1, eager[(row["model"], row["batch_size"])] - 1
            row["share_of_eager_speedup_kept"] = gain / eager_gain if eager_gain > 0 else None
    header = (f"model {model_identity(path)} (head untrained: speed only); texts {source}; {args.threads} threads; "
              f"CPU {platform.processor() or platform.machine()}, instruction sets {', '.join(instruction_sets())}; "
              f"torch {torch.__version__}, onnxruntime {ort.__version__}; median of {args.rounds} interleaved rounds "
              f"of {args.batches} batches")
    lines = [header, "", "| model | removed | runtime | precision | batch | ms/batch | x dense torch fp32 | "
             "x dense same runtime | share of eager speed-up kept |", "|---|---:|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        kept = r.get("share_of_eager_speedup_kept")
        lines.append(f"| {r['model']} | {100 * r['removed_share_of_gated']:.1f}% | {r['runtime']} | {r['precision']} | "
                     f"{r['batch_size']} | {r['ms_per_batch']:.1f} | {r['x_dense_torch_fp32']:.2f} | "
                     f"{r['x_dense_same_runtime']:.2f} | {'' if kept is None else f'{100 * kept:.0f}%'} |")
    print("\n".join(lines))
    if args.output:
        Path(args.output).mkdir(parents=True, exist_ok=True)
        write_json_atomic(Path(args.output) / "speed.json", {"header": header, "rows": rows})
        write_text_atomic(Path(args.output) / "speed.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
