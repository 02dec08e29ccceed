"""lm-eval model ``hf-classifier``: answers ``glue_sparse`` tasks from a sequence-classification head.

lm-eval's ``hf`` model only knows causal and seq2seq LMs (it loads a BERT classifier as a causal LM
with a fresh head and reports garbage). This model reads each request's doc fields, runs the
classifier once per doc, and returns the choice log-probabilities: ``log_softmax`` of the logits in
label order, or, for STS-B regression, a two-point distribution on floor/ceil of the score whose
expected value is the score. It serves any sequence-classification checkpoint: a plain transformers
classifier, a fine-tuning run folder, a sparse-gates adapter (optionally pruned on load), a pruned model,
or an exported ONNX folder (``export --format onnx``: run by ONNX Runtime in the precision it was exported in,
which the report names). Its old name, ``sparse-gated``, stays registered for now and warns (``glue_sparse_tasks.deprecations``).

    lm_eval run --model hf-classifier --model_args pretrained=RUN_DIR --tasks glue_sparse \\
        --metadata '{"data_dir": "../shared/data/glue"}'
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import torch
from lm_eval.api.model import LM
from tqdm import tqdm

from glue_sparse_tasks.atomic import write_json_atomic
from glue_sparse_tasks.deprecations import removal_notice
from glue_sparse_tasks.glue_tasks import GLUE_TASKS
from glue_sparse_tasks.lm_eval_hook import register_models
from glue_sparse_tasks.tasks.utils import answering_task
from sparse_models.accounting import parameter_accounting
from sparse_models.architectures import max_input_length
from sparse_models.checkpoints import (
    Checkpoint,
    CheckpointError,
    label_count,
    load_classifier,
    recorded_trainable_parameters,
    resolve_checkpoints,
)
from sparse_models.runtime.devices import TORCH_DTYPES, resolve_device

#: what an evaluation writes beside the checkpoint: accounting and throughput (its old name kept, for readers)
EVAL_REPORT_FILE = "sparse_gated_eval.json"


logger = logging.getLogger(__name__)


def _data_parallel_position() -> tuple[int, int, int]:
    """(rank, world size, local rank) under ``torchrun`` / ``accelerate launch``; (0, 1, 0) otherwise.
    Each rank then gets its share of the requests from lm-eval and rank 0 writes the results, as with
    lm-eval's own ``hf`` model. Without CUDA the processes talk over gloo."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1, 0
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    return state.process_index, state.num_processes, state.local_process_index


def resolve_dtype(dtype: str | None, device: str) -> torch.dtype:
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    try:
        return TORCH_DTYPES[str(dtype)]
    except KeyError:
        raise ValueError(f"dtype={dtype!r}: expected auto, {', '.join(TORCH_DTYPES)}") from None


def two_point_logprobs(score: float, n_choices: int = 6) -> list[float]:
    """Log-probabilities over 0..n-1 with all mass on floor/ceil of ``score``; expectation == score."""
    score = min(max(score, 0.0), float(n_choices - 1))
    low = math.floor(score)
    frac = score - low
    probs = [0.0] * n_choices
    probs[low] += 1.0 - frac
    if frac > 0:
        probs[low + 1] += frac
    return [math.log(p) if p > 0 else -1e9 for p in probs]


