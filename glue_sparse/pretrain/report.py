"""``glue-sparse pretrain-report``: dense and gated pre-training twins side by side: the final
validation perplexity at equal tokens, the removed shares, forward tokens/s of each saved model against
the dense one (timed interleaved on the same packed validation blocks), a plot of the curves against
tokens and training FLOPs, and the targets stated as met or missed."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

import torch

import sparse_models  # noqa: F401  (registers SparsePrunedForCausalLM with the Auto classes)
from glue_sparse.perplexity.options import PerplexityError
from glue_sparse.common.causal_lm import packed_token_stream
from glue_sparse.pretrain.data import train_source, validation_texts
from glue_sparse.pretrain.options import PretrainReportOptions
from glue_sparse.pretrain.run import DENSE_FLOOR
from glue_sparse_tasks.atomic import check_writable, write_json_atomic, write_text_atomic
from sparse_models.runtime.timing import paired_speedup, time_rounds


def read_runs(folders: list[str]) -> list[dict[str, Any]]:
    runs = []
    for folder in folders:
        path = Path(folder) / "run.json"
        if not path.is_file():
            raise PerplexityError(f"--runs: {path} does not exist (is the run finished?)")
        run = json.loads(path.read_text())
        run["folder"], run["name"] = str(folder), Path(folder).name
        runs.append(run)
    if not any(r["options"]["method"] == "dense" for r in runs):
        raise PerplexityError("--runs: no dense run among them to compare with")
    return runs


def describe(run: dict[str, Any]) -> str:
    o = run["options"]
    if o["method"] == "dense":
        return "dense"
    lr = f", gate lr {o['gate_lr']:g}" if o.get("gate_lr") is not None else ""
    return (f"gates, removal {o['target_removal']:.0%}{lr}" if o["recipe"] == "removal" else
            f"gates, reference (target sparsity {o['target_sparsity']}, lambda {o['sparsity_lambda']:g}{lr})")


@torch.inference_mode()
def forward_speed(runs: list[dict[str, Any]], dense: dict[str, Any], options: PretrainReportOptions) -> dict[str, Any]:
    """Tokens/s of each run's saved model and its paired speed-up over the dense model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(options.threads)
    o = dense["options"]
    source = train_source(o["train_data"], o["data_dir"], o["train_docs"], check=False)
    texts, _ = validation_texts(o["eval_data"], o["data_dir"], o["eval_docs"], source, use_hub=o["hub"])
    tokenizer = AutoTokenizer.from_pretrained(str(Path(dense["folder"]) / "model"))
    seqlen, size = o["seqlen"], options.speed_batch_size
    ids = list(packed_token_stream(tokenizer, texts, seqlen * size * options.speed_batches))
    blocks = torch.tensor(ids).view(-1, seqlen)
    batches = [{"input_ids": blocks[i:i + size]} for i in range(0, len(blocks), size)]
    models = [AutoModelForCausalLM.from_pretrained(str(Path(r["folder"]) / "model")).eval() for r in [dense, *runs]]
    seconds = time_rounds(models, batches, options.speed_rounds)
    tokens = blocks.numel()
    out = {"batch_size": size, "seqlen": seqlen, "batches": len(batches), "rounds": options.speed_rounds,
           "threads": options.threads, "cpu_count": os.cpu_count()}
    for run, own in zip(runs, seconds[1:]):
        ratio = paired_speedup(seconds[0], own)
        out[run["name"]] = {"tokens_per_second": tokens / statistics.median(own),
                            "dense_tokens_per_second": tokens / statistics.median(seconds[0]),
                            "speedup": ratio.median, "speedup_low": ratio.low, "speedup_high": ratio.high}
    return out


