"""Randomness: the global generator, and where each draw without `key=` takes its key.

One idea per module:

- `threefry`: the key of a generator state's n-th draw, alike on the host and in a program;
- `generator`: the global generator, a thread-safe counter of draws under a seed;
- `sources`: the draw sources that checkpoint, js.compile and to_jax put in place, so that
  a recomputation replays its forward's draws and a program draws anew on every call.
"""
