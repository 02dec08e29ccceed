"""Finding and loading classifier checkpoints: plain HF, pruned ``SparsePruned*``, or a gates adapter.

``pretrained`` may be one checkpoint (used for the task it was trained on) or a run directory with
one checkpoint per GLUE task (``<dir>/<task>/``, as ``glue-sparse finetune`` writes it).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.glue_tasks import GLUE_TASKS
from sparse_models.deploy import EXPORT_RECORD, ONNX_FILE
from sparse_models.pruned.configuration_sparse_pruned import SparsePrunedConfig

RUN_FILE = "run.json"
PRUNED_SUBDIR = "pruned"
_HEAD_WEIGHT_SUFFIXES = ("classifier.weight", "classifier.out_proj.weight", "score.weight")


class CheckpointError(UserInputError):
    """A checkpoint or run directory that cannot serve the requested tasks; the message says why."""


@dataclass(frozen=True)
class Checkpoint:
    path: str
    kind: str  # "hf", "pruned", "adapter" or "onnx" (an exported graph run by ONNX Runtime)
    task: str | None  # the GLUE task it was trained on, when recorded
    num_labels: int | None

    def describe(self) -> str:
        return f"{self.kind} checkpoint {self.path}" + (f" (trained on {self.task})" if self.task else "")


def is_checkpoint(path: Path) -> bool:
    return any((path / name).is_file() for name in ("config.json", "adapter_config.json", ONNX_FILE, EXPORT_RECORD))


ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
MODEL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")


def _safetensors_problem(file: Path) -> str | None:
    """What is wrong with a safetensors file, read from its header alone (cheap), or None."""
    from safetensors import safe_open

    size = file.stat().st_size
    with file.open("rb") as handle:
        head = handle.read(8)
    declared = int.from_bytes(head, "little") if len(head) == 8 else None
    if declared is None or (declared < 100 << 20 and 8 + declared > size):
        return f"truncated ({size:,} bytes: its header alone needs more)"
    try:
        with safe_open(str(file), "pt") as handle:
            handle.keys()
    except Exception as exc:  # noqa: BLE001  (safetensors raises its own error type, and OSError)
        text = str(exc)
        if "incomplete metadata" in text or "not fully covered" in text or "too small" in text:
            return "truncated (its header promises more bytes than the file holds)"
        return f"not a safetensors file ({text})"
    return None


def check_weights(path: str | os.PathLike) -> None:
    """Refuse in one line, before anything loads or is written, a checkpoint folder whose weights are damaged:
    a safetensors file that is truncated or not safetensors at all, a shard index naming a shard that is
    missing or lacks the tensors it should hold, a PyTorch file that is no readable archive."""
    import zipfile

    path = Path(path)
    cure = "download or copy it again"
    for name in (*MODEL_WEIGHTS, *ADAPTER_WEIGHTS):
        file = path / name
        if not file.is_file():
            continue
        if name.endswith(".index.json"):
            weight_map = _read_json(file).get("weight_map") or {}
            for shard in sorted(set(weight_map.values())):
                if not (path / shard).is_file():
                    raise CheckpointError(f"{path / shard}: missing, but {name} names it; {cure}")
                problem = _safetensors_problem(path / shard) if shard.endswith(".safetensors") else None
                if problem:
                    raise CheckpointError(f"{path / shard}: {problem}; {cure}")
                if shard.endswith(".safetensors"):
                    from safetensors import safe_open

                    with safe_open(str(path / shard), "pt") as handle:
                        missing = sorted(set(k for k, v in weight_map.items() if v == shard) - set(handle.keys()))
                    if missing:
                        raise CheckpointError(f"{path / shard}: lacks {len(missing)} tensor(s) {name} puts there "
                                              f"(first: {missing[0]}); {cure}")
        elif name.endswith(".safetensors"):
            problem = _safetensors_problem(file)
            if problem:
                raise CheckpointError(f"{file}: {problem}; {cure}")
        elif not zipfile.is_zipfile(file):
            raise CheckpointError(f"{file}: truncated or not a PyTorch weights archive; {cure}")


def check_model(name: str | os.PathLike | None) -> None:
    """``check_weights`` for what a ``--model`` names: a local folder, or a Hub id's snapshot in the local Hub
    cache (nothing to check yet where it is not cached: the download is then whole or fails itself)."""
    if name is None:
        return
    folder = Path(name).expanduser()
    if not folder.is_dir():
        try:
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(str(name), local_files_only=True))
        except Exception:  # noqa: BLE001  (not cached, not a Hub id: the load itself will say)
            return
    check_weights(folder)


def check_complete(path: str | os.PathLike) -> None:
    """Refuse, naming the folder and the missing or damaged file, a checkpoint whose weights are not there or
    not whole; else PEFT and transformers fall back to the Hub, or fail deep inside, about something else."""
    path = Path(path)
    check_weights(path)
    if (path / "adapter_config.json").is_file():
        if not any((path / f).is_file() for f in ADAPTER_WEIGHTS):
            raise CheckpointError(f"{path}: adapter_config.json is there but no adapter weights "
                                  f"({' or '.join(ADAPTER_WEIGHTS)}); the adapter was not saved completely")
    elif (path / EXPORT_RECORD).is_file() or (path / ONNX_FILE).is_file():
        if not (path / ONNX_FILE).is_file() or not (path / ONNX_FILE).stat().st_size:
            raise CheckpointError(f"{path / ONNX_FILE}: missing or empty, beside {EXPORT_RECORD}; export the "
                                  "folder again (glue-sparse export --format onnx)")
    elif (path / "config.json").is_file():
        if not any((path / f).is_file() for f in MODEL_WEIGHTS):
            raise CheckpointError(f"{path}: config.json is there but no model weights ({', '.join(MODEL_WEIGHTS)})")
    else:
        raise CheckpointError(f"{path}: not a checkpoint folder (no config.json or adapter_config.json)")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: cannot read JSON ({exc})") from None


def _adapter_num_labels(path: Path) -> int | None:
    from safetensors import safe_open

    weights = path / "adapter_model.safetensors"
    if not weights.is_file():
        return None
    with safe_open(str(weights), "pt") as handle:
        for key in handle.keys():
            if key.endswith(_HEAD_WEIGHT_SUFFIXES):
                return int(handle.get_slice(key).get_shape()[0])
    return None


def describe_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Kind, trained task and label count of one local checkpoint folder."""
    path = Path(path)
    check_complete(path)
    run = _run_record(path)
    task = run.get("task")
    if (path / "adapter_config.json").is_file():
        num_labels = run.get("num_labels") or _adapter_num_labels(path)
        return Checkpoint(str(path), "adapter", task, num_labels)
    config = _read_json(path / "config.json")
    task = task or (config.get("finetuning_task") if config.get("finetuning_task") in GLUE_TASKS else None)
    num_labels = config.get("num_labels") or len(config.get("id2label") or {}) or None
    if (path / ONNX_FILE).is_file():  # an exported graph; its config.json is the original architecture's
        kind = "onnx"
    else:
        kind = "pruned" if config.get("model_type") == SparsePrunedConfig.model_type else "hf"
    return Checkpoint(str(path), kind, task, num_labels)


