"""Scoring against hand-computed and scikit-learn/scipy values, every convention, degenerate input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import f1_score, matthews_corrcoef

from glue_sparse_tasks import scoring


def test_accuracy_f1_mcc_by_hand():
    preds = [1, 0, 1, 1, 0, 1]
    refs = [1, 0, 0, 1, 1, 1]
    assert scoring.accuracy(preds, refs) == pytest.approx(4 / 6)
    # tp=3 fp=1 fn=1 -> precision 3/4, recall 3/4
    assert scoring.binary_f1(preds, refs) == pytest.approx(0.75)
    # tp=3 tn=1 fp=1 fn=1: (3*1 - 1*1) / sqrt(4*4*2*2) = 2/8
    assert scoring.mcc(preds, refs) == pytest.approx(0.25)
    assert scoring.mcc(preds, refs) == pytest.approx(matthews_corrcoef(refs, preds))


def test_correlations_match_scipy():
    rng = np.random.default_rng(0)
    refs = rng.uniform(0, 5, 50)
    preds = refs + rng.normal(0, 1, 50)
    assert scoring.pearson(preds, refs) == pytest.approx(pearsonr(preds, refs)[0])
    assert scoring.spearman(preds, refs) == pytest.approx(spearmanr(preds, refs)[0])


def test_constant_predictions_give_mcc_zero():
    assert scoring.mcc([1, 1, 1, 1], [0, 1, 0, 1]) == 0.0


def test_undefined_pearson_is_nan_with_warning():
    with pytest.warns(scoring.UndefinedCorrelationWarning, match="constant"):
        value = scoring.pearson([2.0, 2.0, 2.0], [1.0, 2.0, 3.0])
    assert math.isnan(value)


@pytest.mark.parametrize("fn", [scoring.accuracy, scoring.mcc, scoring.pearson, scoring.binary_f1])
def test_length_mismatch_raises(fn):
    with pytest.raises(ValueError, match="differ in length: 2 != 3"):
        fn([1, 0], [1, 0, 1])


def _rows():
    """A full set of rows for every task, with known per-task results."""
    rng = np.random.default_rng(1)
    preds, refs, tasks = [], [], []

    def add(task, p, r):
        preds.extend(p)
        refs.extend(r)
        tasks.extend([task] * len(p))

    for task in ("cola", "sst2", "mrpc", "qqp", "qnli", "rte", "wnli"):
        r = list(rng.integers(0, 2, 40))
        p = [x if rng.random() < 0.8 else 1 - x for x in r]
        add(task, p, r)
    r = list(rng.uniform(0, 5, 40))
    add("stsb", [x + rng.normal(0, 1) for x in r], r)
    rm = list(rng.integers(0, 3, 30))
    add("mnli_matched", [x if i % 3 else (x + 1) % 3 for i, x in enumerate(rm)], rm)
    rmm = list(rng.integers(0, 3, 50))
    add("mnli_mismatched", [x if i % 4 else (x + 2) % 3 for i, x in enumerate(rmm)], rmm)
    return preds, refs, tasks


def _sub(preds, refs, tasks, name):
    sel = [i for i, t in enumerate(tasks) if t == name]
    return [preds[i] for i in sel], [refs[i] for i in sel]


def test_flat_metrics_and_pooled_mnli():
    preds, refs, tasks = _rows()
    flat = scoring.flat_metrics(preds, refs, tasks)
    p, r = _sub(preds, refs, tasks, "cola")
    assert flat["cola_mcc"] == pytest.approx(matthews_corrcoef(r, p))
    p, r = _sub(preds, refs, tasks, "mrpc")
    assert flat["mrpc_f1"] == pytest.approx(f1_score(r, p))
    p, r = _sub(preds, refs, tasks, "stsb")
    assert flat["stsb_pearson"] == pytest.approx(pearsonr(p, r)[0])
    assert flat["stsb_spearman"] == pytest.approx(spearmanr(p, r)[0])
    pm, rm = _sub(preds, refs, tasks, "mnli_matched")
    pmm, rmm = _sub(preds, refs, tasks, "mnli_mismatched")
    correct_m = sum(a == b for a, b in zip(pm, rm))
    correct_mm = sum(a == b for a, b in zip(pmm, rmm))
    assert flat["mnli_matched_accuracy"] == pytest.approx(correct_m / 30)
    assert flat["mnli_mismatched_accuracy"] == pytest.approx(correct_mm / 50)
    # Pooled is over rows, not the mean of the two halves (30 vs 50 rows).
    assert flat["mnli_accuracy"] == pytest.approx((correct_m + correct_mm) / 80)
    assert flat["mnli_accuracy"] != pytest.approx(
        (flat["mnli_matched_accuracy"] + flat["mnli_mismatched_accuracy"]) / 2)


def test_every_convention_by_hand():
    preds, refs, tasks = _rows()
    f = scoring.flat_metrics(preds, refs, tasks)
    default = np.mean([f["cola_mcc"], f["sst2_accuracy"], f["mrpc_accuracy"], f["qqp_accuracy"],
                       f["stsb_pearson"], f["mnli_accuracy"], f["qnli_accuracy"], f["rte_accuracy"]])
    leaderboard = np.mean([
        f["cola_mcc"], f["sst2_accuracy"], (f["mrpc_f1"] + f["mrpc_accuracy"]) / 2,
        (f["qqp_f1"] + f["qqp_accuracy"]) / 2, (f["stsb_pearson"] + f["stsb_spearman"]) / 2,
        (f["mnli_matched_accuracy"] + f["mnli_mismatched_accuracy"]) / 2,
        f["qnli_accuracy"], f["rte_accuracy"], f["wnli_accuracy"]])
    bert = np.mean([f["mnli_matched_accuracy"], f["mnli_mismatched_accuracy"], f["qqp_f1"],
                    f["qnli_accuracy"], f["sst2_accuracy"], f["cola_mcc"], f["stsb_spearman"],
                    f["mrpc_f1"], f["rte_accuracy"]])
    for name, expected in (("default", default), ("leaderboard", leaderboard), ("bert_paper", bert)):
        avg = scoring.glue_average(f, name)
        assert avg.is_complete and avg.value == pytest.approx(expected), name
        assert name in avg.label()


def test_partial_average_names_missing_tasks():
    preds, refs, tasks = _rows()
    keep = [i for i, t in enumerate(tasks) if t not in ("qqp", "mnli_mismatched")]
    f = scoring.flat_metrics([preds[i] for i in keep], [refs[i] for i in keep],
                             [tasks[i] for i in keep])
    assert "mnli_accuracy" not in f  # pooled needs both halves
    avg = scoring.glue_average(f, "default")
    assert avg.value is None
    assert avg.missing_tasks == ["mnli", "qqp"]
    expected = np.mean([f["cola_mcc"], f["sst2_accuracy"], f["mrpc_accuracy"], f["stsb_pearson"],
                        f["qnli_accuracy"], f["rte_accuracy"]])
    assert avg.partial_value == pytest.approx(expected)
    assert "partial" in avg.label() and "missing mnli, qqp" in avg.label()


def test_unknown_task_and_convention_errors():
    with pytest.raises(ValueError, match="unknown task name.*'mnli'.*must be one of"):
        scoring.flat_metrics([1], [1], ["mnli"])
    with pytest.raises(ValueError, match="valid conventions are: default, leaderboard, bert_paper"):
        scoring.glue_average({}, "superglue")
