"""Issue 79: runtime x precision x removal for MiniLM on the CPU, in one interleaved run.

Subjects: the packaged MiniLM classifier dense and with 30 / 50 / 70% of its gated weights closed by structured
magnitude and pruned (``merge_and_unload()``, its default ``auto`` layout), each run three ways: torch eager fp32
(the pruned model as the package builds it), ONNX Runtime fp32 and ONNX Runtime int8 (``export_onnx``: the
regular form, fused by ONNX Runtime's transformer optimizer; int8 by dynamic quantisation). Every subject runs
the same SST-2 validation batches, taking turns batch by batch (``interleaved_rounds``), threads pinned. Printed
and written: ms per batch, speed-up over dense torch fp32 and over dense in the same runtime and precision, and
the share of eager torch's speed-up the ONNX graph keeps. Speed only: the head is untrained. The table is
``glue-sparse speed --runtimes torch,onnxruntime``'s (``glue_sparse.speed.runtimes``), on magnitude masks.

    python benchmarks/onnx_speed.py --data-dir ../shared/data/glue --output benchmarks/results/onnx_speed
"""

from __future__ import annotations

import argparse
import copy

import peft
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from glue_sparse.common.packaged import minilm_path, model_identity
from glue_sparse.speed.run import timing_texts, tokenized_batches
from glue_sparse.speed.runtimes import runtime_table, table_header, write_table
from sparse_models import SparseGatesConfig
from sparse_models.removal import close_lowest, magnitude_scores


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
    path = minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(0)
    dense = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).eval()
    models = {"dense": dense, **{f"magnitude {float(r):.0%}": magnitude_pruned(dense, float(r))
                                 for r in args.levels.split(",")}}
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    texts, source = timing_texts(args.data_dir, max(batch_sizes) * args.batches)
    batches = {bs: tokenized_batches(tokenizer, texts, bs, args.batches) for bs in batch_sizes}
    rows = runtime_table(models, batches, args.threads, args.rounds)
    header = table_header(f"{model_identity(path)} (head untrained: speed only)", source, args.threads, args.rounds,
                          args.batches)
    write_table(rows, header, args.output)


if __name__ == "__main__":
    main()
