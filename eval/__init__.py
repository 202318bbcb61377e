"""Evaluation: trace metrics, runtime-error metrics, reranking, code search (SPEC §7)."""
