"""Knowledge distillation from a fine-tuned teacher (issue #51, first part): the loss, the teacher's logits
cached by content, a real fine-tune with ``--distill``, and the teachers that are refused in one line."""

from __future__ import annotations

import json

import pytest
import torch

from glue_sparse.cli.main import main
from glue_sparse.finetune.options import FinetuneConfig, FinetuneConfigError, full_source_config
from glue_sparse.finetune.run import run_finetune
from glue_sparse.finetune.run_dir import FULL_SOURCE_TEACHER, identity
from sparse_models.trainer import distillation_loss
from tests.tiny_models import save_tiny_classifier


def test_distillation_loss_is_scaled_kl_and_mse_for_a_regression_head():
    student, teacher = torch.tensor([[1.0, -1.0], [0.5, 0.0]]), torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    temperature = 2.0
    p = torch.softmax(teacher / temperature, -1)
    expected = (p * (p.log() - torch.log_softmax(student / temperature, -1))).sum(-1).mean() * temperature ** 2
    assert distillation_loss(student, teacher, temperature).item() == pytest.approx(expected.item(), rel=1e-6)
    assert distillation_loss(teacher, teacher, temperature).item() == pytest.approx(0.0, abs=1e-7)
    assert distillation_loss(torch.tensor([[1.0], [3.0]]), torch.tensor([[2.0], [3.0]]), 5.0).item() == 0.5


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("distill")
    return {"base": str(save_tiny_classifier(root / "base", 2, seed=11)),
            "teacher": str(save_tiny_classifier(root / "teacher", 2, seed=3, task="rte")),
            "three": str(save_tiny_classifier(root / "three", 3, seed=4, task="mnli"))}


