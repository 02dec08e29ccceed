"""``glue-sparse perplexity``: one causal LM (with its adapter, pruned if asked) scored under the chosen
protocols (``glue_sparse.perplexity.protocols``) on a corpus range."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from peft import PeftModel

from glue_sparse.common.causal_lm import corpus_texts, doc_range, load_causal_lm
from glue_sparse.common.option_fields import result_file
from glue_sparse.perplexity.options import PerplexityOptions
from glue_sparse.perplexity.protocols import score_protocols
from glue_sparse_tasks.atomic import check_writable, write_json_atomic
from sparse_models.checkpoints import check_complete
from sparse_models.runtime.devices import resolve_device, resolve_precision


def run_perplexity(options: PerplexityOptions) -> dict[str, dict[str, Any]]:
    """Score one model (with its adapter, pruned if asked) under the chosen protocols; write JSON if asked."""
    options.protocol_list()
    device = resolve_device(options.device)
    resolve_precision(options.precision, device)  # a precision this device cannot run: refused before the load
    texts, prov = corpus_texts(options)
    target = result_file(options.output, "perplexity.json") if options.output else None
    if target:
        check_writable(Path(target).parent, "--output")
    if options.adapter:
        check_complete(options.adapter)  # before the model loads
    model, tokenizer, name = load_causal_lm(options.model, str(device))
    if options.adapter:
        model = PeftModel.from_pretrained(model, options.adapter).eval()
        name = f"{name} + adapter {Path(options.adapter).name}"
        if options.prune:
            model = model.merge_and_unload()
            name += " (pruned)"
    results = score_protocols(model, tokenizer, texts[doc_range(options.eval_docs)], prov, options, name)
    if target:
        write_json_atomic(target, results)
    return results
