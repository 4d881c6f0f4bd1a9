"""Device profiles for virtual time: public peak numbers of real GPUs.

Every number comes from the vendor's datasheet or whitepaper, named beside it.
Datasheets quote tensor-core rates "with sparsity" (2:4 structured); the
profiles keep the dense rates, half of those, since a dense matmul gets no more.
Launch costs are not on a datasheet: they are typical measured figures, and
the source says so. What jaxstream's own host code costs per op is measured,
not a property of the chip: virtual_host.py.

`get_profile("auto")` is the profile of this machine's GPU, matched by the name
CuPy or JAX reports for it (`DeviceProfile.device_names`), and the default
profile where there is no GPU.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, replace

from .cuda import cuda_device_count, require_cupy
from .xla import jax_gpus

# Launch costs, the same for every profile (driver and hardware queue, not the chip).
# No datasheet gives them; these are typical measured figures. NVIDIA's "Getting Started
# with CUDA Graphs" (developer blog, 2019) times short kernels (about 2.9 us each) launched
# back to back on one stream at about 3.8 us per kernel: the launch path adds about 1 us
# per kernel when the host keeps ahead. We take 1 us of device-side latency per kernel and
# 2 us of host time per cudaLaunchKernel, so that a host launching back to back keeps
# ahead of kernels of a few microseconds, as in that measurement. The CUDA C++ Best
# Practices Guide ("Asynchronous and overlapping transfers with computation") describes
# launches as asynchronous: the call returns to the host before the kernel runs.
KERNEL_LATENCY_S = 1.0e-6
HOST_LAUNCH_S = 2.0e-6


@dataclass(frozen=True)
class DeviceProfile:
    """Peak rates of one GPU, in FLOP/s and bytes/s, and its parallel width.

    `matmul_flops` maps a dtype's name to the dense rate of a matmul in it, as
    PyTorch runs it by default (float32 matmuls on CUDA cores, since
    `torch.backends.cuda.matmul.allow_tf32` defaults to False); `vector_flops`
    is the CUDA-core rate of everything else. `host_link` is the host-to-device
    bandwidth, one direction.
    """

    name: str
    description: str
    sms: int
    threads_per_sm: int
    vector_flops: float
    matmul_flops: dict[str, float]
    memory_bandwidth: float
    host_link: float
    device_names: str = ""
    """A regular expression that the names CUDA gives this GPU match (searched, any case)."""
    kernel_latency_s: float = KERNEL_LATENCY_S
    host_launch_s: float = HOST_LAUNCH_S

    def matmul_rate(self, dtype_name: str) -> float:
        """The dense matmul rate in `dtype_name`; the CUDA-core rate for a dtype not listed."""
        return self.matmul_flops.get(dtype_name, self.vector_flops)


TERA = 1e12
GIGA = 1e9

H100 = DeviceProfile(
    name="h100",
    description="NVIDIA H100 SXM5 80GB",
    # NVIDIA H100 Tensor Core GPU Architecture whitepaper: the H100 SXM5 has 132 SMs.
    sms=132,
    # CUDA C++ Programming Guide, compute capability 9.0: 2048 resident threads per SM.
    threads_per_sm=2048,
    # NVIDIA H100 Tensor Core GPU datasheet (SXM): FP32 67 TFLOPS.
    vector_flops=67 * TERA,
    matmul_flops={
        # Datasheet: BF16/FP16 Tensor Core 1,979 TFLOPS with sparsity, so 989.5 dense.
        "bfloat16": 989.5 * TERA,
        "float16": 989.5 * TERA,
        "float32": 67 * TERA,
        # Datasheet: FP64 Tensor Core 67 TFLOPS.
        "float64": 67 * TERA,
    },
    # Datasheet: GPU memory bandwidth 3.35 TB/s (HBM3).
    memory_bandwidth=3.35 * TERA,
    # Datasheet: PCIe Gen5 128 GB/s (both directions together).
    host_link=64 * GIGA,
    # CUDA names the SXM5 part "NVIDIA H100 80GB HBM3"; the PCIe and NVL parts, with fewer
    # SMs or lower clocks, are named "... PCIe" and "... NVL" and do not match.
    device_names=r"H100 80GB HBM3|H100 SXM",
)

# NVIDIA H200 Tensor Core GPU datasheet: the H200 is the H100's GH100 chip with 141 GB of
# HBM3e, so the same 132 SMs at the same clocks as the H100 SXM5 (NVIDIA H100 Tensor Core
# GPU Architecture whitepaper), the same CUDA-core and tensor-core rates (FP32 67 TFLOPS,
# BF16/FP16 989.5 dense, FP64 67) and the same PCIe Gen5 link: only its memory differs.
H200 = replace(
    H100,
    name="h200",
    description="NVIDIA H200 SXM 141GB",
    # H200 datasheet: GPU memory 141 GB HBM3e at 4.8 TB/s.
    memory_bandwidth=4.8 * TERA,
    # CUDA names it "NVIDIA H200"; the H200 NVL (lower power, other clocks) does not match.
    device_names=r"H200(?! NVL)",
)

A100 = DeviceProfile(
    name="a100",
    description="NVIDIA A100 SXM4 80GB",
    # NVIDIA A100 Tensor Core GPU Architecture whitepaper: the A100 has 108 SMs.
    sms=108,
    # CUDA C++ Programming Guide, compute capability 8.0: 2048 resident threads per SM.
    threads_per_sm=2048,
    # NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TFLOPS.
    vector_flops=19.5 * TERA,
    matmul_flops={
        # Datasheet: BF16/FP16 Tensor Core 312 TFLOPS (624 with sparsity).
        "bfloat16": 312 * TERA,
        "float16": 312 * TERA,
        "float32": 19.5 * TERA,
        # Datasheet: FP64 Tensor Core 19.5 TFLOPS.
        "float64": 19.5 * TERA,
    },
    # Datasheet: 2,039 GB/s for the 80GB SXM (HBM2e).
    memory_bandwidth=2039 * GIGA,
    # Datasheet: PCIe Gen4 64 GB/s (both directions together).
    host_link=32 * GIGA,
    # CUDA names it "NVIDIA A100-SXM4-80GB".
    device_names=r"A100-SXM4-80GB",
)

T4 = DeviceProfile(
    name="t4",
    description="NVIDIA T4 (70 W, PCIe)",
    # NVIDIA Turing GPU Architecture whitepaper: T4's TU104 runs 2,560 CUDA cores in
    # 40 SMs of 64 cores each.
    sms=40,
    # CUDA C++ Programming Guide, compute capability 7.5: 1024 resident threads per SM.
    threads_per_sm=1024,
    # NVIDIA T4 datasheet: single precision 8.1 TFLOPS.
    vector_flops=8.1 * TERA,
    matmul_flops={
        # Datasheet: mixed precision (FP16/FP32) 65 TFLOPS; Turing has no bfloat16 or TF32.
        "float16": 65 * TERA,
        "float32": 8.1 * TERA,
        # CUDA C++ Programming Guide, arithmetic throughput at 7.5: FP64 runs at 1/32 of FP32.
        "float64": 8.1 * TERA / 32,
    },
    # Datasheet: 320+ GB/s GDDR6.
    memory_bandwidth=320 * GIGA,
    # Datasheet: PCIe Gen3 x16, 32 GB/s both directions together.
    host_link=16 * GIGA,
    # CUDA names it "Tesla T4".
    device_names=r"\bT4\b",
)

PROFILES: dict[str, DeviceProfile] = {p.name: p for p in (H100, H200, A100, T4)}
DEFAULT_PROFILE = "h100"
"""What `"auto"` means on a machine without a GPU."""
AUTO = "auto"


def get_profile(profile: str | DeviceProfile) -> DeviceProfile:
    """The profile named `profile` (case-insensitive), `profile` itself, or for "auto" this
    machine's GPU's (`machine_profile`)."""
    if isinstance(profile, DeviceProfile):
        return profile
    name = str(profile).lower()
    if name == AUTO:
        return machine_profile()
    found = PROFILES.get(name)
    if found is None:
        raise ValueError(
            f"unknown device profile {profile!r}; the known profiles are "
            f"{', '.join(sorted(PROFILES))} and {AUTO!r} (this machine's GPU), or pass a "
            "jaxstream.devices.profiles.DeviceProfile"
        )
    return found


def profile_for_gpu(gpu_name: str) -> DeviceProfile | None:
    """The profile whose `device_names` match `gpu_name` (as CUDA names the GPU), or None."""
    for profile in PROFILES.values():
        if profile.device_names and re.search(profile.device_names, gpu_name, re.IGNORECASE):
            return profile
    return None


def machine_gpu_name() -> str | None:
    """GPU 0's name as CuPy reports it (JAX's where CuPy is missing); None without a GPU."""
    if cuda_device_count() == 0:
        return None
    try:
        name = require_cupy("the GPU's name").cuda.runtime.getDeviceProperties(0)["name"]
    except ImportError:
        gpus = jax_gpus()
        return gpus[0].device_kind if gpus else None
    return name.decode() if isinstance(name, bytes) else str(name)


def machine_profile() -> DeviceProfile:
    """The profile of this machine's GPU; the default profile without a GPU, or, with a
    warning, for a GPU that no profile describes."""
    gpu = machine_gpu_name()
    if gpu is None:
        return PROFILES[DEFAULT_PROFILE]
    found = profile_for_gpu(gpu)
    if found is None:
        warnings.warn(
            f"no device profile describes this machine's GPU ({gpu!r}); virtual time uses "
            f"the {DEFAULT_PROFILE!r} profile instead. Pass profile= one of "
            f"{', '.join(sorted(PROFILES))} or a DeviceProfile of your own",
            stacklevel=3,
        )
        return PROFILES[DEFAULT_PROFILE]
    return found
