"""The round trip of ``glue-sparse predict`` (issue #50), on real models: validation predictions written
as GLUE-server files, read back by an independent reader that knows only the server's format
(``tests/submission_reader.py``) and scored, against lm-eval's own scores of the same model
(``hf-classifier`` on ``--run``; the results file lm-eval wrote beside ``--samples``), metric by metric,
and the ``glue_average`` metric of the predictions read back against ``predict.json``'s average.

    python benchmarks/predict_round_trip.py --run RUN_DIR --data-dir ../shared/data/glue --out OUT
    python benchmarks/predict_round_trip.py --samples LM_EVAL_OUT --data-dir ../shared/data/glue --out OUT

It prints one row per task and metric with both numbers and whether they are equal to the last digit,
writes ``round_trip.json`` in OUT, and exits 1 if any pair differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the reader is a test helper of this checkout

import evaluate  # noqa: E402

import glue_sparse_tasks  # noqa: E402
from glue_sparse.cli.main import main as glue_sparse  # noqa: E402
from glue_sparse_tasks.atomic import write_json_atomic  # noqa: E402
from glue_sparse_tasks.data import load_glue_rows  # noqa: E402
from tests.submission_reader import SERVER_FORMAT, read_server_file, score_submission  # noqa: E402

LM_EVAL_NAMES = {"accuracy": "acc", "f1": "f1", "mcc": "mcc", "pearson": "pearson", "spearman": "spearman"}


def lm_eval_scores(args: argparse.Namespace, tasks: list[str]) -> dict[str, dict[str, float]]:
    """lm-eval's metrics per glue_sparse task: a fresh hf-classifier run, or the samples' results file."""
    if args.samples:
        results = sorted(Path(args.samples).rglob("results_*.json"))[-1]
        return json.loads(results.read_text())["results"]
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from glue_sparse.lm_eval_model.classifier_lm import HFClassifierLM

    manager = TaskManager(include_path=glue_sparse_tasks.TASKS_DIR, include_defaults=False,
                          metadata={"data_dir": args.data_dir})
    return simple_evaluate(model=HFClassifierLM(pretrained=args.run), tasks=[f"glue_sparse_{t}" for t in tasks],
                           task_manager=manager, bootstrap_iters=0)["results"]


def average_of_files(folder: Path, data_dir: str) -> dict:
    """The glue_average metric over the predictions read back from the files."""
    preds, refs, tasks = [], [], []
    for name, (task, (data_task, split, _), _) in SERVER_FORMAT.items():
        if split and (folder / name).exists():
            gold = {r["idx"]: r["label"] for r in load_glue_rows(data_task, split, data_dir, use_hub=False)[0]}
            for index, value in read_server_file(folder / name):
                preds.append(value), refs.append(gold[index]), tasks.append(task)
    return evaluate.load(glue_sparse_tasks.GLUE_AVERAGE_METRIC).compute(predictions=preds, references=refs,
                                                                        tasks=tasks)


def test_split_check(args: argparse.Namespace, out: Path, files: dict) -> list[dict]:
    """``--split test`` on test-format files (the validation rows without labels, their idx kept): each file's
    index column must be the input's idx order, one row per input row."""
    import json as json_

    fmt = out / "test_format"
    for name, entry in files.items():
        _, (data_task, split, test_split), _ = SERVER_FORMAT[name]
        rows = load_glue_rows(data_task, split, args.data_dir, use_hub=False)[0]
        (fmt / data_task).mkdir(parents=True, exist_ok=True)
        (fmt / data_task / f"{test_split}.jsonl").write_text(
            "".join(json_.dumps({**r, "label": -1}) + "\n" for r in rows))
    submission = out / "test_submission"
    code = glue_sparse(["predict", "--run", args.run, "--data-dir", str(fmt), "--no-hub", "--output",
                        str(submission), "--overwrite"])
    checks = []
    for name in files:
        _, (data_task, _, test_split), _ = SERVER_FORMAT[name]
        inputs = [r["idx"] for r in load_glue_rows(data_task, test_split, str(fmt), use_hub=False)[0]]
        rows = read_server_file(submission / name) if code == 0 else []
        written = [i for i, _ in rows]
        checks.append({"file": name, "input_rows": len(inputs), "written_rows": len(written),
                       "index_in_input_order": written == inputs,
                       "same_predictions_as_validation": rows == read_server_file(out / "submission" / name)})
    return checks


