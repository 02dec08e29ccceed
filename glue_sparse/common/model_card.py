"""The model card (``README.md``) of every checkpoint a run keeps and of every pruned model: Hub metadata
(``base_model``, ``library_name``, ``pipeline_tag``, ``tags``, ``datasets``, ``license`` when the base model
names one, and ``model-index`` with the run's own GLUE scores on the validation split), then the method, what
was removed, the parameter counts, the measured speed-up with its machine and batch, the exact command and
how to load it. Written with ``huggingface_hub``'s own card classes, so its readers (``ModelCard.load``,
``metadata_load``, ``model_index_to_eval_results``) give back the same numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from glue_sparse_tasks.atomic import write_json_atomic, write_text_atomic
from glue_sparse_tasks.glue_tasks import evaluation_split
from glue_sparse_tasks.local_formats import TSV_FOLDERS
from glue_sparse_tasks.scoring import primary_metric

CARD_FILE = "README.md"
#: where a run's own scores come from: (the model-index source name, its URL, what the card says)
TRAINER_SOURCE = ("glue-sparse fine-tuning evaluation", "https://pypi.org/project/glue-sparse/",
                  "the fine-tuning run's final evaluation (glue_sparse_tasks.scoring on the Trainer's predictions)")
LM_EVAL_SOURCE = ("lm-evaluation-harness (glue-sparse hf-classifier)", "https://github.com/EleutherAI/lm-evaluation-harness",
                  "lm-evaluation-harness through glue-sparse's hf-classifier model (the glue_sparse_* tasks)")
Source = tuple[str, str, str]
LATENCY_FILE = "latency.json"
#: a run folder's own scores and where they come from, beside its card (what ``glue-sparse export`` reuses)
SCORES_FILE = "scores.json"
#: the Hub id of each packaged default (a local folder has none to name)
PACKAGED_HUB_IDS = {"all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2",
                    "SmolLM2-135M": "HuggingFaceTB/SmolLM2-135M-Instruct"}
#: our flat metric names -> (the Hub's metric type, its display name)
METRIC_TYPES = {"accuracy": ("accuracy", "Accuracy"), "f1": ("f1", "F1"), "mcc": ("matthews_correlation", "MCC"),
                "pearson": ("pearsonr", "Pearson"), "spearman": ("spearmanr", "Spearman"),
                "matched_accuracy": ("accuracy", "Matched accuracy"),
                "mismatched_accuracy": ("accuracy", "Mismatched accuracy")}
METHOD_WORDS = {
    "full": "full fine-tuning (every weight)",
    "lora": "LoRA",
    "gates": "sparse gates (FineGates-style row/column gates) over a frozen backbone",
    "gates+lora": "sparse gates with LoRA inside every gated layer",
    "gates+full": "sparse gates while every weight fine-tunes",
    "magnitude": "structured magnitude pruning of a full fine-tune, then re-fine-tuning with the masks held",
    "mask-search": "post-training mask search (Kwon et al. 2022) on a full fine-tune, no gradient step",
}


def base_model_id(identity: str) -> str | None:
    """The Hub id a run's base model identity names: a packaged default's, a Hub id's (``id@revision``), else
    None (a local folder)."""
    name = identity.split(" (", 1)[0]
    if name in PACKAGED_HUB_IDS:
        return PACKAGED_HUB_IDS[name]
    return name.split("@", 1)[0] if "@" in name and "/" in name else None


def base_license(folder: str | Path | None) -> str | None:
    """The license the base model's own card names, if its folder has one."""
    card = Path(folder) / CARD_FILE if folder else None
    if card is None or not card.is_file():
        return None
    from huggingface_hub import metadata_load

    return (metadata_load(card) or {}).get("license")


def eval_results(task: str, metrics: dict[str, float], source: Source, model_name: str) -> list[Any]:
    """One ``EvalResult`` per metric of ``task`` (flat names as the scoring module gives them, or ``task_``-
    prefixed), on the task's evaluation split of ``nyu-mll/glue``."""
    from huggingface_hub import EvalResult

    out = []
    for key, value in metrics.items():
        name = key.removeprefix(f"{task}_")
        if name not in METRIC_TYPES or not isinstance(value, (int, float)):
            continue
        metric_type, metric_name = METRIC_TYPES[name]
        out.append(EvalResult(task_type="text-classification", task_name="Text Classification",
                              dataset_type="nyu-mll/glue", dataset_name=f"GLUE {TSV_FOLDERS[task]}",
                              dataset_config=task, dataset_split=evaluation_split(task), metric_type=metric_type,
                              metric_name=metric_name, metric_value=float(value), source_name=source[0],
                              source_url=source[1]))
    return out


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


