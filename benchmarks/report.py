"""`make benchmark`'s speed report: every ratio below measured in one run on this machine and written to
research/speed/benchmarks/benchmarks.md (+ research/speed/benchmarks/benchmark_scaling.png), with the machine, library versions, thread count and the
load average before and after.

1. Matmul peak: best of several repeats of 2048 and 4096 square products, fp32 and bf16 (`timing.measure_peak`).
2. Compute efficiency of each family's training step at its benchmark size: achieved FLOP/s (FLOPs counted by
   torch's FLOP counter, forward + backward) over the peak of the same dtype from section 1.
3. torch.compile vs eager step time of the transformer families (bf16 autocast, as they train).
4. Inference: every pipeline's latency at batch 1 and throughput at batch 256, model in fp32 and bf16.
5. Scaling: step time vs batch, sequence length, frames and width, measured exponents beside the expected ones.
6. What bounds the step: achieved share of peak = matmul efficiency at the step's own shapes x share of the step's
   time in those products (`step_bound.measure_bound`), and SDPA's bf16/fp32 speed by attention shape.

Run: `make benchmark` (after time_to_accuracy.py), or `python benchmarks/report.py [--quick] [--output PATH]`.
`--quick` (tiny presets and sizes, a smaller peak, no compilation) checks that everything runs and that the report
has its structure; its numbers mean nothing."""

import argparse
import os
import re
import sys
import time
from pathlib import Path

import torch
from compute_efficiency import BENCHMARK_BATCH, measure_compile, measure_efficiency
from inference import measure_all
from machine import load_average, machine_info
from scaling import plot, run_all
from step_bound import ATTENTION_SHAPES, measure_bound, time_attention
from timing import measure_peak
from workloads import FAMILIES, TRANSFORMER_FAMILIES, build_workload

REPORTS = Path(__file__).resolve().parents[1] / "research" / "speed" / "benchmarks"
SECTIONS = (
    "## Machine",
    "## 1. Matmul peak",
    "## 2. Compute efficiency of the training step",
    "## 3. torch.compile vs eager",
    "## 4. Inference",
    "## 5. Scaling",
    "## 6. What bounds the training step",
)
NON_FINITE = re.compile(r"\b(nan|inf)\b", re.IGNORECASE)
# The issue's target for the transformer families' bf16 training step.
BF16_TARGET = 0.5


def _pct(spread) -> str:
    return f"{100 * spread.median:.3g}% ({100 * spread.low:.3g}-{100 * spread.high:.3g})"


def _ms(spread) -> str:
    return f"{1e3 * spread.median:.2f} ({1e3 * spread.low:.2f}-{1e3 * spread.high:.2f})"