class HFClassifierLM(LM):
    """Classifier-backed lm-eval model for ``glue_sparse_*`` tasks (see module docstring).

    model_args: ``pretrained`` (checkpoint or run dir), ``variant`` ("pruned" picks ``<task>/pruned``),
    ``base`` (base model for adapters whose recorded base moved), ``prune`` (prune adapters before
    evaluating), ``tokenizer``, ``max_length``, ``dtype`` (auto: bf16 on GPU, fp32 on CPU),
    ``results_json`` (where to write accounting and throughput; default: in ``pretrained``).
    """

    def __init__(
        self,
        pretrained: str,
        batch_size: int | str | None = 32,
        max_batch_size: int | None = None,
        device: str | None = None,
        dtype: str | None = "auto",
        max_length: int | None = None,
        tokenizer: str | None = None,
        base: str | None = None,
        prune: bool = False,
        variant: str = "",
        results_json: str | None = None,
        **_unused: Any,
    ) -> None:
        super().__init__()
        self._rank, self._world_size, local_rank = _data_parallel_position()
        self.pretrained = str(pretrained)
        self.checkpoints = resolve_checkpoints(self.pretrained, variant=str(variant or ""))
        only = next(iter(self.checkpoints.values()))
        self.single_checkpoint = len(self.checkpoints) == 1 and Path(only.path) == Path(self.pretrained)
        self.device_name = str(resolve_device(device, lenient=True))  # lm-eval passes cuda:0 by default
        if self._world_size > 1 and self.device_name.startswith("cuda"):
            self.device_name = f"cuda:{local_rank}"  # one device per process, as lm-eval's hf model
        self.dtype = resolve_dtype(dtype, self.device_name)
        self.batch_size_arg = batch_size if batch_size is not None else 32
        self.max_batch_size = int(max_batch_size) if max_batch_size else None
        self.max_length = int(max_length) if max_length else None
        self.tokenizer_source = tokenizer
        self.base = base
        self.prune = str(prune).lower() in ("1", "true", "yes")
        self.results_json = results_json
        self.report: dict[str, Any] = {}

    # ------------------------------------------------------------------ which checkpoint for which task
    def checkpoint_for(self, glue_task: str) -> Checkpoint:
        data_task = answering_task(glue_task)
        if self.single_checkpoint:
            (trained_on, ckpt), = self.checkpoints.items()
            if trained_on is not None and trained_on != data_task:
                raise CheckpointError(
                    f"{ckpt.describe()} cannot answer glue_sparse_{glue_task}: it was trained on {trained_on}. "
                    "Pass a run directory with one checkpoint per task for several tasks."
                )
            return ckpt
        if data_task not in self.checkpoints:
            raise CheckpointError(
                f"run directory {self.pretrained} has no checkpoint for {data_task} (needed by "
                f"glue_sparse_{glue_task}); it has: {', '.join(sorted(t for t in self.checkpoints if t))}"
            )
        return self.checkpoints[data_task]

    def check_labels(self, glue_task: str, ckpt: Checkpoint) -> None:
        data_task = answering_task(glue_task)
        expected = GLUE_TASKS[data_task].num_labels
        num_labels = label_count(ckpt)
        if num_labels != expected:
            raise CheckpointError(
                f"{ckpt.describe()} has {num_labels} label(s) but glue_sparse_{glue_task} needs {expected}"
                + (" (a regression head)" if expected == 1 else "")
            )

    # ------------------------------------------------------------------ batching
    def _batch_size(self, model: Any, longest: Callable[[], dict]) -> int:
        """The batch size; ``auto`` probes the longest doc on CUDA only (``longest`` builds it lazily)."""
        arg = str(self.batch_size_arg)
        if not arg.startswith("auto"):
            return int(arg)
        if not self.device_name.startswith("cuda"):
            size = 64
        else:
            size = self.max_batch_size or 1024
            example = longest()
            while size > 1:
                try:
                    batch = {k: v[:1].repeat(size, 1).to(self.device_name) for k, v in example.items()}
                    with torch.inference_mode():
                        model(**batch)
                    break
                except torch.cuda.OutOfMemoryError:
                    torch.cuda.empty_cache()
                    size //= 2
        return min(size, self.max_batch_size) if self.max_batch_size else size

    def _score_docs(self, glue_task: str, docs: list[dict]) -> tuple[list[list[float]], dict[str, Any]]:
        """Per doc, the choice log-probabilities; plus this task's accounting and throughput."""
        ckpt = self.checkpoint_for(glue_task)
        data_task = answering_task(glue_task)
        spec = GLUE_TASKS[data_task]
        model, tokenizer = load_classifier(ckpt, self.dtype, self.device_name, self.base, self.prune,
                                           self.tokenizer_source)
        config = model.config.inner_config() if hasattr(model.config, "inner_config") else model.config
        max_length = max_input_length(config, tokenizer, self.max_length)
        start = time.perf_counter()
        columns = [[doc[f] for doc in docs] for f in spec.text_fields]
        encoded = tokenizer(*columns, truncation=True, max_length=max_length)
        order = sorted(range(len(docs)), key=lambda i: len(encoded["input_ids"][i]))
        batch_size = self._batch_size(
            model, lambda: dict(tokenizer.pad([{k: encoded[k][order[-1]] for k in encoded}], return_tensors="pt")))
        out: list[list[float] | None] = [None] * len(docs)
        forward_seconds = 0.0
        with torch.inference_mode():
            for lo in tqdm(range(0, len(order), batch_size), desc=f"hf-classifier {glue_task}",
                           disable=len(order) <= batch_size):  # explicit: shown even under TQDM_DISABLE
                idx = order[lo:lo + batch_size]
                batch = tokenizer.pad([{k: encoded[k][i] for k in encoded} for i in idx], return_tensors="pt")
                batch = {k: v.to(self.device_name) for k, v in batch.items()}
                t0 = time.perf_counter()
                logits = model(**batch).logits.float()
                forward_seconds += time.perf_counter() - t0
                if spec.is_regression:
                    rows = [two_point_logprobs(float(s)) for s in logits[:, 0].tolist()]
                else:
                    rows = torch.log_softmax(logits, dim=-1).tolist()
                for i, row in zip(idx, rows):
                    out[i] = row
        seconds = time.perf_counter() - start
        info = {
            "checkpoint": ckpt.path,
            "kind": ckpt.kind + ("+pruned" if self.prune and ckpt.kind == "adapter" else ""),
            "runtime": getattr(model, "runtime", "torch"),  # an exported ONNX folder: onnxruntime, as exported
            "precision": getattr(model, "precision", str(self.dtype).removeprefix("torch.")),
            "docs": len(docs),
            "batch_size": batch_size,
            "max_length": max_length,
            "seconds": seconds,
            "docs_per_second": len(docs) / seconds if seconds else None,
            "forward_docs_per_second": len(docs) / forward_seconds if forward_seconds else None,
            "accounting": self._accounting(model, ckpt),
        }
        del model
        return out, info  # type: ignore[return-value]

    @staticmethod
    def _accounting(model: Any, ckpt: Checkpoint) -> dict[str, Any]:
        """Accounting with the trainable count that is actually known for this kind of checkpoint:
        the run's record, else the adapter's saved tensors; unknown for a plain HF checkpoint. An ONNX graph has
        no torch modules to count: its export record carries the accounting of the model it was exported from."""
        if ckpt.kind == "onnx":
            return model.record.get("accounting") or {}
        trainable = recorded_trainable_parameters(ckpt)
        accounting = parameter_accounting(model, trainable)
        if trainable is None and ckpt.kind == "hf":
            accounting = dataclasses.replace(accounting, trainable_parameters=None)
        return accounting.to_dict()

    # ------------------------------------------------------------------ lm-eval interface
    def loglikelihood(self, requests: list, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        by_task: dict[str, dict[int, dict]] = defaultdict(dict)
        for req in requests:
            if "glue_task" not in req.doc:
                raise ValueError(f"hf-classifier answers glue_sparse_* tasks only; {req.task_name} docs lack "
                                 "the 'glue_task' field")
            by_task[req.doc["glue_task"]][req.doc_id] = req.doc
        for glue_task in by_task:  # every error before any scoring
            self.check_labels(glue_task, self.checkpoint_for(glue_task))
        answers: dict[tuple[str, int], list[float]] = {}
        for glue_task, docs in by_task.items():
            ids = sorted(docs)
            scores, info = self._score_docs(glue_task, [docs[i] for i in ids])
            self.report[glue_task] = info
            answers.update({(glue_task, i): s for i, s in zip(ids, scores)})
        mine = {task: len(docs) for task, docs in by_task.items()}
        logger.debug("hf-classifier rank %d of %d scored %s docs", self.rank, self.world_size, mine)
        per_rank = self.gather_object(mine, dst=0) if self.world_size > 1 else [mine]
        if self.rank == 0:
            for task in self.report:
                self.report[task]["docs_by_rank"] = [counts.get(task, 0) for counts in per_rank]
            self._write_report()
        results = []
        for req in requests:
            row = answers[(req.doc["glue_task"], req.doc_id)]
            results.append((row[req.idx], req.idx == max(range(len(row)), key=row.__getitem__)))
        return results

    # ------------------------------------------------------------------ data parallelism (lm-eval's hooks)
    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.world_size <= 1:
            return tensor
        from accelerate.utils import gather

        return gather(tensor)

    def gather_object(self, obj: Any, dst: int = 0) -> list | None:
        if self.world_size <= 1:
            return [obj]
        result = [None] * self.world_size if self.rank == dst else None
        torch.distributed.gather_object(obj=obj, object_gather_list=result, dst=dst)
        return result

    def barrier(self) -> None:
        if self.world_size > 1:
            torch.distributed.barrier()

    def get_model_info(self) -> dict[str, Any]:
        """lm-eval copies this into ``results["config"]``: accounting and throughput per task."""
        return {"sparse_gated": {"pretrained": self.pretrained, "device": self.device_name,
                                 "dtype": str(self.dtype).removeprefix("torch."), "tasks": self.report}}

    def _write_report(self) -> None:
        target = self.results_json
        if target is None:
            folder = Path(self.pretrained)
            folder = folder if folder.is_dir() and os.access(folder, os.W_OK) else Path.cwd()
            target = str(folder / EVAL_REPORT_FILE)
        write_json_atomic(target, self.get_model_info()["sparse_gated"])
        self.results_path = target

    def loglikelihood_rolling(self, requests: list, disable_tqdm: bool = False) -> list:
        raise NotImplementedError("hf-classifier is a classifier: it has no rolling log-likelihood")

    def generate_until(self, requests: list, disable_tqdm: bool = False) -> list:
        raise NotImplementedError("hf-classifier is a classifier: it does not generate text")


class SparseGatedLM(HFClassifierLM):
    """``--model sparse-gated``: ``hf-classifier`` under its old name, with a deprecation warning."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(f"lm-eval model 'sparse-gated' is now 'hf-classifier' (SparseGatedLM: HFClassifierLM); "
                      f"the old name: {removal_notice()}", DeprecationWarning, stacklevel=2)
        super().__init__(*args, **kwargs)


def register() -> None:
    """Register ``hf-classifier`` by hand (only needed with ``GLUE_SPARSE_NO_HOOK=1``)."""

    register_models()
