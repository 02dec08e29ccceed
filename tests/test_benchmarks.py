"""The benchmark suite cannot rot: every script in benchmarks/ is registered in benchmarks/run.py, runs at
its smallest size through that entry point, and imports no private name from the package."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

BENCHMARKS = REPO / "benchmarks"
_spec = importlib.util.spec_from_file_location("benchmark_suite", BENCHMARKS / "run.py")
suite = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = suite  # dataclasses look their module up there
_spec.loader.exec_module(suite)
PACKAGES = ("glue_sparse", "glue_sparse_tasks", "sparse_models", "metrics")


def test_every_script_in_benchmarks_is_registered_once():
    scripts = sorted(p.name for p in BENCHMARKS.iterdir() if p.suffix in (".py", ".sh") and p.name != "run.py")
    assert sorted(b.script for b in suite.SUITE.values()) == scripts


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py")))
def test_no_benchmark_imports_a_private_name_from_the_package(script):
    tree = ast.parse((BENCHMARKS / script).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PACKAGES:
            private = [a.name for a in node.names if a.name.startswith("_")]
            assert not private, f"{script}:{node.lineno} imports {private} from {node.module}"
            assert not any(part.startswith("_") for part in node.module.split(".")), f"{script}:{node.lineno}"


@pytest.mark.parametrize("name", [n for n, b in suite.SUITE.items() if b.smoke is not None])
def test_each_benchmark_runs_at_its_smallest_size(name, glue_fixture_dir, tmp_path):
    done = subprocess.run([sys.executable, str(BENCHMARKS / "run.py"), name, "--smoke", str(glue_fixture_dir),
                           str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    assert done.stdout.strip(), "a benchmark prints what it measured"
    if name == "gpu-check":  # it reports a failing section and goes on: none may have failed
        import json

        report = json.loads((tmp_path / "gpu_check.json").read_text())
        assert not [k for k, v in report.items() if isinstance(v, dict) and "error" in v], report


def test_the_pretraining_script_parses_and_uses_only_flags_the_commands_have(tmp_path):
    done = subprocess.run([sys.executable, str(BENCHMARKS / "run.py"), "pretrain-cpu", "--smoke", ".", "."],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = (BENCHMARKS / "pretrain_cpu.sh").read_text()
    for command in ("pretrain", "pretrain-report"):
        helped = subprocess.run([sys.executable, "-m", "glue_sparse.cli.main", command, "--help"], capture_output=True,
                                text=True, timeout=300).stdout
        used = set(re.findall(rf"glue-sparse {command} ([^\n]*(?:\\\n[^\n]*)*)", text))
        flags = {flag for line in used for flag in re.findall(r"(--[a-z][a-z-]+)", line)}
        common = set(re.findall(r"(--[a-z][a-z-]+)", text.split("common=(")[1].split(")")[0]))
        for flag in flags | (common if command == "pretrain" else set()):
            assert flag in helped, f"benchmarks/pretrain_cpu.sh passes {flag} to glue-sparse {command}"


def test_the_list_names_every_benchmark():
    listed = subprocess.run([sys.executable, str(BENCHMARKS / "run.py"), "--list"], capture_output=True, text=True)
    assert listed.returncode == 0 and all(name in listed.stdout for name in suite.SUITE)


@pytest.mark.parametrize("config", sorted(p.name for p in BENCHMARKS.glob("*.json")))
def test_every_committed_bench_config_loads_with_its_targets(config):
    """A grid config that no longer loads (a renamed field, a bad targets block) would surface only hours into
    a part; each loads, validates and names its cells here."""
    from glue_sparse.bench.options import BenchConfig

    bench = BenchConfig.load(BENCHMARKS / config)
    bench.validate()
    assert list(bench.runs(whole=True)) and 0 < bench.goals().removal_tolerance <= 0.03
