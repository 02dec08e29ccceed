"""Probe (issue 79): the speed in ONNX Runtime of a MiniLM pruned only inside its blocks (FFN channels and
query/key/value head dimensions closed at random; residual-stream rows and columns left open, so the regular form
folds nothing back), against one pruned the same share by magnitude everywhere. Speed only (untrained head, random
masks): it asks whether issue 79's 4.0x is reachable when removal avoids the residual stream.
Run from the repository root: python benchmarks/results/onnx_speed/internal_only.py"""
import copy

import peft
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from glue_sparse.common.packaged import minilm_path
from glue_sparse.speed.run import timing_texts, tokenized_batches
from glue_sparse.speed.runtimes import runtime_table, table_header, write_table
from sparse_models import SparseGatesConfig, parameter_accounting
from sparse_models.removal import close_lowest, magnitude_scores

INTERNAL_ROWS = ("attention.self.query", "attention.self.key", "attention.self.value", "intermediate.dense")


def internal_only(dense, closed: float, seed: int = 0):
    """Close ``closed`` of the rows of the query/key/value/FFN-input matrices (the chains close the matching
    columns downstream); every residual-side gate stays open."""
    gated = peft.get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, layer in gated.base_model.gated_layers().items():
            layer.sparse_gates_col["default"].fill_(3.0)
            rows = layer.sparse_gates_row["default"]
            if name.endswith(INTERNAL_ROWS):
                shut = torch.rand(rows.shape, generator=generator) < closed
                rows.copy_(torch.where(shut, torch.full_like(rows, -3.0), torch.full_like(rows, 3.0)))
            else:
                rows.fill_(3.0)
    return gated.merge_and_unload(layout="remove").eval()


def magnitude(dense, removal: float):
    gated = peft.get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS", target_removal=removal,
                                                                          bias_delta=False))
    close_lowest(gated, removal, scores=magnitude_scores(gated), snap_open=True)
    return gated.merge_and_unload().eval()


def main() -> None:
    torch.manual_seed(0)
    path = minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    dense = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).eval()
    inner = internal_only(dense, 0.75)
    share = parameter_accounting(inner).removed_share_of_gated
    models = {"dense": dense, f"internal-only {share:.0%}": inner, f"magnitude {share:.0%}": magnitude(dense, share)}
    texts, source = timing_texts("../shared/data/glue", 256)
    batches = {32: tokenized_batches(tokenizer, texts, 32, 8)}
    rows = runtime_table(models, batches, threads=2, rounds=7)
    write_table(rows, table_header("all-MiniLM-L6-v2 (head untrained: speed only)", source, 2, 7, 8),
                "benchmarks/results/onnx_speed/internal_only")


if __name__ == "__main__":
    main()
