"""Latency of every family's exported encoder path in onnxruntime against the same computation in PyTorch, measured
in the same run: the ratio ORT / PyTorch is what the table reports, beside the times themselves.

For each family and preset (`tiny`, `cpu_fast`), the model's `"encoder"` path (`hf-jepa export-onnx`'s default, the
feature path the pipelines call) is exported with `hf_jepa.export.export_onnx` (which checks parity with onnxruntime
first) and timed three ways on the same random inputs, at batch 1 and a larger batch:

* PyTorch eager under `torch.no_grad()`, the exported wrapper module itself (the graph's computation, without the
  public functions' input checks, so both sides run the same work);
* the same under `torch.inference_mode()`;
* onnxruntime's CPU session on the exported file.

Each measurement is `--repeats` groups of N calls (N chosen so a group takes about `--group-seconds`, after warm-up
calls), and the three runtimes are interleaved within each repeat, so load on the (shared) machine hits them alike.
Reported: median and spread (min-max) of seconds per call, and the per-repeat ratios ORT / PyTorch. Inputs: random
normalised images at the preset's size; random token ids with a full attention mask of `--tokens` tokens; EPM-JEPA:
sequences of `--frames` random frames in [0, 1].

    python benchmarks/onnx_latency.py [--threads 1] [--repeats 5] [--out research/speed/onnx]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from machine import load_average, machine_info
from timing import Spread

from hf_jepa import (
    BroJepaConfig,
    BroJepaModel,
    EpmJepaConfig,
    EpmJepaModel,
    IJepaConfig,
    IJepaModel,
    JepaReasonerConfig,
    JepaReasonerModel,
    TJepaConfig,
    TJepaModel,
)
from hf_jepa.export import export_onnx, family_paths
from hf_jepa.export.onnx_export import onnxruntime_session

FAMILIES = {
    "I-JEPA": (IJepaConfig, IJepaModel),
    "T-JEPA": (TJepaConfig, TJepaModel),
    "BRo-JEPA": (BroJepaConfig, BroJepaModel),
    "EPM-JEPA": (EpmJepaConfig, EpmJepaModel),
    "JEPA-Reasoner": (JepaReasonerConfig, JepaReasonerModel),
}
PRESETS = ("tiny", "cpu_fast")
RUNTIMES = ("torch_no_grad", "torch_inference_mode", "onnxruntime")
OUT = Path(__file__).resolve().parents[1] / "research" / "speed" / "onnx"


def bench_inputs(model, path, batch: int, tokens: int, frames: int) -> dict[str, torch.Tensor]:
    """Random inputs of the stated shapes for `path` (its input names, in its argument order)."""
    generator = torch.Generator().manual_seed(batch)
    names = list(path.inputs(2, 0))
    if "input_ids" in names:
        config = getattr(model.config, "backbone_config", model.config)
        length = min(tokens, int(config.max_position_embeddings))
        ids = torch.randint(0, int(config.vocab_size), (batch, length), generator=generator)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    config = model.config
    size, channels = int(config.image_size), int(config.num_channels)
    if "frames" in path.dynamic.get("pixel_values", {}).values():
        return {"pixel_values": torch.rand((batch, frames, channels, size, size), generator=generator)}
    return {"pixel_values": torch.randn((batch, channels, size, size), generator=generator)}


def _calls_for(fn, group_seconds: float) -> int:
    """Calls of `fn` that take about `group_seconds` (from the fastest of 3 timed calls; at least 2, at most 500)."""
    once = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        once.append(time.perf_counter() - start)
    return max(2, min(500, round(group_seconds / max(min(once), 1e-6))))


def time_runtimes(fns: dict, repeats: int, group_seconds: float, warmup: int = 3) -> tuple[dict[str, list], int]:
    """Seconds per call of each of `fns` in `repeats` interleaved groups of N calls; returns ({name: times}, N)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    calls = min(_calls_for(fn, group_seconds) for fn in fns.values())
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - start) / calls)
    return times, calls


def measure(family: str, preset: str, args, work: Path) -> dict:
    """Export one family/preset's encoder path and time it at each batch; returns its results.json row."""
    config_class, model_class = FAMILIES[family]
    torch.manual_seed(0)
    model = model_class(getattr(config_class, preset)()).float().eval()
    started = time.perf_counter()
    (export,) = export_onnx(model, output=work / f"{family}-{preset}", paths=["encoder"])
    export_seconds = time.perf_counter() - started
    path = next(p for p in family_paths(model) if p.name == "encoder")
    session = onnxruntime_session(export.onnx_file, threads=args.threads)
    module = path.module.eval()
    row = {
        "family": family,
        "preset": preset,
        "path": path.name,
        "parameters": sum(p.numel() for p in module.parameters()),
        "export_seconds": export_seconds,
        "export_max_abs_diff": export.worst,
        "batches": {},
    }
    for batch in (1, args.batch):
        inputs = bench_inputs(model, path, batch, args.tokens, args.frames)
        feeds = {name: tensor.numpy() for name, tensor in inputs.items()}
        names = list(path.output_names)

        def no_grad():
            with torch.no_grad():
                return module(*inputs.values())

        def inference_mode():
            with torch.inference_mode():
                return module(*inputs.values())

        def ort():
            return session.run(names, feeds)

        # The timed inputs are checked too: same outputs in both runtimes.
        expected = no_grad()
        expected = expected if isinstance(expected, tuple) else (expected,)
        diff = max(float(abs(e.numpy() - g).max()) for e, g in zip(expected, ort()))
        times, calls = time_runtimes(
            {"torch_no_grad": no_grad, "torch_inference_mode": inference_mode, "onnxruntime": ort},
            args.repeats,
            args.group_seconds,
        )
        spreads = {name: Spread.of(values) for name, values in times.items()}
        ratios = {
            base: Spread.of([o / b for o, b in zip(times["onnxruntime"], times[base])])
            for base in ("torch_no_grad", "torch_inference_mode")
        }
        row["batches"][str(batch)] = {
            "input_shapes": {name: list(tensor.shape) for name, tensor in inputs.items()},
            "calls_per_repeat": calls,
            "max_abs_diff": diff,
            "seconds_per_call": {name: vars(spread) for name, spread in spreads.items()},
            "seconds_per_call_all": times,
            "ratio_ort_over": {base: vars(spread) for base, spread in ratios.items()},
        }
        print(
            f"{family:13s} {preset:8s} batch {batch:3d}: torch {spreads['torch_no_grad'].median * 1e3:8.3f} ms, "
            f"inference_mode {spreads['torch_inference_mode'].median * 1e3:8.3f} ms, "
            f"ORT {spreads['onnxruntime'].median * 1e3:8.3f} ms, ORT/torch {ratios['torch_no_grad'].median:.2f}",
            flush=True,
        )
    return row


