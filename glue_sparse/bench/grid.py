"""The bench grid's engine: fine-tune, evaluate through lm-eval (``hf-classifier``), time, and store rows
(``glue-sparse bench`` runs it through ``run.py``; the main job, ``demo``, builds on it too).

One row per task x method x regime x seed goes to a JSON Lines store (rewritten atomically per row).
A row's ``key`` hashes its run identity, the data fingerprints, the evaluation settings and the
package version, so finished work is skipped and an interrupted bench resumes where it stopped
(unfinished fine-tunes continue from their last checkpoint).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import glue_sparse_tasks
from glue_sparse.bench.options import BenchConfig, BenchConfigError, arm_folder
from glue_sparse.bench.store import STORE_FILE, SUPERSEDED_DIR, SUPERSEDED_FILE, read_store, row_key, write_store
from glue_sparse.common.latency import checkpoint_latency
from glue_sparse.common.model_card import LATENCY_FILE, LM_EVAL_SOURCE, write_run_cards
from glue_sparse.common.run_environment import git_state
from glue_sparse.finetune.options import TrainingOptions  # the tokens-per-example default
from glue_sparse.finetune.run_dir import IDENTITY_FILE, MAGNITUDE_SOURCE, identity
from glue_sparse_tasks import TASKS_DIR
from glue_sparse_tasks.atomic import write_json_atomic
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.glue_tasks import evaluation_split
from glue_sparse_tasks.scoring import chance_score
from sparse_models.checkpoints import PRUNED_SUBDIR, RUN_FILE
from sparse_models.runtime.devices import resolve_device

LM_EVAL_METRIC_KEYS = {"acc": "accuracy", "f1": "f1", "mcc": "mcc", "pearson": "pearson", "spearman": "spearman",
                       "acc_matched": "matched_accuracy", "acc_mismatched": "mismatched_accuracy"}


# --------------------------------------------------------------------------------------- one row
def _lm_eval_metrics(task_dir: Path, task: str, data_dir: str | None, limit: int | None,
                     results_json: Path, device: str = "cpu") -> dict[str, float]:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from glue_sparse.lm_eval_model.classifier_lm import HFClassifierLM

    lm = HFClassifierLM(pretrained=str(task_dir), batch_size=32, device=device, results_json=str(results_json))
    metadata = {"data_dir": data_dir} if data_dir else {}
    tm = TaskManager(include_path=TASKS_DIR, include_defaults=False, metadata=metadata)
    out = simple_evaluate(model=lm, tasks=[f"glue_sparse_{task}"], task_manager=tm, limit=limit,
                          bootstrap_iters=0)
    raw = out["results"][f"glue_sparse_{task}"]
    return {k.split(",")[0]: v for k, v in raw.items()
            if "," in k and "stderr" not in k and isinstance(v, (int, float))}


def flat_metrics_from_lm_eval(task: str, metrics: dict[str, float]) -> dict[str, float]:
    """lm-eval metric names -> the scoring module's flat keys (``rte_accuracy``, ``stsb_pearson``...)."""
    return {f"{task}_{LM_EVAL_METRIC_KEYS[k]}": v for k, v in metrics.items() if k in LM_EVAL_METRIC_KEYS}


def _latency(task_dir: Path, task: str, bench: BenchConfig) -> dict[str, Any]:
    """The cell's latency at the bench's settings (``checkpoint_latency``)."""
    return checkpoint_latency(task_dir, task, bench.data_dir, bench.use_hub, bench.latency_docs,
                              bench.latency_batch_size, bench.latency_rounds, TrainingOptions.max_length)


def refresh_cards(task_dir: Path, row: dict[str, Any]) -> None:
    """Rewrite a cell's model cards with its lm-eval scores and, once timed, its latency (kept beside them in
    ``latency.json`` for ``glue-sparse export``)."""
    if not (task_dir / RUN_FILE).is_file():
        return  # a row from another machine whose run folder is not here
    if row.get("latency"):
        write_json_atomic(task_dir / LATENCY_FILE, row["latency"])
    write_run_cards(task_dir, json.loads((task_dir / RUN_FILE).read_text()), row["flat_metrics"], LM_EVAL_SOURCE,
                    row.get("latency"))


