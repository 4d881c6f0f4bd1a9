"""Streaming backward: K = 1, 2, 4 independent branches on K streams, forward and backward.

The workload is an input `x` (batch x width) on the device and `layers` layers
`h = tanh(linear(h, W))` in all, split into K independent branches of
`layers / K` layers each, so every K does the same total work. Branch k runs
its forward under `with js.stream(s_k)` after `s_k.wait_stream(caller)`, so its
read of `x` is ordered after `x` was made; the caller's stream waits for every
s_k and joins the branch sums into one loss; `loss.backward()` runs on the
caller's stream and the gradient of `x` is read there. The same K-branch graph
with every branch on one side stream is the baseline, so "K streams / 1 stream"
measures what the streams themselves do.

On `sim` the kernels run synchronously on the host, so streams cannot overlap:
the sim timings are the scheduling overhead of streams (events, the device's
worker thread, the stream sanitizer, always on for sim), and what sim shows is
the schedule: one profiled backward per K, which thread and stream ran each
node, and a timeline of it. With `--device cuda` (CuPy and a GPU), the same
workload on `cuda:0` streams measures the wall-clock overlap.

The package: the workload (``workload``), the timed peers (``peers``), the
profiled schedule (``schedule``), the correctness checks (``checks``), the
table, notes and figures (``table``) and the run (``experiment``).
"""

from experiments.streaming_backward.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
