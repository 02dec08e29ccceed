"""Metric computation time: our lm-eval aggregations vs lm-eval's registered, bootstrapped ones.

Times a full CoLA (MCC, 1,043 rows) and MRPC (F1, 408 rows) metric computation through
`glue_sparse_tasks.tasks.utils`, then lm-eval's own `matthews_corrcoef`/`f1_score` aggregation
plus the stderr it would compute (bootstrap, 1,000 of its default 100,000 draws, extrapolated).
Run: python benchmarks/aggregation_speed.py
"""

from __future__ import annotations

import random
import time

from lm_eval.api import metrics as lm_metrics

from glue_sparse_tasks.tasks import utils


def _items(n: int, seed: int) -> list[tuple[int, int, None]]:
    rng = random.Random(seed)
    return [(rng.randint(0, 1), rng.randint(0, 1), None) for _ in range(n)]


def _time(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main() -> None:
    for task, n, ours, theirs in (("CoLA mcc", 1043, utils.mcc, lm_metrics.matthews_corrcoef),
                                  ("MRPC f1", 408, utils.f1, lm_metrics.f1_score)):
        items = _items(n, n)
        t_ours = min(_time(ours, items) for _ in range(5))
        pairs = [(g, p) for p, g, _ in items]
        t_theirs = _time(theirs, pairs)
        t_boot = _time(lambda: lm_metrics.bootstrap_stderr(theirs, pairs, iters=1000)) * 100
        print(f"{task:9} n={n:5}: ours {t_ours * 1e3:7.2f} ms (no bootstrap) | lm-eval metric "
              f"{t_theirs * 1e3:7.2f} ms + bootstrap stderr ~{t_boot:7.1f} s (100k draws, "
              f"extrapolated from 1k) | ratio ~{(t_theirs + t_boot) / t_ours:,.0f}x")


if __name__ == "__main__":
    main()