def resolve_checkpoints(pretrained: str, variant: str = "") -> dict[str | None, Checkpoint]:
    """``{task: checkpoint}`` for a run directory, or ``{trained_task_or_None: checkpoint}`` for one.

    ``variant="pruned"`` picks ``<task>/pruned/`` inside a run directory. A name that is not a local
    folder is taken as a Hub model id (a plain HF checkpoint).
    """
    path = Path(pretrained).expanduser()
    if not path.exists():
        if pretrained.startswith((".", "/", "~")) or pretrained.count("/") > 1:
            raise CheckpointError(f"pretrained={pretrained!r}: no such folder")
        return {None: Checkpoint(pretrained, "hf", None, None)}  # a Hub id such as org/name
    if not path.is_dir():
        raise CheckpointError(f"pretrained={pretrained!r} is a file; expected a checkpoint or run folder")
    if variant and variant != PRUNED_SUBDIR:
        raise CheckpointError(f"variant={variant!r}: the only variant is {PRUNED_SUBDIR!r}")
    if is_checkpoint(path) and not variant:
        ckpt = describe_checkpoint(path)
        return {ckpt.task: ckpt}
    found = {}
    for task in GLUE_TASKS:
        candidate = path / task / variant if variant else path / task
        if is_checkpoint(candidate):
            found[task] = describe_checkpoint(candidate)
    if not found:
        where = f"<task>/{variant}/" if variant else "<task>/"
        raise CheckpointError(
            f"pretrained={pretrained!r} holds no checkpoint: expected config.json or adapter_config.json "
            f"there, or a run directory with {where} folders for GLUE tasks ({', '.join(GLUE_TASKS)})"
        )
    return found


