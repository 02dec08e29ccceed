"""The names ``--precision`` takes, written once for every layer: the method core resolves them
(``sparse_models.runtime.devices``) and the workflows' option dataclasses check them on creation, without
importing torch (so ``--help`` stays instant)."""

from __future__ import annotations

#: auto (bf16 autocast on a CUDA device that supports it, fp32 elsewhere), or the autocast type itself
PRECISIONS = ("auto", "fp32", "bf16", "fp16")

#: what an exported ONNX graph's weights are quantised to (``export --quantize``; ``speed``'s int8 column):
#: none (fp32) or int8 by ONNX Runtime's dynamic quantisation (activations quantised per batch at run time)
QUANTIZE_CHOICES = ("none", "int8")

#: how ``--quantize int8`` scales the weights: one scale per output channel (the default: it kept every task within
#: 1.0 point of fp32 where one scale per matrix lost 1.40 on CoLA; benchmarks/results/onnx_int8_scores) or per matrix
INT8_SCALES = ("per-channel", "per-matrix")
