"""What every experiment shares: how it is invoked and timed, and how its results are written.

- ``experiment``: ``Experiment`` and ``RunOptions``, the interface of an experiment;
- ``timing``: round-robin timing of peers, and ``PeerUnavailable`` for an absent one;
- ``peers``: bringing torch, JAX and jaxstream up on a device, or saying why not;
- ``peer_table``: the row keys, columns, verdicts and figure of a table with a column per peer;
- ``results``: ``ExperimentResult`` and its ``Column``s;
- ``reports``: writing NAME.json, NAME.md and NAME.png;
- ``environment``: the command, machine, versions and revision of a run;
- ``plots``, ``progress``, ``threads``: figures, progress bars, intra-op thread limits.

None of these modules imports NumPy, torch or JAX at import time except ``peers``
(NumPy), so the command line can set the thread limits first.
"""