#: How an exported ONNX folder runs with nothing but onnxruntime, numpy and tokenizers; ``FOLDER`` and ``TEXTS``
#: are placeholders (the card fills in the folder; ``TEXTS``: strings, or (first, second) pairs). The test of
#: issue 79 runs exactly this in an environment without torch, transformers or glue-sparse.
STANDALONE_ONNX_SNIPPET = """import json
import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

folder = FOLDER
tokenizer = Tokenizer.from_file(f"{folder}/tokenizer.json")
tokenizer.enable_padding(pad_id=json.load(open(f"{folder}/config.json")).get("pad_token_id") or 0)
tokenizer.enable_truncation(max_length=512)
session = ort.InferenceSession(f"{folder}/model.onnx", providers=["CPUExecutionProvider"])
encodings = tokenizer.encode_batch(TEXTS)
columns = {"input_ids": [e.ids for e in encodings], "attention_mask": [e.attention_mask for e in encodings],
           "token_type_ids": [e.type_ids for e in encodings]}
feed = {i.name: np.array(columns[i.name], dtype=np.int64) for i in session.get_inputs()}
logits = session.run(None, feed)[0]
"""


def card_text(record: dict[str, Any], metrics: dict[str, float], source: Source, latency: dict[str, Any] | None,
              pruned: bool, base_folder: str | None = None, onnx: dict[str, Any] | None = None) -> str:
    """The whole card of one task's checkpoint (``pruned``: its pruned model; ``onnx``: exported as an ONNX
    graph, its export record) from its run record."""
    from huggingface_hub import ModelCard, ModelCardData

    task, method = record["task"], record["method"]
    accounting = (record.get("pruned") or {}).get("accounting") if pruned else None
    accounting = accounting or record["accounting"]
    name = (f"{record.get('base_model', 'model').split(' (')[0]}-{method}-{task}" + ("-pruned" if pruned else "")
            + (f"-onnx-{onnx['precision']}" if onnx else ""))
    base = base_model_id(record.get("base_model", ""))
    data = ModelCardData(
        base_model=base, library_name="onnx" if onnx else "transformers", pipeline_tag="text-classification",
        tags=["glue-sparse", "glue", method, *(["structured-pruning", "pruned"] if pruned or accounting.get(
            "removed_weights") else []), *(["custom_code"] if pruned and not onnx else []),
              *(["onnx", onnx["precision"]] if onnx else [])],
        datasets=["nyu-mll/glue"], license=base_license(base_folder), model_name=name,
        eval_results=eval_results(task, metrics, source, name) or None)
    hp = record.get("hyperparameters", {})
    removal = hp.get("target_removal")
    lines = [f"# {name}", "",
             f"{METHOD_WORDS.get(method, method)} of `{record.get('base_model', '?')}` on GLUE {TSV_FOLDERS[task]} "
             f"({record.get('regime', '?')} regime, seed {record.get('seed', '?')}), made with "
             "[glue-sparse](https://pypi.org/project/glue-sparse/)."
             + (f" The removal recipe asked for {_share(removal)} of gated weights." if removal else ""), "",
             "## Results", "",
             f"GLUE {TSV_FOLDERS[task]}, {evaluation_split(task)} split, scored by {source[2]}:", "",
             "| metric | value |", "|---|---:|",
             *[f"| {k.removeprefix(task + '_')} | {v:.4f} |" for k, v in metrics.items() if isinstance(v, (int, float))
               and k.removeprefix(task + "_") in METRIC_TYPES], "",
             "## Size", "",
             "| | |", "|---|---:|",
             f"| parameters before pruning | {accounting['dense_parameters']:,} |",
             f"| parameters {'in this model' if pruned else 'left after pruning'} | "
             f"{accounting['remaining_parameters']:,} |",
             *_removal_rows(accounting, pruned),
             "", "## Speed", "", _latency_line(latency) + (
                 " That is the torch model in eager mode; this graph's speed in ONNX Runtime: `glue-sparse speed "
                 "--runtimes torch,onnxruntime`." if onnx else ""), "",
             "## How it was made", "", "```bash", record.get("command") or "(command not recorded)", "```", "",
             f"Primary metric: {primary_metric(task)}. Hyperparameters and data "
             "fingerprints are in the run's `run.json`.", "",
             "## How to load it", "", _how_to_load_onnx(onnx) if onnx else _how_to_load(pruned), ""]
    return ModelCard.from_template(data, template_str="---\n{{ card_data }}\n---\n\n" + "\n".join(lines)).content


def _removal_rows(accounting: dict[str, Any], pruned: bool) -> list[str]:
    """Closed (removable) and physically removed shares of the gated weights and of all parameters."""
    gated, dense = max(1, accounting.get("gated_weights", 1)), max(1, accounting["dense_parameters"])
    closed = accounting.get("closed_gated_weights", -1)
    closed = accounting.get("removed_gated_weights", 0) if closed is None or closed < 0 else closed
    rows = [f"| gated weights closed (removable) | {_share(closed / gated)} |"]
    if pruned:
        rows.append(f"| gated weights physically removed in this model | "
                    f"{_share(accounting.get('removed_gated_weights', 0) / gated)} |")
    rows.append(f"| all parameters {'removed in this model' if pruned else 'removable'} | "
                f"{_share(accounting.get('removed_parameters', 0) / dense)} |")
    return rows


