"""Test LMs that answer glue_sparse docs from their gold labels, and a runner for real lm-eval."""

from __future__ import annotations

import math

from lm_eval.api.model import LM

from glue_sparse_tasks import TASKS_DIR


def _flipped(doc_id: int) -> bool:
    return doc_id % 3 == 0


def answer(doc: dict, doc_id: int, flip: bool) -> float | int:
    """The prediction the test LM makes for one doc: gold, or a known wrong answer."""
    gold = doc["label"]
    if doc["glue_task"] == "stsb":
        return 5.0 - float(gold) if flip and _flipped(doc_id) else float(gold)
    n = 3 if doc["glue_task"].startswith("mnli") else 2
    return (int(gold) + 1) % n if flip and _flipped(doc_id) else int(gold)


class OracleLM(LM):
    """Log-likelihoods that make lm-eval pick ``answer(doc)``; STS-B gets a two-point distribution
    on floor/ceil of the score whose expected value is exactly the score."""

    def __init__(self, flip: bool = False):
        super().__init__()
        self.flip = flip

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        out = []
        for req in requests:
            target = answer(req.doc, req.doc_id, self.flip)
            if req.doc["glue_task"] == "stsb":
                lo = math.floor(target)
                frac = target - lo
                probs = {lo: 1.0 - frac, min(lo + 1, 5): frac} if lo < 5 else {5: 1.0}
                p = probs.get(req.idx, 0.0)
                out.append((math.log(p) if p > 0 else -1e9, False))
            else:
                out.append((0.0 if req.idx == target else -10.0, req.idx == target))
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError


def run_tasks(lm, tasks: list[str], data_dir, limit=None) -> dict:
    """Real lm-eval over our task folder only (skipping the 9 s index of lm-eval's own tasks)."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=TASKS_DIR, include_defaults=False,
                     metadata={"data_dir": str(data_dir)})
    return simple_evaluate(model=lm, tasks=tasks, task_manager=tm, limit=limit,
                           log_samples=True, bootstrap_iters=100000)
