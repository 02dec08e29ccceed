"""The distillation teacher of a fine-tune (``--distill --teacher PATH``): its logits on every training
example, computed once and cached by content (the teacher's weights and the exact token ids) in
the cache entry ``teacher_logits/<key>/`` (``glue_sparse.common.cache``), and the checks that refuse a teacher that cannot teach this student
(another label count, another vocabulary), in one line, before training starts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from glue_sparse.common.cache import CacheEntryError, open_entry
from glue_sparse.common.packaged import model_identity
from glue_sparse.finetune.options import FinetuneConfig, FinetuneConfigError
from glue_sparse_tasks.glue_tasks import GLUE_TASKS
from sparse_models.checkpoints import describe_checkpoint, has_tokenizer, label_count, load_classifier

#: the entry's file (one per entry, checked against its manifest on every read)
LOGITS_FILE = "logits.json"
#: what a teacher sees of a training example (the student's own token ids)
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _refuse_labels(config: FinetuneConfig, num_labels: int) -> None:
    expected = GLUE_TASKS[config.task].num_labels
    if num_labels != expected:
        raise FinetuneConfigError(f"--teacher {config.teacher}: {num_labels} label(s), but {config.task} needs "
                                  f"{expected}; give a checkpoint fine-tuned on {config.task}")


def _refuse_vocabulary(config: FinetuneConfig, teacher: Any, student: Any) -> None:
    if teacher.get_vocab() != student.get_vocab():
        raise FinetuneConfigError(f"--teacher {config.teacher}: its tokenizer's vocabulary differs from the "
                                  f"student's ({config.base_model or 'the packaged MiniLM'}); the teacher reads the "
                                  "student's token ids, so both must share one tokenizer")


def _shape(path: str) -> tuple[int, int]:
    """(layers, hidden width) of a checkpoint folder, an adapter's read from its base model."""
    from transformers import AutoConfig

    if (Path(path) / "adapter_config.json").is_file():
        from peft import PeftConfig

        path = PeftConfig.from_pretrained(path).base_model_name_or_path
    config = AutoConfig.from_pretrained(path)
    return getattr(config, "num_hidden_layers", None) or getattr(config, "n_layers", 0), \
        getattr(config, "hidden_size", None) or getattr(config, "dim", 0)


def _refuse_shape(config: FinetuneConfig, student_base: str) -> None:
    teacher, student = _shape(config.teacher), _shape(student_base)
    if teacher != student:
        raise FinetuneConfigError(f"--distill-hidden: the teacher {config.teacher} has {teacher[0]} layers of width "
                                  f"{teacher[1]}, the student {student[0]} of width {student[1]}; layer-wise "
                                  "distillation maps equal depths and widths one to one")


def check_teacher(config: FinetuneConfig, student_base: str) -> None:
    """Refuse a teacher of another label count or another vocabulary than ``student_base``'s (it would
    teach noise), or of another depth or width for ``--distill-hidden``, reading only configs and
    tokenizers: before the run folder is made or any model loads."""
    from transformers import AutoTokenizer

    ckpt = describe_checkpoint(config.teacher)
    _refuse_labels(config, label_count(ckpt))
    if ckpt.kind != "adapter" or has_tokenizer(ckpt.path):  # else it reads its base's: the student's, in a bench
        _refuse_vocabulary(config, AutoTokenizer.from_pretrained(ckpt.path),
                           AutoTokenizer.from_pretrained(student_base))
    if config.distill_hidden:
        _refuse_shape(config, student_base)


def teacher_model(config: FinetuneConfig, device: str) -> Any:
    """The teacher in evaluation mode on ``device``, frozen: layer-wise distillation reads its hidden states."""
    import torch

    model, _ = load_classifier(describe_checkpoint(config.teacher), torch.float32, device)
    model.requires_grad_(False)
    model.config.output_hidden_states = True
    return model.eval()


def _cache_key(config: FinetuneConfig, dataset: Any) -> str:
    digest = hashlib.sha256(model_identity(config.teacher).encode())
    for name in MODEL_INPUTS:
        if name in dataset.column_names:
            for row in dataset[name]:
                digest.update(np.asarray(row, dtype=np.int32).tobytes() + b"|")
    return digest.hexdigest()


def teacher_logits(config: FinetuneConfig, dataset: Any, tokenizer: Any, device: str,
                   batch_size: int = 64) -> list[list[float]]:
    """The teacher's logits per row of the tokenised training set, from its cache entry (checked on every
    read; rebuilt when damaged) or computed and stored there."""
    ckpt = describe_checkpoint(config.teacher)

    def build(staging: Path) -> dict[str, Any]:
        import torch
        from transformers import DataCollatorWithPadding

        model, _ = load_classifier(ckpt, torch.float32, device)
        collate = DataCollatorWithPadding(tokenizer)
        columns = [c for c in MODEL_INPUTS if c in dataset.column_names]
        out: list[list[float]] = []
        with torch.inference_mode():
            for start in range(0, len(dataset), batch_size):
                rows = dataset.select(range(start, min(start + batch_size, len(dataset))))
                batch = collate([{c: row[c] for c in columns} for row in rows])
                out += model(**{k: v.to(device) for k, v in batch.items()}).logits.float().cpu().tolist()
        (staging / LOGITS_FILE).write_text(json.dumps(out))
        return {"rows": len(out), "teacher": model_identity(config.teacher)}

    folder = open_entry("teacher_logits", _cache_key(config, dataset), build, f"teacher {ckpt.path}")
    logits = json.loads((folder / LOGITS_FILE).read_text())
    if len(logits) != len(dataset):
        raise CacheEntryError(f"cache entry {folder} holds {len(logits)} rows for a training set of {len(dataset)}; "
                              "clear it: glue-sparse cache clear --kind teacher_logits")
    return logits