def _chance(task: str, bench: BenchConfig) -> float:
    """The majority-class score (0 for correlations) on the validation set the row was scored on."""
    return _chance_on(task, bench.data_dir, bench.use_hub)


@functools.lru_cache(maxsize=None)
def _chance_on(task: str, data_dir: str | None, use_hub: bool) -> float:  # one read per task, not per row
    rows, _ = load_glue_rows(task, evaluation_split(task), data_dir, use_hub=use_hub)
    return chance_score(task, [r["label"] for r in rows])


def complete_rows(rows: list[dict[str, Any]], bench: BenchConfig, output: Path, store: Path, log=print,
                  retime: bool = False) -> None:
    """Fill what a parallel grid defers: latency (timed here, one model at a time, so concurrent cells
    cannot disturb it) and the chance score of rows written before rows carried one. ``retime`` also
    re-times the part's rows whose latency was timed by other code (another commit, or a dirty tree):
    latency depends on the pruning code and the machine, not on training. Rewrites the store after
    each row, so an interruption keeps what was timed (and a rerun re-times only the rest)."""
    code = git_state()
    for row in rows:
        changed = False
        if "chance" not in row:
            row["chance"], changed = _chance(row["task"], bench), True
        stale = (retime and bench.in_part(row)
                 and (code["dirty"] is not False or (row.get("latency") or {}).get("git") != code))
        if (row.get("latency") is None or stale) and bench.latency_rounds:
            log(f"{row['task']} · {row['label']} · {row['regime']} · seed {row['seed']}: timing CPU eval latency")
            row["latency"], changed = _latency(output / row["run_dir"], row["task"], bench), True
        if changed:
            write_store(store, rows)
            refresh_cards(output / row["run_dir"], row)


def _link_magnitude_source(run_root: Path, full_root: Path) -> None:
    """Point ``<run_root>/magnitude-source`` at the full arm's seed folder: a magnitude or distilled
    fine-tune then finds its identical full run finished there (identities are compared, so a different one is an
    error, not a silent reuse)."""

    run_root.mkdir(parents=True, exist_ok=True)
    link = run_root / MAGNITUDE_SOURCE
    if not link.exists() and not link.is_symlink():
        full_root.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(full_root, run_root), target_is_directory=True)  # relative: folder moves


def _finetune_subprocess(config: Any, out_dir: Path, bench: BenchConfig) -> None:
    cmd = [sys.executable, "-m", "glue_sparse.finetune.run", json.dumps(asdict(config)), str(out_dir),
           "--resume"]
    if bench.data_dir:
        cmd += ["--data-dir", bench.data_dir]
    if not bench.use_hub:
        cmd.append("--no-hub")
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        raise RuntimeError(f"fine-tuning failed ({' '.join(cmd[:3])} ... exit {proc.returncode}); "
                           "rerun the bench to resume it")


EXECUTORS = ("local", "ray")


def grid_cells(bench: BenchConfig, whole: bool = False) -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """(title, run, key, identity) of every cell of the part to run (``whole``: of the grid), in grid order."""
    version = glue_sparse_tasks.__version__
    runs = list(bench.runs(whole))
    fingerprints: dict[tuple, dict[str, str]] = {}
    cells = []
    for i, run in enumerate(runs, 1):
        config, task = run["config"], run["task"]
        hp = config.resolved()
        fp_key = (task, run["regime"], hp["train_limit"])
        if fp_key not in fingerprints:
            _, train_prov = load_glue_rows(task, "train", bench.data_dir, limit=hp["train_limit"],
                                           use_hub=bench.use_hub)
            _, val_prov = load_glue_rows(task, evaluation_split(task), bench.data_dir,
                                         use_hub=bench.use_hub)
            fingerprints[fp_key] = {"train": train_prov.sha256, "validation": val_prov.sha256}
        ident = identity(config)
        title = f"[{i}/{len(runs)}] {task} · {run['label']} · {run['regime']} · seed {run['seed']}"
        cells.append((title, run, row_key(ident, fingerprints[fp_key], bench, version), ident))
    return cells


