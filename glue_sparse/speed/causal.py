"""Dense vs structurally pruned causal-LM forward latency (``glue-sparse speed --causal``): whole heads and
FFN channels removed at each share of decoder-block linear weights, timed beside the dense model on the
same packed C4 batches, with the ideal of the linear layers at the pruned shapes.

The pruned model runs narrower matrices and adds ``o_proj``/``down_proj`` outputs straight into the
residual: no gather or scatter. ``ideal`` replaces only the linear layers' time by that of the same
matrices at their kept shapes; attention over fewer heads also costs less, so a pruned model can beat it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Sequence

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from glue_sparse.common.causal_lm import pack_blocks
from glue_sparse.common.option_fields import result_file
from glue_sparse.common.packaged import model_identity, smollm2_path
from glue_sparse.speed.options import SpeedOptions
from glue_sparse.speed.report import SPEED_FIGURE, plot_speed, speed_markdown
from glue_sparse.speed.run import device_and_dtype, dtype_name, levels_and_batch_sizes
from glue_sparse.speed.timing import compare_layouts
from glue_sparse_tasks.atomic import write_json_atomic, write_text_atomic
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.local_formats import GlueDataError
from glue_sparse_tasks.text_corpora import load_c4_texts
from sparse_models.checkpoints import check_model
from sparse_models.structured import check_llama_heads, compact, decoder_units, one_shot_plan
from sparse_models.structured.scores import METHODS, collect_statistics

__all__ = ["run_causal_speed", "causal_speed_targets", "NEVER_SLOWER", "SPEEDUP_AT"]

#: Issue #37's targets: never slower than dense at any level, and this speed-up at this share.
NEVER_SLOWER = 1.0
SPEEDUP_AT = (0.2, 1.15)
SYNTHETIC = "the river ran under the old bridge while people walked quickly to the market".split()


def _texts(data_dir: str | None) -> tuple[list[str], list[str], str]:
    """(calibration documents, timing documents, source): C4 sample documents 0-999 and 1000 on, or
    synthetic text when no C4 file is found (then the baselines that calibrate are refused)."""
    try:
        texts, prov = load_c4_texts(data_dir, use_hub=False)
        return texts[:1000], texts[1000:] or texts, f"C4 documents 1000- of {prov.source}"
    except GlueDataError:
        synthetic = [" ".join(SYNTHETIC[(i + j) % len(SYNTHETIC)] for j in range(400)) for i in range(64)]
        return [], synthetic, "synthetic text (no C4 sample found)"


def causal_speed_targets(rows: Sequence[dict[str, Any]], batch_size: int) -> list[str]:
    """Met/missed lines at ``batch_size``: never slower at every level, the speed-up at 20%."""
    mine = [r for r in rows if r["batch_size"] == batch_size]
    lines = [f"Targets (batch {batch_size}):"]
    for r in mine:
        x = r["latency_ratio"]
        lines.append(f"- {r['level']}: {x:.2f}x (rounds {r['latency_ratio_low']:.2f}-{r['latency_ratio_high']:.2f}), "
                     f"never slower {'met' if x >= NEVER_SLOWER else 'MISSED'}")
    level, target = SPEEDUP_AT
    at = [r for r in mine if abs(r["target_removal"] - level) < 1e-9]
    for r in at:
        x = r["latency_ratio"]
        lines.append(f"- >= {target}x at {level:.0%} of block linears: {x:.2f}x, "
                     f"{'met' if x >= target else 'MISSED'} (margin {x - target:+.2f})")
    return lines


def run_causal_speed(options: SpeedOptions) -> list[dict[str, Any]]:
    """Time dense vs pruned at every ``--removed`` share and batch size; print, and write if asked."""
    if options.threads:
        torch.set_num_threads(options.threads)
    levels, batch_sizes = levels_and_batch_sizes(options)
    if options.causal_method not in METHODS:
        raise UserInputError(f"--causal-method {options.causal_method!r}: expected one of {', '.join(METHODS)}")
    device, dtype = device_and_dtype(options)
    model_path = options.model or smollm2_path()
    check_model(model_path)
    check_llama_heads(model_path)
    calibration_texts, timing, source = _texts(options.data_dir)
    if options.causal_method != "magnitude-sp" and not calibration_texts:
        raise UserInputError(f"--causal-method {options.causal_method} calibrates on C4: no C4 sample found under "
                             f"--data-dir {options.data_dir}")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    blocks = pack_blocks(tokenizer, timing, options.causal_seqlen, max(batch_sizes) * options.batches)
    batches = {bs: [{"input_ids": torch.tensor(blocks[i:i + bs]).to(device)}
                    for i in range(0, bs * options.batches, bs)] for bs in batch_sizes}
    dense = AutoModelForCausalLM.from_pretrained(model_path).to(device, dtype).eval()
    layers = decoder_units(dense)
    stats = None
    if options.causal_method != "magnitude-sp":
        calibration = pack_blocks(tokenizer, calibration_texts, 128, 128)
        stats = collect_statistics(dense, layers, [torch.tensor(calibration[i:i + 8]).to(device)
                                                   for i in range(0, len(calibration), 8)])
    name = model_identity(model_path)
    print(f"model {name}\ntexts {source}, {options.causal_seqlen} tokens a sequence; {device}, {dtype_name(dtype)}; "
          f"threads {torch.get_num_threads()}; units by {options.causal_method}\n", flush=True)
    rows = []
    for level in levels:
        plan = one_shot_plan(options.causal_method, dense, layers, level, stats)
        pruned = compact(copy.deepcopy(dense), plan)
        for bs in batch_sizes:
            for row in compare_layouts(dense, {"units": pruned}, batches[bs], f"{options.causal_method} {level:.0%}",
                                       rounds=options.rounds, align=1):
                rows.append({**row.to_dict(), "target_removal": level})
                print(f"{row.level:<18} batch {bs:>3}  removed {row.removed_share_of_gated:6.1%}  dense "
                      f"{row.dense_ms:8.1f} ms  pruned {row.pruned_ms:8.1f} ms  ideal {row.ideal_ms:8.1f} ms  "
                      f"latency x {row.latency_ratio:.2f} ({row.latency_ratio_low:.2f}-{row.latency_ratio_high:.2f})  "
                      f"ideal x {row.dense_ms / row.ideal_ms:.2f}", flush=True)
    targets = [line for bs in batch_sizes for line in causal_speed_targets(rows, bs)]
    print("\n" + "\n".join(targets))
    if options.output:
        meta = {"model": name, "texts": f"{source}, {options.causal_seqlen} tokens a sequence",
                "threads": torch.get_num_threads(), "rounds": options.rounds, "batches": options.batches, "align": 1,
                "device": str(device), "dtype": dtype_name(dtype), "method": options.causal_method}
        target = result_file(options.output, "speed.json")
        write_json_atomic(target, {**meta, "rows": rows})
        markdown = Path(target).with_suffix(".md")
        write_text_atomic(markdown, speed_markdown(rows, meta, targets))
        plot_speed(rows, Path(target).with_name(SPEED_FIGURE), f"{meta['model'].split(' (')[0]}, {meta['device']}")
        print(f"\nwrote {target} and {markdown}")
    return rows
