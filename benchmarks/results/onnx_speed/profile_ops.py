"""Where ONNX Runtime spends its time (issue 79): dense MiniLM and magnitude-pruned at 70%, fp32 and int8 (per
channel), ONNX Runtime's own profiler over 8 SST-2 batches of 32, time per operator type summed over nodes.
Run from the repository root: python benchmarks/results/onnx_speed/profile_ops.py"""
import collections
import copy
import json
import tempfile
from pathlib import Path

import onnxruntime as ort
import peft
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from glue_sparse.common.packaged import minilm_path
from glue_sparse.speed.run import timing_texts, tokenized_batches
from glue_sparse_tasks.atomic import write_text_atomic
from sparse_models import SparseGatesConfig
from sparse_models.deploy import ONNX_FILE
from sparse_models.deploy.onnx_export import export_onnx
from sparse_models.removal import close_lowest, magnitude_scores


def magnitude(dense, removal):
    gated = peft.get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS", target_removal=removal,
                                                                          bias_delta=False))
    close_lowest(gated, removal, scores=magnitude_scores(gated), snap_open=True)
    return gated.merge_and_unload().eval()


def profile(graph: Path, feeds: list[dict], scratch: Path) -> dict[str, float]:
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
    options.enable_profiling, options.profile_file_prefix = True, str(scratch / graph.parent.name)
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    for feed in feeds:  # warm-up pass
        session.run(None, feed)
    session.end_profiling()
    options.profile_file_prefix = str(scratch / (graph.parent.name + "-timed"))
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    for feed in feeds:
        session.run(None, feed)
    events = json.loads(Path(session.end_profiling()).read_text())
    ms = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            ms[event["args"]["op_name"]] += event["dur"] / 1000 / len(feeds)
    return dict(ms)


def main() -> None:
    torch.manual_seed(0)
    path = minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    dense = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).eval()
    texts, _ = timing_texts("../shared/data/glue", 256)
    batches = tokenized_batches(tokenizer, texts, 32, 8)
    feeds = [{k: v.numpy() for k, v in b.items()} for b in batches]
    sample = {k: v[:4] for k, v in batches[0].items()}
    table = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, model in (("dense", dense), ("magnitude 70%", magnitude(dense, 0.7))):
            for quantize in ("none", "int8"):
                folder = Path(scratch) / f"{name.replace(' ', '_').replace('%', '')}-{quantize}"
                folder.mkdir()
                export_onnx(model, sample, folder, quantize=quantize)
                table[(name, "int8" if quantize == "int8" else "fp32")] = profile(folder / ONNX_FILE, feeds,
                                                                                 Path(scratch))
    ops = sorted({op for t in table.values() for op in t}, key=lambda op: -max(t.get(op, 0) for t in table.values()))
    keys = list(table)
    lines = ["ms per batch of 32 by operator type (ONNX Runtime profiler, kernel time, 2 threads)", "",
             "| operator | " + " | ".join(f"{n} {p}" for n, p in keys) + " |", "|---|" + "---:|" * len(keys)]
    for op in ops:
        lines.append(f"| {op} | " + " | ".join(f"{table[k].get(op, 0):.1f}" for k in keys) + " |")
    lines.append("| total | " + " | ".join(f"{sum(table[k].values()):.1f}" for k in keys) + " |")
    text = "\n".join(lines) + "\n"
    write_text_atomic("benchmarks/results/onnx_speed/profile_ops.md", text)
    print(text)


if __name__ == "__main__":
    main()
