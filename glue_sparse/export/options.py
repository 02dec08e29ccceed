"""``glue-sparse export``'s options: which run, tasks and variant to export, and where."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.common.option_fields import option, required
from glue_sparse_tasks.precisions import QUANTIZE_CHOICES

#: what an export writes: a transformers folder for the Hub, or an ONNX Runtime graph beside the tokenizer
FORMATS = ("hub", "onnx")

#: what of a task's run folder is exported: the checkpoint the run kept (an adapter merged into a plain
#: model), or its physically pruned model (``pruned/``, with its code)
VARIANTS = ("checkpoint", "pruned")


@dataclass(kw_only=True)
class ExportOptions:
    """One run's tasks as Hub-ready folders (each field is a flag of ``glue-sparse export``)."""

    run: str = required("a fine-tuning run folder (one <task>/ per task, as finetune and bench write them) or one "
                        "task's folder")
    output: str = required("folder to write, one Hub-ready <task>/ folder inside per exported task")
    task: str | None = option(None, "comma-separated tasks to export (default: every task the run holds)")
    variant: str = option("checkpoint", "checkpoint (the model the run kept; an adapter is merged into a plain "
                                        "model) or pruned (its physically pruned model, with its code)")
    format: str = option("hub", "hub (a transformers folder: config, safetensors, tokenizer, card) or onnx (model.onnx "
                                "for ONNX Runtime, fused, with the tokenizer, the original architecture's config and a "
                                "card; needs pip install 'glue-sparse[onnx]')")
    quantize: str = option("none", "--format onnx: none (fp32) or int8 (ONNX Runtime dynamic quantisation of the "
                                   "weights)")
    int8_scales: str = option("per-channel", "--quantize int8: per-channel (one weight scale per output channel; kept "
                                             "GLUE scores within 1.0 of fp32) or per-matrix")
    data_dir: str | None = option(None, "local GLUE folder, for timing a model the run did not time (else "
                                        "$GLUE_SPARSE_DATA_DIR, then the Hub)")
    latency_docs: int = option(256, "validation documents timed where the run recorded no latency (0: none)")
