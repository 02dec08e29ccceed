"""Shared fixtures: tiny GLUE folders written by the tests, and the real data folder when present."""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path

import pytest

from glue_sparse_tasks.glue_tasks import GLUE_TASKS

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Layout timings (merge_and_unload's cost model) go to a cache of the test session, not the user's.
os.environ["GLUE_SPARSE_CACHE"] = tempfile.mkdtemp(prefix="glue_sparse_cache_")

REPO = Path(__file__).resolve().parents[1]
_SHARED = Path(os.environ.get("GLUE_SPARSE_SHARED_DATA", REPO.parent / "shared" / "data"))

QQP_TSV_HEADER = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"


def fixture_rows(task: str, n: int, seed: int = 0) -> list[dict]:
    """Deterministic rows in HF field layout; labels cycle so every class occurs."""
    spec = GLUE_TASKS[task]
    rng = random.Random(f"{task}-{seed}")
    rows = []
    for i in range(n):
        row: dict = {f: f"{task} {f} row {i} {rng.choice(['alpha', 'beta', 'gamma'])}."
                     for f in spec.text_fields}
        row["label"] = round(rng.uniform(0, 5), 2) if spec.is_regression else i % spec.num_labels
        row["idx"] = i
        rows.append(row)
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_qqp_tsv(folder: Path, split_file: str, rows: list[dict]) -> Path:
    """Write rows in the original GLUE QQP TSV layout (quotes are literal text: QUOTE_NONE)."""
    lines = [QQP_TSV_HEADER]
    for r in rows:
        lines.append(f"{r['idx']}\t{2 * r['idx']}\t{2 * r['idx'] + 1}\t{r['question1']}\t"
                     f"{r['question2']}\t{r['label']}")
    path = folder / "QQP" / split_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def glue_fixture_dir(tmp_path_factory) -> Path:
    """A complete small GLUE folder: JSONL for every task, QQP validation as a GLUE TSV."""
    root = tmp_path_factory.mktemp("glue_fixture")
    for task in GLUE_TASKS:
        n = 24
        if task == "mnli":
            write_jsonl(root / "mnli" / "validation_matched.jsonl", fixture_rows(task, n, 1))
            write_jsonl(root / "mnli" / "validation_mismatched.jsonl", fixture_rows(task, n + 3, 2))
        elif task == "qqp":
            rows = fixture_rows(task, n)
            rows[0]["question1"] = '"Why are "quoted" words kept?"'  # QUOTE_NONE keeps the quotes
            write_qqp_tsv(root, "dev.tsv", rows)
        else:
            write_jsonl(root / task / "validation.jsonl", fixture_rows(task, n))
            write_jsonl(root / task / "train.jsonl", fixture_rows(task, 40, 3))
    return root


@pytest.fixture(scope="session")
def shared_glue_dir() -> Path:
    """The real offline GLUE data (``../shared/data/glue``); tests using it skip without it."""
    path = _SHARED / "glue"
    if not path.is_dir():
        pytest.skip(f"real GLUE data not found at {path} (set GLUE_SPARSE_SHARED_DATA)")
    return path


@pytest.fixture(scope="session")
def glue_sparse_wheel(tmp_path_factory) -> Path:
    """The package's wheel, built once per session from this checkout (as a user's ``pip install .`` builds it)."""
    from tests.no_weights_env import build_wheel

    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def export_run_dir(glue_fixture_dir, tmp_path_factory) -> Path:
    """A gates run on MRPC with its pruned model, and a full run on RTE without one, in one run folder (what
    ``export`` exports, to the Hub or to ONNX)."""
    from glue_sparse.finetune.options import FinetuneConfig
    from glue_sparse.finetune.run import run_finetune
    from tests.tiny_models import save_tiny_classifier

    base = save_tiny_classifier(tmp_path_factory.mktemp("export_base"), 2, seed=41)
    out = tmp_path_factory.mktemp("export_run")
    common = dict(base_model=str(base), train_limit=24, epochs=1, batch_size=8, max_length=32)
    run_finetune(FinetuneConfig(task="mrpc", method="gates", target_removal=0.3, prune=True, **common), out,
                 data_dir=str(glue_fixture_dir), use_hub=False)
    run_finetune(FinetuneConfig(task="rte", method="full", **common), out, data_dir=str(glue_fixture_dir),
                 use_hub=False)
    return out
