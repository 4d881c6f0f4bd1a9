"""What the profiler costs: backward time with profiling off, on, and compiled out.

The engine reaches the profiler only through ``if profiler.active:`` checks
(one per node, one per hook and final callback). To measure what those checks
cost when no profile is open, the same engine source is recompiled with every
such check replaced by its ``else`` branch ("compiled out") and timed against
the shipping engine with profiling off; the ratio of the two is the off-path
cost. Profiling on is timed as a user pays for it: opening the profile, the
backward, closing it. PyTorch's profiler, on and off, is the reference.

Workloads: chains of ``y = y * 1.0001`` on a (4,) float32 tensor, where the
engine's per-node bookkeeping dominates, with and without a tensor hook on
every intermediate (the hook sites are then on the path too).

The engine without its checks is built in ``compiled_out``; the run, its peers
and its table are in ``experiment``.
"""

from experiments.profiler_overhead.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
