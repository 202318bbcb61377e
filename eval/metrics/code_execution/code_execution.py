"""Code-execution trace metrics (CodeExecutor, Table 3) as a local `evaluate` metric.

    import evaluate
    metric = evaluate.load("eval/metrics/code_execution")          # works with HF_HUB_OFFLINE=1
    metric.compute(predictions=[generated trace text, ...], references=[reference trace text, ...])
    metric.compute(..., singleline=True)                            # the release's SingleLine variant
    metric.compute(..., aligned=True)                               # adds our alignment-based variant

The default numbers are the release's `inference/metric.py` (output_accuracy,
trace_accuracy, line_*, identifier_*; percent). Definitions: codeexecutor/modeling/trace_metrics.py.
"""

import datasets
import evaluate

from codeexecutor.modeling.trace_metrics import aligned_metrics, orca_metrics, records, table3_metrics

_DESCRIPTION = "Output accuracy, trace accuracy, line and identifier precision/recall/F1 of generated execution traces."
_KWARGS = """
predictions: list of generated trace texts (model format, docs/trace-format.md)
references: list of reference trace texts
singleline: score as the release scores SingleLine (one state per text; default False)
aligned: also return our alignment-based variant, under aligned_* names (default False)
orca: also return ORCA's exact-match, prefix and coverage metrics (default False)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class CodeExecution(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="Liu et al., Code Execution with Pre-trained Language Models, Findings of ACL 2023",
            inputs_description=_KWARGS,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions, references, singleline: bool = False, aligned: bool = False, orca: bool = False):
        out = table3_metrics(predictions, references, singleline=singleline)
        if aligned or orca:
            pred, ref = records(predictions), records(references)
            if aligned:
                out.update({k: v for k, v in aligned_metrics(pred, ref).items() if k != "programs"})
            if orca:
                out.update({f"orca_{k}": v for k, v in orca_metrics(pred, ref).items()})
        return out
