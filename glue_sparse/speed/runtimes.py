"""``glue-sparse speed --runtimes torch,onnxruntime``: one table of runtime x precision x removal on the CPU.

Each model (dense, the pruned models of ``--target-removal``'s closed patterns, a run's pruned models) runs in
torch eager fp32 and, exported by ``sparse_models.deploy.onnx_export``, in ONNX Runtime fp32 and int8. Every
subject runs the same batches, taking turns batch by batch (``interleaved_rounds``); torch and ONNX Runtime get
the same thread count. The header names the CPU's instruction sets, since int8 speed depends on them (VNNI's
int8 dot products; without VNNI int8 can be slower than fp32, and the table then shows it).
"""

from __future__ import annotations

import copy
import platform
import statistics
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch
from peft import get_peft_model
from torch import nn
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from glue_sparse.common.option_fields import result_file
from glue_sparse.common.packaged import minilm_path, model_identity
from glue_sparse.speed.options import SpeedOptions
from glue_sparse.speed.run import levels_and_batch_sizes, timing_texts, tokenized_batches
from glue_sparse.speed.timing import calibrate_closed_fraction
from glue_sparse_tasks.atomic import write_json_atomic, write_text_atomic
from glue_sparse_tasks.errors import UserInputError
from sparse_models import SparseGatesConfig, parameter_accounting
from sparse_models.checkpoints import check_model, load_classifier, resolve_checkpoints
from sparse_models.deploy.onnx_classifier import OnnxClassifier
from sparse_models.deploy.onnx_export import export_onnx, require_onnx
from sparse_models.runtime.timing import interleaved_rounds

__all__ = ["instruction_sets", "runtime_table", "run_runtime_speed", "table_header", "table_markdown", "write_table"]

#: the vector instruction sets that decide int8 speed on x86 (VNNI: int8 dot products; AMX: int8 tiles)
INSTRUCTION_SETS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
#: (runtime, precision) pairs each model runs as
RUNTIME_PRECISIONS = (("torch", "fp32"), ("onnxruntime", "fp32"), ("onnxruntime", "int8"))


def instruction_sets() -> list[str]:
    """The CPU's instruction sets among ``INSTRUCTION_SETS`` (Linux ``/proc/cpuinfo``; [] where unreadable)."""
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return []
    present = set(flags.split(":", 1)[1].split())
    return [name for name in INSTRUCTION_SETS if name in present]


def _subjects(models: dict[str, nn.Module], sample: dict[str, torch.Tensor], scratch: Path,
              threads: int) -> dict[tuple[str, str, str], Callable[..., Any]]:
    """Every model in every (runtime, precision): the torch model itself, or its exported graph in a session."""
    subjects: dict[tuple[str, str, str], Callable[..., Any]] = {}
    for name, model in models.items():
        for runtime, precision in RUNTIME_PRECISIONS:
            if runtime == "torch":
                subjects[(name, runtime, precision)] = model
                continue
            folder = scratch / f"{len(subjects)}-{precision}"
            folder.mkdir()
            export_onnx(model, sample, folder, quantize="int8" if precision == "int8" else "none")
            subjects[(name, runtime, precision)] = OnnxClassifier(folder, threads=threads)
    return subjects


def runtime_table(models: dict[str, nn.Module], batches: dict[int, list[dict]], threads: int,
                  rounds: int) -> list[dict[str, Any]]:
    """Rows of ms per batch and speed-ups, every model x runtime x precision x batch size, timed interleaved.
    ``models`` must hold ``"dense"``; the others are compared with it in their own runtime and precision."""
    torch.set_num_threads(threads)
    removed = {name: parameter_accounting(m).removed_share_of_gated if hasattr(m.config, "inner_config") else 0.0
               for name, m in models.items()}
    first = next(iter(batches.values()))[0]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        subjects = _subjects(models, {k: v[:4] for k, v in first.items()}, Path(scratch), threads)
        keys = list(subjects)
        for batch_size, its_batches in batches.items():
            def step(model: Callable[..., Any], batch: dict) -> Callable[[], None]:
                def run() -> None:
                    with torch.inference_mode():
                        model(**batch)
                return run

            samples = interleaved_rounds([[step(subjects[k], b) for b in its_batches] for k in keys], rounds)
            ms = {k: 1000 * statistics.median(s) / len(its_batches) for k, s in zip(keys, samples)}
            for (name, runtime, precision), value in ms.items():
                rows.append({"model": name, "removed_share_of_gated": removed[name], "runtime": runtime,
                             "precision": precision, "batch_size": batch_size, "ms_per_batch": value,
                             "x_dense_torch_fp32": ms[("dense", "torch", "fp32")] / value,
                             "x_dense_same_runtime": ms[("dense", runtime, precision)] / value})
    eager = {(r["model"], r["batch_size"]): r["x_dense_torch_fp32"] for r in rows if r["runtime"] == "torch"}
    for row in rows:
        gain, eager_gain = row["x_dense_same_runtime"] - 1, eager[(row["model"], row["batch_size"])] - 1
        if row["runtime"] != "torch" and row["model"] != "dense" and eager_gain > 0.05:
            row["share_of_eager_speedup_kept"] = gain / eager_gain  # not where eager gains too little to divide by
    return rows


