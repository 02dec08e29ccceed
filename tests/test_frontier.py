"""The report's frontier (issue #61): methods as lines through their removal levels on the tasks every point
shares, one colour per method in every figure, no point on a frame's edge, and per-level verdicts in words;
read from the committed converged grid (real rows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from glue_sparse.bench.frontier import frontier_figure, frontier_lines, level_verdicts, line_name
from glue_sparse.common.colours import method_colour
from glue_sparse.bench.report import LATENCY_PLOT, SCORE_PLOT, _plot, summarise, write_report
from glue_sparse.bench.report_targets import paired, targets
from glue_sparse.bench.store import read_stores

CONVERGED = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "minilm_converged"


@pytest.fixture(scope="module")
def summaries():
    return summarise(read_stores(sorted(CONVERGED.glob("*/results.jsonl"))))


def test_an_arms_line_is_its_label_without_the_level():
    names = {"gates+full r0.5 from-full distill": "gates+full from-full distill", "mask-search r0.7": "mask-search",
             "gates reference": "gates reference", "full": "full"}
    for label, line in names.items():
        assert line_name({"label": label}) == line


def test_only_rows_averaging_the_same_tasks_share_the_frontier(summaries):
    tasks, lines, full = frontier_lines(summaries)
    assert tasks == ["cola", "mrpc", "rte", "sst2", "stsb"] and full["regime"] == "limited"
    assert all(s["regime"] == "limited" and s["average_tasks"] == tasks for group in lines.values() for s in group)
    assert [s["target_removal"] for s in lines["gates"]] == [0.3, 0.5]  # one line through both levels
    assert "gates reference" not in lines  # no asked removal: no level to draw it at


def test_one_regime_per_frontier_even_where_both_regimes_average_the_same_task():
    """The SST-2 part has full-data cells (full, gates r0.3) beside the limited ones, all averaging SST-2 alone:
    the frontier keeps the limited regime, and its reference is limited full fine-tuning (85.2, not 88.2)."""
    parts = ("sst2-seed-1", "kd-sst2-seed-1", "levels-sst2-seed-1")
    summaries = summarise(read_stores([CONVERGED / part / "results.jsonl" for part in parts]))
    assert {s["regime"] for s in summaries} == {"full", "limited"}
    tasks, lines, full = frontier_lines(summaries)
    assert tasks == ["sst2"] and full["regime"] == "limited" and round(full["glue_average"].mean * 100, 1) == 85.2
    assert all(s["regime"] == "limited" for group in lines.values() for s in group)
    assert [s["target_removal"] for s in lines["gates"]] == [0.3, 0.5]  # one point per level, not two at 30%


def test_no_point_sits_on_a_frames_edge(summaries):
    fig = frontier_figure(summaries)
    for ax in fig.axes:
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        points = [line for line in ax.get_lines() if line.get_transform() == ax.transData]  # not the full line
        assert points
        for line in points:
            for x, y in zip(line.get_xdata(), line.get_ydata()):
                assert x0 < x < x1 and y0 < y < y1, (line.get_label(), x, y, (x0, x1), (y0, y1))


def test_one_colour_per_method_in_every_figure(summaries, tmp_path):
    score = _plot(summaries, "score", "score", tmp_path / SCORE_PLOT)
    latency = _plot(summaries, "latency", "latency", tmp_path / LATENCY_PLOT)
    assert set(latency) < set(score)  # full has no latency: the other methods keep their colours all the same
    assert all(latency[m] == score[m] == method_colour(m) for m in latency)
    assert len(set(score.values())) == len(score)  # and no two methods share one
    fig = frontier_figure(summaries)
    for container in fig.axes[1].containers:  # error bar containers carry each line's label
        name = container.get_label().split(" (n=")[0]
        method = next(m for m in sorted(score, key=len, reverse=True) if name.startswith(m))
        assert container.lines[0].get_color() == method_colour(method), name


def test_each_level_names_its_best_method_its_margin_and_whether_the_spread_covers_it(tmp_path):
    """On issue #51's parts (complete, so the numbers stay put while issue #61's parts land beside them)."""
    rows = read_stores(sorted(p for p in CONVERGED.glob("*/results.jsonl") if not p.parent.name.startswith("levels-")))
    verdicts = level_verdicts(summarise(rows))
    assert verdicts[0].startswith("- **30% removed**") and "best **mask-search** 66.8 ± 0.5 over 3 seeds" in verdicts[0]
    assert "ahead of **gates+full distill**" in verdicts[0] and "by 1.52: outside the seeds' spread" in verdicts[0]
    assert verdicts[1].startswith("- **50% removed**") and "one seed each, so no spread to judge it by" in verdicts[1]
    # three seeds against one: the one-seed side is named, and no spread is claimed
    one_seed = [r for r in rows if r["label"] != "gates+full r0.3 distill" or r["seed"] == 1]
    assert "gates+full distill has one seed, so no spread to judge it by" in level_verdicts(summarise(one_seed))[0]
    paths = write_report(rows, tmp_path)
    text = Path(paths["markdown"]).read_text()
    assert "## Frontier" in text and verdicts[0] in text and paths["frontier_plot"].stat().st_size > 10_000


