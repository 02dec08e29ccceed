"""Minor page faults per forward, dense against pruned, in the speed table's interleaved loop (issue #15).

Freed memory above glibc's trim threshold goes back to the kernel, and a tensor allocated there next
faults its pages in again (zeroed). The threshold follows the largest block freed so far, so which model
of a process pays depends on the sizes of both models' tensors and on the process's history. This
script prunes one random pattern (``auto``, as the table does), runs dense and pruned taking turns batch
by batch on SST-2 validation batches like ``glue-sparse speed``, and counts the process's minor page
faults (``getrusage``) during each model's forwards beside their times: a reader of a speed ratio sees
how much of it is the allocator rather than the matrices.

``--keep-freed-memory`` first tells glibc (``mallopt``) to keep freed memory (trim threshold 1 GiB) and
to serve blocks up to its 32 MiB maximum from the heap, so after the warm-up neither model faults: the
ratio of the matrices and index work alone.

    python benchmarks/page_faults.py [--data-dir ../shared/data/glue] [--removed 0.4] [--rounds 5] [--keep-freed-memory]
"""

from __future__ import annotations

import argparse
import copy
import ctypes
import resource
import time

import torch
from peft import get_peft_model

from glue_sparse.experiments.packaged import minilm_path
from glue_sparse.experiments.speed import (
    calibrate_closed_fraction,
    dense_and_batches,
    index_work,
    mean_length,
    prune_with_layout,
)
from sparse_models import SparseGatesConfig
from sparse_models.sparse_gates.layout_costs import DEFAULT_ALIGN

#: glibc ``mallopt`` parameters (malloc.h) and the largest mmap threshold it accepts on 64-bit.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX = -1, -3, 32 << 20


def _keep_freed_memory() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        raise SystemExit("--keep-freed-memory needs glibc (libc.so.6 not found)") from None
    if not (libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30) and libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)):
        raise SystemExit("--keep-freed-memory: mallopt refused the thresholds")


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--removed", type=float, default=0.4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--keep-freed-memory", action="store_true", help="mallopt: no trimming, no mmap up to 32 MiB")
    args = p.parse_args()
    if args.keep_freed_memory:
        _keep_freed_memory()
    torch.set_num_threads(args.threads)
    dense, batches, source = dense_and_batches(minilm_path(), args.data_dir, args.batch_size, args.batches)
    gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
    calibrate_closed_fraction(gated, args.removed)
    length = mean_length(batches)
    pruned = prune_with_layout(gated, "auto", args.batch_size * length, DEFAULT_ALIGN, length)
    models = {"dense": dense, "pruned": pruned}
    ops, heads = index_work(pruned)
    glibc = "keeps freed memory" if args.keep_freed_memory else "defaults"
    print(f"{source}; batch {args.batch_size} x {args.batches}; random {args.removed:.0%} closed, auto built "
          f"{ops} index ops{' and narrowed heads' if heads else ''}; threads {torch.get_num_threads()}; "
          f"glibc {glibc}; round 0 is the warm-up")
    print(f"{'round':>5} {'dense ms':>9} {'pruned ms':>9} {'dense/pruned':>12} {'dense faults':>12} "
          f"{'pruned faults':>13}   (faults: minor page faults per forward)")
    # its own loop, the order of ``time_rounds``: timed through ``time_rounds`` with forward hooks filling lists,
    # dense faulted in 0 of 3 processes against 6 of 8 with this loop (the growing lists may pin glibc's heap)
    with torch.inference_mode():
        for round_index in range(args.rounds + 1):
            seconds, faults = dict.fromkeys(models, 0.0), dict.fromkeys(models, 0)
            order = list(models)[:: -1 if round_index % 2 else 1]
            for batch in batches:
                for name in order:
                    before, start = _minor_faults(), time.perf_counter()
                    models[name](**batch)
                    seconds[name] += time.perf_counter() - start
                    faults[name] += _minor_faults() - before
            n = len(batches)
            print(f"{round_index:>5} {1000 * seconds['dense'] / n:>9.1f} {1000 * seconds['pruned'] / n:>9.1f} "
                  f"{seconds['dense'] / seconds['pruned']:>12.3f} {faults['dense'] / n:>12.0f} "
                  f"{faults['pruned'] / n:>13.0f}", flush=True)


if __name__ == "__main__":
    main()
