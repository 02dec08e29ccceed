"""``glue-sparse predict``: predictions per GLUE-server file from a fine-tuning run or from lm-eval samples,
scored where the split is labelled, written as a submission with what made it (``predict.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from glue_sparse.common.cache_root import file_sha256
from glue_sparse.common.packaged import model_identity
from glue_sparse.predict.options import PredictInputError, PredictOptions
from glue_sparse.predict.samples import FilePredictions, predictions_from_samples, read_samples, sample_files
from glue_sparse.predict.writer import check_output, write_submission
from glue_sparse_tasks import __version__, scoring
from glue_sparse_tasks.submission import SUBMISSION_FILES, ZIP_NAME


def _lm_eval_results(folder: Path) -> dict[str, Any]:
    """The results file lm-eval wrote beside its samples (the newest); empty when there is none."""
    results = sorted(folder.glob("results_*.json"))
    return json.loads(results[-1].read_text()) if results else {}


def _lm_eval_model(results: dict[str, Any]) -> dict[str, Any]:
    """The model an lm-eval run names in its results file, by name or content hash (never by its path)."""
    if not results:
        return {}
    config = results.get("config", {})
    args = config.get("model_args") or ""
    args = ",".join(f"{k}={v}" for k, v in args.items()) if isinstance(args, dict) else str(args)
    pretrained = next((a.split("=", 1)[1] for a in args.split(",") if a.startswith("pretrained=")), None)
    named = model_identity(pretrained) if pretrained and Path(pretrained).is_dir() else pretrained
    return {"model": config.get("model"), "pretrained": named}


def predict_samples(options: PredictOptions) -> tuple[dict[str, FilePredictions], dict[str, Any]]:
    """Per file the predictions of lm-eval sample files, and which files and model they came from."""
    files: dict[str, FilePredictions] = {}
    used = {}
    for task, path in sample_files(options.samples).items():
        samples = read_samples(path)
        results = _lm_eval_results(path.parent)
        docs, original = len({s["doc_id"] for s in samples}), results.get("n-samples", {}).get(task, {}).get("original")
        if original is not None and docs < original and options.split == "test":
            raise PredictInputError(f"{path}: {docs} of {task}'s {original} docs (an lm-eval --limit run?); the GLUE "
                                    "server scores every test row: run lm-eval again without --limit")
        files.update(predictions_from_samples(task, samples, str(path), options.split))
        used[path.name] = {"task": task, "sha256": file_sha256(path), "docs": docs, "of": original,
                           **_lm_eval_model(results)}
    return files, {"samples": used}


def scores(files: dict[str, FilePredictions]) -> dict[str, Any]:
    """A labelled split's metrics per task and its GLUE average, through ``glue_sparse_tasks.scoring``."""
    preds, refs, tasks = [], [], []
    for key, entry in files.items():
        if key != "ax":
            preds += entry.predictions
            refs += entry.references
            tasks += [key] * len(entry.predictions)
    flat = scoring.flat_metrics(preds, refs, tasks)
    average = scoring.glue_average(flat)
    return {"metrics": flat, "glue_average": average.value, "glue_average_label": average.label(),
            "partial_glue_average": average.partial_value}


def predict(options: PredictOptions) -> dict[str, Any]:
    """Make the submission; return its ``predict.json`` record."""
    options.validate()
    output = Path(options.output)
    check_output(output, options.overwrite)
    if options.samples:
        files, provenance = predict_samples(options)
    else:
        from glue_sparse.predict.classifier import predict_run  # torch and lm-eval: only for --run

        files, provenance = predict_run(options)
    expected = [f for f in SUBMISSION_FILES if options.split == "test" or f.glue_task != "ax"]
    missing = [f.name for f in expected if f.glue_task not in files]
    record: dict[str, Any] = {
        "split": options.split,
        "glue_sparse": __version__,
        "files": {f.name: {"glue_task": f.glue_task, "rows": len(files[f.glue_task].indices),
                           "data_sha256": files[f.glue_task].data_sha256()}
                  for f in SUBMISSION_FILES if f.glue_task in files},
        "missing": missing,
        "complete": not missing and options.split == "test",
        **provenance,
    }
    if options.split == "validation":
        record["scores"] = scores(files)
    record["note"] = _note(options.split, missing)
    write_submission(output, files, record)
    _print_summary(output, record)
    return record


def _note(split: str, missing: list[str]) -> str:
    if split == "validation":
        return ("validation predictions, for checking the pipeline (the round trip); the GLUE server takes the "
                "test split (--split test)")
    if missing:
        return (f"incomplete: the GLUE server needs all {len(SUBMISSION_FILES)} files; missing {', '.join(missing)} "
                f"(this {ZIP_NAME} holds the tasks present)")
    return f"complete: upload {ZIP_NAME} at gluebenchmark.com (docs/submission.md)"


def _print_summary(output: Path, record: dict[str, Any]) -> None:
    metrics = record.get("scores", {}).get("metrics", {})
    print(f"{'file':<12} {'rows':>6}  {'score' if metrics else ''}")
    for name, entry in record["files"].items():
        task = entry["glue_task"]
        score = metrics.get(f"{task}_{scoring.primary_metric(task)}") if metrics and task != "ax" else None
        print(f"{name:<12} {entry['rows']:>6}  {'' if score is None else f'{score:.4f}'}")
    if record["missing"]:
        print(f"missing: {', '.join(record['missing'])}")
    if "scores" in record:
        average = record["scores"]
        value = average["glue_average"] if average["glue_average"] is not None else average["partial_glue_average"]
        if value is not None:
            print(f"{average['glue_average_label']}: {value:.4f}")
    print(f"\n{record['note']}\nwritten: {output / ZIP_NAME}, {output / 'predict.json'}")