def test_a_levels_distance_from_full_is_taken_on_the_seeds_both_ran():
    """Issue #51's 30% leader (mask search, three seeds) and every other pruned arm cut to seed 1: its level
    line sets it against full's seed 1, as the report's targets do (-0.53), not against full's three-seed mean
    (-0.39), and says so."""
    rows = read_stores(sorted(p for p in CONVERGED.glob("*/results.jsonl") if not p.parent.name.startswith("levels-")))
    assert "; -0.46 from full fine-tuning; ahead of" in level_verdicts(summarise(rows))[0]  # seeds 1-3 on both
    one_seed = summarise([r for r in rows if r["label"] == "full" or r["seed"] == 1])
    top = next(s for s in one_seed if s["label"] == "mask-search r0.3")
    full = next(s for s in one_seed if s["label"] == "full" and s["regime"] == "limited")
    both = paired(top, full)
    assert both.seeds == [1] and f"{100 * (both.average - both.other_average):+.2f}" == "-0.53"
    assert "best **mask-search** 66.8 (1 seed)" in level_verdicts(one_seed)[0]
    assert "; -0.53 from full fine-tuning (on seed 1, which both ran);" in level_verdicts(one_seed)[0]


def test_a_level_ranks_a_one_seed_draw_after_a_three_seed_mean_and_says_it_reads_higher():
    """Mask search (issue #51's 30% leader) cut to seed 1 reads 66.8 against gates+full distill's three-seed
    65.3: the three-seed arm is the level's best, as the targets' best gated arm is chosen among the arms on the
    most seeds, and the one-seed draw above it is named, never ranked against it."""
    rows = read_stores(sorted(p for p in CONVERGED.glob("*/results.jsonl") if not p.parent.name.startswith("levels-")))
    line = level_verdicts(summarise([r for r in rows if r["label"] != "mask-search r0.3" or r["seed"] == 1]))[0]
    assert "best **gates+full distill** 65.3 ± 0.9 over 3 seeds" in line, line
    assert "; **mask-search** reads higher, 66.8 (1 seed), on fewer seeds than 3" in line, line
    assert "ahead of **mask-search**" not in line, line


def test_a_seed_still_running_neither_narrows_nor_skews_an_arms_average(tmp_path):
    """Issue #51's full arm (three seeds on five tasks) with seed 2's STS-B row not yet in: the average stays a
    five-task one over seeds 1 and 3, seed 2 is named as left out, and the arm keeps its place on the frontier."""
    rows = read_stores(sorted(p for p in CONVERGED.glob("*/results.jsonl") if not p.parent.name.startswith("levels-")))
    full = [r for r in rows if r["label"] == "full" and r["regime"] == "limited"]
    assert {r["seed"] for r in full} == {1, 2, 3} and len({r["task"] for r in full}) == 5
    running = [r for r in rows if not (r["label"] == "full" and r["seed"] == 2 and r["task"] == "stsb")]
    summary = next(s for s in summarise(running) if s["label"] == "full" and s["regime"] == "limited")
    assert summary["average_tasks"] == ["cola", "mrpc", "rte", "sst2", "stsb"]
    assert summary["seeds"] == [1, 3] and summary["seeds_on_fewer_tasks"] == [2]
    done = summarise([r for r in full if r["seed"] != 2])[0]
    assert summary["glue_average"].values == done["glue_average"].values
    assert frontier_lines(summarise(running))[2]["label"] == "full"
    table = Path(write_report(running, tmp_path)["markdown"]).read_text()
    assert "| full | limited | 1,3 (+2 on fewer tasks) |" in table


def test_a_seed_still_running_neither_narrows_nor_skews_a_target():
    """The targets pick their cells by the arm summary's rule: with seed 2 of issue #51's `gates+full r0.3
    distill` in on STS-B alone, its comparison with full stays on five tasks over seeds 1 and 3 (it read
    "averages over stsb only" before, while the table and frontier averaged five tasks), and gives the number
    the two finished seeds give."""
    rows = read_stores(sorted(p for p in CONVERGED.glob("*/results.jsonl") if not p.parent.name.startswith("levels-")))
    arm = "gates+full r0.3 distill"
    running = [r for r in rows if not (r["label"] == arm and r["seed"] == 2 and r["task"] != "stsb")]
    finished = [r for r in rows if not (r["label"] == arm and r["seed"] == 2)]

    def line(rows_: list[dict]) -> str:
        return next(t for t in targets(summarise(rows_)) if t.startswith(f"- [limited, {arm}, ")
                    and "within 2.0 points of full" in t)

    assert line(running).startswith(f"- [limited, {arm}, seeds 1,3] gates within")
    assert line(running) == line(finished)
