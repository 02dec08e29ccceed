"""GLUE average: per-task GLUE metrics and the GLUE average, under a named convention.

A thin `evaluate` wrapper: all scoring lives in ``glue_sparse_tasks.scoring`` (absolute import, since
`evaluate` copies this script into its modules cache before importing it).
"""

import datasets
import evaluate

from glue_sparse_tasks.scoring import SCORED_TASKS, flat_metrics, get_convention, glue_average

_CITATION = """\
@inproceedings{wang2019glue,
  title={{GLUE}: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding},
  author={Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer and Bowman, Samuel R.},
  booktitle={International Conference on Learning Representations},
  year={2019}
}
@inproceedings{hu2022lora,
  title={{LoRA}: Low-Rank Adaptation of Large Language Models},
  author={Hu, Edward J. and Shen, Yelong and Wallis, Phillip and Allen-Zhu, Zeyuan and Li, Yuanzhi and Wang, Shean and Wang, Lu and Chen, Weizhu},
  booktitle={International Conference on Learning Representations},
  year={2022}
}
"""

_DESCRIPTION = """\
Per-task GLUE validation metrics (CoLA MCC, STS-B Pearson/Spearman, accuracy, MRPC/QQP F1, MNLI
matched / mismatched / pooled) and the GLUE average under a named convention: `default` (LoRA paper:
8 tasks, MNLI pooled), `leaderboard` or `bert_paper`. With a task missing it reports
`missing_tasks` and a `partial_average` instead of `glue_average`.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: class ids (float scores for STS-B).
    references: gold label ids (float scores for STS-B).
    tasks: the task of each row, one of cola sst2 mrpc qqp stsb mnli_matched mnli_mismatched qnli
        rte wnli. Not needed when the metric is loaded for one task (`evaluate.load(path, "cola")`).
    convention: `default`, `leaderboard` or `bert_paper`.
Returns:
    One flat dict: `<task>_<metric>` for every task present (e.g. `cola_mcc`, `mnli_accuracy`),
    `glue_convention`, and `glue_average` when every task of the convention is present, else
    `partial_average` and `missing_tasks`.
Examples:
    >>> import evaluate, glue_sparse_tasks
    >>> metric = evaluate.load(glue_sparse_tasks.GLUE_AVERAGE_METRIC, "rte")
    >>> metric.compute(predictions=[0, 1, 1], references=[0, 1, 0])["rte_accuracy"]
    0.6666666666666666
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class GlueAverage(evaluate.Metric):
    def _info(self):
        if self.config_name not in ("default", *SCORED_TASKS):
            raise KeyError(
                f"unknown configuration {self.config_name!r}: use no name (rows carry `tasks`) or "
                f"one of {', '.join(SCORED_TASKS)}"
            )
        features = {
            "predictions": datasets.Value("float64"),
            "references": datasets.Value("float64"),
        }
        if self.config_name == "default":
            features["tasks"] = datasets.Value("string")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(features),
            reference_urls=["https://gluebenchmark.com/", "https://arxiv.org/abs/2106.09685"],
        )

    def _compute(self, predictions, references, tasks=None, convention="default"):
        if tasks is None:
            tasks = [self.config_name] * len(predictions)
        flat = flat_metrics(predictions, references, tasks)
        avg = glue_average(flat, get_convention(convention).name)
        out = dict(flat)
        out["glue_convention"] = avg.convention
        if avg.is_complete:
            out["glue_average"] = avg.value
        else:
            out["missing_tasks"] = avg.missing_tasks
            out["partial_average"] = avg.partial_value
        return out
