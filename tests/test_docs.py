"""The README stays a short user guide (issue #39: at most 250 lines, and this fails past 300) whose
relative links all lead to files in the repository, and whose headline numbers are the committed results
they link to (one source of truth: a re-run that changes a result fails here until the README follows)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_stays_short():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail into docs/ (limit 300, aim 250)"


def test_readme_and_docs_links_lead_to_files():
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, broken


# (level, best sparse-gates arm, best baseline) that the README's frontier row names
FRONTIER_HEADLINE = [("0.3", "gates+full r0.3 from-full distill", "mask-search r0.3"),
                     ("0.5", "gates+full r0.5 from-mask distill", "mask-search r0.5"),
                     ("0.7", "gates+full r0.7 from-mask distill", "magnitude r0.7 distill")]


def _headline(what: str) -> str:
    """The result cell of the README's headline row that starts with ``what``."""
    for line in (REPO / "README.md").read_text().splitlines():
        if line.startswith(f"| {what}"):
            return line.split("|")[2]
    raise AssertionError(f"README.md has no headline row starting with {what!r}")


def _converged_limited_rows() -> dict[str, dict[str, str]]:
    """The committed whole converged report's limited-regime rows, by method."""
    with open(REPO / "benchmarks/results/minilm_converged/report/report.csv", newline="") as f:
        return {r["method"]: r for r in csv.DictReader(f) if r["regime"] == "limited"}


def test_readme_glue_headline_is_the_converged_report():
    rows = _converged_limited_rows()
    cell = _headline("MiniLM, limited regime")
    for name, method in [("full", "full"), ("gates", "gates r0.3"), ("gates+full", "gates+full r0.3"),
                         ("magnitude", "magnitude r0.3"), ("gates+full distilled", "gates+full r0.3 distill"),
                         ("mask search", "mask-search r0.3")]:
        mean_sd = rows[method]["GLUE avg"].split(" (")[0]  # "67.2 ± 0.2 (67.3)": mean ± sd (median)
        assert f"{name} {mean_sd}" in cell, (method, mean_sd, cell)


def test_readme_frontier_headline_is_the_converged_report():
    """Issue #61's answer in one row: per removal level the best sparse-gates arm on three seeds (checked to be
    the best in report.csv) against the best baseline, as the committed whole report reads them."""
    rows = _converged_limited_rows()
    mean = lambda method: float(rows[method]["GLUE avg"].split(" ")[0])  # noqa: E731
    cell = _headline("MiniLM, the same average at 30 / 50 / 70%")
    for level, gated, baseline in FRONTIER_HEADLINE:
        three_seeds = [m for m, r in rows.items() if m.startswith("gates") and f" r{level}" in m and r["seeds"] == "1,2,3"]
        assert max(three_seeds, key=mean) == gated, (level, three_seeds)
        for method in (gated, baseline):
            name = method.replace(f" r{level}", "").replace("distill", "distilled")
            mean_sd = rows[method]["GLUE avg"].split(" (")[0]
            assert f"{name} {mean_sd} ({rows[method]['latency ×']}×)" in cell, (method, mean_sd, cell)


def test_readme_speed_headline_is_the_pruning_speed_run():
    rows = json.loads((REPO / "benchmarks/results/pruning_speed/speed.json").read_text())["rows"]
    [row] = [r for r in rows if r["level"].startswith("random 40%") and r["layout"] == "auto"
             and r["batch_size"] == 32]
    assert f"{row['latency_ratio']:.2f}× dense" in _headline("pruned MiniLM speed at 40%")


def test_readme_smollm2_headline_is_the_posttrain_store():
    store = REPO / "benchmarks/results/posttrain_structured_smollm2/results.jsonl"
    ppl = {row["cell"]: row["perplexity"] for row in map(json.loads, store.read_text().splitlines())}
    cell = _headline("SmolLM2-135M, 20%")
    for name, key in [("dense", "dense"), ("unit gates", "gates@0.2"), ("FLAP", "flap@0.2"),
                      ("wanda-sp", "wanda-sp@0.2")]:
        assert f"{name} {ppl[key]['c4']:.1f} / {ppl[key]['wikitext2']:.1f}" in cell, (key, cell)


def test_the_python_api_example_runs_and_prunes(tmp_path, monkeypatch):
    """docs/python-api.md's example, run as written (issue #62): it trains, closes 30% and saves a smaller model."""
    import contextlib
    import io

    code = re.search(r"```python\n(.*?)```", (REPO / "docs" / "python-api.md").read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "docs/python-api.md", "exec"), {})
    assert "closed 30.0% of gated weights" in printed.getvalue()
    left, before = (int(n.replace(",", "")) for n in re.findall(r"([\d,]+) of ([\d,]+) parameters", printed.getvalue())[0])
    assert left < before and (tmp_path / "example_pruned" / "modeling_sparse_pruned.py").is_file()
