"""Code-execution trace metrics (CodeExecutor, Table 3) as a local `evaluate` metric.

    import evaluate
    metric = evaluate.load("eval/metrics/code_execution")          # works with HF_HUB_OFFLINE=1
    metric.compute(predictions=[generated trace text, ...], references=[reference trace text, ...])
    metric.compute(..., aligned=True)                               # alignment-based variant

Definitions: eval/trace_metrics.py (positional, official; or aligned).
"""

import datasets
import evaluate

from eval.trace_metrics import orca_metrics, records, trace_metrics

_DESCRIPTION = "Output accuracy, trace accuracy, line and identifier precision/recall/F1 of generated execution traces."
_KWARGS = """
predictions: list of generated trace texts (model format, SPEC §3)
references: list of reference trace texts
aligned: align steps by their line sequences before comparing (default False: positional, as the official metric)
orca: also return ORCA's exact-match, prefix and coverage metrics (default False)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class CodeExecution(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="Liu et al., Code Execution with Pre-trained Language Models, Findings of ACL 2023",
            inputs_description=_KWARGS,
            features=datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
        )

    def _compute(self, predictions, references, aligned: bool = False, orca: bool = False):
        pred, ref = records(predictions), records(references)
        out = trace_metrics(pred, ref, aligned=aligned)
        if orca:
            out.update({f"orca_{k}": v for k, v in orca_metrics(pred, ref).items()})
        return out
