"""Benchmarks that produce the project's tables and figures.

Each experiment is one module of this package; ``python -m experiments list``
shows them and ``python -m experiments reproduce`` regenerates every result
under ``experiments/results/``.
"""
