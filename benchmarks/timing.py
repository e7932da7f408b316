"""Timing helpers shared by the benchmark scripts (run as `python benchmarks/bench_<family>.py`)."""

import time

import torch


def timed(fn, repeats: int, warmup: int = 2) -> float:
    """Mean seconds per call of `fn` over `repeats` calls, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def matmul_peak(dtype: torch.dtype, size: int = 2048) -> float:
    """This machine's dense matmul FLOP/s for `dtype` (a `size` x `size` square product)."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    seconds = timed(lambda: a @ b, repeats=10)
    return 2 * size**3 / seconds
