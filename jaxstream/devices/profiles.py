"""Device profiles for virtual time: public peak numbers of real GPUs.

Every number comes from the vendor's datasheet or whitepaper, named beside it.
Datasheets quote tensor-core rates "with sparsity" (2:4 structured); the
profiles keep the dense rates, half of those, since a dense matmul gets no more.
Launch costs are not on a datasheet: they are typical measured figures, and
the source says so.
"""

from __future__ import annotations

from dataclasses import dataclass

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
)

PROFILES: dict[str, DeviceProfile] = {p.name: p for p in (H100, A100, T4)}


def get_profile(profile: str | DeviceProfile) -> DeviceProfile:
    """The profile named `profile` (case-insensitive), or `profile` itself."""
    if isinstance(profile, DeviceProfile):
        return profile
    found = PROFILES.get(str(profile).lower())
    if found is None:
        raise ValueError(
            f"unknown device profile {profile!r}; the known profiles are "
            f"{', '.join(sorted(PROFILES))} (or pass a jaxstream.devices.profiles.DeviceProfile)"
        )
    return found
