"""Dense vs physically pruned CPU forward latency, beside the FLOP ratio of the same batches.

Both sides run in one process on the same batches, taking turns batch by batch so machine noise hits
them alike; each side's time is the median over rounds after a warm-up round that is discarded.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

import torch
from peft import get_peft_model
from torch import nn
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from glue_sparse.common.packaged import minilm_path, model_identity
from glue_sparse.finetune.options import TrainingOptions  # the tokens-per-example default
from glue_sparse.common.option_fields import result_file
from glue_sparse.speed.options import SpeedOptions
from glue_sparse.speed.report import SPEED_FIGURE, built, plot_speed, speed_markdown, speed_targets
from glue_sparse.speed.timing import calibrate_closed_fraction, compare_layouts
from glue_sparse_tasks.method_defaults import DEFAULT_ALIGN
from glue_sparse_tasks.atomic import write_json_atomic, write_text_atomic
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.local_formats import GlueDataError
from sparse_models import SparseGatesConfig
from sparse_models.checkpoints import Checkpoint, check_model, describe_checkpoint, load_classifier
from sparse_models.runtime.devices import TORCH_DTYPES, resolve_device, resolve_precision
from sparse_models.sparse_gates.pruning import LAYOUTS
from sparse_models.runtime.timing import mean_length


def tokenized_batches(tokenizer: Any, texts: Iterable[str], batch_size: int, n_batches: int,
                      max_length: int = TrainingOptions.max_length) -> list[dict]:
    """GLUE-like batches: consecutive texts, padded to the longest in each batch (dynamic length)."""
    texts = list(texts)[: batch_size * n_batches]
    return [
        dict(tokenizer(texts[i:i + batch_size], padding="longest", truncation=True, max_length=max_length,
                       return_tensors="pt"))
        for i in range(0, len(texts), batch_size)
    ]


def dense_and_batches(model_path: str, data_dir: str | None, batch_size: int, n_batches: int,
                      ) -> tuple[nn.Module, list[dict], str]:
    """What every paired speed A/B starts from: the dense classifier (head seeded with 0, so runs
    agree), its GLUE-like timing batches, and where their texts came from."""
    texts, source = timing_texts(data_dir, batch_size * n_batches)
    batches = tokenized_batches(AutoTokenizer.from_pretrained(model_path), texts, batch_size, n_batches)
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2).eval(), batches, source


HEADS_SUFFIX = "+heads"


def prune_with_layout(gated: nn.Module, layout: str, tokens: int, align: int, length: int) -> nn.Module:
    """A pruned copy of ``gated`` in one of ``LAYOUTS`` (``+heads``: attention narrowed per head), with
    the timed layouts chosen for ``tokens`` tokens per forward in rows of ``length``."""
    heads = layout.endswith(HEADS_SUFFIX)
    return copy.deepcopy(gated).eval().merge_and_unload(layout=layout.removesuffix(HEADS_SUFFIX), layout_tokens=tokens,
                                                        layout_length=length, align=align,
                                                        narrow_heads=True if heads else None)


SYNTHETIC_WORDS = "the film is a quiet and often funny portrait of people who".split()


def timing_texts(data_dir: str | None, n: int) -> tuple[list[str], str]:
    """SST-2 validation sentences when available (GLUE-like lengths), else synthetic ones."""

    try:
        rows, prov = load_glue_rows("sst2", "validation", data_dir, use_hub=False)
        return [r["sentence"] for r in rows][:n], f"SST-2 validation ({prov.source})"
    except GlueDataError:
        texts = [" ".join(SYNTHETIC_WORDS[j % len(SYNTHETIC_WORDS)] for j in range(8 + (i * 7) % 40))
                 for i in range(n)]
        return texts, "synthetic sentences of 8-47 words (no SST-2 validation found)"


def run_speed(options: SpeedOptions) -> list[dict[str, Any]]:
    """Time dense vs pruned for random closed patterns at each removal level and for trained adapters;
    print one line per (pattern, batch size) and write the rows if asked."""
    if options.threads:
        torch.set_num_threads(options.threads)
    levels, batch_sizes = levels_and_batch_sizes(options)
    layouts = [x for x in options.layouts.split(",") if x]
    if bad := [x for x in layouts if x.removesuffix(HEADS_SUFFIX) not in LAYOUTS]:
        raise UserInputError(f"--layouts: unknown layout(s) {bad}; valid: {', '.join(LAYOUTS)}, each "
                             f"optionally with {HEADS_SUFFIX!r} (attention narrowed per head)")
    adapters = [_adapter_checkpoint(path) for path in options.adapter]  # bad folders fail before any load
    device, dtype = device_and_dtype(options)
    model_path = options.model or minilm_path()
    check_model(model_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    texts, source = timing_texts(options.data_dir, max(batch_sizes) * options.batches)
    batches = {bs: [{k: v.to(device) for k, v in batch.items()}
                    for batch in tokenized_batches(tokenizer, texts, bs, options.batches)] for bs in batch_sizes}
    torch.manual_seed(0)
    dense = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2).to(device, dtype).eval()
    name = model_identity(model_path)
    on = _device_name(device)
    print(f"model {name}\ntexts {source}; {on}, {dtype_name(dtype)}; threads {torch.get_num_threads()}\n", flush=True)
    candidates = []
    for level in levels:
        gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
        fraction = calibrate_closed_fraction(gated, level)
        candidates.append((f"random {level:.0%} (rows/cols closed {fraction:.1%})", gated))
    for adapter in adapters:  # loaded with its own head size (STS-B regresses: one output); the heads are
        # outside the timed encoder's gated matrices, so the two-label dense is the baseline for all
        gated_adapter, _ = load_classifier(adapter, dtype, str(device), base=model_path)
        candidates.append((f"trained {adapter.path}", gated_adapter))
    rows = []
    print(f"{'level':<42} {'layout':>6} {'built':>12} {'batch':>5} {'closed':>7} {'removed':>7} {'dense ms':>9} "
          f"{'pruned ms':>9} {'ideal ms':>9} {'latency x':>9} {'rounds':>11} {'ideal x':>8} {'of ideal':>8} "
          f"{'FLOP x':>7}")
    for label, gated in candidates:
        for bs in batch_sizes:  # `auto` chooses per layer for this batch's token count, as a user would prune
            length = mean_length(batches[bs])
            pruned = {layout: prune_with_layout(gated, layout, bs * length, options.align, length)
                      for layout in layouts}
            for row in compare_layouts(dense, pruned, batches[bs], label, rounds=options.rounds, align=options.align):
                rows.append(row.to_dict())
                spread = f"{row.latency_ratio_low:.2f}-{row.latency_ratio_high:.2f}"
                print(f"{label:<42} {row.layout:>6} {built(row.to_dict()):>12} {bs:>5} "
                      f"{row.closed_share_of_gated:>7.1%} "
                      f"{row.removed_share_of_gated:>7.1%} {row.dense_ms:>9.2f} {row.pruned_ms:>9.2f} "
                      f"{row.ideal_ms:>9.2f} {row.latency_ratio:>9.2f} {spread:>11} "
                      f"{row.dense_ms / row.ideal_ms:>8.2f} "
                      f"{row.share_of_ideal:>8.0%} {row.flop_ratio:>7.2f}", flush=True)
    targets = speed_targets(rows)
    print("\n" + "\n".join(targets))
    if options.output:
        meta = {"model": name, "texts": source, "threads": torch.get_num_threads(), "rounds": options.rounds,
                "batches": options.batches, "align": options.align, "device": on, "dtype": dtype_name(dtype)}
        target = result_file(options.output, "speed.json")
        write_json_atomic(target, {**meta, "rows": rows})
        markdown = Path(target).with_suffix(".md")
        write_text_atomic(markdown, speed_markdown(rows, meta, targets))
        plot_speed(rows, Path(target).with_name(SPEED_FIGURE), f"{meta['model'].split(' (')[0]}, {meta['device']}")
        print(f"\nwrote {target} and {markdown}")
    return rows


def levels_and_batch_sizes(options: SpeedOptions) -> tuple[list[float], list[int]]:
    """``--target-removal`` shares and ``--batch-sizes``, refused in one line before any model loads."""
    try:
        levels = [float(x) for x in options.removed.split(",") if x]
        batch_sizes = [int(x) for x in options.batch_sizes.split(",") if x]
    except ValueError as exc:
        raise UserInputError(f"--target-removal and --batch-sizes take comma-separated numbers ({exc})") from None
    if any(not 0 < x < 1 for x in levels):
        raise UserInputError(f"--target-removal values must be in (0, 1), got {options.removed!r}")
    return levels, batch_sizes


def dtype_name(dtype: torch.dtype) -> str:
    """``float32``, ``bfloat16``: how the speed tables name the type they timed."""
    return str(dtype).removeprefix("torch.")


def device_and_dtype(options: SpeedOptions) -> tuple[torch.device, torch.dtype]:
    """``--device`` (as every command reads it: ``sparse_models.runtime.devices``) and ``--precision``, the type the
    weights are cast to for timing; refused in one line before any model loads."""
    device = resolve_device(options.device)
    return device, TORCH_DTYPES[resolve_precision(options.precision, device)]


def _device_name(device: torch.device) -> str:
    """What the table names the device by: the GPU's model, or "cpu"."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _adapter_checkpoint(path: str) -> Checkpoint:
    """``--adapter``'s folder as a checkpoint, refused in one line unless it is a complete adapter."""
    checkpoint = describe_checkpoint(path)
    if checkpoint.kind != "adapter":
        raise UserInputError(f"--adapter {path}: a {checkpoint.kind} checkpoint, not a sparse-gates adapter "
                             "(expected adapter_config.json and adapter weights)")
    return checkpoint


#: Issue #15's targets, checked on the default layout at batch 32.
