"""Runtime-error detection, localisation and classification from traces, as a local
`evaluate` metric: a crash is predicted when the generated trace ends with an
`<exception> <k> Type` step.

    metric = evaluate.load("eval/metrics/runtime_errors")
    metric.compute(predictions=[generated trace text, ...], references=[reference trace text, ...])
"""

import datasets
import evaluate

from codeexecutor.modeling.trace_metrics import error_metrics, records

_DESCRIPTION = "Detection accuracy (TP/FP/FN/TN), localisation accuracy, error-kind accuracy and weighted F1."


class RuntimeErrors(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="ORCA (2025); Bieber et al. (2022)",
            inputs_description="predictions / references: generated and reference trace texts",
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions, references):
        return error_metrics(records(predictions), records(references))