def _weights(folder) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return {k: v for path in sorted(folder.glob("*.safetensors")) for k, v in load_file(str(path)).items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _config(models, **kw) -> FinetuneConfig:
    defaults = dict(task="rte", method="gates", regime="limited", seed=1, base_model=models["base"], train_limit=16,
                    epochs=1, batch_size=8, eval_batch_size=16, max_length=32, logging_steps=1)
    return FinetuneConfig(**{**defaults, **kw})


def test_a_distilled_run_trains_caches_the_teacher_and_records_it(models, glue_fixture_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("GLUE_SPARSE_CACHE", str(tmp_path / "cache"))
    config = _config(models, distill=True, teacher=models["teacher"])
    record = run_finetune(config, tmp_path / "a", data_dir=str(glue_fixture_dir), use_hub=False)
    assert record["status"] == "complete"
    cached = list((tmp_path / "cache" / "teacher_logits").glob("*/logits.json"))
    assert len(cached) == 1 and len(json.loads(cached[0].read_text())) == 16  # one row of logits per example
    ident = identity(config)
    assert ident["distill_alpha"] == 0.5 and ident["distill_temperature"] == 2.0
    assert ident["teacher"].startswith("teacher (model.safetensors sha256 ")  # by content, not by path
    # the teacher changes what is learned: the same run without it ends elsewhere
    run_finetune(_config(models), tmp_path / "b", data_dir=str(glue_fixture_dir), use_hub=False)
    assert not _same(_weights(tmp_path / "a" / "rte"), _weights(tmp_path / "b" / "rte"))
    # a second distilled run reads the cached logits (same teacher, same token ids) and trains the same
    run_finetune(config, tmp_path / "c", data_dir=str(glue_fixture_dir), use_hub=False)
    assert _same(_weights(tmp_path / "a" / "rte"), _weights(tmp_path / "c" / "rte"))


def test_without_a_teacher_the_full_fine_tune_is_trained_first_and_teaches(models, glue_fixture_dir, tmp_path,
                                                                          monkeypatch):
    """`--distill` alone: the teacher is the full fine-tune with the run's data, budget and seed (the run a
    magnitude run would prune), trained first under <output>/magnitude-source/ and reused after."""
    monkeypatch.setenv("GLUE_SPARSE_CACHE", str(tmp_path / "cache"))
    config = _config(models, distill=True, learning_rate=0.01, gate_learning_rate=0.5)
    record = run_finetune(config, tmp_path / "out", data_dir=str(glue_fixture_dir), use_hub=False)
    teacher = json.loads((tmp_path / "out" / "magnitude-source" / "rte" / "run.json").read_text())
    assert record["status"] == teacher["status"] == "complete" and teacher["method"] == "full"
    assert teacher["hyperparameters"]["learning_rate"] == full_source_config(config).resolved()["learning_rate"]
    assert teacher["hyperparameters"]["learning_rate"] != 0.01  # the student's own lr is not the teacher's
    assert identity(config)["teacher"] == FULL_SOURCE_TEACHER
    assert len(list((tmp_path / "cache" / "teacher_logits").glob("*/logits.json"))) == 1


def test_a_bench_arm_with_distill_learns_from_the_full_arm_of_its_cell(models, tmp_path):
    from glue_sparse.bench.options import BenchConfig

    bench = BenchConfig.from_dict({"tasks": ["rte"], "seeds": [1], "regimes": ["limited"], "base_model": models["base"],
                                   "finetune": {"train_limit": 16, "epochs": 1},
                                   "methods": ["full", {"method": "gates", "label": "gates-kd", "distill": True,
                                                        "target_removal": 0.3}]}, "test")
    cells = list(bench.runs())
    assert [c["label"] for c in cells] == ["full", "gates-kd"]  # the student after its teacher
    assert cells[1]["full_label"] == "full" and cells[0]["full_label"] is None


def test_runs_without_distillation_keep_their_identity(models):
    """Finished runs (and bench rows) made before --distill existed stay the same runs."""
    ident = identity(_config(models))
    assert not {"distill", "teacher", "distill_alpha", "distill_temperature"} & set(ident)
    source = full_source_config(_config(models, method="magnitude", distill=True, teacher=models["teacher"]))
    assert not source.distill and source.teacher is None  # the teacher teaches the re-fine-tuning only


def test_bad_teachers_are_refused_in_one_line(models, glue_fixture_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GLUE_SPARSE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(FinetuneConfigError, match="no such checkpoint folder"):
        _config(models, distill=True, teacher=str(tmp_path / "missing"))
    with pytest.raises(FinetuneConfigError, match="--teacher apply with --distill"):
        _config(models, teacher=models["teacher"])
    with pytest.raises(FinetuneConfigError, match=r"--distill-alpha must be in \(0, 1\]"):
        _config(models, distill=True, teacher=models["teacher"], distill_alpha=1.5)

    def refused(teacher: str) -> str:
        code = main(["finetune", "--tasks", "rte", "--model", models["base"], "--method", "full", "--max_steps", "1",
                     "--distill", "--teacher", teacher, "--output", str(tmp_path / "out"), "--data-dir",
                     str(glue_fixture_dir), "--no-hub"])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == 2, err
        return err

    assert "3 label(s), but rte needs 2" in refused(models["three"])
    other_vocab = tmp_path / "other_vocab"
    save_tiny_classifier(other_vocab, 2, seed=5, task="rte")
    tokenizer = json.loads((other_vocab / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    vocab["[unused-renamed]"] = vocab.pop("[unused0]")  # one token of another name: another vocabulary
    (other_vocab / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert "vocabulary differs from the student's" in refused(str(other_vocab))


def test_hidden_distillation_loss_is_the_mean_layer_mse_on_real_tokens():
    from sparse_models.trainer import hidden_distillation_loss

    teacher = [torch.zeros(2, 3, 4) for _ in range(3)]  # embeddings, then two layers
    student = [torch.full((2, 3, 4), 9.0), torch.ones(2, 3, 4), torch.zeros(2, 3, 4)]
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    student[2][0, 2] = 100.0  # a padded token: not counted
    assert hidden_distillation_loss(student, teacher, mask).item() == pytest.approx(0.5)  # (1 + 0) / 2 layers
    assert hidden_distillation_loss(teacher, teacher, None).item() == 0.0
    with pytest.raises(ValueError, match="the student has 2 layers, the teacher 1"):
        hidden_distillation_loss(student, teacher[:2], mask)


def test_layer_wise_distillation_trains_on_the_teachers_hidden_states(models, glue_fixture_dir, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("GLUE_SPARSE_CACHE", str(tmp_path / "cache"))
    config = _config(models, method="gates+full", distill=True, teacher=models["teacher"], distill_hidden=1.0)
    record = run_finetune(config, tmp_path / "hidden", data_dir=str(glue_fixture_dir), use_hub=False)
    assert record["status"] == "complete" and record["hyperparameters"]["distill_hidden"] == 1.0
    # the layer-wise term changes what is learned: the same run on the logits alone ends elsewhere
    plain = _config(models, method="gates+full", distill=True, teacher=models["teacher"])
    run_finetune(plain, tmp_path / "logits", data_dir=str(glue_fixture_dir), use_hub=False)
    assert not _same(_weights(tmp_path / "hidden" / "rte"), _weights(tmp_path / "logits" / "rte"))
    assert "distill_hidden" not in identity(plain)  # logit-only distilled runs keep their identity


def test_layer_wise_distillation_refuses_a_teacher_of_another_depth(models, glue_fixture_dir, tmp_path):
    deeper = save_tiny_classifier(tmp_path / "deeper", 2, seed=5, task="rte", layers=3)
    config = _config(models, distill=True, teacher=str(deeper), distill_hidden=0.5)
    with pytest.raises(FinetuneConfigError, match="has 3 layers of width 32, the student 2 of width 32"):
        run_finetune(config, tmp_path / "out", data_dir=str(glue_fixture_dir), use_hub=False)
    assert not (tmp_path / "out" / "rte").exists()
    with pytest.raises(FinetuneConfigError, match="--distill-hidden apply with --distill"):
        _config(models, distill_hidden=1.0)
    with pytest.raises(FinetuneConfigError, match="--distill-hidden must be 0 or more"):
        _config(models, distill=True, teacher=models["teacher"], distill_hidden=-1.0)
