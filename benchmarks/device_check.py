"""One command for a GPU machine: the full-size training paths under accelerate, and every family's quick reproduction
on CUDA. Prepared on CPU (`--smoke` runs the same steps with tiny presets on the CPU, which the test suite does), to be
run once where a GPU is lent:

    python benchmarks/device_check.py                # <= ~8 minutes on one H100/H200-class GPU
    python benchmarks/device_check.py --smoke        # the same checks, tiny presets, CPU, ~1 minute

Per run it prints samples/s, peak device memory and whether the saved folder reloads (AutoModel.from_pretrained, every
tensor finite and equal to the state the trainer saved). Runs, each 20 optimiser steps in bf16:
  - T-JEPA with the BERT-Large backbone (`preset=full`), batch 16 x 128 tokens;
  - JEPA-Reasoner 0.9B (`preset=full`) then the 198M Mono-Talker on its chains, batch 8;
each under the FSDP2 config (single process) and the DDP config (single process), gradient checkpointing off and on;
then `hf-jepa reproduce <family> --quick` for the four reproductions. Results go to `--out` (markdown).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs" / "accelerate"


def _single_process_config(name: str, directory: Path, cpu: bool) -> Path:
    """The shipped accelerate config with one process (one GPU here); on CPU, the 2-process CPU config's settings."""
    config = yaml.safe_load((CONFIGS / name).read_text())
    config.update(num_processes=1, num_machines=1, machine_rank=0)
    config.pop("gpu_ids", None)
    if cpu:  # FSDP/DeepSpeed need a GPU; the CPU smoke run checks the same commands through DDP on the CPU
        config = yaml.safe_load((CONFIGS / "cpu_2proc.yaml").read_text())
        config.update(num_processes=1, mixed_precision="no")
    path = directory / f"single-{name}"
    path.write_text(yaml.safe_dump(config))
    return path


def _train(family: str, settings: list[str], output_dir: Path, config: Path, env: dict) -> dict:
    accelerate = Path(sys.executable).with_name("accelerate")
    command = [
        str(accelerate),
        "launch",
        "--config_file",
        str(config),
        "-m",
        "hf_jepa.cli",
        "train",
        family,
        "--set",
        *settings,
        "--output-dir",
        str(output_dir),
    ]
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or ["?"]
        errors = [line[line.index("error:") :] for line in lines if "error:" in line]  # the CLI's one-line error
        return {"ok": False, "error": (errors or lines)[-1], "wall_s": wall}
    metrics = json.loads((output_dir / "eval_results.json").read_text())
    return {"ok": True, "metrics": metrics, "wall_s": wall, "reload": _reload_check(output_dir)}


