"""What a benchmark ran on: CPU model, cores, threads, library versions and the load average."""

import os
import platform
from pathlib import Path

import torch


def cpu_model() -> str:
    """The processor's name from /proc/cpuinfo (Linux), else `platform.processor()`."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def cpu_flags_of_interest() -> list[str]:
    """The matrix/vector extensions that decide bf16 speed on x86 (AMX tiles, AVX-512 BF16), where listed."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return []
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return sorted(flags & {"amx_bf16", "amx_tile", "amx_int8", "avx512_bf16", "avx512f", "avx2"})
    return []


def machine_info() -> dict[str, str]:
    """A flat description of this machine and software, for the report's header."""
    import accelerate
    import transformers

    return {
        "cpu": cpu_model(),
        "cpu flags": " ".join(cpu_flags_of_interest()) or "n/a",
        "cores (os.cpu_count)": str(os.cpu_count()),
        "torch threads": str(torch.get_num_threads()),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "accelerate": accelerate.__version__,
        "platform": platform.platform(),
    }


def load_average() -> float:
    """The 1-minute load average (number of runnable processes); compare it with the core count."""
    return os.getloadavg()[0]
