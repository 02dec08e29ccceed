"""An exported ONNX folder behind the interface the package scores models through: ``model(**batch).logits``.

So ``hf-classifier``, ``predict`` and ``speed`` run an ONNX (fp32 or int8) graph in ONNX Runtime with the same
tokenization, batching and scoring as a torch model; the runtime and precision come from ``onnx_export.json``.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from glue_sparse_tasks.errors import UserInputError
from sparse_models.deploy import ONNX_FILE
from sparse_models.deploy.onnx_export import read_record, require_onnx

__all__ = ["OnnxClassifier"]


class OnnxClassifier:
    """``folder/model.onnx`` in an ONNX Runtime CPU session (``threads``: intra-op threads, 0 for its default)."""

    def __init__(self, folder: str | os.PathLike, threads: int = 0) -> None:
        require_onnx("an ONNX model folder")
        import onnxruntime as ort
        from transformers import AutoConfig

        folder = Path(folder)
        graph = folder / ONNX_FILE
        if not graph.is_file():
            raise UserInputError(f"{folder}: no {ONNX_FILE} in it (export one with glue-sparse export --format onnx)")
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail / InvalidProtobuf / InvalidGraph types
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserInputError(f"{graph}: not a readable ONNX graph (damaged, truncated or not ONNX): "
                                 f"{reason}") from None
        self.path = str(folder)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.record = read_record(folder)
        self.config = AutoConfig.from_pretrained(str(folder))
        self.runtime = self.record.get("runtime", "onnxruntime")
        self.precision = self.record.get("precision", "fp32")

    def __call__(self, **batch: Any) -> SimpleNamespace:
        feed = {k: np.asarray(batch[k].cpu() if isinstance(batch[k], torch.Tensor) else batch[k], dtype=np.int64)
                for k in self.inputs}
        return SimpleNamespace(logits=torch.from_numpy(self.session.run(None, feed)[0]))

    def eval(self) -> "OnnxClassifier":
        return self

    def to(self, *_args: Any, **_kwargs: Any) -> "OnnxClassifier":
        """ONNX Runtime runs the graph on the CPU in its exported precision; nothing to move."""
        return self