def _run_record(path: Path) -> dict[str, Any]:
    """The ``run.json`` beside a checkpoint (or beside its ``pruned/`` parent), else {}."""
    for candidate in (path / RUN_FILE, path.parent / RUN_FILE if path.name == PRUNED_SUBDIR else None):
        if candidate is not None and candidate.is_file():
            return _read_json(candidate)
    return {}


def recorded_trainable_parameters(ckpt: Checkpoint) -> int | None:
    """Trainable parameters as recorded by training, or the element count of a saved adapter."""
    path = Path(ckpt.path)
    recorded = _run_record(path).get("accounting", {}).get("trainable_parameters")
    if recorded is not None:
        return int(recorded)
    weights = path / "adapter_model.safetensors"
    if ckpt.kind == "adapter" and weights.is_file():
        from safetensors import safe_open

        with safe_open(str(weights), "pt") as handle:
            return sum(math.prod(handle.get_slice(k).get_shape()) for k in handle.keys())
    return None


def has_tokenizer(path: str | os.PathLike) -> bool:
    """Whether a checkpoint folder carries its own tokenizer (an adapter without one reads its base's)."""
    return any((Path(path) / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"))


def label_count(ckpt: Checkpoint) -> int:
    """The outputs of a checkpoint's classification head: as recorded, else from its config."""
    if ckpt.num_labels is not None:
        return ckpt.num_labels
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(ckpt.path).num_labels


def load_classifier(ckpt: Checkpoint, dtype: Any, device: str, base: str | None = None,
                    prune: bool = False, tokenizer: str | None = None) -> tuple[Any, Any]:
    """(model in eval mode on ``device``, tokenizer) for one checkpoint of any kind."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer


    path = Path(ckpt.path)
    tokenizer_source = tokenizer
    if ckpt.kind == "adapter":
        from peft import PeftConfig, PeftModel

        base_path = base or PeftConfig.from_pretrained(ckpt.path).base_model_name_or_path
        if not base_path:
            raise CheckpointError(f"{ckpt.path}: adapter_config.json names no base model; pass base=PATH")
        if base_path.startswith(("/", ".", "~")) and not Path(base_path).expanduser().exists():
            raise CheckpointError(
                f"{ckpt.path}: its base model {base_path!r} does not exist here; pass base=PATH in --model_args"
            )
        # The adapter carries its own head (PEFT modules_to_save): the base's head may differ in size.
        kwargs = {"num_labels": ckpt.num_labels, "ignore_mismatched_sizes": True} if ckpt.num_labels else {}
        model = AutoModelForSequenceClassification.from_pretrained(base_path, dtype=dtype, **kwargs)
        model = PeftModel.from_pretrained(model, ckpt.path).eval()
        if prune:
            model = model.merge_and_unload()
        tokenizer_source = tokenizer_source or (ckpt.path if has_tokenizer(path) else base_path)
    elif ckpt.kind == "onnx":  # runs in ONNX Runtime in the precision it was exported in (dtype does not apply)
        from sparse_models.deploy.onnx_classifier import OnnxClassifier

        model = OnnxClassifier(path)
        tokenizer_source = tokenizer_source or ckpt.path
    else:
        model = AutoModelForSequenceClassification.from_pretrained(ckpt.path, dtype=dtype)
        tokenizer_source = tokenizer_source or ckpt.path
    return model.to(device).eval(), AutoTokenizer.from_pretrained(tokenizer_source)
