"""The `glue_average` evaluate metric, loaded offline both ways, against the scoring module."""

from __future__ import annotations

import math

import evaluate
import pytest
from conftest import REPO
from sklearn.metrics import accuracy_score, matthews_corrcoef
from test_scoring import _rows

import glue_sparse_tasks
from glue_sparse_tasks import scoring


@pytest.fixture(scope="module")
def combined():
    return evaluate.load(glue_sparse_tasks.GLUE_AVERAGE_METRIC)


def test_loads_from_checkout_path_and_package_constant():
    by_path = evaluate.load(str(REPO / "metrics" / "glue_average"))
    by_const = evaluate.load(glue_sparse_tasks.GLUE_AVERAGE_METRIC)
    for metric in (by_path, by_const):
        out = metric.compute(predictions=[1, 0], references=[1, 1], tasks=["sst2", "sst2"])
        assert out["sst2_accuracy"] == 0.5


def test_full_glue_average_every_convention(combined):
    preds, refs, tasks = _rows()
    flat = scoring.flat_metrics(preds, refs, tasks)
    for convention in scoring.CONVENTIONS:
        out = combined.compute(predictions=preds, references=refs, tasks=tasks, convention=convention)
        assert out["glue_convention"] == convention
        assert out["glue_average"] == pytest.approx(scoring.glue_average(flat, convention).value)
        assert "missing_tasks" not in out and "partial_average" not in out
    for key in ("cola_mcc", "stsb_pearson", "stsb_spearman", "mrpc_accuracy", "mrpc_f1",
                "qqp_accuracy", "qqp_f1", "sst2_accuracy", "qnli_accuracy", "rte_accuracy",
                "mnli_matched_accuracy", "mnli_mismatched_accuracy", "mnli_accuracy"):
        assert out[key] == pytest.approx(flat[key]), key


def test_partial_average_when_tasks_missing(combined):
    out = combined.compute(predictions=[1, 0, 1, 1], references=[1, 0, 0, 1],
                           tasks=["cola", "cola", "rte", "rte"])
    assert "glue_average" not in out
    assert out["missing_tasks"] == ["mnli", "mrpc", "qnli", "qqp", "sst2", "stsb"]
    assert out["partial_average"] == pytest.approx((1.0 + 0.5) / 2)


def test_per_task_config_and_add_batch():
    cola = evaluate.load(glue_sparse_tasks.GLUE_AVERAGE_METRIC, "cola")
    preds, refs = [1, 1, 0, 1, 0, 0], [1, 0, 0, 1, 1, 0]
    cola.add_batch(predictions=preds[:3], references=refs[:3])
    cola.add_batch(predictions=preds[3:], references=refs[3:])
    out = cola.compute()
    assert out["cola_mcc"] == pytest.approx(matthews_corrcoef(refs, preds))
    assert out["cola_accuracy"] == pytest.approx(accuracy_score(refs, preds))


def test_stsb_config_regression_and_nan(combined):
    stsb = evaluate.load(glue_sparse_tasks.GLUE_AVERAGE_METRIC, "stsb")
    out = stsb.compute(predictions=[0.5, 2.5, 4.0], references=[1.0, 2.0, 4.5])
    assert out["stsb_pearson"] > 0.9
    with pytest.warns(scoring.UndefinedCorrelationWarning):
        out = stsb.compute(predictions=[3.0, 3.0, 3.0], references=[1.0, 2.0, 4.5])
    assert math.isnan(out["stsb_pearson"])


def test_bad_inputs(combined):
    with pytest.raises(ValueError, match="unknown task name"):
        combined.compute(predictions=[1], references=[1], tasks=["superglue"])
    with pytest.raises(ValueError):
        combined.compute(predictions=[1, 0], references=[1], tasks=["rte", "rte"])
