"""The dtype names our commands and the lm-eval model accept, and the torch dtype each means: one map."""

from __future__ import annotations

import torch

TORCH_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
                "float16": torch.float16, "fp16": torch.float16}
