"""The bench grid on Ray: each pending cell is one Ray task; the driver keeps writing the store.

Ray is an optional extra (``pip install glue-sparse[ray]``); this module is imported only by
``run_bench(executor="ray")``. Without ``address`` a local Ray is started for the run and stopped
after it; with one, the cells go to that cluster. A cell asks for ``bench.cpus_per_cell`` CPUs and,
where ``bench.gpus_per_cell`` is set, that many GPUs. A task that raises or whose worker dies is
retried ``retries`` times; a cell that still fails is yielded with its error, and the others go on.
A magnitude (or distilled) cell is submitted only once the full cell whose run it prunes (or learns from)
has ended: on a cluster
with a free CPU for every cell the two would otherwise train that run at once, in one folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

from glue_sparse_tasks.console import is_verbose, quiet_loggers
from glue_sparse_tasks.errors import UserInputError


def prerequisites(runs: list[dict[str, Any]]) -> dict[int, int]:
    """{index of a cell: index of the cell it waits for} among ``runs``: a magnitude or distilled cell
    (``full_label`` set) waits for the full arm's cell of its task, regime and seed when that cell runs too."""
    position = {(r["label"], r["task"], r["regime"], r["seed"]): i for i, r in enumerate(runs)}
    return {i: position[source] for i, r in enumerate(runs) if r.get("full_label")
            and (source := (r["full_label"], r["task"], r["regime"], r["seed"])) in position}


def run_cells_on_ray(run_cell: Callable[..., dict[str, Any]], cells: list[tuple[str, dict[str, Any], str]],
                     bench: Any, output: Path,
                     address: str | None = None, retries: int = 2,
                     log=print) -> Iterator[tuple[str, dict[str, Any] | None, BaseException | None]]:
    """Yield (title, row or None, error or None) for every cell, in the order they finish; ``run_cell``
    (the bench's, passed in so this module never imports the bench back) runs one cell."""
    try:
        import ray
    except ImportError:
        raise UserInputError("--executor ray needs Ray: pip install 'glue-sparse[ray]'") from None
    if not is_verbose():
        quiet_loggers()  # importing Ray set its logger back to INFO

    if not cells:
        return
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        remote = ray.remote(num_cpus=bench.cpus_per_cell, num_gpus=bench.gpus_per_cell or 0,
                            max_retries=retries, retry_exceptions=True)(run_cell)
        waits = prerequisites([run for _, run, _ in cells])
        pending: dict[Any, int] = {}

        def submit(i: int) -> None:
            title, run, key = cells[i]
            pending[remote.remote(run, bench, str(output), key, title, print)] = i

        for i in range(len(cells)):
            if i not in waits:
                submit(i)
        log(f"{len(pending)} cells submitted to Ray ({ray.cluster_resources().get('CPU', 0):g} CPUs"
            f"{', address ' + address if address else ', local'})"
            + (f"; {len(waits)} more once the full runs they prune have ended" if waits else ""))
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ref)
            title = cells[i][0]
            for waiting in [w for w, source in waits.items() if source == i]:
                del waits[waiting]
                submit(waiting)
            try:
                yield title, ray.get(ref), None
            except Exception as exc:  # noqa: BLE001 - a failed cell is reported, the others go on
                yield title, None, exc
    finally:
        if started_here:
            ray.shutdown()
