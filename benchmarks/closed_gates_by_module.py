"""Where a gates adapter closed its gates: the share of closed row and column gates per kind of matrix.

Reads only the adapter file (no model, no data), so it compares rankings cheaply: e.g. Taylor-ranked
closing concentrates on query/key while logit-ranked closing spreads over all six matrices
(``benchmarks/results/gates_cola_probe/``).

    python benchmarks/closed_gates_by_module.py RUN/TASK [RUN/TASK ...]
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

from safetensors.torch import load_file

from sparse_models.gates import eval_gate_values

#: "encoder.layer.3.attention.self.query.sparse_gates_row" -> kind "attention.self.query", side "row"
_GATE_KEY = re.compile(r"layer\.\d+\.(?P<kind>.+?)\.sparse_gates_(?P<side>row|col)")


def closed_by_kind(adapter: Path) -> dict[tuple[str, str], tuple[int, int]]:
    """(kind of matrix, row|col) -> (closed gates, all gates), summed over layers."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for key, logits in load_file(str(adapter / "adapter_model.safetensors")).items():
        match = _GATE_KEY.search(key)
        if match:
            entry = counts[(match["kind"], match["side"])]
            entry[0] += int((eval_gate_values(logits) == 0).sum())
            entry[1] += logits.numel()
    return {k: (v[0], v[1]) for k, v in sorted(counts.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapters", nargs="+", type=Path, help="task folders holding adapter_model.safetensors")
    args = parser.parse_args()
    tables = {a: closed_by_kind(a) for a in args.adapters}
    kinds = sorted({k for t in tables.values() for k in t})
    print("| matrix | gates | " + " | ".join(str(a) for a in args.adapters) + " |")
    print("|---|---|" + "---:|" * len(args.adapters))
    for kind, side in kinds:
        cells = [f"{tables[a][(kind, side)][0] / tables[a][(kind, side)][1]:.0%}" if (kind, side) in tables[a]
                 else "–" for a in args.adapters]
        print(f"| {kind} | {side} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
