"""Benchmarks that produce the project's tables and figures.

Each experiment is a module or package of this package, listed in
``registry.MODULES``; ``harness`` is what they share and ``workloads`` what they
time. ``python -m experiments list`` shows them and ``python -m experiments
reproduce`` regenerates every result under ``experiments/results/``.
"""