def arm_root(output: str | Path, label: str, regime: str, seed: int) -> Path:
    """``runs/<arm folder>/<regime>/seed-<s>``; a folder written before arm folders lost their blanks
    (``runs/gates r0.3/...``) is used where it exists and the new one does not, so old benches resume."""
    runs = Path(output) / "runs"
    root = runs / arm_folder(label) / regime / f"seed-{seed}"
    old = runs / label / regime / f"seed-{seed}"
    return old if old != root and old.is_dir() and not root.exists() else root


def _task_dir(output: Path, run: dict[str, Any]) -> Path:
    return arm_root(output, run["label"], run["regime"], run["seed"]) / run["task"]


def set_aside_superseded(rows: list[dict[str, Any]], cells: list[tuple[str, dict[str, Any], str, dict[str, Any]]],
                         output: Path, log=print) -> list[dict[str, Any]]:
    """This grid's rows; the others move to ``superseded.jsonl``, so the store and its report hold one
    grid only. A row is superseded when a default or the config changed since it ran. Where a cell now
    wants a different fine-tune in that row's run folder, the folder moves to ``superseded/<key>`` too,
    so the cell trains afresh instead of refusing the folder; an unchanged fine-tune stays and is reused."""
    keys = {key for _, _, key, _ in cells}
    stale = [r for r in rows if r["key"] not in keys]
    if not stale:
        return rows
    wanted = {_task_dir(output, run): ident for _, run, _, ident in cells}
    for row in stale:
        task_dir = output / row["run_dir"]
        ident_file = task_dir / IDENTITY_FILE
        if task_dir in wanted and ident_file.is_file() and json.loads(ident_file.read_text()) != wanted[task_dir]:
            target = output / SUPERSEDED_DIR / row["key"]
            target.parent.mkdir(parents=True, exist_ok=True)
            task_dir.rename(target)
            row["run_dir"] = str(target.relative_to(output))
    aside = output / SUPERSEDED_FILE
    write_store(aside, read_store(aside) + stale)
    log(f"{len(stale)} row(s) from an earlier grid or defaults moved to {aside}")
    return [r for r in rows if r["key"] in keys]


