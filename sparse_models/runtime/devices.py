"""What ``--device``, ``--precision`` and ``--dtype`` mean, written once for every command that trains,
scores or times.

``--device``: ``auto`` (a CUDA GPU when one is visible, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``.
``--precision``: ``auto`` (bf16 autocast on a CUDA device that supports it, fp32 elsewhere), ``fp32``,
``bf16`` or ``fp16``; the weights stay fp32, the matrix products run in the chosen type (autocast), as the
``Trainer``'s ``bf16``/``fp16`` do. Where a command casts weights instead (``speed --dtype``, lm-eval's
``dtype=``) the names map to torch dtypes through ``TORCH_DTYPES``, the one map.
"""

from __future__ import annotations

import warnings
from contextlib import nullcontext
from typing import Any, ContextManager

import torch

from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.precisions import PRECISIONS

TORCH_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
                "float16": torch.float16, "fp16": torch.float16}
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(name: str | None = "auto", lenient: bool = False) -> torch.device:
    """The torch device ``--device NAME`` means here; one line when it names no usable device. ``lenient``
    (lm-eval's models, whose CLI passes ``cuda:0`` by default): a CUDA or MPS device asked for where none
    is visible falls back to the CPU, with a warning unless it was that default."""
    if name is None:
        name = "cuda" if lenient else "auto"
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if lenient and ((name.startswith("cuda") and not torch.cuda.is_available())
                    or (name == "mps" and not torch.backends.mps.is_available())):
        if name not in ("cuda", "cuda:0", "mps"):
            warnings.warn(f"device={name!r} requested but it is not available here; using cpu")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        device = None
    if device is None or device.type not in ("cpu", "cuda", *(("mps",) if lenient else ())):
        raise UserInputError(f"--device {name!r}: expected auto, cpu, cuda or cuda:N")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserInputError(f"--device {name}: no such CUDA device here (none visible); use --device cpu or auto")
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise UserInputError(f"--device {name}: no such CUDA device here ({torch.cuda.device_count()} visible)")
    return device


def resolve_precision(precision: str, device: torch.device) -> str:
    """fp32, bf16 or fp16: what ``--precision`` means on ``device``."""
    if precision not in PRECISIONS:
        raise UserInputError(f"--precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    if precision == "auto":
        return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if precision == "fp16" and device.type != "cuda":
        raise UserInputError("--precision fp16 needs a CUDA device (on the CPU: fp32 or bf16)")
    return precision


def autocast(device: torch.device, precision: str) -> ContextManager[Any]:
    """The autocast region of a resolved precision (none for fp32), for loops outside the ``Trainer``."""
    if precision not in AUTOCAST_DTYPES:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[precision])


def trainer_arguments(device: str, precision: str) -> dict[str, Any]:
    """``TrainingArguments`` fields for ``--device``/``--precision``. The Trainer takes one GPU per process
    (torchrun's local rank), so ``cuda:N`` is chosen with ``CUDA_VISIBLE_DEVICES`` instead."""
    resolved = resolve_device(device)
    if resolved.index is not None:
        raise UserInputError(f"--device {device}: a training command uses one GPU per process; choose it with "
                             f"CUDA_VISIBLE_DEVICES={resolved.index} and --device cuda")
    chosen = resolve_precision(precision, resolved)
    return {"use_cpu": resolved.type == "cpu", "bf16": chosen == "bf16", "fp16": chosen == "fp16",
            "dataloader_pin_memory": resolved.type == "cuda"}
