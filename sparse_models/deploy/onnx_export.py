"""Encoders (dense, gated or pruned) to one ONNX Runtime graph, fused, optionally int8.

The path: ``regular_form`` (stock modules, narrower matrices), ``torch.onnx.export`` (TorchScript exporter,
opset 17, dynamic batch and sequence axes, eager attention: the pattern ONNX Runtime's transformer optimizer
fuses into ``Attention``), ONNX Runtime's transformer optimizer, then ``onnxruntime.quantization
.quantize_dynamic`` for int8. Optimum is not on this path: optimum-onnx 0.1.0, the newest release, requires
transformers < 4.58 and this package needs 5.20 or later.

Every export checks itself: the saved graph's logits on a sample batch against the torch model's, written to
``onnx_export.json`` beside the graph. An optimizer pass that would change the logits (a layer whose heads it
misreads) is dropped, and the record says so.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from glue_sparse_tasks.atomic import write_json_atomic
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.precisions import QUANTIZE_CHOICES
from sparse_models.deploy import EXPORT_RECORD, ONNX_FILE
from sparse_models.deploy.regular_form import regular_form

__all__ = ["OPSET", "ExportRecord", "export_onnx", "onnx_install_hint", "read_record", "require_onnx"]

OPSET = 17
#: the largest logit difference the fp32 graph may show against torch (issue 79's bar)
FP32_TOLERANCE = 1e-4
#: ONNX Runtime optimizer model types for the encoders it has fusion patterns for (all BERT-shaped)
_OPTIMIZER_TYPES = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "electra": "bert"}


def onnx_install_hint() -> str:
    return "pip install 'glue-sparse[onnx]' (onnxruntime and onnx)"


def require_onnx(what: str) -> None:
    """Stop in one line, naming the extra, where ONNX Runtime or onnx is not installed."""
    import importlib.util

    missing = [m for m in ("onnxruntime", "onnx") if importlib.util.find_spec(m) is None]
    if missing:
        raise UserInputError(f"{what} needs {' and '.join(missing)}, which is not installed: {onnx_install_hint()}")


@dataclass
class ExportRecord:
    """What ``onnx_export.json`` says about a graph: how it was made and how close it is to the torch model."""

    runtime: str = "onnxruntime"
    precision: str = "fp32"
    per_channel: bool | None = None
    opset: int = OPSET
    exporter: str = "torch.onnx.export (TorchScript), eager attention"
    inputs: list[str] = field(default_factory=list)
    model_type: str = ""
    optimizer: str = "none"
    fused_operators: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    max_abs_logit_difference: float | None = None
    source: str = ""
    accounting: dict[str, Any] | None = None
    torch_version: str = torch.__version__
    onnxruntime_version: str = ""


def _input_names(model: nn.Module, sample: dict[str, torch.Tensor]) -> list[str]:
    """The tokenizer's outputs the model's forward takes, in a fixed order."""
    import inspect

    accepted = inspect.signature(model.forward).parameters
    return [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample and k in accepted]


def _node_counts(path: Path) -> dict[str, int]:
    import collections

    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return dict(sorted(collections.Counter(n.op_type for n in graph.node).items()))


def _session(path: Path):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _checked(path: Path, sample: dict[str, torch.Tensor], reference: torch.Tensor) -> tuple[float, list[str]]:
    """(the graph's largest logit difference from ``reference`` on ``sample``, the inputs the graph kept: the
    exporter drops one the model ignores, e.g. DeBERTa-v2's token types), from one session."""
    session = _session(path)
    inputs = [i.name for i in session.get_inputs()]
    logits = session.run(None, {name: sample[name].numpy() for name in inputs})[0]
    return float((torch.from_numpy(logits) - reference).abs().max()), inputs


def _optimized(raw: Path, out: Path, config: Any, check: Any) -> tuple[Path, str, dict[str, int]]:
    """ONNX Runtime's transformer optimizer over ``raw`` where it has patterns for the architecture and its
    output keeps the logits (``check``); else the raw graph. Returns (graph, optimizer, fused operators)."""
    optimizer_type = _OPTIMIZER_TYPES.get(config.model_type)
    if optimizer_type is None:
        return raw, f"none (ONNX Runtime's transformer optimizer has no {config.model_type} patterns)", {}
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(str(raw), model_type=optimizer_type, num_heads=config.num_attention_heads,
                               hidden_size=config.hidden_size)
    fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
    optimized.save_model_to_file(str(out))
    if check(out) > FP32_TOLERANCE:
        return raw, "none (the transformer optimizer's graph moved the logits; kept the exported graph)", {}
    return out, f"onnxruntime.transformers.optimizer (model_type={optimizer_type})", fused


def _quantized(graph: Path, out: Path, per_channel: bool) -> Path:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # the optimizer's fused operators (com.microsoft) defeat ONNX shape inference: name the default type. Its
    # advice to pre-process first (shape inference for static image models) goes to the root logger: not shown
    logging.disable(logging.WARNING)
    try:
        quantize_dynamic(str(graph), str(out), weight_type=QuantType.QInt8, per_channel=per_channel,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    finally:
        logging.disable(logging.NOTSET)
    return out


def export_onnx(model: nn.Module, sample: dict[str, torch.Tensor], folder: str | os.PathLike,
                quantize: str = "none", per_channel: bool = True, source: str = "",
                accounting: dict[str, Any] | None = None, task: str | None = None) -> ExportRecord:
    """Write ``folder/model.onnx``, ``onnx_export.json`` and ``config.json`` for a sequence classifier.

    ``config.json`` is the original architecture's (a pruned model's inner config; ``task`` as its
    ``finetuning_task``), as any Hub model of that type has, so tokenizers and ``AutoConfig`` read it with no
    remote code; the graph, not the config, holds the pruned widths.

    ``sample``: one tokenized batch (``input_ids``, ``attention_mask``, maybe ``token_type_ids``), traced and
    then used to check the saved graph. ``quantize="int8"``: dynamic int8 weights (``per_channel``, the default
    chosen by measurement in benchmarks/results/onnx_int8_scores: scales per
    output channel). The folder must exist; the graph is written aside and then renamed into place.
    """
    require_onnx("ONNX export")
    import onnxruntime

    if quantize not in QUANTIZE_CHOICES:
        raise UserInputError(f"--quantize {quantize!r}: expected one of {', '.join(QUANTIZE_CHOICES)}")
    regular = regular_form(model).float().cpu()
    config = regular.config
    regular.config._attn_implementation = "eager"
    names = _input_names(regular, sample)
    inputs = tuple(sample[k] for k in names)
    with torch.inference_mode():
        reference = regular(**dict(zip(names, inputs))).logits.float()
    folder = Path(folder)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".onnx-") as scratch:
        raw = Path(scratch) / "raw.onnx"
        axes = {k: {0: "batch", 1: "sequence"} for k in names} | {"logits": {0: "batch"}}
        torch.onnx.export(regular, inputs, str(raw), dynamo=False, opset_version=OPSET, input_names=names,
                          output_names=["logits"], dynamic_axes=axes)

        checked: dict[Path, tuple[float, list[str]]] = {}

        def check(path: Path) -> float:  # each graph checked once (the optimizer's output may be the final one)
            if path not in checked:
                checked[path] = _checked(path, sample, reference)
            return checked[path][0]

        graph, optimizer, fused = _optimized(raw, Path(scratch) / "optimized.onnx", config, check)
        if quantize == "int8":
            graph = _quantized(graph, Path(scratch) / "int8.onnx", per_channel)
        difference = check(graph)
        record = ExportRecord(precision="int8" if quantize == "int8" else "fp32",
                              per_channel=per_channel if quantize == "int8" else None, inputs=checked[graph][1],
                              model_type=config.model_type, optimizer=optimizer, fused_operators=fused,
                              nodes=_node_counts(graph), max_abs_logit_difference=difference, source=source,
                              accounting=accounting, onnxruntime_version=onnxruntime.__version__)
        if record.precision == "fp32" and record.max_abs_logit_difference > FP32_TOLERANCE:
            raise RuntimeError(f"the exported graph's logits differ from torch's by "
                               f"{record.max_abs_logit_difference:.2e} (> {FP32_TOLERANCE}); nothing written")
        os.replace(graph, folder / ONNX_FILE)
    write_json_atomic(folder / EXPORT_RECORD, asdict(record))
    config = copy.deepcopy(config)
    config._attn_implementation = None
    if task:
        config.finetuning_task = task
    config.save_pretrained(folder)
    return record


def read_record(folder: str | os.PathLike) -> dict[str, Any]:
    """``onnx_export.json`` of an exported folder ({} where there is none)."""
    path = Path(folder) / EXPORT_RECORD
    return json.loads(path.read_text()) if path.is_file() else {}
