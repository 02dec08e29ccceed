"""Dense vs physically pruned MiniLM CPU latency at 20/40/60% of gated weights removed.

Same code as ``glue-sparse speed``; this script only fixes the published settings and the output file.
Target (issue #4): at 40% removed, latency ratio >= 1.3 and >= 85% of the FLOP ratio.

    python benchmarks/pruning_speed.py [--data-dir ../shared/data/glue] [--adapter DIR ...]
"""

from __future__ import annotations

import sys

from glue_sparse.cli.main import main

if __name__ == "__main__":
    defaults = ["speed", "--removed", "0.2,0.4,0.6", "--batch-sizes", "32,1", "--batches", "8", "--rounds", "7",
                "--output", "benchmarks/results/pruning_speed.json"]
    sys.exit(main(defaults + sys.argv[1:]))
