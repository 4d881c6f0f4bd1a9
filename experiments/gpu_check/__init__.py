"""The GPU check: one command that shows this install works on a GPU, and a report of it.

``python -m experiments.gpu_check`` runs, each within a budget of its own so that
the whole takes at most eight minutes on one GPU (Note [The GPU check's budget] in
``check``): the environment (``probe``), the GPU tests and the whole suite
(``pytest_steps``, with the ``pytest_outcomes`` plugin), the README's GPU section
(``readme``) and every experiment in quick mode on cuda (``experiment_runs``),
device_overhead first: its record calibrates the host side of virtual time
(``calibration``), and the report puts streaming_backward's predictions beside
what cuda measured (``predictions``).
It writes ``experiments/results/gpu/<gpu-name-slug>.md`` and a JSON record
beside it (``report``, whose tables the paper reuses), and exits non-zero if a
step did not pass, or at once, with status 2, where no GPU is present.
``--device sim`` rehearses the same steps on the CPU.
"""
