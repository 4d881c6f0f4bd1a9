"""What the profiler costs: backward time with profiling off, on, and compiled out.

The engine reaches the profiler only through the installed instrumentation object
(Note [Instrumentation] in jaxstream/instrumentation.py): it evaluates each node,
calls each hook and runs each final callback through ``instrumentation.current()``,
which with no profile open is the default ``Instrumentation`` that only makes the
call. To measure what that indirection costs, the engine's own source is recompiled
with every such call replaced by the call it makes ("compiled out") and timed
against the shipping engine with profiling off; the ratio of the two is the off-path
cost. Profiling on (the profiler's ``Recorder`` installed) is timed as a user pays
for it: opening the profile, the backward, closing it. PyTorch's profiler, on and
off, is the reference.

Workloads: chains of ``y = y * 1.0001`` on a (4,) float32 tensor, where the
engine's per-node bookkeeping dominates, with and without a tensor hook on
every intermediate (the hook sites are then on the path too).

The engine without its instrumentation is built in ``compiled_out``; the run, its peers
and its table are in ``experiment``.
"""

from experiments.profiler_overhead.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
