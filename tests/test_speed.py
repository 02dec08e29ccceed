"""``glue-sparse speed`` end to end on a tiny BERT: every layout timed beside dense, closed vs removed."""

from __future__ import annotations

import json

import torch

from glue_sparse.cli.main import main
from glue_sparse.speed.report import speed_targets
from sparse_models.runtime.timing import paired_speedup, time_rounds
from tests.tiny_models import save_tiny_classifier, tiny_bert


def test_speed_times_every_layout_beside_dense_and_keeps_closed_and_removed_apart(tmp_path, glue_fixture_dir,
                                                                                  capsys):
    model = save_tiny_classifier(tmp_path / "tiny", 2, seed=3)
    out = tmp_path / "speed.json"
    main(["speed", "--model", str(model), "--target-removal", "0.4", "--batch-sizes", "4", "--batches", "1",
          "--rounds", "3", "--layouts", "auto,per-layer,keep,remove,remove+heads", "--align", "1",
          "--data-dir", str(glue_fixture_dir), "--output", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["layout"] for r in rows] == ["auto", "per-layer", "keep", "remove", "remove+heads"]
    assert len({r["dense_ms"] for r in rows}) == 1  # one dense timing, shared by the layouts timed with it
    by_layout = {r["layout"]: r for r in rows}
    for r in rows:  # what the gates closed is the same whatever the layout removes
        assert abs(r["closed_share_of_gated"] - 0.4) < 0.03
        assert r["removed_share_of_gated"] <= r["closed_share_of_gated"] + 1e-9
        assert r["pruned_ms"] > 0 and r["ideal_ms"] > 0 and r["flop_ratio"] >= 1.0
        assert r["latency_ratio_low"] <= r["latency_ratio"] <= r["latency_ratio_high"]  # paired, over 3 rounds
    assert by_layout["keep"]["removed_share_of_gated"] < by_layout["remove"]["removed_share_of_gated"]
    # what each pruned model runs beyond its matrices: keep no index work, remove the most
    assert by_layout["keep"]["index_ops"] == 0 < by_layout["remove"]["index_ops"]
    assert by_layout["remove+heads"]["heads_narrowed"] and not by_layout["remove"]["heads_narrowed"]
    assert by_layout["remove+heads"]["index_ops"] < by_layout["remove"]["index_ops"]  # no q/k/v scatters
    auto = by_layout["auto"]  # the whole-model check returned keep, the per-layer choice, remove, or one with heads
    assert auto["heads_narrowed"] or auto["index_ops"] in (0, by_layout["per-layer"]["index_ops"],
                                                           by_layout["remove"]["index_ops"])
    printed = capsys.readouterr().out
    assert "closed" in printed and "removed" in printed and printed.count("random 40%") == 5
    table = out.with_suffix(".md").read_text()  # the committed form: table plus targets for batch 32
    assert table.count("| random 40%") == 5 and "Targets" not in table  # batch 4 here: no batch-32 targets
    assert "| random 40% (rows/cols closed" in table and "| keep | 0 ops | 4 |" in table


def test_speed_runs_in_bfloat16_and_names_its_device_and_dtype(tmp_path, glue_fixture_dir):
    """The accelerator table (bf16 on a GPU) comes from the same command; on CPU bf16 runs too, so the
    path is exercised here, and the written table says what it timed on."""
    model = save_tiny_classifier(tmp_path / "tiny", 2, seed=3)
    out = tmp_path / "speed.json"
    main(["speed", "--model", str(model), "--target-removal", "0.4", "--batch-sizes", "2", "--batches", "1",
          "--rounds", "1", "--layouts", "keep,remove", "--precision", "bf16", "--data-dir", str(glue_fixture_dir),
          "--output", str(out)])
    written = json.loads(out.read_text())
    assert (written["device"], written["dtype"]) == ("cpu", "bfloat16")
    assert [r["layout"] for r in written["rows"]] == ["keep", "remove"]
    assert all(r["pruned_ms"] > 0 and r["ideal_ms"] > 0 for r in written["rows"])
    assert "cpu, bfloat16" in out.with_suffix(".md").read_text()


def test_paired_speedup_takes_the_ratio_within_each_round():
    # round 3 ran during a slow stretch for the pruned side only: its ratio is an outlier, not the median
    speedup = paired_speedup([1.0, 2.0, 1.5], [0.5, 1.0, 3.0])
    assert (speedup.median, speedup.low, speedup.high) == (2.0, 0.5, 2.0)


def test_speed_targets_print_the_round_range_beside_the_verdict():
    row = {"level": "random 40%", "layout": "auto", "batch_size": 32, "closed_share_of_gated": 0.4,
           "latency_ratio": 1.31, "latency_ratio_low": 1.22, "latency_ratio_high": 1.36, "share_of_ideal": 0.9}
    lines = speed_targets([row])
    assert "- >= 1.3x at 40% closed: 1.31x (rounds 1.22-1.36), met (margin +0.01)" in lines
    assert any("never slower than dense at 40% closed: 1.31x" in line and "met" in line for line in lines)


def test_time_rounds_takes_turns_batch_by_batch_and_reverses_the_order_every_other_round():
    models = [tiny_bert(seed=0).eval(), tiny_bert(seed=1).eval()]
    calls = []
    for index, model in enumerate(models):
        model.register_forward_pre_hook(lambda m, args, kwargs, i=index: calls.append(
            (i, int(kwargs["input_ids"][0, 0]))), with_kwargs=True)
    batches = [{"input_ids": torch.full((2, 5), token)} for token in (7, 9)]
    samples = time_rounds(models, batches, rounds=2)
    # warm-up round, then two timed rounds; a slow stretch cannot fall on one model's whole pass
    assert calls == [(0, 7), (1, 7), (0, 9), (1, 9),
                     (1, 7), (0, 7), (1, 9), (0, 9),
                     (0, 7), (1, 7), (0, 9), (1, 9)]
    assert [len(s) for s in samples] == [2, 2] and all(t > 0 for s in samples for t in s)


def test_speed_times_a_regression_adapter_on_a_base_with_its_one_output(tmp_path, glue_fixture_dir):
    import peft
    from transformers import AutoModelForSequenceClassification

    from sparse_models import SparseGatesConfig
    from tests.tiny_models import set_gate_pattern

    base = save_tiny_classifier(tmp_path / "tiny", 2, seed=3)
    one_output = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1, ignore_mismatched_sizes=True)
    gated = peft.get_peft_model(one_output, SparseGatesConfig(task_type="SEQ_CLS"))
    set_gate_pattern(gated, closed=0.3, fractional=0.0)
    gated.save_pretrained(tmp_path / "stsb-adapter")
    out = tmp_path / "speed.json"
    main(["speed", "--model", str(base), "--target-removal", "0.4", "--batch-sizes", "4", "--batches", "1", "--rounds", "1",
          "--layouts", "keep", "--data-dir", str(glue_fixture_dir), "--adapter", str(tmp_path / "stsb-adapter"),
          "--output", str(out)])
    trained = [r for r in json.loads(out.read_text())["rows"] if r["level"].startswith("trained")]
    assert len(trained) == 1 and trained[0]["closed_share_of_gated"] > 0.2 and trained[0]["pruned_ms"] > 0
