"""Compute efficiency of each family's training step: achieved FLOP/s (FLOPs of forward + backward counted by
torch's FLOP counter, `timing.count_flops`) over the dense matmul peak of the same dtype measured in the same run
(`timing.measure_peak`), fp32 and bf16 autocast; and the step time with `torch.compile` vs eager.

Run alone: `python benchmarks/compute_efficiency.py [--quick]`; `benchmarks/report.py` (`make benchmark`) runs it
into research/speed/benchmarks/benchmarks.md."""

import argparse
from dataclasses import dataclass

import torch
from timing import Peak, Spread, count_flops, measure_peak, repeat_times
from workloads import FAMILIES, TRANSFORMER_FAMILIES, build_workload

# The batch each family's reproduction trains with on CPU (BRo-JEPA's default batch is 256).
BENCHMARK_BATCH = {"t-jepa": 32, "i-jepa": 64, "epm-jepa": 32, "jepa-reasoner": 64, "bro-jepa": 256}


@dataclass
class EfficiencyRow:
    family: str
    shape: str
    flops: int  # per training step
    seconds: dict[str, Spread]  # "fp32" / "bf16" -> step time
    units: int
    unit: str

    def achieved(self, precision: str) -> Spread:
        """FLOP/s of the step (median, slowest, fastest repeat)."""
        return self.seconds[precision].scaled(self.flops)

    def share_of_peak(self, precision: str, peak: Peak) -> Spread:
        achieved = self.achieved(precision)
        return Spread(*(value / peak.flops_per_s for value in (achieved.median, achieved.low, achieved.high)))


@dataclass
class CompileRow:
    family: str
    eager: Spread
    compiled: Spread
    compile_s: float  # the first compiled step (tracing + code generation)

    @property
    def speedup(self) -> float:
        return self.eager.median / self.compiled.median


def measure_efficiency(family: str, preset: str, batch_size: int, repeats: int) -> EfficiencyRow:
    workload = build_workload(family, preset, batch_size)
    seconds = {
        precision: Spread.of(repeat_times(lambda: workload.step(precision == "bf16"), repeats))
        for precision in ("fp32", "bf16")
    }
    # Counted in fp32: autocast changes the dtype of the matmuls, not their number.
    flops = count_flops(lambda: workload.step(False))
    return EfficiencyRow(family, workload.shape, flops, seconds, workload.units, workload.unit)


def measure_compile(family: str, preset: str, batch_size: int, repeats: int, bf16: bool = True) -> CompileRow:
    """Step time of the same workload eager, then with its forward compiled (fresh model, same batch)."""
    import time

    eager = build_workload(family, preset, batch_size)
    eager_s = Spread.of(repeat_times(lambda: eager.step(bf16), repeats))
    compiled = build_workload(family, preset, batch_size)
    compiled.compile()
    torch._dynamo.reset()
    start = time.perf_counter()
    compiled.step(bf16)
    compile_s = time.perf_counter() - start
    compiled_s = Spread.of(repeat_times(lambda: compiled.step(bf16), repeats))
    torch._dynamo.reset()
    return CompileRow(family, eager_s, compiled_s, compile_s)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="tiny presets and batches (a smoke test, seconds)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    preset, scale = ("tiny", 8) if args.quick else ("cpu_fast", None)
    peaks = {
        name: measure_peak(dtype, sizes=(256,) if args.quick else (2048, 4096))
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    for family in FAMILIES:
        row = measure_efficiency(family, preset, scale or BENCHMARK_BATCH[family], args.repeats)
        shares = {p: row.share_of_peak(p, peaks[p]) for p in ("fp32", "bf16")}
        print(
            f"{family:14s} {row.shape:36s} {row.flops / 1e9:8.2f} GFLOP/step  fp32 {100 * shares['fp32'].median:5.1f}%"
            f"  bf16 {100 * shares['bf16'].median:5.1f}% of peak"
        )
    for family in TRANSFORMER_FAMILIES:
        row = measure_compile(family, preset, scale or BENCHMARK_BATCH[family], args.repeats)
        print(f"{family:14s} compiled/eager step speed-up {row.speedup:.2f}x (compile {row.compile_s:.1f} s)")


if __name__ == "__main__":
    main()