def table_header(model: str, texts: str, threads: int, rounds: int, batches: int) -> str:
    import onnxruntime

    return (f"model {model}; texts {texts}; {threads} threads; CPU {platform.processor() or platform.machine()}, "
            f"instruction sets {', '.join(instruction_sets()) or 'unknown'}; torch {torch.__version__}, onnxruntime "
            f"{onnxruntime.__version__}; median of {rounds} interleaved rounds of {batches} batches")


def table_markdown(rows: list[dict[str, Any]], header: str) -> str:
    lines = [header, "", "| model | removed | runtime | precision | batch | ms/batch | x dense torch fp32 | "
             "x dense same runtime | share of eager speed-up kept |", "|---|---:|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        kept = r.get("share_of_eager_speedup_kept")
        lines.append(f"| {r['model']} | {100 * r['removed_share_of_gated']:.1f}% | {r['runtime']} | "
                     f"{r['precision']} | {r['batch_size']} | {r['ms_per_batch']:.1f} | "
                     f"{r['x_dense_torch_fp32']:.2f} | {r['x_dense_same_runtime']:.2f} | "
                     f"{'' if kept is None else f'{100 * kept:.0f}%'} |")
    return "\n".join(lines) + "\n"


def write_table(rows: list[dict[str, Any]], header: str, output: str | None) -> str:
    """Print the table and, with ``output``, write ``speed.json`` and ``speed.md`` there (atomically)."""
    markdown = table_markdown(rows, header)
    print(markdown)
    if output:
        target = result_file(output, "speed.json")
        write_json_atomic(target, {"header": header, "rows": rows})
        write_text_atomic(Path(target).with_suffix(".md"), markdown)
    return markdown


def _run_models(run: str) -> dict[str, nn.Module]:
    """A run folder's pruned models, one per task (``<task>/pruned``), in fp32 on the CPU."""
    checkpoints = resolve_checkpoints(run, variant="pruned")
    return {f"{task} pruned": load_classifier(ckpt, torch.float32, "cpu")[0] for task, ckpt in checkpoints.items()}


def run_runtime_speed(options: SpeedOptions) -> list[dict[str, Any]]:
    """The runtime table for ``options`` (its levels' random closed patterns, ``--run``'s pruned models)."""
    require_onnx("--runtimes onnxruntime")
    if options.device not in ("auto", "cpu"):
        raise UserInputError(f"--runtimes onnxruntime times the CPU (ONNX Runtime's CPU provider); got --device "
                             f"{options.device}")
    levels, batch_sizes = levels_and_batch_sizes(options)
    model_path = options.model or minilm_path()
    check_model(model_path)
    run_models = _run_models(options.run) if options.run else {}
    threads = options.threads or torch.get_num_threads()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    texts, source = timing_texts(options.data_dir, max(batch_sizes) * options.batches)
    batches = {bs: tokenized_batches(tokenizer, texts, bs, options.batches) for bs in batch_sizes}
    torch.manual_seed(0)
    dense = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2).eval()
    models: dict[str, nn.Module] = {"dense": dense}
    for level in levels:
        gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
        calibrate_closed_fraction(gated, level)
        models[f"random {level:.0%}"] = gated.merge_and_unload().eval()
    models.update(run_models)
    rows = runtime_table(models, batches, threads, options.rounds)
    write_table(rows, table_header(model_identity(model_path), source, threads, options.rounds, options.batches),
                options.output)
    return rows
