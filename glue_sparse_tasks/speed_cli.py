"""``glue-sparse speed``: dense vs physically pruned CPU latency for an encoder (default: packaged MiniLM)."""

from __future__ import annotations

import argparse
import copy
import json
import sys

from glue_sparse_tasks.atomic import write_json_atomic

SYNTHETIC_WORDS = "the film is a quiet and often funny portrait of people who".split()


def _texts(data_dir: str | None, n: int) -> tuple[list[str], str]:
    """SST-2 validation sentences when available (GLUE-like lengths), else synthetic ones."""
    from glue_sparse_tasks.data import load_glue_rows
    from glue_sparse_tasks.local_formats import GlueDataError

    try:
        rows, prov = load_glue_rows("sst2", "validation", data_dir, use_hub=False)
        return [r["sentence"] for r in rows][:n], f"SST-2 validation ({prov.source})"
    except GlueDataError:
        texts = [" ".join(SYNTHETIC_WORDS[j % len(SYNTHETIC_WORDS)] for j in range(8 + (i * 7) % 40))
                 for i in range(n)]
        return texts, "synthetic sentences of 8-47 words (no SST-2 validation found)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="encoder folder or Hub name (default: the packaged MiniLM)")
    p.add_argument("--removed", default="0.2,0.4,0.6",
                   help="shares of gated weights to remove with random closed patterns")
    p.add_argument("--adapter", action="append", default=[],
                   help="trained sparse-gates adapter folder(s) to time as well")
    p.add_argument("--batch-sizes", default="32,1", help="batch sizes to time")
    p.add_argument("--batches", type=int, default=8, help="batches per timing round")
    p.add_argument("--rounds", type=int, default=5, help="timing rounds (median; one extra warm-up round)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--data-dir", help="GLUE folder for SST-2 validation sentences")
    p.add_argument("--output", help="write the rows as JSON here (atomically)")


def run(args: argparse.Namespace) -> int:
    import torch
    from peft import PeftModel, get_peft_model
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from sparse_models import SparseGatesConfig
    from sparse_models.packaged import minilm_path
    from sparse_models.speed import calibrate_closed_fraction, compare_dense_pruned, tokenized_batches

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        levels = [float(x) for x in args.removed.split(",") if x]
        batch_sizes = [int(x) for x in args.batch_sizes.split(",") if x]
    except ValueError as exc:
        print(f"error: --removed and --batch-sizes take comma-separated numbers ({exc})", file=sys.stderr)
        return 2
    if any(not 0 < x < 1 for x in levels):
        print(f"error: --removed values must be in (0, 1), got {args.removed!r}", file=sys.stderr)
        return 2
    model_path = args.model or minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    texts, source = _texts(args.data_dir, max(batch_sizes) * args.batches)
    batches = {bs: tokenized_batches(tokenizer, texts, bs, args.batches) for bs in batch_sizes}
    torch.manual_seed(0)
    dense = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2).eval()
    print(f"model {model_path}\ntexts {source}; threads {torch.get_num_threads()}\n", flush=True)

    candidates = []
    for level in levels:
        gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
        fraction = calibrate_closed_fraction(gated, level)
        candidates.append((f"random {level:.0%} (rows/cols closed {fraction:.1%})", gated))
    for path in args.adapter:
        candidates.append((f"trained {path}", PeftModel.from_pretrained(copy.deepcopy(dense), path)))

    rows = []
    header = (f"{'level':<42} {'batch':>5} {'removed gated':>13} {'removed total':>13} {'dense ms':>9} "
              f"{'pruned ms':>9} {'latency x':>9} {'FLOP x':>7} {'of FLOP x':>9}")
    print(header)
    for label, gated in candidates:
        pruned = gated.eval().merge_and_unload()
        for bs in batch_sizes:
            row = compare_dense_pruned(dense, pruned, batches[bs], label, rounds=args.rounds)
            rows.append(row.to_dict())
            print(f"{label:<42} {bs:>5} {row.removed_share_of_gated:>13.1%} {row.removed_share_of_total:>13.1%} "
                  f"{row.dense_ms:>9.2f} {row.pruned_ms:>9.2f} {row.latency_ratio:>9.2f} {row.flop_ratio:>7.2f} "
                  f"{row.share_of_flop_speedup:>9.0%}", flush=True)
    if args.output:
        write_json_atomic(args.output, {"model": model_path, "texts": source, "threads": torch.get_num_threads(),
                                        "rows": rows})
        print(f"\nwrote {args.output}")
    else:
        print("\n" + json.dumps({"rows": len(rows)}))
    return 0
