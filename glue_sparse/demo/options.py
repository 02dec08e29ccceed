"""The main job's grid and budget, in a module that imports no torch (``glue-sparse demo --help`` is
instant); running it and printing its table is ``run.py``.

Why SST-2 alone, 2,000 rows, 2 epochs: the main job must rank the methods as the converged benchmark
does (full at or above magnitude and gates) and end within 10 minutes on 2 cores. The measurements that
chose it (SST-2, MRPC and STS-B at this budget) are in benchmarks/results/main_job/.
"""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.bench.options import BenchConfig
from glue_sparse.common.option_fields import option
from glue_sparse.finetune.options import MASK_SEARCH_EXAMPLES

#: The converged benchmark whose headline the main job prints under its table (the same methods there).
CONVERGED_REPORT = "benchmarks/results/minilm_converged/report/report.csv"
#: mask search reads 512 training examples here, the converged grid MASK_SEARCH_EXAMPLES (the paper's 2K): about
#: a minute on 2 cores instead of five, so the job stays well inside its 10 minutes.
DEMO_MASK_SEARCH_EXAMPLES = 512
DEMO_METHODS = ("full", {"method": "gates", "label": "gates-r0.3", "target_removal": 0.3},
                {"method": "magnitude", "label": "magnitude-r0.3", "target_removal": 0.3},
                {"method": "mask-search", "label": "mask-search-r0.3", "target_removal": 0.3,
                 "mask_search_examples": DEMO_MASK_SEARCH_EXAMPLES})


@dataclass(kw_only=True)
class DemoOptions:
    """``glue-sparse demo``: where it writes, what it reads, and its size."""

    output: str = option("demo_out", "folder for the demo bench (rerun: finished cells are kept)")
    data_dir: str | None = option(None, "GLUE folder (default: $GLUE_SPARSE_DATA_DIR or ../shared/data/glue)")
    model: str | None = option(None, "encoder folder or Hub name (default: the packaged MiniLM)")
    tasks: str = option("sst2", "comma-separated GLUE tasks (e.g. sst2,mrpc: about 9 min more on 2 cores)")
    train_limit: int = option(2000, "first training rows per task")
    epochs: float = option(2.0, "training epochs")
    seeds: list[int] = option(help="comma-separated seeds (default 1; each more adds the grid once again)",
                              default_factory=lambda: [1])

    def note(self) -> str:
        return (f"Main job: full fine-tuning vs sparse gates vs magnitude pruning vs mask search (post-training, "
                f"Kwon et al. 2022), each pruned method closing 30% of gated weights, "
                f"{self.model or 'packaged MiniLM'}, {self.tasks}. It differs from the converged benchmark "
                f"(benchmarks/minilm_converged.json: 5 tasks, 10,000 rows, 5 epochs, 3 seeds) only in size: "
                f"first {self.train_limit} training rows, {self.epochs:g} epochs, "
                f"{'one seed' if len(self.seeds) == 1 else f'seeds {self.seeds}'}, "
                f"{DEMO_MASK_SEARCH_EXAMPLES} examples for the mask search ({MASK_SEARCH_EXAMPLES:,} there).")

    def bench_config(self, data_dir: str | None) -> BenchConfig:
        """The main job's grid: full vs gates vs magnitude vs mask search at 30% removal, its seeds."""
        return BenchConfig.from_dict({
            "tasks": [t for t in self.tasks.split(",") if t], "regimes": ["limited"], "seeds": list(self.seeds),
            "methods": list(DEMO_METHODS), "finetune": {"train_limit": self.train_limit, "epochs": self.epochs},
            "latency_docs": 64, "latency_rounds": 3, "data_dir": data_dir, "use_hub": data_dir is None,
            "base_model": self.model,
        }, "demo")
