"""Encoders for deployment runtimes: the regular form graph runtimes can fuse (``regular_form``), ONNX export
and int8 quantisation (``onnx_export``), and exported graphs run by ONNX Runtime (``onnx_classifier``).

The names of an exported ONNX folder's files live here, so ``sparse_models.checkpoints`` can recognise such a
folder without importing torch or ONNX Runtime.
"""

ONNX_FILE = "model.onnx"
"""The graph of an exported folder (fp32, or int8 where exported with ``--quantize int8``)."""
EXPORT_RECORD = "onnx_export.json"
"""How the graph was made (runtime, precision, opset, fusions) and its logits' distance from the torch model's."""
