"""Benchmarks (not tests): retrieval quality, context economy and speed, run from the repo
root as ``python -m bench.<module>``."""
