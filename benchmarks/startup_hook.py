"""Start-up cost of the lazy lm-eval hook: `python -c pass` with the hook on vs off.

Both sides run in one process pool, interleaved, N times each; prints medians and the difference.
The hook's own import time is also read from `python -X importtime`. Target: under 10 ms.
Run: python benchmarks/startup_hook.py [N]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time


def _run(env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - start


def _importtime_us(env: dict) -> int:
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], env=env,
                         capture_output=True, text=True, check=True).stderr
    lines = [line for line in err.splitlines() if line.rstrip().endswith("glue_sparse_tasks.lm_eval_hook")]
    return int(lines[0].split("|")[1]) if lines else 0


def main(n: int = 40) -> None:
    on = {k: v for k, v in os.environ.items() if k != "GLUE_SPARSE_NO_HOOK"}
    off = {**on, "GLUE_SPARSE_NO_HOOK": "1"}
    for _ in range(3):  # warm the page cache and .pyc files
        _run(on), _run(off)
    t_on, t_off = [], []
    for _ in range(n):
        t_on.append(_run(on))
        t_off.append(_run(off))
    med_on, med_off = statistics.median(t_on) * 1e3, statistics.median(t_off) * 1e3
    imports = sorted(_importtime_us(on) for _ in range(11))
    print(f"python -c pass, median of {n}: hook on {med_on:.1f} ms, hook off {med_off:.1f} ms, "
          f"difference {med_on - med_off:+.1f} ms (target < 10 ms)")
    print(f"hook import (cumulative, -X importtime), median of 11: {imports[5] / 1000:.2f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