def _ms(spread: dict) -> str:
    return f"{spread['median'] * 1e3:.3g} ({spread['low'] * 1e3:.3g}-{spread['high'] * 1e3:.3g})"


def _ratio(spread: dict) -> str:
    return f"{spread['median']:.2f} ({spread['low']:.2f}-{spread['high']:.2f})"


def _shape(shapes: dict) -> str:
    return ", ".join(
        f"{name} {'x'.join(map(str, shape))}" for name, shape in shapes.items() if name != "attention_mask"
    )


def render(results: dict) -> str:
    """The markdown report of `results` (the results.json mapping)."""
    setup = results["setup"]
    lines = [
        "# ONNX Runtime vs PyTorch: encoder latency",
        "",
        f"Command (from the repository root): `{setup['command']}`",
        "",
        f"Machine: {setup['machine']['cpu']}, {setup['machine']['cores (os.cpu_count)']} cores shared with other "
        f"jobs (load average {setup['load_before']:.2f} before, {setup['load_after']:.2f} after the run); "
        f"{setup['threads']} thread(s) for both PyTorch (`torch.set_num_threads`) and onnxruntime "
        f"(`intra_op_num_threads`); torch {setup['machine']['torch']}, onnxruntime {setup['onnxruntime']}, "
        f"onnx {setup['onnx']}; fp32; whole run {setup['seconds']:.0f} s.",
        "",
        "Data: random inputs of the stated shapes (normalised images at the preset's size; random token ids with a "
        f"full attention mask; EPM-JEPA: sequences of {setup['frames']} frames in [0, 1]). Path: each family's "
        "`encoder` export (`hf-jepa export-onnx DIR --path encoder`), the pipelines' feature path. PyTorch times the "
        "exported wrapper module (same computation, without the public functions' input checks). Each cell: median "
        f"(min-max) over {setup['repeats']} repeats of N calls (after warm-up; N in the table), the three runtimes "
        "interleaved within each repeat. ORT/PyTorch: median (min-max) of the per-repeat ratios against `no_grad` "
        "eager (below 1: onnxruntime is faster).",
        "",
        "| family | preset | encoder params | batch | inputs | N | PyTorch no_grad (ms) | PyTorch inference_mode (ms) "
        "| onnxruntime (ms) | ORT / no_grad | ORT / inference_mode | max abs diff |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["rows"]:
        for batch, cell in row["batches"].items():
            times = cell["seconds_per_call"]
            lines.append(
                f"| {row['family']} | {row['preset']} | {row['parameters'] / 1e6:.2f}M | {batch} | "
                f"{_shape(cell['input_shapes'])} | {cell['calls_per_repeat']} | {_ms(times['torch_no_grad'])} | "
                f"{_ms(times['torch_inference_mode'])} | {_ms(times['onnxruntime'])} | "
                f"{_ratio(cell['ratio_ort_over']['torch_no_grad'])} | "
                f"{_ratio(cell['ratio_ort_over']['torch_inference_mode'])} | {cell['max_abs_diff']:.1e} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="threads for PyTorch and onnxruntime (default 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--group-seconds", type=float, default=0.3, help="about how long one group of N calls runs")
    parser.add_argument("--batch", type=int, default=32, help="the larger batch (besides 1)")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per text (capped at the model's limit)")
    parser.add_argument("--frames", type=int, default=4, help="frames per EPM-JEPA sequence")
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS)
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--out", type=Path, default=OUT, help="folder for results.json and onnx_latency.md")
    args = parser.parse_args(argv)
    import onnx
    import onnxruntime

    torch.set_num_threads(args.threads)
    started, load_before = time.perf_counter(), load_average()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for preset in args.presets:
            for family in args.families:
                rows.append(measure(family, preset, args, Path(work)))
    shown = [os.path.relpath(a) if a.endswith(".py") else a for a in sys.argv]
    results = {
        "setup": {
            "command": "HF_HUB_OFFLINE=1 python " + " ".join(shown),
            "machine": machine_info(),
            "onnxruntime": onnxruntime.__version__,
            "onnx": onnx.__version__,
            "threads": args.threads,
            "repeats": args.repeats,
            "batch": args.batch,
            "tokens": args.tokens,
            "frames": args.frames,
            "load_before": load_before,
            "load_after": load_average(),
            "seconds": time.perf_counter() - started,
            "median_ratio_ort_over_no_grad": statistics.median(
                cell["ratio_ort_over"]["torch_no_grad"]["median"] for row in rows for cell in row["batches"].values()
            ),
        },
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "onnx_latency.md").write_text(render(results))
    print(
        f"Wrote {args.out / 'results.json'} and {args.out / 'onnx_latency.md'} in {results['setup']['seconds']:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
