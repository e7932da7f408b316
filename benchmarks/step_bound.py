"""What bounds a training step's share of the matmul peak.

A step's achieved FLOP/s over the peak factors exactly into two measured parts:

    achieved / peak = (FLOPs / T_compute) / peak  x  T_compute / T_step
                      matmul efficiency at the    x  share of the step's time
                      step's own shapes              spent in those products

T_compute is the time of the step's matmul-class calls (mm, addmm, bmm, baddbmm, SDPA forward and backward,
convolutions) replayed alone, one after another, with the shapes, strides and dtypes the step gave them (recorded
below the autocast layer, so a bf16 step replays bf16 products). Replayed alone, with hot caches and nothing else
between them, these calls run at least as fast as inside the step: FLOPs / T_compute is an upper bound of what the
step could achieve if every other piece of work (element-wise ops, norms, softmax, dtype casts, the optimizer,
framework overhead) were free. When that bound itself is below the target, no amount of trimming the rest reaches it
at these shapes; the shapes (batch, width) have to grow.

`measure_bound(workload, bf16)` -> a `StepBound` with both factors, the step's phases (forward, backward, optimizer)
and the heaviest non-matmul ops by the profiler's self time. Run alone: `python benchmarks/step_bound.py [--quick]`;
`benchmarks/report.py` (`make benchmark`) writes it into research/speed/benchmarks/benchmarks.md."""

import argparse
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from timing import Spread, count_flops, repeat_times
from torch.utils._python_dispatch import TorchDispatchMode

# aten ops (overload packets) that do the counted FLOPs; everything else in a step is "the rest".
_COMPUTE_OPS = {"mm", "addmm", "bmm", "baddbmm", "convolution", "convolution_backward"}
_COMPUTE_PREFIXES = ("_scaled_dot_product", "_flash_attention", "_efficient_attention", "mkldnn_convolution")
# Profiler names of the same work (self time lands on these, including oneDNN's kernels they call).
_PROFILER_COMPUTE = tuple(f"aten::{name}" for name in _COMPUTE_OPS) + tuple(f"aten::{p}" for p in _COMPUTE_PREFIXES)


def is_compute_op(func) -> bool:
    name = func._overloadpacket.__name__
    return name in _COMPUTE_OPS or name.startswith(_COMPUTE_PREFIXES)


class TensorSpec(NamedTuple):
    """What a replay needs to rebuild an argument: its shape, strides and dtype (values do not change the speed)."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype

    def build(self) -> torch.Tensor:
        tensor = torch.empty_strided(self.shape, self.stride, dtype=self.dtype)
        if self.dtype.is_floating_point:
            return tensor.normal_()
        return tensor.fill_(self.dtype == torch.bool)


def _spec(value: Any) -> Any:
    """A hashable description of an argument: tensors become `TensorSpec`s, lists and tuples tuples."""
    if isinstance(value, torch.Tensor):
        return TensorSpec(tuple(value.shape), tuple(value.stride()), value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(_spec(item) for item in value)
    return value


class ComputeRecorder(TorchDispatchMode):
    """Counts every matmul-class call by (op, argument specs). A dispatch mode sits below autocast, so it sees the
    products in the dtype they run in."""

    def __init__(self):
        super().__init__()
        self.calls: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if is_compute_op(func):
            key = (func, _spec(args), tuple(sorted((name, _spec(value)) for name, value in kwargs.items())))
            self.calls[key] += 1
        return func(*args, **kwargs)


def record_compute_calls(fn) -> Counter:
    """The matmul-class calls of one run of `fn`: {(op, args, kwargs): count}."""
    recorder = ComputeRecorder()
    with recorder:
        fn()
    return recorder.calls


def _build(value: Any) -> Any:
    """The inverse of `_spec`: fresh tensors of the recorded specs (tuples stay tuples: aten takes them for int[])."""
    if isinstance(value, TensorSpec):
        return value.build()
    if isinstance(value, tuple):
        return tuple(_build(item) for item in value)
    return value


def replay_seconds(calls: Counter, repeats: int = 3) -> float:
    """Seconds to run every recorded call as often as the step did, alone: per distinct call, the best of `repeats`
    timings of its count of back-to-back calls (best-of: a busy core only makes a product slower)."""
    total = 0.0
    for (func, args, kwargs), count in calls.items():
        args = _build(args)
        kwargs = {key: _build(value) for key, value in kwargs}
        with torch.no_grad():
            total += count * min(repeat_times(lambda: func(*args, **kwargs), repeats, warmup=1, calls=count))
    return total


@dataclass
class StepBound:
    family: str
    precision: str
    flops: int
    step: Spread  # seconds per whole step
    phases: dict[str, float]  # median seconds of forward / backward / optimizer
    compute_seconds: float  # the matmul-class calls replayed alone
    compute_calls: int
    distinct_calls: int
    top_rest: list[tuple[str, float]] = field(default_factory=list)  # (op, self seconds per step) by the profiler

    def achieved_share(self, peak: float) -> float:
        return self.flops / self.step.median / peak

    def at_shapes_share(self, peak: float) -> float:
        """Matmul efficiency at the step's own shapes: the ceiling if nothing but these products took time."""
        return self.flops / self.compute_seconds / peak

    @property
    def compute_fraction(self) -> float:
        return self.compute_seconds / self.step.median


