"""Timing helpers shared by the benchmark scripts: repeated timings with their spread, the machine's dense matmul
peak (best of several repeats of large squares, with the load around it) and the one FLOP counter every efficiency
figure uses."""

import os
import statistics
import time
from dataclasses import dataclass, field

import torch
from torch.utils.flop_counter import FlopCounterMode

# Large enough to run at the BLAS/oneDNN kernels' best; both sizes are kept and the best of them is the peak.
PEAK_SIZES = (2048, 4096)


def timed(fn, repeats: int, warmup: int = 2) -> float:
    """Mean seconds per call of `fn` over `repeats` calls, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def repeat_times(fn, repeats: int, warmup: int = 2, calls: int = 1) -> list[float]:
    """Seconds per call of `fn` in each of `repeats` timed groups of `calls` calls (after `warmup` untimed calls)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return times


@dataclass(frozen=True)
class Spread:
    """Median, minimum and maximum of repeated measurements."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> "Spread":
        if not values:
            raise ValueError("Spread.of needs at least one value")
        return cls(statistics.median(values), min(values), max(values))

    def scaled(self, factor: float) -> "Spread":
        """The spread of `factor / x` for x in this spread when `factor` > 0 (times -> rates: low and high swap)."""
        return Spread(factor / self.median, factor / self.high, factor / self.low)

    def format(self, fmt: str = ".3g") -> str:
        return f"{self.median:{fmt}} ({self.low:{fmt}}-{self.high:{fmt}})"


@dataclass(frozen=True)
class Peak:
    """The best dense-matmul FLOP/s of `dtype` over `repeats` timings of each square size, with the load average
    (1 minute) before and after the measurement."""

    dtype: str
    flops_per_s: float
    by_size: dict[int, float] = field(default_factory=dict)
    repeats: int = 0
    load_before: float = float("nan")
    load_after: float = float("nan")


def measure_peak(dtype: torch.dtype, sizes: tuple[int, ...] = PEAK_SIZES, repeats: int = 5) -> Peak:
    """This machine's dense matmul FLOP/s for `dtype`: for each square `size`, the best of `repeats` timed products
    (after one warm-up), and the best over sizes. Best-of, not mean: a busy core only ever makes a product slower."""
    load_before = os.getloadavg()[0]
    by_size = {}
    for size in sizes:
        a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
        best = min(repeat_times(lambda: torch.mm(a, b), repeats=repeats, warmup=1))
        by_size[size] = 2 * size**3 / best
    name = str(dtype).removeprefix("torch.").replace("float32", "fp32").replace("bfloat16", "bf16")
    return Peak(name, max(by_size.values()), by_size, repeats, load_before, os.getloadavg()[0])


def matmul_peak(dtype: torch.dtype, size: int = 2048) -> float:
    """This machine's dense matmul FLOP/s for `dtype` (best of 5 products of a `size` square)."""
    return measure_peak(dtype, sizes=(size,)).flops_per_s


def count_flops(fn) -> int:
    """FLOPs of one call of `fn` as torch's FLOP counter counts them (matmuls, convolutions and SDPA, forward and
    backward if `fn` runs the backward); element-wise work is not counted, so achieved FLOP/s is a lower bound."""
    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return counter.get_total_flops()
