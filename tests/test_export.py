"""Model cards and ``glue-sparse export`` (issue #62): every kept checkpoint and pruned model gets a card whose
Hub metadata ``huggingface_hub``'s own readers turn back into the run's scores; export writes one Hub-ready
folder per task and refuses, in one line and before writing, a task or variant the run lacks."""

from __future__ import annotations

import json

import pytest
import torch
from huggingface_hub import ModelCard, metadata_load
from huggingface_hub.repocard_data import model_index_to_eval_results

from glue_sparse.cli.main import main


def _card_scores(folder) -> dict[str, float]:
    card = ModelCard.load(folder / "README.md")
    assert card.data.library_name == "transformers" and card.data.pipeline_tag == "text-classification"
    name, results = model_index_to_eval_results(metadata_load(folder / "README.md")["model-index"])
    assert name and all(r.dataset_type == "nyu-mll/glue" and r.dataset_split == "validation" for r in results)
    return {f"{r.dataset_config}:{r.metric_type}": r.metric_value for r in results}


def test_every_kept_checkpoint_and_pruned_model_has_a_card_with_the_runs_scores(export_run_dir):
    record = json.loads((export_run_dir / "mrpc" / "run.json").read_text())
    expected = {"mrpc:accuracy": record["final_metrics"]["accuracy"], "mrpc:f1": record["final_metrics"]["f1"]}
    assert _card_scores(export_run_dir / "mrpc") == expected
    assert _card_scores(export_run_dir / "mrpc" / "pruned") == expected
    text = (export_run_dir / "mrpc" / "pruned" / "README.md").read_text()
    closed = record["pruned"]["accounting"]["closed_share_of_gated"]
    assert "trust_remote_code=True" in text and f"gated weights closed (removable) | {100 * closed:.1f}%" in text
    assert abs(closed - 0.3) < 0.01
    assert "custom_code" in ModelCard.load(export_run_dir / "mrpc" / "pruned" / "README.md").data.tags
    assert "rte:accuracy" in _card_scores(export_run_dir / "rte")


def test_export_writes_hub_ready_folders_whose_cards_round_trip(export_run_dir, tmp_path, glue_fixture_dir,
                                                                 tmp_path_factory):
    from transformers import AutoModelForSequenceClassification

    import sparse_models  # noqa: F401  (registers the pruned classes)

    out = tmp_path / "hub"
    assert main(["export", "--run", str(export_run_dir), "--task", "mrpc", "--variant", "pruned", "--output", str(out),
                 "--data-dir", str(glue_fixture_dir), "--latency-docs", "8"]) == 0
    folder = out / "mrpc"
    files = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "README.md", "modeling_sparse_pruned.py", "tokenizer.json"} <= files
    assert json.loads((folder / "config.json").read_text())["auto_map"]
    # names no path of the machine that made it (the base model was loaded from a folder under this one)
    assert str(tmp_path_factory.getbasetemp()) not in (folder / "config.json").read_text()
    record = json.loads((export_run_dir / "mrpc" / "run.json").read_text())
    assert _card_scores(folder) == {"mrpc:accuracy": record["final_metrics"]["accuracy"],
                                    "mrpc:f1": record["final_metrics"]["f1"]}
    assert "× the dense model's speed" in (folder / "README.md").read_text()  # timed here: the run was not
    # the checkpoint variant of a gates adapter: a plain model with the closed rows and columns folded in
    assert main(["export", "--run", str(export_run_dir), "--output", str(tmp_path / "plain"), "--latency-docs", "0"]) == 0
    plain = AutoModelForSequenceClassification.from_pretrained(tmp_path / "plain" / "mrpc").eval()
    pruned = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    assert plain.config.model_type == "bert" and (tmp_path / "plain" / "rte" / "README.md").is_file()
    ids = torch.randint(1, 100, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(plain(input_ids=ids).logits, pruned(input_ids=ids).logits, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("args, message", [
    (["--task", "cola"], "has no finished run for task(s) cola; it holds mrpc, rte"),
    (["--task", "rte", "--variant", "pruned"], "--variant pruned: the run kept no pruned model for rte"),
    (["--variant", "fused"], "--variant 'fused': expected one of checkpoint, pruned"),
])
def test_export_refuses_a_task_or_variant_the_run_lacks_in_one_line(export_run_dir, tmp_path, capsys, args, message):
    assert main(["export", "--run", str(export_run_dir), "--output", str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not (tmp_path / "out").exists()
