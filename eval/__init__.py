"""Evaluation: trace metrics, runtime-error metrics, reranking, code search (docs/metrics.md)."""
