"""What one kernel costs: FLOPs, bytes and occupancy from its shapes and dtypes.

The virtual clock (Note [Virtual time] in virtual_time.py) turns these into a
duration with a device profile. Only shapes and dtypes are read, never values,
so the cost of an op is the same on every backend.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .profiles import DeviceProfile

MATMUL_OPS = frozenset({"matmul", "linear"})
PRODUCT_OPS = frozenset({"matmul", "linear", "einsum", "bmm", "addmm", "baddbmm", "convolution"})
"""Matrix products and convolutions: the host's cost of issuing one differs from a vector
op's (a library's product call picks an algorithm and a handle), so it has its own figure."""
# Ops that GPU libraries run as stride tricks, with no kernel (beside the view ops).
NO_KERNEL_OPS = frozenset({"broadcast_to"})
# A vector kernel's thread handles this many elements (vectorized loads of four floats,
# as PyTorch's elementwise kernels do), so a device is full at SMs x threads x this.
ELEMENTS_PER_THREAD = 4
# A matmul's thread block computes one output tile of this many rows and columns, and
# one block fills one SM (the common CUTLASS/cuBLAS tile on Hopper and Ampere).
MATMUL_TILE = 128


@dataclass(frozen=True)
class KernelCost:
    """One kernel's work: `flops`, `bytes` moved, and the fraction of the device it fills.

    `engine` is "sm" for kernels that run on the SMs and "copy" for copies over
    the host link, which run on the copy engines and fill no SM: their
    `occupancy` is the share of the link they fill (all of it).
    """

    flops: float
    bytes: float
    occupancy: float
    rate: float
    bandwidth: float
    engine: str = "sm"

    def work_seconds(self) -> float:
        """The kernel's time alone on the device, without the launch latency (its roofline
        at the fraction of the device it fills)."""
        roofline = max(self.flops / self.rate, self.bytes / self.bandwidth)
        return roofline / self.occupancy


def _arrays(values: Iterable[Any]) -> list[Any]:
    """The array operands among `values` (Python scalars and None have no shape)."""
    found = []
    for value in values:
        if isinstance(value, list | tuple):
            found += _arrays(value)
        elif hasattr(value, "shape") and hasattr(value, "dtype"):
            found.append(value)
    return found


def _nbytes(array: Any) -> int:
    return math.prod(array.shape) * array.dtype.itemsize


def _elements(array: Any) -> int:
    return math.prod(array.shape)


def _matmul_flops(name: str, inputs: list[Any], out: Any, params: Mapping[str, Any]) -> float:
    """2 x output elements x the contracted length; einsum: 2 x the product of every label."""
    if name == "einsum":
        sizes: dict[str, int] = {}
        for labels, array in zip(params["subscripts"].split("->")[0].split(","), inputs,
                                 strict=False):
            sizes.update(zip(labels, array.shape, strict=False))
        return 2.0 * math.prod(sizes.values())
    first = inputs[0]
    contracted = first.shape[-1] if first.shape else 1
    return 2.0 * _elements(out) * contracted


def _matmul_tiles(out: Any) -> int:
    shape = tuple(out.shape) or (1,)
    rows, cols = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[-1])
    batch = math.prod(shape[:-2])
    return batch * math.ceil(rows / MATMUL_TILE) * math.ceil(cols / MATMUL_TILE)


def is_product(name: str) -> bool:
    """Whether op `name` is a matrix product or a convolution (Note [Virtual time])."""
    return name in PRODUCT_OPS


def launches_kernel(name: str, view: bool) -> bool:
    """Whether op `name` runs a kernel: views and broadcasts only change strides."""
    return not view and name not in NO_KERNEL_OPS


def op_cost(
    name: str, operands: Iterable[Any], params: Mapping[str, Any], out: Any,
    profile: DeviceProfile,
) -> KernelCost:
    """The cost of op `name` reading `operands` and producing `out` on `profile`.

    A matmul (and linear, einsum) does 2 FLOPs per multiply-add at the profile's
    matmul rate in its dtype and fills one SM per output tile; every other op is
    a vector kernel: one FLOP per element of its largest array, at the CUDA-core
    rate, filling one thread per `ELEMENTS_PER_THREAD` elements. Every kernel
    reads its inputs and writes its output once.
    """
    inputs = _arrays(operands)
    outputs = _arrays([out])
    moved = float(sum(_nbytes(a) for a in (*inputs, *outputs)))
    if (name in MATMUL_OPS or name == "einsum") and inputs and outputs:
        first = outputs[0]
        return KernelCost(
            flops=_matmul_flops(name, inputs, first, params),
            bytes=moved,
            occupancy=min(1.0, _matmul_tiles(first) / profile.sms),
            rate=profile.matmul_rate(first.dtype.name),
            bandwidth=profile.memory_bandwidth,
        )
    largest = max((_elements(a) for a in (*inputs, *outputs)), default=1)
    threads = max(1, math.ceil(largest / ELEMENTS_PER_THREAD))
    return KernelCost(
        flops=float(largest),
        bytes=moved,
        occupancy=min(1.0, threads / (profile.sms * profile.threads_per_sm)),
        rate=profile.vector_flops,
        bandwidth=profile.memory_bandwidth,
    )


def copy_cost(array: Any, profile: DeviceProfile) -> KernelCost:
    """A copy of `array` between the host and the device, over the host link."""
    return KernelCost(
        flops=0.0, bytes=float(_nbytes(array)), occupancy=1.0, rate=profile.vector_flops,
        bandwidth=profile.host_link, engine="copy",
    )
