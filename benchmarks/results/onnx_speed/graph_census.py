"""Why the export writes a regular form (issue 79): MiniLM dense and magnitude-pruned at 30 / 50 / 70%, exported as
the package builds the pruned model for eager torch (gathers, index-adds) and in its regular form; per graph the
index nodes, ONNX Runtime's transformer-optimizer fusions and, for the regular form, the saved graph's largest
logit difference from torch. Run from the repository root: python benchmarks/results/onnx_speed/graph_census.py"""
import collections
import copy
import tempfile
from pathlib import Path

import onnx
import peft
import torch
from onnxruntime.transformers.optimizer import optimize_model
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from glue_sparse.common.packaged import minilm_path
from glue_sparse_tasks.atomic import write_text_atomic
from sparse_models import SparseGatesConfig
from sparse_models.deploy.onnx_export import OPSET, export_onnx
from sparse_models.deploy.regular_form import regular_form
from sparse_models.removal import close_lowest, magnitude_scores

INDEX_OPS = ("Shape", "Gather", "Concat", "ScatterElements")
FUSIONS = ("EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu")


def magnitude(dense, removal):
    gated = peft.get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS", target_removal=removal,
                                                                          bias_delta=False))
    close_lowest(gated, removal, scores=magnitude_scores(gated), snap_open=True)
    return gated.merge_and_unload(layout="remove").eval()


def as_built(model, sample, path: Path) -> Path:
    """The model exported as it is (PrunedLinear's index work in the graph), eager attention."""
    names = ["input_ids", "attention_mask", "token_type_ids"]
    inner = model.model if hasattr(model.config, "inner_config") else model
    inner.config._attn_implementation = "eager"
    torch.onnx.export(model, tuple(sample[k] for k in names), str(path), dynamo=False, opset_version=OPSET,
                      input_names=names, output_names=["logits"],
                      dynamic_axes={k: {0: "batch", 1: "sequence"} for k in names} | {"logits": {0: "batch"}})
    return path


def census(path: Path, config) -> tuple[dict, dict]:
    nodes = collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node)
    fused = optimize_model(str(path), model_type="bert", num_heads=config.num_attention_heads,
                           hidden_size=config.hidden_size).get_fused_operator_statistics()
    return {op: nodes[op] for op in INDEX_OPS}, {op: fused.get(op, 0) for op in FUSIONS}


def main() -> None:
    torch.manual_seed(0)
    path = minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    dense = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).eval()
    sample = dict(tokenizer(["a short example", "a somewhat longer example sentence with more words"],
                            padding=True, return_tensors="pt"))
    lines = ["| model | graph | " + " | ".join(INDEX_OPS) + " | " + " | ".join(FUSIONS) + " | max logit diff |",
             "|---|---|" + "---:|" * (len(INDEX_OPS) + len(FUSIONS) + 1)]
    with tempfile.TemporaryDirectory() as scratch:
        for name, model in [("dense", dense)] + [(f"magnitude {r:.0%}", magnitude(dense, r)) for r in (0.3, 0.5, 0.7)]:
            folder = Path(scratch) / name.replace(" ", "_").replace("%", "")
            folder.mkdir()
            record = export_onnx(model, sample, folder)  # the exported (optimized) graph, with its logit check
            graphs = [("as built for eager torch", as_built(copy.deepcopy(model), sample, folder / "built.onnx"), ""),
                      ("regular form", as_built(regular_form(model), sample, folder / "regular.onnx"),
                       f"{record.max_abs_logit_difference:.1e}")]
            for label, graph, difference in graphs:
                nodes, fused = census(graph, dense.config)
                lines.append(f"| {name} | {label} | " + " | ".join(str(nodes[o]) for o in INDEX_OPS) + " | "
                             + " | ".join(str(fused[o]) for o in FUSIONS) + f" | {difference} |")
    text = "\n".join(lines) + "\n"
    write_text_atomic("benchmarks/results/onnx_speed/graph_census.md", text)
    print(text)


if __name__ == "__main__":
    main()
