"""A/B (issue 79): FFN input columns folded back as zeros vs kept removed behind one Gather, ONNX Runtime fp32/int8.
Run from the repository root at the commit that added it: python benchmarks/results/onnx_speed/gather_ab.py"""
import copy, statistics, tempfile, torch, peft
from pathlib import Path
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from glue_sparse.common.packaged import minilm_path
from glue_sparse.speed.run import timing_texts, tokenized_batches
from sparse_models import SparseGatesConfig
from sparse_models.removal import close_lowest, magnitude_scores
from sparse_models.deploy.onnx_export import export_onnx
from sparse_models.deploy.onnx_classifier import OnnxClassifier
from sparse_models.runtime.timing import interleaved_rounds
torch.set_num_threads(2); torch.manual_seed(0)
path = minilm_path(); tok = AutoTokenizer.from_pretrained(path)
dense = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).eval()
def pruned(r):
    g = peft.get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS", target_removal=r, bias_delta=False))
    close_lowest(g, r, scores=magnitude_scores(g), snap_open=True)
    return g.merge_and_unload().eval()
texts, _ = timing_texts("../shared/data/glue", 256)
batches = tokenized_batches(tok, texts, 32, 8)
sample = {k: v[:4] for k, v in batches[0].items()}
subjects = {}
with tempfile.TemporaryDirectory() as d:
    for name, m in [("dense", dense), ("m50", pruned(0.5)), ("m70", pruned(0.7))]:
        for gather in ((False, True) if name != "dense" else (False,)):
            for q in ("none", "int8"):
                f = Path(d) / f"{name}-{gather}-{q}"; f.mkdir()
                rec = export_onnx(m, sample, f, quantize=q, gather_ffn_input=gather)
                subjects[(name, gather, q)] = OnnxClassifier(f, threads=2)
                print(name, gather, q, rec.fused_operators, rec.max_abs_logit_difference)
    keys = list(subjects)
    def step(s, b):
        return lambda: s(**b)
    samples = interleaved_rounds([[step(subjects[k], b) for b in batches] for k in keys], 9)
    ms = {k: 1000 * statistics.median(s) / len(batches) for k, s in zip(keys, samples)}
    for k, v in ms.items():
        print(k, f"{v:.1f} ms", f"x dense same precision {ms[('dense', False, k[2])] / v:.2f}")