def run_cell(run: dict[str, Any], bench: BenchConfig, output: str | Path, key: str, title: str = "",
             log=print) -> dict[str, Any]:
    """One grid cell, start to end: fine-tune (own process), evaluate through lm-eval, time; its row.
    Pure in its inputs, so any executor (this process, a Ray worker) gives the same row."""

    config, task = run["config"], run["task"]
    ident = identity(config)
    run_root = arm_root(output, run["label"], run["regime"], run["seed"])
    if run.get("full_label"):  # magnitude and mask-search prune, distillation learns from, the full arm's own run
        full_root = arm_root(output, run["full_label"], run["regime"], run["seed"])
        _link_magnitude_source(run_root, full_root)
    log(f"{title}: fine-tuning -> {run_root / task}")
    _finetune_subprocess(config, run_root, bench)
    task_dir = run_root / task
    record = json.loads((task_dir / RUN_FILE).read_text())
    log(f"{title}: evaluating through lm-eval (hf-classifier)")
    started = time.perf_counter()
    device = str(resolve_device(config.device))  # evaluated where it was trained
    metrics = _lm_eval_metrics(task_dir, task, bench.data_dir, bench.eval_limit, task_dir / "lm_eval.json", device)
    eval_seconds = time.perf_counter() - started
    pruned_metrics = None
    if (task_dir / PRUNED_SUBDIR).is_dir():
        pruned_metrics = _lm_eval_metrics(task_dir / PRUNED_SUBDIR, task, bench.data_dir, bench.eval_limit,
                                          task_dir / PRUNED_SUBDIR / "lm_eval.json", device)
    latency = None
    if bench.latency_timing == "cell" and bench.latency_rounds:
        log(f"{title}: timing CPU eval latency")
        latency = _latency(task_dir, task, bench)
    refresh_cards(task_dir, {"flat_metrics": flat_metrics_from_lm_eval(task, metrics), "latency": latency})
    return {
        "key": key, "task": task, "label": run["label"], "method": run["method"], "regime": run["regime"],
        "seed": run["seed"], "base_model": ident["base_model"], "hyperparameters": ident,
        "data": record["data"], "metrics": metrics, "flat_metrics": flat_metrics_from_lm_eval(task, metrics),
        "pruned_metrics": pruned_metrics, "primary_metric": record["primary_metric"],
        "accounting": record["accounting"], "train_seconds": record["train_seconds"],
        "seconds_per_step": record["seconds_per_step"], "peak_rss_bytes": record["peak_rss_bytes"],
        "train_steps": record["train_steps"], "eval_seconds": eval_seconds, "latency": latency,
        "chance": _chance(task, bench), "device": record.get("device"),
        "run_dir": str(task_dir.relative_to(output)),  # relative: rows never hold this machine's paths
        "versions": record["versions"], "git": record["git"],
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def run_bench(bench: BenchConfig, output: str | Path, log=print, executor: str = "local",
              address: str | None = None, retries: int = 2, retime_latency: bool = False) -> Path:
    """Run every missing row; return the store path. Rows already in the store are skipped.

    ``executor="local"`` runs cells one after another here; ``"ray"`` runs each cell as a Ray task (a
    local Ray started on the fly, or the cluster at ``address``), retried up to ``retries`` times. Either
    way this process is the only writer of the store, and rows carry the same content keys, so a bench
    begun with one executor can be finished with the other. Cells that still fail are reported at the
    end (RuntimeError naming them) after every other cell has run. ``retime_latency`` re-times the
    part's finished rows whose latency other code timed (``complete_rows``), training nothing again.
    """
    if executor not in EXECUTORS:
        raise BenchConfigError(f"unknown executor {executor!r}; valid executors are: {', '.join(EXECUTORS)}")
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    store = output / STORE_FILE
    whole = grid_cells(bench, whole=True)  # one pass over the data fingerprints, the part filtered from it
    grid = [cell for cell in whole if bench.in_part(cell[1])]
    rows = read_store(store)
    current = set_aside_superseded(rows, whole, output, log)  # rows of the grid's other parts stay
    if len(current) < len(rows):
        rows = current
        write_store(store, rows)
    done = {r["key"] for r in rows}
    cells = []
    for title, run, key, _ in grid:
        if key in done:
            log(f"{title}: cached")
        else:
            cells.append((title, run, key))
    if len(cells) < len(grid):
        log(f"{len(grid) - len(cells)} of {len(grid)} cells cached in {store}")
    failures: list[str] = []

    def finished(title: str, row: dict[str, Any] | None, error: BaseException | None) -> None:
        if row is None:
            failures.append(f"{title}: {type(error).__name__}: {error}")
            log(f"{title}: FAILED ({type(error).__name__}: {error})")
            return
        rows.append(row)
        write_store(store, rows)
        score = row["metrics"].get({"accuracy": "acc"}.get(row["primary_metric"], row["primary_metric"]))
        log(f"{title}: {row['primary_metric']} {score:.4f}, removed "
            f"{row['accounting']['removed_share_of_gated']:.1%} of gated weights")

    if executor == "ray":
        from glue_sparse.bench.ray_executor import run_cells_on_ray

        for title, row, error in run_cells_on_ray(run_cell, cells, bench, output, address=address, retries=retries,
                                                  log=log):
            finished(title, row, error)
    else:
        for title, run, key in cells:
            try:
                row = run_cell(run, bench, output, key, title, log)
            except (RuntimeError, OSError, ValueError) as exc:
                finished(title, None, exc)
                continue
            finished(title, row, None)
    if not failures:
        complete_rows(rows, bench, output, store, log, retime=retime_latency)
    if failures:
        raise RuntimeError(f"{len(failures)} cell(s) failed; the others are in {store} (rerun to retry): "
                           + "; ".join(failures))
    return store
