"""The bench end to end on a tiny random BERT and fixture data; caching, resume, report and plots."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess

import pytest
from transformers import TrainerCallback

from glue_sparse.bench.options import BenchConfig, BenchConfigError
from glue_sparse.bench.report import _score_axis_label, summarise, write_report
from glue_sparse.bench.report_targets import paired, targets
from glue_sparse.bench.grid import run_bench
from glue_sparse.bench.store import read_store, write_store
from glue_sparse.common.run_environment import git_state
from glue_sparse.finetune.run import run_finetune
from glue_sparse_tasks import scoring
from tests.tiny_models import save_tiny_classifier

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    return str(save_tiny_classifier(tmp_path_factory.mktemp("bench_base"), 2, seed=21))


def _bench(tiny_base, glue_fixture_dir, **kw) -> BenchConfig:
    raw = {"tasks": ["rte", "stsb"], "methods": ["full", {"method": "gates", "label": "gates-0.4"}],
           "seeds": [1, 2], "base_model": tiny_base,
           "finetune": {"max_steps": 2, "batch_size": 8, "max_length": 32, "save_steps": 1, "train_limit": 16},
           "latency_docs": 16, "latency_batch_size": 8, "latency_rounds": 1,
           "data_dir": str(glue_fixture_dir), "use_hub": False}
    raw.update(kw)
    return BenchConfig.from_dict(raw)


@pytest.fixture(scope="module")
def finished(tiny_base, glue_fixture_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    logs: list[str] = []
    store = run_bench(_bench(tiny_base, glue_fixture_dir), out, log=logs.append)
    return out, store, logs


def test_bench_runs_end_to_end_and_stores_one_row_per_combination(finished):
    out, store, logs = finished
    rows = read_store(store)
    assert len(rows) == 2 * 2 * 2  # tasks x methods x seeds
    assert {(r["task"], r["label"], r["seed"]) for r in rows} == {
        (t, m, s) for t in ("rte", "stsb") for m in ("full", "gates-0.4") for s in (1, 2)}
    for r in rows:
        assert r["metrics"] and r["flat_metrics"] and r["latency"]["dense_ms_per_batch"] > 0
        assert r["versions"]["torch"] and "commit" in r["git"]
        assert str(out) not in json.dumps(r)  # rows name runs and data relative, never by this machine's path
        assert r["data"]["train"]["source"] == f"local:{r['task']}/train.jsonl"
        assert r["accounting"]["dense_parameters"] > 0
        if r["method"] == "gates":
            assert r["pruned_metrics"] == r["metrics"]  # pruned model scores like its adapter
            assert r["latency"]["pruned_ms_per_batch"] > 0
            low, high = r["latency"]["latency_ratio_range"]  # paired per round (one round here: a point)
            assert low <= r["latency"]["latency_ratio"] <= high
            assert 0 < r["latency"]["layout_tokens"] <= 8 * 128  # pruned for the timed batches (8 docs, <= 128 long)
        else:
            assert r["pruned_metrics"] is None
    stsb = next(r for r in rows if r["task"] == "stsb")
    assert set(stsb["flat_metrics"]) == {"stsb_pearson", "stsb_spearman"}
    assert any("evaluating through lm-eval" in line for line in logs)


def test_cached_rows_are_skipped(finished, tiny_base, glue_fixture_dir):
    out, store, _ = finished
    before = store.read_text()
    logs: list[str] = []
    run_bench(_bench(tiny_base, glue_fixture_dir), out, log=logs.append)
    assert store.read_text() == before
    assert sum(line.endswith(": cached") for line in logs) == 8


def test_interrupted_bench_resumes(finished, tiny_base, glue_fixture_dir, tmp_path):
    out, store, _ = finished
    rows = read_store(store)
    bench = _bench(tiny_base, glue_fixture_dir)
    # A bench stopped after three rows, with the fourth fine-tune stopped after its first step.
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    fourth = list(bench.runs())[3]
    run_root = tmp_path / "runs" / fourth["label"] / fourth["regime"] / f"seed-{fourth['seed']}"

    class StopAfterFirstStep(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_training_stop = True

    stopped = run_finetune(fourth["config"], run_root, data_dir=str(glue_fixture_dir),
                           callbacks=[StopAfterFirstStep()], use_hub=False)
    assert stopped["status"] == "interrupted"
    logs: list[str] = []
    run_bench(bench, tmp_path, log=logs.append)
    resumed = read_store(tmp_path / "results.jsonl")
    assert len(resumed) == 8 and sum(line.endswith(": cached") for line in logs) == 3
    assert {r["key"] for r in resumed} == {r["key"] for r in rows}
    record = json.loads((run_root / fourth["task"] / "run.json").read_text())
    assert record["resumed_from_step"] == 1


def test_report_is_recomputed_from_the_store(finished, tmp_path):
    _, store, _ = finished
    rows = read_store(store)
    paths = write_report(rows, tmp_path)
    summaries = {s["label"]: s for s in summarise(rows)}
    full = summaries["full"]
    per_seed = []
    for seed in (1, 2):
        flat = {}
        for r in rows:
            if r["label"] == "full" and r["seed"] == seed:
                flat.update(r["flat_metrics"])
        per_seed.append(scoring.glue_average(flat).partial_value)
    assert full["glue_average"].mean == pytest.approx(statistics.fmean(per_seed))
    assert full["glue_average"].median == pytest.approx(statistics.median(per_seed))
    assert full["average_tasks"] == ["rte", "stsb"]
    text = paths["markdown"].read_text()
    assert "partial GLUE average (default) over stsb, rte; missing cola, mnli, mrpc, qnli, qqp, sst2" in text
    assert "## Targets" in text and "gates" in text
    assert "score the same as their gated adapters (within 0.0001): yes, on every row" in text
    # the latency column names the code that timed it, and says so when a store mixes commits
    timed = [r for r in rows if r.get("latency")]
    code = timed[0]["latency"]["git"]
    assert all(r["latency"]["git"] == code for r in timed)
    stamp = code["commit"][:7] + (" (dirty)" if code["dirty"] else "")
    assert f"Latency timed by code at {stamp} ({len(timed)} rows)." in text
    mixed = [dict(r, latency={k: v for k, v in r["latency"].items() if k != "git"}) if r is timed[0] else r
             for r in rows]
    text = write_report(mixed, tmp_path / "mixed")["markdown"].read_text()
    assert (f"Latency timed by code at {stamp} ({len(timed) - 1} rows), an unrecorded commit (1 row); ratios "
            "timed by different code or hosts are not one measurement.") in text
    # targets are stated for every gates configuration, against full on the seeds they share
    lead = (summaries["gates-0.4"]["glue_average"].mean - full["glue_average"].mean) * 100
    target_lines = targets(list(summaries.values()))
    assert any(line.startswith("- [limited, gates-0.4, seeds 1,2, averages over rte+stsb only] gates within 2.0 "
                               "points of full: ")
               and f"gates − full = {lead:+.2f} points (margin {lead + 2.0:+.2f})" in line
               for line in target_lines), target_lines
    floor = next(line for line in target_lines if "convergence floor" in line)  # a part of a grid: 2 of 5 tasks
    assert "not judged, these rows average rte+stsb only" in floor and "MISSED" not in floor
    five = dict(full, average_tasks=["cola", "mrpc", "rte", "sst2", "stsb"])  # as if the grid were whole
    floor = next(line for line in targets([five]) if "convergence floor" in line)
    assert f"{full['glue_average'].mean * 100:.2f}" in floor and ("MISSED" in floor) == (
        full["glue_average"].mean * 100 < 66.0)
    removal = next(line for line in target_lines if "achieved removal within ±3 points" in line)
    worst = max(abs(r["accounting"]["removed_share_of_gated"] - r["hyperparameters"]["target_removal"])
                for r in rows if r["label"] == "gates-0.4")
    assert f"largest miss {worst * 100:.2f} points" in removal
    seed1 = {s["label"]: s for s in summarise([r for r in rows if r["seed"] == 1])}
    lead_seed1 = (seed1["gates-0.4"]["glue_average"].mean - seed1["full"]["glue_average"].mean) * 100
    one_seed = summarise([dict(r, label="gates-seed1") for r in rows if r["label"] == "gates-0.4" and r["seed"] == 1])
    assert any(line.startswith("- [limited, gates-seed1, seeds 1, averages over rte+stsb only]")
               and f"gates − full = {lead_seed1:+.2f} points" in line for line in targets([full, *one_seed]))
    # parts of a grid reported together: two arms are compared only on the cells both have, chosen as an
    # arm's own average chooses them. Without full's stsb on seed 2, full's own average is seed 1's over
    # rte+stsb (seed 2, still running, is named beside it); the comparison (and the memory one) is made on
    # the same cells, seed 1 over rte+stsb, not narrowed to rte over seeds 1,2.
    gapped = summarise([r for r in rows if not (r["label"] == "full" and r["seed"] == 2 and r["task"] == "stsb")])
    by_label = {s["label"]: s for s in gapped}
    assert by_label["full"]["average_tasks"] == by_label["gates-0.4"]["average_tasks"] == ["rte", "stsb"]
    assert by_label["full"]["seeds"] == [1] and by_label["full"]["seeds_on_fewer_tasks"] == [2]
    assert any(line.startswith("- [limited, gates-0.4, seeds 1, averages over rte+stsb only] gates within 2.0 points")
               and f"gates − full = {lead_seed1:+.2f} points" in line for line in targets(gapped)), targets(gapped)
    paired_memory = paired(by_label["gates-0.4"], by_label["full"])
    assert paired_memory.seeds == [1] and paired_memory.tasks == ["rte", "stsb"]
    assert paired_memory.other_peak_rss_mb == pytest.approx(statistics.fmean(
        r["peak_rss_bytes"] / 2**20 for r in rows if r["label"] == "full" and r["seed"] == 1))
    # memory against LoRA is judged task by task: a mean over tasks would hide an excess on one of them
    lora = dict(summaries["full"], label="lora", method="lora")
    pair = paired(summaries["gates-0.4"], lora)
    def mean_mb(label: str, task: str) -> float:  # from the rows, not from the code under test
        return statistics.fmean(r["peak_rss_bytes"] / 2**20 for r in rows if r["label"] == label and r["task"] == task)

    excess = {task: mean_mb("gates-0.4", task) - mean_mb("full", task) for task in pair.tasks}
    memory = next(line for line in targets([full, summaries["gates-0.4"], lora]) if "peak training memory" in line)
    assert sorted(excess) == ["rte", "stsb"] and (("MISSED" in memory) == any(mb > 0 for mb in excess.values()))
    assert f"per task rte {excess['rte']:+.0f}, stsb {excess['stsb']:+.0f} MB" in memory, memory
    assert f"met on {sum(mb <= 0 for mb in excess.values())} of 2" in memory
    # every gate method at a removal is judged (gates+lora, gates+full), not only gates alone
    both = [dict(summaries["gates-0.4"], label="gates+full-0.4", method="gates+full")]
    assert any(line.startswith("- [limited, gates+full-0.4, seeds 1,2, averages over rte+stsb only] gates within")
               for line in targets([full, *both]))
    csv_lines = paths["csv"].read_text().splitlines()
    assert csv_lines[0].startswith("method,regime,seeds,rte,stsb,GLUE avg")
    assert len(csv_lines) == 3
    # the score plot's axis names what a part of a grid averages, not "GLUE average"
    assert _score_axis_label(list(summaries.values()), "default") == "average over rte, stsb ×100 (partial)"
    assert _score_axis_label(summarise([r for r in rows if r["task"] == "rte"]), "default") == "rte score ×100"
    for key in ("score_plot", "latency_plot"):
        data = paths[key].read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000


def test_bad_bench_configs_name_the_field(tmp_path):
    with pytest.raises(BenchConfigError, match=r"unknown field\(s\) \['epoch'\]"):
        BenchConfig.from_dict({"tasks": ["rte"], "methods": ["full"], "epoch": 3})
    with pytest.raises(BenchConfigError, match="unknown method 'gate'"):
        BenchConfig.from_dict({"tasks": ["rte"], "methods": ["gate"]})
    with pytest.raises(BenchConfigError, match="labels must be unique"):
        BenchConfig.from_dict({"tasks": ["rte"], "methods": ["gates", {"method": "gates"}]})
    bad = tmp_path / "store.jsonl"
    bad.write_text('{"key": 1}\nnot json\n')
    with pytest.raises(BenchConfigError, match="store.jsonl:2"):
        read_store(bad)


def test_bench_flags_override_the_config_file(tmp_path):
    from glue_sparse.bench.command import _bench_config
    from glue_sparse.cli.main import build_parser

    config = tmp_path / "bench.yaml"
    config.write_text("tasks: [rte, stsb]\nmethods: [full, {method: gates, label: g6, target_removal: 0.6}]\n"
                      "seeds: [1, 2, 3]\nfinetune: {epochs: 1}\n")
    args = build_parser().parse_args(["bench", "--config", str(config), "--seeds", "7", "--max-steps", "5",
                                      "--output", str(tmp_path / "out")])
    bench = _bench_config(args)
    assert bench.seeds == [7] and bench.tasks == ["rte", "stsb"]
    assert bench.finetune == {"epochs": 1, "max_steps": 5}
    runs = list(bench.runs())
    gates = next(r for r in runs if r["label"] == "g6")
    assert gates["config"].target_removal == 0.6 and gates["config"].prune

    # --only-tasks/--only-seeds run a part of the grid (per-method entries included), with the grid's own
    # cells; a name outside the grid is an error naming it
    config.write_text("tasks: [rte, stsb]\nseeds: [1, 2]\nmethods: [full, {method: full, label: f1, seeds: [1]}]\n")
    parts = lambda *flags: sorted((r["label"], r["task"], r["seed"]) for r in _bench_config(build_parser().parse_args(
        ["bench", "--config", str(config), *flags, "--output", str(tmp_path / "out")])).runs())
    whole = parts()
    assert len(whole) == 6 and parts("--only-tasks", "rte") == [c for c in whole if c[1] == "rte"]
    assert parts("--only-tasks", "stsb", "--only-seeds", "2") == [("full", "stsb", 2)]
    with pytest.raises(BenchConfigError, match=r"--only-tasks \['cola'\] names no cell of this grid"):
        parts("--only-tasks", "cola")
    # --only-arms picks method labels (a label with a space included)
    assert parts("--only-arms", "f1") == [("f1", "rte", 1), ("f1", "stsb", 1)]
    assert parts("--only-arms", "full,f1", "--only-tasks", "rte") == [c for c in whole if c[1] == "rte"]
    with pytest.raises(BenchConfigError, match=r"--only-arms \['gates r0.3'\] names no cell of this grid"):
        parts("--only-arms", "gates r0.3")
    # a label with blanks is named by the label or by its folder name (blanks as dashes)
    config.write_text("tasks: [rte]\nseeds: [1]\nmethods: [full, {method: full, label: 'f r1'}]\n")
    assert parts("--only-arms", "f-r1") == parts("--only-arms", "f r1") == [("f r1", "rte", 1)]
    # --only-regimes splits an arm that runs in both regimes (the long full-regime cells apart)
    config.write_text("tasks: [rte]\nseeds: [1]\nregimes: [limited]\n"
                      "methods: [full, {method: full, label: full, regimes: [full], epochs: 2}]\n")
    regimes = lambda *flags: sorted(r["regime"] for r in _bench_config(build_parser().parse_args(
        ["bench", "--config", str(config), *flags, "--output", str(tmp_path / "out")])).runs())
    assert regimes() == ["full", "limited"] and regimes("--only-arms", "full") == ["full", "limited"]
    assert regimes("--only-regimes", "limited") == ["limited"] and regimes("--only-regimes", "full") == ["full"]
    with pytest.raises(BenchConfigError, match=r"--only-regimes \['fulll'\] names no cell of this grid"):
        regimes("--only-regimes", "fulll")
    # the same list written in the config file is named by its field, as the file spells it
    config.write_text("tasks: [rte]\nseeds: [1]\nonly_tasks: [cola]\nmethods: [full]\n")
    with pytest.raises(BenchConfigError, match=r": only_tasks \['cola'\] names no cell of this grid"):
        regimes()


def test_magnitude_cells_wait_for_the_full_run_they_prune():
    """On Ray every cell may start at once, so a magnitude cell is held back until the full cell of its
    task, regime and seed has ended (else both would train that run in one folder); a part without the
    full arm has nothing to wait for (the magnitude cell trains the run where the full arm's cell finds it)."""
    from glue_sparse.bench.ray_executor import prerequisites

    raw = {"tasks": ["rte", "stsb"], "seeds": [1, 2],
           "methods": [{"method": "magnitude", "label": "m3", "target_removal": 0.3}, "full", "gates"]}
    runs = list(BenchConfig.from_dict(raw).runs())
    waits = prerequisites(runs)
    assert len(waits) == 4 and all(runs[i]["method"] == "magnitude" for i in waits)
    for i, source in waits.items():
        assert runs[source]["label"] == "full"
        assert (runs[source]["task"], runs[source]["seed"]) == (runs[i]["task"], runs[i]["seed"])
    assert prerequisites(list(BenchConfig.from_dict({**raw, "only_arms": ["m3", "gates"]}).runs())) == {}


def test_rows_of_changed_defaults_are_set_aside_and_only_their_cells_rerun(finished, tiny_base, glue_fixture_dir,
                                                                           tmp_path):
    """A grid re-run after a cell's settings changed (here the gates learning rate; a changed default does
    the same) re-trains that cell only. The old rows leave the store for superseded.jsonl, with their run
    folders where the new cell needs the place, so the store and its report hold one grid."""
    out, _, _ = finished
    copy = tmp_path / "bench"
    shutil.copytree(out, copy, symlinks=True)
    old = {(r["label"], r["task"], r["seed"]): r for r in read_store(copy / "results.jsonl")}
    changed = _bench(tiny_base, glue_fixture_dir, seeds=[1],
                     methods=["full", {"method": "gates", "label": "gates-0.4", "learning_rate": 0.05}])
    logs: list[str] = []
    run_bench(changed, copy, log=logs.append)
    rows = read_store(copy / "results.jsonl")
    assert sorted((r["label"], r["task"], r["seed"]) for r in rows) == sorted(
        (m, t, 1) for m in ("full", "gates-0.4") for t in ("rte", "stsb"))
    for r in rows:
        if r["label"] == "full":  # unchanged: served from the store
            assert r["key"] == old[("full", r["task"], 1)]["key"]
        else:
            assert r["key"] != old[("gates-0.4", r["task"], 1)]["key"]
            assert r["hyperparameters"]["learning_rate"] == 0.05
    assert sum(line.endswith(": cached") for line in logs) == 2
    aside = read_store(copy / "superseded.jsonl")
    assert len(aside) == 6  # seed 2 of both arms, and the old gates rows of seed 1
    assert any("6 row(s) from an earlier grid or defaults moved to" in line for line in logs)
    for r in aside:
        moved = r["label"] == "gates-0.4" and r["seed"] == 1
        assert r["run_dir"].startswith("superseded/") == moved
        assert (copy / r["run_dir"] / "run.json").is_file()
        if moved:
            assert json.loads((copy / r["run_dir"] / "run_config.json").read_text())["learning_rate"] != 0.05


def test_a_part_of_the_grid_keeps_the_rows_of_the_other_parts(finished, tiny_base, glue_fixture_dir, tmp_path):
    """A grid too long for one working stretch runs in parts (``only_tasks``/``only_seeds``) into one
    store: a part's cells are the grid's own (cached here), and rows of its other parts are not set aside."""
    out, _, _ = finished
    copy = tmp_path / "bench"
    shutil.copytree(out, copy, symlinks=True)
    before = read_store(copy / "results.jsonl")
    logs: list[str] = []
    run_bench(_bench(tiny_base, glue_fixture_dir, only_tasks=["rte"]), copy, log=logs.append)
    assert read_store(copy / "results.jsonl") == before
    assert sum(line.endswith(": cached") for line in logs) == 4  # rte x 2 methods x 2 seeds
    assert not (copy / "superseded.jsonl").exists()


def test_retiming_latency_times_the_part_again_and_trains_nothing(finished, tiny_base, glue_fixture_dir, tmp_path):
    """Latency depends on the pruning code and the machine, not on training: ``retime_latency`` re-times
    the part's rows that other code timed, keeps their scores, and leaves the other parts' rows alone."""
    out, _, _ = finished
    copy = tmp_path / "bench"
    shutil.copytree(out, copy, symlinks=True)
    rows = read_store(copy / "results.jsonl")
    older = {"commit": "0" * 40, "dirty": False}
    for r in rows:
        r["latency"]["git"] = older
    write_store(copy / "results.jsonl", rows)
    logs: list[str] = []
    run_bench(_bench(tiny_base, glue_fixture_dir, only_tasks=["rte"]), copy, log=logs.append, retime_latency=True)
    after = read_store(copy / "results.jsonl")
    assert sum(line.endswith(": cached") for line in logs) == 4  # nothing trained again
    assert sum(line.endswith("timing CPU eval latency") for line in logs) == 4  # rte x 2 methods x 2 seeds
    for before, now in zip(rows, after):
        assert now["metrics"] == before["metrics"] and now["key"] == before["key"]
        assert now["latency"]["git"] == (git_state() if now["task"] == "rte" else older)
        assert now["latency"]["dense_ms_per_batch"] > 0


def test_a_results_store_written_in_the_checkout_does_not_make_the_code_dirty(tmp_path):
    """A benchmark part merges its rows into a committed store under benchmarks/results/; the next part's rows,
    trained by the same code, read clean (they read dirty before). A changed source file still reads dirty."""
    repo = tmp_path / "checkout"
    (repo / "benchmarks" / "results" / "part").mkdir(parents=True)
    (repo / "pkg").mkdir()
    (repo / "pkg" / "code.py").write_text("x = 1\n")
    store = repo / "benchmarks" / "results" / "part" / "results.jsonl"
    store.write_text('{"key": "a"}\n')
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run(git + args, check=True)
    assert git_state(repo / "pkg")["dirty"] is False
    store.write_text('{"key": "a"}\n{"key": "b"}\n')
    assert git_state(repo / "pkg")["dirty"] is False
    (repo / "pkg" / "code.py").write_text("x = 2\n")
    state = git_state(repo / "pkg")
    assert state["dirty"] is True and len(state["commit"]) == 40


def test_report_cli_prints_the_table(finished, tmp_path, capsys):
    from glue_sparse.cli.main import main

    _, store, _ = finished
    assert main(["report", "--results", str(store), "--output", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "| full | limited | 1,2 |" in printed and (tmp_path / "report.csv").is_file()
    assert main(["report", "--results", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path)]) == 2

    # the parts of one grid (run in different working stretches, one task each) report as one store
    rows = read_store(store)
    parts = []
    for task in ("rte", "stsb"):
        parts += ["--results", str(tmp_path / f"{task}.jsonl")]
        (tmp_path / f"{task}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["task"] == task))
    assert main(["report", "--results", *parts[1::2], "--output", str(tmp_path / "parts")]) == 0  # a shell glob
    assert (tmp_path / "parts" / "report.csv").read_text() == (tmp_path / "report.csv").read_text()
    assert main(["report", *parts, "--output", str(tmp_path / "parts")]) == 0  # --results repeated
    assert (tmp_path / "parts" / "report.csv").read_text() == (tmp_path / "report.csv").read_text()
    capsys.readouterr()
    assert main(["report", "--results", str(store), "--results", str(store), "--output", str(tmp_path / "twice")]) == 2
    assert "is also in" in capsys.readouterr().err

    # a part of the rows: one seed of a store that holds two, one arm; a value naming no row is refused
    assert main(["report", "--results", str(store), "--output", str(tmp_path / "seed1"), "--only-seeds", "1",
                 "--only-arms", "full"]) == 0
    printed = capsys.readouterr().out
    assert "| full | limited | 1 |" in printed and "gates-0.4" not in printed
    assert main(["report", "--results", str(store), "--output", str(tmp_path / "seed4"), "--only-seeds", "4"]) == 2
    err = capsys.readouterr().err
    assert "--only-seeds [4] names no row of --results; the seeds there are [1, 2]" in err and err.count("\n") == 1
    assert not (tmp_path / "seed4").exists()


def test_grid_on_a_local_ray_gives_the_in_process_rows(finished, tiny_base, glue_fixture_dir, tmp_path, monkeypatch):
    """A 2 x 2 grid (tasks x methods, seed 1) as Ray tasks on a local Ray: same keys and metrics as the
    in-process executor's rows for those cells (to 1e-4: Ray gives a worker one thread, the test run
    two, so float sums may round differently); the driver alone writes the store. Ray's own start-up
    warnings stay off the terminal (importing Ray resets its logger to INFO)."""
    pytest.importorskip("ray")
    import logging

    monkeypatch.setenv("GLUE_SPARSE_VERBOSE", "0")
    logging.getLogger("ray").setLevel(logging.INFO)  # as a fresh `import ray` leaves it
    _, local_store, _ = finished
    local = {r["key"]: r for r in read_store(local_store)}
    logs: list[str] = []
    store = run_bench(_bench(tiny_base, glue_fixture_dir, seeds=[1]), tmp_path / "ray", log=logs.append,
                      executor="ray")
    rows = read_store(store)
    assert len(rows) == 4 and {r["seed"] for r in rows} == {1}
    assert any("cells submitted to Ray" in line for line in logs)
    assert logging.getLogger("ray").level == logging.ERROR
    for row in rows:
        assert row["key"] in local  # same content keys: a bench begun locally can be finished on Ray
        mine, theirs = row["flat_metrics"], local[row["key"]]["flat_metrics"]
        assert mine.keys() == theirs.keys()
        for name in mine:
            assert mine[name] == pytest.approx(theirs[name], abs=1e-4)
    # finishing the same bench again (any executor) finds every row cached and runs nothing
    again: list[str] = []
    run_bench(_bench(tiny_base, glue_fixture_dir, seeds=[1]), tmp_path / "ray", log=again.append, executor="ray")
    assert any("4 of 4 cells cached" in line for line in again) and not any("submitted" in l for l in again)


def test_on_ray_a_magnitude_cell_starts_after_the_full_run_it_prunes(tiny_base, glue_fixture_dir, tmp_path):
    """With a CPU for each cell Ray would start both at once; the magnitude cell is submitted when the full
    cell has ended, and prunes that very run (one full fine-tune in the bench, linked, not trained twice)."""
    pytest.importorskip("ray")
    logs: list[str] = []
    methods = ["full", {"method": "magnitude", "label": "m3", "target_removal": 0.3}]
    store = run_bench(_bench(tiny_base, glue_fixture_dir, tasks=["rte"], seeds=[1], methods=methods,
                             cpus_per_cell=0.5), tmp_path, log=logs.append, executor="ray")
    assert any("1 cells submitted to Ray" in line and "1 more once the full runs they prune have ended" in line
               for line in logs)
    rows = {r["label"]: r for r in read_store(store)}
    assert rows["m3"]["accounting"]["removed_share_of_gated"] == pytest.approx(0.3, abs=0.03)
    source = tmp_path / "runs" / "m3" / "limited" / "seed-1" / "magnitude-source"
    assert source.is_symlink() and source.resolve() == (tmp_path / "runs" / "full" / "limited" / "seed-1").resolve()
    # the magnitude cell made its link when it started: after the full fine-tune had written its run.json
    assert source.lstat().st_mtime >= (source / "rte" / "run.json").stat().st_mtime


def test_demo_table_shows_closed_and_removed_and_the_speed_up(finished):
    from glue_sparse.demo.run import demo_table

    _, store, _ = finished
    rows = [r for r in read_store(store) if r["task"] in ("rte", "stsb")]
    lines = demo_table(rows).splitlines()
    assert "closed (gated)" in lines[0] and "removed" in lines[0] and "speed-up" in lines[0]
    gates = next(line for line in lines if line.startswith("gates-0.4"))
    assert gates.rstrip().endswith("×") and "%" in gates  # closed and removed shares, then the measured ratio
    assert lines[-1].startswith("chance")


def test_demo_table_averages_the_tasks_and_the_headline_reads_the_converged_report(finished, tmp_path):
    from glue_sparse.demo.run import converged_headline, demo_table
    from glue_sparse_tasks.scoring import primary_metric

    _, store, _ = finished
    rows = [r for r in read_store(store) if r["task"] in ("rte", "stsb")]
    lines = demo_table(rows).splitlines()
    assert "average (2)" in lines[0]
    first = next(r for r in rows if r["task"] == "rte")
    mine = {r["task"]: r for r in rows if r["label"] == first["label"]}  # one row per task, as the main job has
    mean = sum(r["flat_metrics"][f"{t}_{primary_metric(t)}"] for t, r in mine.items()) / len(mine)
    assert f"{mean:.3f}" in next(line for line in lines if line.startswith(first["label"]))
    # the committed converged report: its means for the main job's methods, full first
    line = converged_headline(["sst2"])
    assert "5-task average full 67.2," in line and "magnitude-r0.3 62.9" in line and "SST2 full 86.6" in line
    missing = converged_headline(["sst2"], report=tmp_path / "absent.csv")
    assert "not in this install" in missing


def test_targets_are_read_from_targets_json_and_a_bench_config_overrides_them(finished, tmp_path):
    from glue_sparse.common.targets import DEFAULT_BENCH_TARGETS, TARGETS_FILE, TargetsError

    written = json.loads(TARGETS_FILE.read_text())["bench"]
    assert DEFAULT_BENCH_TARGETS.gates_gap_to_full == written["gates_gap_to_full"]
    grid = {"tasks": ["rte"], "methods": ["full"]}
    assert BenchConfig.from_dict(grid).goals() == DEFAULT_BENCH_TARGETS
    loose = BenchConfig.from_dict({**grid, "targets": {"gates_gap_to_full": 40.0}}).goals()
    assert loose.gates_gap_to_full == 40.0 and loose.latency_target == DEFAULT_BENCH_TARGETS.latency_target
    with pytest.raises(TargetsError, match=r"grid.json: targets: unknown target\(s\) \['gates_gap'\]"):
        BenchConfig.from_dict({**grid, "targets": {"gates_gap": 1}}, "grid.json")
    _, store, _ = finished
    summaries = list(summarise(read_store(store)))
    strict, lenient = targets(summaries), targets(summaries, loose)
    claim = [line for line in strict if "points of full" in line]
    assert claim and all("within 2.0 points of full" in line for line in claim)
    assert all("within 40.0 points of full: met" in line for line in lenient if "points of full" in line)
    # the command reads a config's block
    config = tmp_path / "grid.json"
    config.write_text(json.dumps({**grid, "targets": {"gates_gap_to_full": 40.0}}))
    from glue_sparse.cli.main import main

    assert main(["report", "--results", str(store), "--output", str(tmp_path / "r"), "--config", str(config)]) == 0
    assert "within 40.0 points of full: met" in (tmp_path / "r" / "report.md").read_text()


def test_arm_folders_have_no_blanks_and_folders_written_before_still_resume(tmp_path):
    """Issue #52: ``runs/gates-r0.3/...`` for the label ``gates r0.3``; a bench folder written before, with
    ``runs/gates r0.3/...``, keeps using its folder (so --resume and the rows' run_dir still find it)."""
    from glue_sparse.bench.options import arm_folder
    from glue_sparse.bench.grid import arm_root

    assert arm_folder("gates r0.3") == "gates-r0.3" and arm_folder("full") == "full"
    assert arm_root(tmp_path, "gates r0.3", "limited", 1) == tmp_path / "runs" / "gates-r0.3" / "limited" / "seed-1"
    old = tmp_path / "runs" / "gates r0.3" / "limited" / "seed-1"
    old.mkdir(parents=True)
    assert arm_root(tmp_path, "gates r0.3", "limited", 1) == old
    assert arm_root(tmp_path, "gates r0.3", "limited", 2).name == "seed-2" and " " not in str(
        arm_root(tmp_path, "gates r0.3", "limited", 2).relative_to(tmp_path))


def test_issue_51_targets_pick_the_best_gated_arm_on_shared_seeds(finished):
    """The best gated arm at a removal is chosen among the arms on the most seeds, on the seeds every one of
    them and full share (a one-seed variant's single draw is no candidate beside two-seed arms), then set
    against full, the best magnitude arm and mask-search; distilled gates are set against LoRA."""
    _, store, _ = finished
    rows = read_store(store)

    def arm(label: str, method: str, shift: float, seeds=(1, 2), **hp) -> list[dict]:
        out = []
        for r in rows:
            if r["label"] == "gates-0.4" and r["seed"] in seeds:
                flat = {k: v + shift for k, v in r["flat_metrics"].items()}
                out.append(dict(r, label=label, method=method, flat_metrics=flat, key=label + r["key"],
                                hyperparameters={**r["hyperparameters"], **hp}))
        return out

    grid = [r for r in rows if r["label"] == "full"] + arm("gates-0.4", "gates", 0.0)
    grid += arm("gates-0.4 distill", "gates", 0.05, distill=True)  # best on seeds 1,2
    grid += arm("gates+full-0.4", "gates+full", 0.3, seeds=(1,))  # one seed only: highest, but no candidate
    grid += arm("magnitude-0.4", "magnitude", 0.02) + arm("mask-search-0.4", "mask-search", 0.5)
    grid += [dict(r, label="lora", method="lora", key="lora" + r["key"]) for r in rows if r["label"] == "full"]
    summaries = summarise(grid)
    lines = targets(summaries)
    best = [line for line in lines if "best gated arm" in line]
    assert best and all("gates-0.4 distill − " in line for line in best), best  # best on seeds 1-2
    assert any("best gated arm above the best magnitude arm at 30%: met" in line for line in best), best
    assert any("best gated arm above the best mask-search arm at 30%: MISSED — gates-0.4 distill − mask-search-0.4 "
               "= -45.00 points" in line for line in best), best
    lora = next(line for line in lines if "gates with distillation at or above LoRA" in line)
    by_label = {s["label"]: s for s in summaries}
    lead = (by_label["gates-0.4 distill"]["glue_average"].mean - by_label["lora"]["glue_average"].mean) * 100
    assert f"gates-0.4 distill − lora = {lead:+.2f} points" in lora and ("met" in lora) == (lead >= 0)
    assert "train min" in write_report(grid, store.parent / "r51")["markdown"].read_text()


def test_best_gated_arm_is_ranked_on_the_tasks_every_candidate_shares(finished):
    """Candidates are ranked on the tasks they all ran, never one's mean over more tasks against another's over
    fewer (the issue-51 parts ran task by task); a variant that ran fewer tasks than the others (a one-task
    probe) is no candidate, or its one task alone would pick the level's best arm (issue #61's 50% level:
    an SST-2-only probe picked an arm that ranks last on five tasks)."""
    _, store, _ = finished
    rows = read_store(store)

    def arm(label: str, method: str, shift_by_task: dict[str, float], **hp) -> list[dict]:
        return [dict(r, label=label, method=method, key=label + r["key"],
                     hyperparameters={**r["hyperparameters"], **hp},
                     flat_metrics={k: v + shift_by_task[r["task"]] for k, v in r["flat_metrics"].items()})
                for r in rows if r["label"] == "gates-0.4" and r["task"] in shift_by_task]

    grid = [r for r in rows if r["label"] == "full"] + arm("gates-0.4", "gates", {"rte": 0.0, "stsb": 0.0})
    grid += arm("gates+full-0.4", "gates+full", {"rte": 0.5})  # RTE only: the best arm on RTE
    grid += arm("gates-0.4 distill", "gates", {"rte": 0.1, "stsb": 1.0}, distill=True)  # best on rte+stsb
    best = [line for line in targets(summarise(grid)) if "best gated arm" in line]
    assert best and all("gates-0.4 distill − " in line for line in best), best  # not the RTE-only probe
    # where every candidate ran RTE alone, they are ranked on RTE
    grid = [r for r in grid if r["task"] == "rte" or r["label"] == "full"]
    best = [line for line in targets(summarise(grid)) if "best gated arm" in line]
    assert best and all("gates+full-0.4 − " in line for line in best), best