def make_tiny_run(folder: Path) -> None:
    """Two tiny random classifiers (SST-2, RTE): the smallest run, for the suite's smoke test."""
    from tests.tiny_models import save_tiny_classifier

    for seed, task in enumerate(("sst2", "rte")):
        save_tiny_classifier(folder / task, 2, seed=seed, task=task)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="fine-tuning run folder")
    source.add_argument("--samples", help="lm-eval --output_path of glue_sparse tasks run with --log_samples")
    parser.add_argument("--data-dir", required=True, help="labelled GLUE validation data")
    parser.add_argument("--out", required=True, help="folder for submission/ and round_trip.json")
    parser.add_argument("--tiny-run", action="store_true", help="first build a tiny two-task run in --run")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.tiny_run:
        make_tiny_run(Path(args.run))
    submission = out / "submission"
    source_flag = ["--run", args.run] if args.run else ["--samples", args.samples]
    code = glue_sparse(["predict", *source_flag, "--split", "validation", "--data-dir", args.data_dir,
                        "--no-hub", "--output", str(submission), "--overwrite"])
    if code:
        return code
    record = json.loads((submission / "predict.json").read_text())
    read_back = score_submission(submission, args.data_dir)
    tasks = list(read_back) + (["mnli"] if {"mnli_matched", "mnli_mismatched"} <= set(read_back) else [])
    reference = lm_eval_scores(args, tasks)
    rows = []
    for task, metrics in read_back.items():
        for metric, value in metrics.items():
            theirs = reference[f"glue_sparse_{task}"][f"{LM_EVAL_NAMES[metric]},none"]
            rows.append({"task": task, "metric": metric, "lm_eval": theirs, "read_back": value,
                         "equal": value == theirs})
    files_average = average_of_files(submission, args.data_dir)
    ours = record["scores"]["glue_average"] if record["scores"]["glue_average"] is not None else \
        record["scores"]["partial_glue_average"]
    theirs = files_average.get("glue_average", files_average.get("partial_average"))
    rows.append({"task": "GLUE average", "metric": record["scores"]["glue_average_label"], "lm_eval": theirs,
                 "read_back": ours, "equal": ours == theirs, "note": "glue_average metric vs predict.json"})
    print(f"{'task':<16} {'metric':<10} {'lm-eval':>20} {'read back':>20}  equal")
    for row in rows:
        print(f"{row['task']:<16} {row['metric'][:10]:<10} {row['lm_eval']:>20.16f} {row['read_back']:>20.16f}  "
              f"{'yes' if row['equal'] else 'NO'}")
    write_json_atomic(out / "round_trip.json", {"source": "run" if args.run else "samples", "rows": rows,
                                                 "files": record["files"], "provenance": {
                                                     k: record[k] for k in ("run", "samples") if k in record}})
    test_split = test_split_check(args, out, record["files"]) if args.run else []
    for check in test_split:
        print(f"--split test {check['file']:<10} {check['written_rows']:>5} of {check['input_rows']:>5} rows, index "
              f"column in input order: {'yes' if check['index_in_input_order'] else 'NO'}, predictions as on validation: "
              f"{'yes' if check['same_predictions_as_validation'] else 'NO'}")
    report = json.loads((out / "round_trip.json").read_text())
    write_json_atomic(out / "round_trip.json", {**report, "test_split": test_split})
    print(f"{sum(r['equal'] for r in rows)} of {len(rows)} equal to the last digit; written {out / 'round_trip.json'}")
    held = all(c["index_in_input_order"] and c["written_rows"] == c["input_rows"] and c["same_predictions_as_validation"]
               for c in test_split)
    return 0 if all(r["equal"] for r in rows) and held else 1


if __name__ == "__main__":
    sys.exit(main())