def build_report(quick: bool, repeats: int, output: Path, figure: Path) -> str:
    started, load_start = time.perf_counter(), load_average()
    preset = "tiny" if quick else "cpu_fast"
    lines = [
        "# Speed benchmarks" + (" (--quick smoke run: tiny sizes, the numbers mean nothing)" if quick else ""),
        "",
        "Written by `benchmarks/report.py` (`make benchmark`). Every ratio compares two measurements of the same run "
        "on the machine below; figures are the median over repeats, with (min-max) over the repeats.",
        "",
    ]

    lines += [SECTIONS[0], "", "| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in machine_info().items()]
    lines += [f"| load average (1 min) at start | {load_start:.2f} |", ""]

    sizes = (256, 512) if quick else (2048, 4096)
    peaks = {
        name: measure_peak(dtype, sizes=sizes, repeats=3 if quick else 7)
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    lines += [
        SECTIONS[1],
        "",
        "Best of the repeats of each square size (`torch.mm`, after a warm-up); the peak is the best over sizes. A busy "
        "core only makes a product slower, so best-of is the robust estimate of what the machine can do.",
        "",
        "| dtype | peak GFLOP/s | " + " | ".join(f"{s}x{s} GFLOP/s" for s in sizes) + " | repeats | load before | "
        "load after |",
        "|---|---|" + "---|" * len(sizes) + "---|---|---|",
    ]
    for name, peak in peaks.items():
        per_size = " | ".join(f"{peak.by_size[s] / 1e9:.1f}" for s in sizes)
        lines.append(
            f"| {name} | {peak.flops_per_s / 1e9:.1f} | {per_size} | {peak.repeats} | {peak.load_before:.2f} | "
            f"{peak.load_after:.2f} |"
        )
    lines.append("")

    lines += [
        SECTIONS[2],
        "",
        "Achieved FLOP/s = FLOPs of one step (forward + backward + target-encoder forward, counted by "
        "`torch.utils.flop_counter.FlopCounterMode`; element-wise work is not counted, so this is a lower bound) / "
        "step time (forward, backward, AdamW step). Share of peak = achieved / the peak of the same dtype above. "
        f"Target for the transformer families ({', '.join(TRANSFORMER_FAMILIES)}): >= {BF16_TARGET:.0%} of the bf16 "
        "peak.",
        "",
        "| family | batch | GFLOP/step | fp32 step ms | fp32 % of peak | bf16 step ms | bf16 % of peak | bf16 speed-up "
        "| throughput bf16 | bf16 target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    efficiency = []
    for family in FAMILIES:
        row = measure_efficiency(family, preset, 8 if quick else BENCHMARK_BATCH[family], repeats)
        efficiency.append(row)
        share = {p: row.share_of_peak(p, peaks[p]) for p in ("fp32", "bf16")}
        target = (
            ("met" if share["bf16"].median >= BF16_TARGET else "not met") if family in TRANSFORMER_FAMILIES else "n/a"
        )
        rate = row.seconds["bf16"].scaled(row.units)
        lines.append(
            f"| {family} | {row.shape} | {row.flops / 1e9:.2f} | {_ms(row.seconds['fp32'])} | {_pct(share['fp32'])} | "
            f"{_ms(row.seconds['bf16'])} | {_pct(share['bf16'])} | "
            f"{row.seconds['fp32'].median / row.seconds['bf16'].median:.2f}x | {rate.median:,.0f} {row.unit}/s | "
            f"{target} |"
        )
    lines.append("")

    lines += [SECTIONS[3], ""]
    if quick:
        lines += ["Not measured in `--quick` (compiling takes tens of seconds per family).", ""]
    else:
        lines += [
            "Same workload, bf16 autocast; the compiled model is `torch.compile(model)` (inductor), what "
            "`TrainingArguments(torch_compile=True)` (`--set torch_compile=true`) applies through accelerate. "
            "First step = tracing + code generation, paid once per run (and per new input shape).",
            "",
            "| family | eager step ms | compiled step ms | speed-up | first compiled step s |",
            "|---|---|---|---|---|",
        ]
        for family in TRANSFORMER_FAMILIES:
            try:
                row = measure_compile(family, preset, BENCHMARK_BATCH[family], repeats)
                lines.append(
                    f"| {family} | {_ms(row.eager)} | {_ms(row.compiled)} | {row.speedup:.2f}x | {row.compile_s:.1f} |"
                )
            except Exception as error:  # a compiler missing or failing here must not lose the rest of the report
                lines.append(f"| {family} | failed: {type(error).__name__}: {str(error).splitlines()[0][:120]} | | | |")
        lines.append("")

    batch = 8 if quick else 256
    lines += [
        SECTIONS[4],
        "",
        f"Pipelines on the folders the trainer writes ({preset} preset after one step); latency = one input per call "
        f"(ms), throughput = {batch} inputs in one call with `batch_size={batch}` (inputs/s). bf16 = "
        "`pipe.model.to(torch.bfloat16)`.",
        "",
        "| pipeline | task | precision | latency batch 1 ms | throughput batch " + str(batch) + " /s |",
        "|---|---|---|---|---|",
    ]
    for row in measure_all(preset, batch, repeats=3 if quick else 7, quick=quick):
        if row.error:
            lines.append(f"| {row.name} | {row.task} | {row.precision} | failed: {row.error} | |")
        else:
            throughput = f"{row.throughput.median:,.1f} ({row.throughput.low:,.1f}-{row.throughput.high:,.1f})"
            throughput += f" ({row.note})" if row.note else ""
            lines.append(f"| {row.name} | {row.task} | {row.precision} | {_ms(row.latency)} | {throughput} |")
    lines.append("")

    results = run_all(preset, quick, repeats=2 if quick else 3)
    plot(results, figure)
    lines += [
        SECTIONS[5],
        "",
        "Step time (bf16 autocast) over a sweep of one size, the others fixed; `k` is the least-squares slope of log "
        "time on log size. Expected: the textbook exponent for a compute-bound step, and the exponent of the step's "
        "counted FLOPs over the same sweep. Measured below expected = fixed per-step costs or small, inefficient "
        f"kernels at the small end. Figure: `{figure.name}` (beside this report).",
        "",
        "| sweep | family | sizes | step ms per size | bf16 % of peak per size | measured k | FLOPs k | textbook k |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        times = ", ".join(f"{1e3 * s.median:.1f}" for s in result.seconds)
        shares = ", ".join(f"{share:.1%}" for share in result.shares_of_peak(peaks["bf16"].flops_per_s))
        lines.append(
            f"| {result.name} | {result.family} | {', '.join(map(str, result.values))} | {times} | {shares} | "
            f"{result.measured_exponent:.2f} | {result.flop_exponent:.2f} | {result.textbook} |"
        )
    lines += ["", *_bound_section(quick, peaks)]
    lines += [
        "",
        f"Load average (1 min) at the end: {load_average():.2f} on {os.cpu_count()} cores; whole report "
        f"{time.perf_counter() - started:.0f} s.",
        "",
    ]
    return "\n".join(lines)


def _bound_section(quick: bool, peaks: dict) -> list[str]:
    lines = [
        SECTIONS[6],
        "",
        "achieved / peak = (FLOPs / T_matmul) / peak x T_matmul / T_step. T_matmul: the step's matmul-class calls (mm, "
        "addmm, bmm, SDPA forward and backward, convolutions), recorded below autocast with their shapes, strides and "
        "dtypes and replayed alone (best of 3 per distinct call, hot caches): an upper bound of their speed inside "
        "the step. So 'matmuls at their shapes' is the most the step could reach if everything else (element-wise "
        "ops, norms, casts, the optimizer, Python) were free, and 'time in matmuls' is how far the rest keeps it from "
        "that. Phases and step time: median of 5 steps (forward with the loss, backward, AdamW step). Heaviest other "
        "ops: the profiler's self time over one step (its overhead inflates small ops).",
        "",
        "| family | precision | step ms | forward / backward / optimizer ms | matmul calls (distinct) | matmuls alone ms "
        "| time in matmuls | matmuls at their shapes, % of peak | achieved % of peak | heaviest other ops (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    bounds = {}
    for precision in ("fp32", "bf16"):
        for family in FAMILIES:
            workload = build_workload(family, "tiny" if quick else "cpu_fast", 8 if quick else BENCHMARK_BATCH[family])
            bound = measure_bound(workload, precision == "bf16", repeats=2 if quick else 5)
            bounds[family, precision] = bound
            peak = peaks[precision].flops_per_s
            phases = " / ".join(f"{1e3 * bound.phases[name]:.1f}" for name in ("forward", "backward", "optimizer"))
            rest = ", ".join(f"{name.removeprefix('aten::')} {1e3 * seconds:.1f}" for name, seconds in bound.top_rest)
            lines.append(
                f"| {family} | {precision} | {_ms(bound.step)} | {phases} | {bound.compute_calls} "
                f"({bound.distinct_calls}) | {1e3 * bound.compute_seconds:.1f} | {bound.compute_fraction:.0%} | "
                f"{bound.at_shapes_share(peak):.1%} | {bound.achieved_share(peak):.1%} | {rest} |"
            )
    ceilings = ", ".join(
        f"{family} {bounds[family, 'bf16'].at_shapes_share(peaks['bf16'].flops_per_s):.0%}"
        for family in TRANSFORMER_FAMILIES
    )
    lines += [
        "",
        f"bf16 ceilings of the transformer families at their benchmark shapes (matmuls alone): {ceilings}. Where a "
        f"ceiling is below the {BF16_TARGET:.0%} target, no trimming of the other work reaches the target at these "
        "shapes: the products themselves are too small for the bf16 (AMX) kernels; section 5 shows the time growing "
        "slower than the FLOPs with batch and width for the same reason.",
        "",
        "SDPA forward + backward, bf16 vs fp32 inputs (best of 5; shapes = batch, heads, keys, head dim; the first "
        "four are the benchmark steps' attention). Below 256 keys the families' `attend` runs bf16 training "
        "attention on CPU in fp32 because of this; transformers' own BERT and ViT layers (T-JEPA's encoders, "
        "I-JEPA's encoder) still run it in bf16.",
        "",
        "| shape | fp32 ms | bf16 ms | bf16 / fp32 time |",
        "|---|---|---|---|",
    ]
    for shape in ATTENTION_SHAPES[:2] if quick else ATTENTION_SHAPES:
        timing = time_attention(shape)
        lines.append(
            f"| {tuple(shape)} | {1e3 * timing.seconds['fp32']:.2f} | {1e3 * timing.seconds['bf16']:.2f} | "
            f"{timing.bf16_over_fp32:.2f} |"
        )
    return lines


def check_report(text: str) -> list[str]:
    """What is wrong with a report's structure: a missing section, or a non-finite number in a ratio column."""
    problems = [f"missing section {section!r}" for section in SECTIONS if section not in text]
    for line in text.splitlines():
        if line.startswith("|") and NON_FINITE.search(line):
            problems.append(f"non-finite value in: {line}")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny presets and sizes: a structure check, seconds")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement (default 5; 2 quick)")
    parser.add_argument("--output", type=Path, default=REPORTS / "benchmarks.md")
    parser.add_argument("--figure", type=Path, default=None, help="default: benchmark_scaling.png beside --output")
    args = parser.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 5)
    if repeats < 2:
        parser.error(f"--repeats must be >= 2 (a spread needs two measurements), got {repeats}")
    output = args.output.resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure = (args.figure or output.parent / "benchmark_scaling.png").resolve()
    text = build_report(args.quick, repeats, output, figure)
    output.write_text(text)
    problems = check_report(text)
    print(text)
    for problem in problems:
        print(f"report problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