def _latency_line(latency: dict[str, Any] | None) -> str:
    if not latency or "latency_ratio" not in latency:
        return ("Not measured for this checkpoint (`glue-sparse export` measures it where the run did not, and "
                "`glue-sparse speed` compares layouts).")
    machine = latency.get("machine") or f"{latency.get('threads', '?')} CPU threads"
    return (f"{latency['latency_ratio']:.2f}× the dense model's speed ({latency.get('dense_ms_per_batch', 0):.1f} ms → "
            f"{latency.get('pruned_ms_per_batch', 0):.1f} ms per batch of {latency.get('batch_size', '?')} "
            f"validation documents, {latency.get('docs', '?')} documents), measured on {machine} in fp32.")


def _how_to_load_onnx(onnx: dict[str, Any]) -> str:
    fused = ", ".join(f"{v} {k}" for k, v in onnx.get("fused_operators", {}).items()) or "none"
    precision = ("int8 weights (ONNX Runtime dynamic quantisation, "
                 + ("per output channel" if onnx.get("per_channel") else "one scale per matrix") + ")"
                 if onnx["precision"] == "int8" else "fp32")
    difference = onnx.get("max_abs_logit_difference")
    return (f"`model.onnx` is an ONNX Runtime graph (opset {onnx['opset']}, {precision}; optimizer: "
            f"{onnx['optimizer']}; fused: {fused}); its logits differ from the torch model's by at most "
            f"{difference:.1e} on a check batch (`onnx_export.json`). It needs only onnxruntime, numpy and "
            "tokenizers:\n\n```python\n"
            + STANDALONE_ONNX_SNIPPET.replace("folder = FOLDER", 'folder = "PATH"').replace(
                "encode_batch(TEXTS)", 'encode_batch(["a sentence"])  # or [("first", "second")] pairs')
            + "```\n\nWith glue-sparse, `lm_eval --model hf-classifier --model_args pretrained=PATH` scores it on "
            "the `glue_sparse_*` tasks and `glue-sparse predict` writes a GLUE submission from it.")


def _how_to_load(pruned: bool) -> str:
    auto = "AutoModelForSequenceClassification"
    if not pruned:
        return f"```python\nfrom transformers import {auto}\nmodel = {auto}.from_pretrained(\"PATH_OR_HUB_ID\")\n```"
    return ("The pruned architecture's code ships beside the weights (`auto_map` in `config.json`), so it loads "
            "without glue-sparse:\n\n"
            f"```python\nfrom transformers import {auto}\nmodel = {auto}.from_pretrained(\"PATH_OR_HUB_ID\", "
            "trust_remote_code=True)\n```\n\nWith `pip install glue-sparse`, `import sparse_models` registers the "
            "classes and `trust_remote_code` is not needed.")


def write_model_card(folder: str | Path, record: dict[str, Any], metrics: dict[str, float], source: Source,
                     latency: dict[str, Any] | None = None, pruned: bool = False,
                     base_folder: str | None = None, onnx: dict[str, Any] | None = None) -> Path:
    """Write ``folder/README.md`` (atomically); its path."""
    return write_text_atomic(Path(folder) / CARD_FILE, card_text(record, metrics, source, latency, pruned,
                                                                 base_folder, onnx))


def write_run_cards(task_dir: str | Path, record: dict[str, Any], metrics: dict[str, float], source: Source,
                    latency: dict[str, Any] | None = None, base_folder: str | None = None) -> list[Path]:
    """The cards of one task's run folder: its checkpoint's and, where the run kept one, its pruned model's; and
    the scores they show, in ``scores.json``."""
    task_dir = Path(task_dir)
    write_json_atomic(task_dir / SCORES_FILE, {"source": list(source), "metrics": metrics})
    base_folder = base_folder if base_folder and Path(base_folder).is_dir() else None
    cards = [write_model_card(task_dir, record, metrics, source, latency, pruned=False, base_folder=base_folder)]
    if record.get("pruned") and (task_dir / record["pruned"]["path"]).is_dir():
        cards.append(write_model_card(task_dir / record["pruned"]["path"], record, metrics, source, latency,
                                      pruned=True, base_folder=base_folder))
    return cards


def run_scores(task_dir: str | Path, record: dict[str, Any]) -> tuple[dict[str, float], Source]:
    """(the scores of a task's run folder, their source): lm-eval's where the bench evaluated it (``scores.json``),
    else the run's final evaluation."""
    import json

    path = Path(task_dir) / SCORES_FILE
    if path.is_file():
        saved = json.loads(path.read_text())
        return saved["metrics"], tuple(saved["source"])
    return record["final_metrics"], TRAINER_SOURCE
