"""Dense vs physically pruned MiniLM CPU latency at 10/20/40/60% of gated weights closed, per layout.

Same code as ``glue-sparse speed``; this script only fixes the published settings and the output files
(``benchmarks/results/pruning_speed/``: ``speed.json``, ``speed.md`` and ``speed.png``). Targets (issue #15, auto layout, batch 32, 2 threads):
never slower than dense at 10/20/40/60%, >= 1.3x at 40%, >= 85% of the ideal speed-up at 40% and 60%.
``per-layer`` is ``auto`` without its whole-model check, timed beside it to show what the check changes.

    python benchmarks/pruning_speed.py [--data-dir ../shared/data/glue] [--adapter DIR ...]
"""

from __future__ import annotations

import sys

from glue_sparse.cli.main import main

if __name__ == "__main__":
    defaults = ["speed", "--target-removal", "0.1,0.2,0.4,0.6", "--batch-sizes", "32,1", "--batches", "8",
                "--rounds", "7", "--threads", "2", "--layouts", "auto,per-layer,keep,remove",
                "--output", "benchmarks/results/pruning_speed"]
    sys.exit(main(defaults + sys.argv[1:]))
