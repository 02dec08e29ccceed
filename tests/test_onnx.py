"""ONNX Runtime deployment (issue 79): dense and pruned encoders of every prunable type export to graphs whose
fp32 logits equal torch's; a pruned BERT's graph is the stock block (the fusions a dense one gets, no scatters);
``export --format onnx [--quantize int8]`` folders are scored by ``hf-classifier`` through the same tasks, run
with nothing but onnxruntime, numpy and tokenizers, and a damaged or missing graph is one line naming it."""

from __future__ import annotations

import copy
import json
import os
import subprocess

import peft
import pytest
import torch

from glue_sparse.cli.main import main
from glue_sparse.common.model_card import STANDALONE_ONNX_SNIPPET
from sparse_models import SparseGatesConfig
from sparse_models.deploy import EXPORT_RECORD, ONNX_FILE
from sparse_models.deploy.onnx_classifier import OnnxClassifier
from sparse_models.deploy.onnx_export import FP32_TOLERANCE, export_onnx
from sparse_models.deploy.regular_form import regular_form
from tests.no_weights_env import make_env
from tests.tiny_models import MORE_ARCHITECTURES, set_gate_pattern, tiny_bert, tiny_model, tiny_roberta

pytest.importorskip("onnxruntime")

#: every encoder type the package gates and prunes (``sparse_models.architectures``)
ENCODERS = ["bert", "roberta", *[t for t, (_, m, _) in MORE_ARCHITECTURES.items() if m.endswith("SequenceClassification")]]


def _encoder(model_type: str) -> torch.nn.Module:
    return {"bert": tiny_bert, "roberta": tiny_roberta}.get(model_type, lambda: tiny_model(model_type))()