def _reload_check(output_dir: Path) -> str:
    """Reload the saved folder with the Auto classes; every tensor finite and equal to the saved safetensors."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModel

    import hf_jepa  # noqa: F401  (registers the Auto classes)

    model = AutoModel.from_pretrained(output_dir)
    saved = load_file(str(output_dir / "model.safetensors"))
    state = model.state_dict()
    missing = sorted(set(saved) - set(state))
    if missing:
        return f"missing {missing[:3]}"
    bad = [k for k, v in saved.items() if not torch.equal(state[k].cpu(), v) or not torch.isfinite(v.float()).all()]
    return "ok" if not bad else f"differs: {bad[:3]}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Full-size training and quick reproductions on a GPU.")
    parser.add_argument("--smoke", action="store_true", help="tiny presets on the CPU (what the test suite runs)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default="research/speed/device_check/device_check.md")
    parser.add_argument("--work-dir", default=None, help="where runs are written (default: a temporary folder)")
    parser.add_argument(
        "--reproductions",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run every family's `reproduce --quick` (default: on, except with --smoke: minutes on a CPU)",
    )
    args = parser.parse_args(argv)

    import torch

    cpu = args.smoke or not torch.cuda.is_available()
    if not args.smoke and cpu:
        print("device_check: no CUDA device; use --smoke for the CPU run of the same checks", file=sys.stderr)
        return 2
    device = "cpu" if cpu else torch.cuda.get_device_name(0)
    # a temporary folder (removed at the end: the full-size runs write tens of GB) unless --work-dir keeps them
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="hf-jepa-device-check-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "4")}
    if cpu:
        env["ACCELERATE_USE_CPU"] = "1"
    preset = "tiny" if args.smoke else "full"
    precision = "no" if cpu else "bf16"
    common = [
        f"preset={preset}",
        f"max_steps={args.steps}",
        f"mixed_precision={precision}",
        "logging_steps=5",
        "disable_progress_bar=true",
        "plot=false",
        "warmup_steps=2",
    ]
    runs = []  # (label, family, settings, needs reasoner dir)
    # The tiny preset's BERT has 64 positions; the full one 512.
    text = ["data=embedded", "per_device_batch_size=16", f"max_length={64 if args.smoke else 128}", "downstream=false"]
    reasoning = ["per_device_batch_size=8", "num_train_examples=512", "num_eval_examples=32"]
    for config_name in ("fsdp2.yaml", "multi_gpu_ddp.yaml"):
        config = _single_process_config(config_name, work, cpu)
        for checkpointing in (False, True):
            tag = f"{config_name.removesuffix('.yaml')}, checkpointing {'on' if checkpointing else 'off'}"
            flag = f"gradient_checkpointing={str(checkpointing).lower()}"
            runs.append((f"T-JEPA BERT-Large ({tag})", "t-jepa", common + text + [flag], config, None))
            reasoner_dir = work / f"reasoner-{config_name}-{checkpointing}"
            runs.append(
                (f"JEPA-Reasoner 0.9B ({tag})", "jepa-reasoner", common + reasoning + [flag], config, reasoner_dir)
            )
            runs.append(
                (
                    f"Mono-Talker 198M ({tag})",
                    "jepa-mono-talker",
                    common + reasoning + [flag, f"reasoner={reasoner_dir}"],
                    config,
                    None,
                )
            )

    lines = [
        f"Device check on {device} ({'smoke: tiny presets' if args.smoke else 'full presets'}), "
        f"{args.steps} steps per run.",
        "",
        "| run | samples/s | peak memory (GiB) | wall (s) | reload |",
        "|---|---:|---:|---:|---|",
    ]
    failures = 0
    for label, family, settings, config, output_dir in runs:
        output_dir = output_dir or work / label.replace(" ", "-").replace("(", "").replace(")", "").replace(",", "")
        outcome = _train(family, settings + ["overwrite_output_dir=true"], output_dir, config, env)
        if not outcome["ok"]:
            failures += 1
            lines.append(f"| {label} | failed: {outcome['error'][:120]} | | {outcome['wall_s']:.0f} | |")
        else:
            metrics = outcome["metrics"]
            batch = next(int(s.split("=")[1]) for s in settings if s.startswith("per_device_batch_size="))
            rate = args.steps * batch / max(metrics.get("train_time_s", float("nan")), 1e-9)
            peak = metrics.get("peak_memory_gib")
            lines.append(
                f"| {label} | {rate:,.1f} | {'n/a' if peak is None else f'{peak:.2f}'} | "
                f"{outcome['wall_s']:.0f} | {outcome['reload']} |"
            )
        print(lines[-1], flush=True)

    reproductions = ("bro-jepa", "epm-jepa", "t-jepa", "jepa-reasoner")
    if args.reproductions is False or (args.reproductions is None and args.smoke):
        reproductions = ()
        lines += ["", "Reproductions skipped (--smoke: each takes minutes on a CPU; --reproductions runs them)."]
    else:
        lines += ["", "| reproduction (--quick) | exit | wall (s) |", "|---|---:|---:|"]
    for family in reproductions:
        command = [
            sys.executable,
            "-m",
            "hf_jepa.cli",
            "reproduce",
            family,
            "--quick",
            "--output-dir",
            str(work / f"reproduce-{family}"),
        ]
        if family in ("bro-jepa", "epm-jepa"):
            command += ["--data", "embedded"]
        if family == "t-jepa":
            command += ["--set", "mnist=embedded"]
        started = time.perf_counter()
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        failures += result.returncode != 0
        lines.append(f"| {family} | {result.returncode} | {time.perf_counter() - started:.0f} |")
        print(lines[-1], flush=True)
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"\n{failures} failure(s); written to {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
