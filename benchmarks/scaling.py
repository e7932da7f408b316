"""How a training step's time grows with batch size, sequence length (T-JEPA tokens per row), number of frames
(EPM-JEPA) and width (T-JEPA hidden size), as the exponent `k` of a log-log fit `time ~ x^k`, beside two expected
exponents: the textbook one (compute-bound: ~1 in batch, frames and length while the MLPs dominate, up to 2 in length
when attention does, 2 in width for matmuls) and the exponent of the step's counted FLOPs over the same sweep.
A measured exponent below the FLOP exponent means fixed per-step overheads (or small, inefficient matmuls at the
small end) still matter at these sizes.

Run alone: `python benchmarks/scaling.py [--quick]`; `benchmarks/report.py` (`make benchmark`) runs it and draws
research/speed/benchmarks/benchmark_scaling.png."""

import argparse
import math
from dataclasses import dataclass

from timing import Spread, count_flops, repeat_times
from workloads import build_workload

# (sweep name, family, swept argument, textbook exponent in words, full-run values, quick values, fixed batch)
SWEEPS = (
    ("batch size", "t-jepa", "batch_size", "1 (work is linear in rows)", (8, 16, 32, 64), (2, 4, 8), None),
    (
        "sequence length (tokens)",
        "t-jepa",
        "length",
        "1-2 (1 while the MLPs/projections dominate, 2 when attention does)",
        (32, 64, 128, 256),
        (16, 32, 48),
        16,
    ),
    (
        "frames per sequence",
        "epm-jepa",
        "frames",
        "1 (per-frame encoder, one prediction per step)",
        (4, 8, 16, 32),
        (4, 6, 8),
        16,
    ),
    # Up to BERT-Large's 1024: how close the step gets to the bf16 peak once the products are large.
    (
        "width (hidden size)",
        "t-jepa",
        "width",
        "2 (matmuls are width x width)",
        (128, 256, 512, 1024),
        (32, 64, 96),
        16,
    ),
)


@dataclass
class SweepResult:
    name: str
    family: str
    textbook: str
    values: list[int]
    seconds: list[Spread]
    flops: list[int]

    @property
    def measured_exponent(self) -> float:
        return fit_exponent(self.values, [s.median for s in self.seconds])

    @property
    def flop_exponent(self) -> float:
        return fit_exponent(self.values, self.flops)

    def shares_of_peak(self, peak_flops_per_s: float) -> list[float]:
        """Each size's achieved FLOP/s (median step time) over `peak_flops_per_s`."""
        return [flops / s.median / peak_flops_per_s for flops, s in zip(self.flops, self.seconds)]


def fit_exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) on log(x): the `k` of `y ~ x^k`."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"fit_exponent needs two or more (x, y) pairs, got {len(xs)} x and {len(ys)} y")
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def run_sweep(sweep, preset: str, quick: bool, repeats: int, bf16: bool = True) -> SweepResult:
    name, family, argument, textbook, full_values, quick_values, batch = sweep
    values = list(quick_values if quick else full_values)
    seconds, flops = [], []
    for value in values:
        kwargs = {argument: value}
        if argument != "batch_size":
            kwargs["batch_size"] = min(batch, 4) if quick else batch
        workload = build_workload(family, preset, **kwargs)
        seconds.append(Spread.of(repeat_times(lambda: workload.step(bf16), repeats)))
        flops.append(count_flops(lambda: workload.step(False)))
    return SweepResult(name, family, textbook, values, seconds, flops)


def run_all(preset: str, quick: bool, repeats: int) -> list[SweepResult]:
    return [run_sweep(sweep, preset, quick, repeats) for sweep in SWEEPS]


def plot(results: list[SweepResult], path) -> None:
    """One log-log panel per sweep: measured step time (with its spread) and the FLOP-proportional line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 3.4))
    for axis, result in zip(axes, results):
        medians = [s.median for s in result.seconds]
        errors = [
            [m - s.low for m, s in zip(medians, result.seconds)],
            [s.high - m for m, s in zip(medians, result.seconds)],
        ]
        axis.errorbar(
            result.values, medians, yerr=errors, marker="o", label=f"measured (k={result.measured_exponent:.2f})"
        )
        scale = medians[0] / result.flops[0]
        axis.plot(result.values, [f * scale for f in result.flops], "--", label=f"FLOPs (k={result.flop_exponent:.2f})")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel(result.name)
        axis.set_ylabel("step time (s)")
        axis.set_title(result.family, fontsize=10)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="tiny presets and sizes (a smoke test)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for result in run_all("tiny" if args.quick else "cpu_fast", args.quick, args.repeats):
        print(
            f"{result.name:26s} {result.family:9s} values {result.values}: measured k={result.measured_exponent:.2f}, "
            f"FLOPs k={result.flop_exponent:.2f}, textbook {result.textbook}"
        )


if __name__ == "__main__":
    main()