def write_pretrain_report(options: PretrainReportOptions) -> dict[str, Any]:
    folders = [f for f in options.runs.split(",") if f]
    runs = read_runs(folders)
    check_writable(Path(options.out), "--output")
    Path(options.out).mkdir(parents=True, exist_ok=True)
    dense = next(r for r in runs if r["options"]["method"] == "dense")
    speed = forward_speed(runs, dense, options) if options.speed else {}
    rows, lines = [], []
    for run in runs:
        acc = run.get("accounting") or {}
        row = {"run": run["name"], "method": describe(run), "train_tokens": run["train_tokens"],
               "train_flops": run["curve"][-1]["train_flops"], "val_perplexity": run["final"]["val_perplexity"],
               "ratio_to_dense": run["final"]["val_perplexity"] / dense["final"]["val_perplexity"],
               "equal_tokens": run["train_tokens"] == dense["train_tokens"],
               "removed_share_of_gated": acc.get("removed_share_of_gated", 0.0),
               "removed_share_of_nonembedding": acc.get("removed_share_of_nonembedding", 0.0),
               "removed_share_of_total": acc.get("removed_share_of_total", 0.0),
               "speedup": speed.get(run["name"], {}).get("speedup")}
        rows.append(row)
    floor = dense["dense_floor_met"]
    lines += [f"# Pre-training from scratch: {dense['options']['model_config']}, {dense['tokenizer']['spec']} "
              f"({dense['tokenizer']['vocab_size']} tokens)", "",
              f"Validation: {dense['options']['eval_tokens']:,} packed targets of C4 documents "
              f"{dense['options']['eval_docs']} ({dense['validation']['source']}), gates deterministic. Training: "
              f"documents {dense['options']['train_docs']}, {dense['train_tokens']:,} tokens, seqlen "
              f"{dense['options']['seqlen']}, lr {dense['options']['lr']:g}.", "",
              "| run | method | val ppl | x dense | removed % gated | % non-embedding | % all | tokens/s x dense |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        sp = "" if row["speedup"] is None else f"{row['speedup']:.2f}"
        lines.append(f"| {row['run']} | {row['method']} | {row['val_perplexity']:.2f} | {row['ratio_to_dense']:.3f} | "
                     f"{row['removed_share_of_gated']:.1%} | {row['removed_share_of_nonembedding']:.1%} | "
                     f"{row['removed_share_of_total']:.1%} | {sp} |")
    ratio = dense["final"]["val_perplexity"] / dense["unigram_perplexity"]
    lines += ["", f"Unigram perplexity of the same validation targets: {dense['unigram_perplexity']:.1f}; dense "
                  f"{dense['final']['val_perplexity']:.2f} = {ratio:.3f}x of it: dense floor (<= {DENSE_FLOOR:g}x) "
                  f"{'MET' if floor else 'MISSED'}.", ""]
    lines += targets(rows, runs, options)
    plot = plot_curves(runs, Path(options.out) / "curves.png")
    result = {"rows": rows, "speed": speed, "dense_floor_met": floor, "unigram_perplexity": dense["unigram_perplexity"],
              "plot": str(plot)}
    write_json_atomic(Path(options.out) / "results.json", result)
    write_text_atomic(Path(options.out) / "results.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return result


def targets(rows: list[dict[str, Any]], runs: list[dict[str, Any]], options: PretrainReportOptions) -> list[str]:
    """Each target as MET / MISSED with its numbers (``rows[i]`` is the table row of ``runs[i]``)."""
    out = []
    at_level = [r for r, run in zip(rows, runs, strict=True)
                if run["options"]["method"] == "gates" and run["options"]["recipe"] == "removal"
                and abs(r["removed_share_of_gated"] - options.removal_level) < 0.02 and r["equal_tokens"]]
    for r in at_level:
        met = r["ratio_to_dense"] <= options.target_ppl_ratio
        out.append(f"- {r['run']}: perplexity {r['ratio_to_dense']:.3f}x dense at {r['removed_share_of_gated']:.1%} of "
                   f"gated weights removed (target <= {options.target_ppl_ratio:.2f}x): {'MET' if met else 'MISSED'}")
    if not at_level:
        out.append(f"- no removal run at {options.removal_level:.0%} with the dense run's tokens: perplexity target "
                   "not checked")
    for r in rows:
        if r["speedup"] is not None and r["method"] != "dense":
            met = r["speedup"] >= options.target_speedup
            out.append(f"- {r['run']}: forward tokens/s {r['speedup']:.2f}x dense (target >= "
                       f"{options.target_speedup:.2f}x): {'MET' if met else 'MISSED'}")
    return out


def plot_curves(runs: list[dict[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for run in runs:
        curve = run["curve"]
        for ax, key in zip(axes, ("tokens", "train_flops")):
            ax.plot([p[key] for p in curve], [p["val_perplexity"] for p in curve], marker=".", label=describe(run))
    for ax, label in zip(axes, ("training tokens", "training FLOPs (6 N T)")):
        ax.set_xlabel(label)
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation perplexity")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    staging = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(staging, dpi=110)
    plt.close(fig)
    os.replace(staging, path)
    return path