def _sample(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    config = model.config.inner_config() if hasattr(model.config, "inner_config") else model.config
    ids = torch.randint(5, config.vocab_size, (3, 12), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padding: the graph must honour the mask as the torch model does
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def _pruned(model: torch.nn.Module, narrow_heads: bool) -> torch.nn.Module:
    gated = peft.get_peft_model(copy.deepcopy(model), SparseGatesConfig(task_type="SEQ_CLS"))
    set_gate_pattern(gated, closed=0.4, fractional=0.0)
    return gated.merge_and_unload(layout="remove", align=1, narrow_heads=narrow_heads).eval()


@pytest.mark.parametrize("model_type", ENCODERS)
@pytest.mark.parametrize("variant", ["dense", "pruned"])
def test_onnx_logits_equal_torchs_for_every_prunable_encoder(model_type, variant, tmp_path):
    model = _encoder(model_type)
    if variant == "pruned":
        model = _pruned(model, narrow_heads=False)
    sample = _sample(model)
    record = export_onnx(model, sample, tmp_path)
    with torch.inference_mode():
        expected = model(**{k: v for k, v in sample.items() if k in record.inputs}).logits
    got = OnnxClassifier(tmp_path)(**sample).logits
    assert (got - expected).abs().max() <= FP32_TOLERANCE
    assert record.max_abs_logit_difference <= FP32_TOLERANCE


def test_a_pruned_bert_exports_as_the_stock_block_with_the_dense_fusions(tmp_path):
    """Closed residual rows and columns fold back in as zeros: no ScatterElements, and the optimizer fuses as
    many Attention / SkipLayerNormalization / BiasGelu as in the dense graph. Attention narrowed per head (to
    different query/key and value sizes, padded to one head size, logits unchanged) keeps every fusion but
    Attention, which ONNX Runtime's optimizer fuses only at the model's own head width."""
    dense = tiny_bert()
    records = {}
    for name, model in (("dense", dense), ("pruned", _pruned(dense, narrow_heads=False)),
                        ("heads", _pruned(dense, narrow_heads=True))):
        (tmp_path / name).mkdir()
        records[name] = export_onnx(model, _sample(model), tmp_path / name)
        assert not {"ScatterElements", "ScatterND"} & set(records[name].nodes)
        assert records[name].max_abs_logit_difference <= FP32_TOLERANCE
    dense_fused = records["dense"].fused_operators
    assert dense_fused["SkipLayerNormalization"] == 2 * dense.config.num_hidden_layers
    assert dense_fused["Attention"] == dense.config.num_hidden_layers
    assert records["pruned"].fused_operators == dense_fused
    assert {k: v for k, v in dense_fused.items() if k not in ("Attention", "EmbedLayerNormalization")} == {
        k: v for k, v in records["heads"].fused_operators.items() if k != "LayerNormalization"}
    pruned = regular_form(_pruned(dense, narrow_heads=False))
    assert sum(p.numel() for p in pruned.parameters()) < sum(p.numel() for p in dense.parameters())


@pytest.fixture(scope="module")
def exported(export_run_dir, tmp_path_factory):
    """The MRPC gates run's pruned model exported as fp32 and int8 ONNX folders."""
    root = tmp_path_factory.mktemp("onnx_export")
    for quantize in ("none", "int8"):
        assert main(["export", "--run", str(export_run_dir), "--task", "mrpc", "--variant", "pruned", "--format",
                     "onnx", "--quantize", quantize, "--output", str(root / quantize), "--latency-docs", "0"]) == 0
    return root


def test_export_onnx_folders_are_scored_by_hf_classifier_as_exported(exported, export_run_dir, glue_fixture_dir,
                                                                     tmp_path):
    from huggingface_hub import ModelCard

    fp32, int8 = exported / "none" / "mrpc", exported / "int8" / "mrpc"
    for folder, precision in ((fp32, "fp32"), (int8, "int8")):
        assert {ONNX_FILE, EXPORT_RECORD, "config.json", "tokenizer.json", "README.md"} <= {p.name for p in folder.iterdir()}
        record = json.loads((folder / EXPORT_RECORD).read_text())
        assert record["precision"] == precision and record["runtime"] == "onnxruntime"
        assert record["per_channel"] is (True if precision == "int8" else None)  # the measured default
        card = ModelCard.load(folder / "README.md")
        assert card.data.library_name == "onnx" and "onnx" in card.data.tags and precision in card.data.tags
        assert json.loads((folder / "config.json").read_text())["model_type"] == "bert"  # no remote code
    reports = {}
    for folder in (fp32, int8):
        report = tmp_path / f"{folder.parent.name}.json"
        assert main(["eval", "--model", "hf-classifier", "--model_args", f"pretrained={folder},results_json={report}",
                     "--tasks", "glue_sparse_mrpc", "--device", "cpu", "--output_path", str(tmp_path / "lm"),
                     "--metadata", json.dumps({"data_dir": str(glue_fixture_dir)})]) == 0
        reports[folder.parent.name] = json.loads(report.read_text())["tasks"]["mrpc"]
    assert reports["none"]["runtime"] == "onnxruntime" and reports["none"]["precision"] == "fp32"
    assert reports["int8"]["precision"] == "int8" and reports["int8"]["kind"] == "onnx"
    run = json.loads((export_run_dir / "mrpc" / "run.json").read_text())
    assert reports["none"]["accounting"] == run["pruned"]["accounting"]


def test_an_onnx_folder_runs_with_only_onnxruntime_numpy_and_tokenizers(exported, tmp_path):
    """The card's snippet, in an environment holding onnxruntime, numpy and tokenizers (and what they need)
    but no torch, transformers or glue-sparse, gives the package's logits."""
    folder = exported / "none" / "mrpc"
    pairs = [("The company said profits rose.", "Profits went up, the company said."), ("A short one.", "Another.")]
    env = make_env(tmp_path, None, keep=("onnxruntime", "numpy", "tokenizers", "flatbuffers", "protobuf", "google",
                                        "packaging", "sympy", "mpmath", "coloredlogs", "humanfriendly"))
    script = (STANDALONE_ONNX_SNIPPET.replace("FOLDER", repr(str(folder))).replace("TEXTS", repr(pairs))
              + "import sys, importlib.util\n"
                "assert not any(importlib.util.find_spec(m) for m in ('torch', 'transformers', 'glue_sparse'))\n"
                "print(json.dumps(logits.tolist()))\n")
    result = subprocess.run([str(env / "python"), "-c", script], cwd=tmp_path, capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    assert result.returncode == 0, result.stderr[-2000:]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    batch = tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    expected = OnnxClassifier(folder)(**batch).logits
    assert (torch.tensor(json.loads(result.stdout)) - expected).abs().max() <= 1e-5


def test_predict_writes_a_submission_file_from_an_onnx_folder(exported, glue_fixture_dir, tmp_path, capsys):
    rows = [json.loads(line) for line in (glue_fixture_dir / "mrpc" / "validation.jsonl").read_text().splitlines()]
    (tmp_path / "data" / "mrpc").mkdir(parents=True)
    (tmp_path / "data" / "mrpc" / "test.jsonl").write_text("".join(json.dumps({**r, "label": -1}) + "\n" for r in rows))
    assert main(["predict", "--run", str(exported / "int8"), "--device", "cpu", "--output", str(tmp_path / "out"),
                 "--data-dir", str(tmp_path / "data")]) == 0
    lines = (tmp_path / "out" / "MRPC.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == len(rows) + 1
    provenance = json.loads((tmp_path / "out" / "predict.json").read_text())
    assert "model.onnx sha256" in json.dumps(provenance)  # named by its graph's content, not its path


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_damaged_or_missing_graph_is_one_line_naming_it(exported, tmp_path, capsys, damage, glue_fixture_dir):
    import shutil

    folder = tmp_path / "mrpc"
    shutil.copytree(exported / "none" / "mrpc", folder)
    graph = folder / ONNX_FILE
    if damage == "missing":
        graph.unlink()
    else:
        graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 3])
    code = main(["eval", "--model", "hf-classifier", "--model_args", f"pretrained={folder}", "--tasks",
                 "glue_sparse_mrpc", "--device", "cpu", "--metadata", json.dumps({"data_dir": str(glue_fixture_dir)})])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert code == 2 and len(errors) == 1 and str(graph) in errors[0], errors


def test_without_the_onnx_extra_export_stops_in_one_line_naming_it(export_run_dir, glue_sparse_wheel, tmp_path):
    bin_dir = make_env(tmp_path, glue_sparse_wheel, hide=("onnx",))
    result = subprocess.run([str(bin_dir / "glue-sparse"), "export", "--run", str(export_run_dir), "--task", "mrpc",
                             "--format", "onnx", "--output", str(tmp_path / "out")], cwd=tmp_path, capture_output=True,
                            text=True, env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr[-2000:]
    assert "onnxruntime" in errors[0] and "glue-sparse[onnx]" in errors[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_speed_times_runtime_by_precision_by_removal_in_one_table(export_run_dir, glue_fixture_dir, tmp_path):
    from tests.tiny_models import save_tiny_classifier

    model = save_tiny_classifier(tmp_path / "bert", 2, seed=41)
    assert main(["speed", "--model", str(model), "--runtimes", "torch,onnxruntime", "--target-removal", "0.5",
                 "--run", str(export_run_dir), "--batch-sizes", "4,1", "--batches", "2", "--rounds", "1",
                 "--threads", "1", "--data_dir", str(glue_fixture_dir), "--output", str(tmp_path / "out")]) == 0
    table = json.loads((tmp_path / "out" / "speed.json").read_text())
    assert "instruction sets" in table["header"] and "onnxruntime" in table["header"]
    cells = {(r["model"], r["runtime"], r["precision"], r["batch_size"]) for r in table["rows"]}
    models = {"dense", "random 50%", "mrpc pruned"}
    assert cells == {(m, *rp, bs) for m in models for rp in (("torch", "fp32"), ("onnxruntime", "fp32"),
                                                               ("onnxruntime", "int8")) for bs in (4, 1)}
    dense = [r for r in table["rows"] if r["model"] == "dense"]
    assert all(r["x_dense_same_runtime"] == 1.0 for r in dense)
    # half the gated weights closed; merge_and_unload's default layout removes what pays (and aligns kept widths)
    assert all(0 < r["removed_share_of_gated"] <= 0.5 for r in table["rows"] if r["model"] == "random 50%")
    assert (tmp_path / "out" / "speed.md").read_text().count("| random 50% |") == 6


def test_an_onnx_folders_tokenizer_loads_without_glue_sparse_and_without_remote_code(exported, tmp_path):
    """Its config.json is the original architecture's, so AutoTokenizer (which reads config.json first in
    transformers 5) finds no custom code: no prompt, no warning about a sparse_gated model."""
    bin_dir = make_env(tmp_path, None)
    probe = ("from transformers import AutoTokenizer; import importlib.util as u; "
             f"t = AutoTokenizer.from_pretrained({str(exported / 'int8' / 'mrpc')!r}); "
             "print(type(t).__name__, u.find_spec('glue_sparse') is None)")
    result = subprocess.run([str(bin_dir / "python"), "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, env={k: v for k, v in os.environ.items()
                                                           if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["BertTokenizer", "True"]
    assert "custom code" not in result.stdout + result.stderr and "sparse_gated" not in result.stderr


@pytest.mark.parametrize("args, named", [(["--int8-scales", "per-row"], "--int8-scales"),
                                         (["--quantize", "int4"], "--quantize"),
                                         (["--format", "hub", "--quantize", "int8"], "--format onnx")])
def test_export_refuses_a_bad_onnx_option_in_one_line_before_writing(export_run_dir, tmp_path, capsys, args, named):
    base = ["export", "--run", str(export_run_dir), "--task", "mrpc", "--output", str(tmp_path / "out")]
    assert main([*base, *(["--format", "onnx"] if "--format" not in args else []), *args]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and named in errors[0], errors
    assert not (tmp_path / "out").exists()