def _phase_times(workload, bf16: bool) -> dict[str, float]:
    """Forward (loss included), backward and optimizer (step + zero_grad) seconds of one step."""
    marks = [time.perf_counter()]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = workload.forward(**workload.batch).loss
    marks.append(time.perf_counter())
    loss.backward()
    marks.append(time.perf_counter())
    workload.optimizer.step()
    workload.optimizer.zero_grad(set_to_none=True)
    marks.append(time.perf_counter())
    return dict(zip(("forward", "backward", "optimizer"), (b - a for a, b in zip(marks, marks[1:]))))


def _top_rest(workload, bf16: bool, top: int) -> list[tuple[str, float]]:
    """The heaviest non-matmul ops of one step by the profiler's self CPU time (the profiler's own overhead inflates
    many small ops, so these are the names of the rest more than its exact split)."""
    from torch.profiler import ProfilerActivity, profile

    workload.step(bf16)  # warm
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        workload.step(bf16)
    rows = [
        (event.key, event.self_cpu_time_total / 1e6)
        for event in prof.key_averages()
        if event.key.startswith("aten::") and not event.key.startswith(_PROFILER_COMPUTE)
    ]
    return sorted(rows, key=lambda row: -row[1])[:top]


def measure_bound(workload, bf16: bool, repeats: int = 5, top: int = 3) -> StepBound:
    step = lambda: workload.step(bf16)  # noqa: E731
    for _ in range(2):
        step()
    phases = [_phase_times(workload, bf16) for _ in range(repeats)]
    median_phases = {name: Spread.of([p[name] for p in phases]).median for name in phases[0]}
    step_seconds = Spread.of([sum(p.values()) for p in phases])
    calls = record_compute_calls(step)
    return StepBound(
        family=workload.family,
        precision="bf16" if bf16 else "fp32",
        # Counted in fp32 (autocast changes the products' dtype, not their number), as section 2 of the report.
        flops=count_flops(lambda: workload.step(False)),
        step=step_seconds,
        phases=median_phases,
        compute_seconds=replay_seconds(calls),
        compute_calls=sum(calls.values()),
        distinct_calls=len(calls),
        top_rest=_top_rest(workload, bf16, top),
    )


# (batch, heads, keys, head_dim): the attention shapes of the benchmark steps (I-JEPA's context encoder and
# predictor, T-JEPA's predictor, the reasoner), then longer sequences with 32- and 64-dim heads.
ATTENTION_SHAPES = (
    (64, 4, 31, 32),
    (192, 4, 37, 16),
    (32, 4, 64, 32),
    (64, 4, 109, 32),
    (16, 4, 256, 32),
    (8, 16, 256, 64),
    (4, 16, 512, 64),
)


@dataclass
class AttentionTiming:
    shape: tuple[int, int, int, int]
    seconds: dict[str, float]  # "fp32" / "bf16" -> best forward + backward seconds

    @property
    def bf16_over_fp32(self) -> float:
        return self.seconds["bf16"] / self.seconds["fp32"]


def time_attention(shape: tuple[int, int, int, int], repeats: int = 5) -> AttentionTiming:
    """Best-of-`repeats` seconds of one SDPA forward + backward at `shape` (B, heads, keys, head_dim), fp32 and bf16
    inputs: the measurement behind the families' `attend`, which runs short bf16 CPU training attention in fp32."""
    seconds = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        query, key, value = (torch.randn(shape, dtype=dtype, requires_grad=True) for _ in range(3))
        grad = torch.randn(shape, dtype=dtype)

        def forward_backward():
            torch.nn.functional.scaled_dot_product_attention(query, key, value).backward(grad)

        seconds[name] = min(repeat_times(forward_backward, repeats, warmup=1))
    return AttentionTiming(shape, seconds)


def main():
    from compute_efficiency import BENCHMARK_BATCH
    from timing import measure_peak
    from workloads import FAMILIES, build_workload

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny presets and batches (a smoke test, seconds)")
    args = parser.parse_args()
    preset = "tiny" if args.quick else "cpu_fast"
    for shape in ATTENTION_SHAPES[:2] if args.quick else ATTENTION_SHAPES:
        timing = time_attention(shape)
        print(f"SDPA forward + backward {shape}: bf16 / fp32 time {timing.bf16_over_fp32:.2f}")
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        peak = measure_peak(dtype, sizes=(256,) if args.quick else (2048,)).flops_per_s
        for family in FAMILIES:
            workload = build_workload(family, preset, 8 if args.quick else BENCHMARK_BATCH[family])
            bound = measure_bound(workload, precision == "bf16")
            print(
                f"{family:14s} {precision}: achieved {bound.achieved_share(peak):6.1%} of peak = matmuls at their "
                f"shapes {bound.at_shapes_share(peak):6.1%} x time in matmuls {bound.compute_fraction:6.1%}; "
                f"phases {', '.join(f'{k} {1e3 * v:.1f} ms' for k, v in bound.phases.items())}; rest: "
                + ", ".join(f"{name} {1e3 * s:.1f} ms" for name, s in bound.top_rest)
            )


if __name__ == "__main__":
    main()
