"""BRo-JEPA time to accuracy: zero-shot accuracy vs seconds of training, `hf-jepa train bro-jepa` against the plain
single-file reference (`bro_reference.py`), measured in the same run.

Each system is trained `--repeats` times (repeat r with seed `--seed` + r), the systems interleaved (A B A B ...) so
that a change in the machine's load hits both alike. Every run is evaluated at several checkpoints with hf_jepa's protocol (prototypes from all training
images, all test images, zero-shot = mean over the unseen ops +-2..+-9); evaluation time is kept off the training
clock. The hf-jepa runs go through `JepaTrainer` with the family's defaults (`TRAINING_DEFAULTS` and the cpu_fast
preset) unless `--hf-set` overrides them, so the clock includes the trainer's own per-step work; the checkpoints are
steps of its one schedule (the accuracy at a checkpoint is what that run had reached, the last one is what the command
delivers).

Every checkpoint also scores zero-shot accuracy on the test digits moved by 2 px and turned by +-15 degrees
(`hf_jepa.data.PERTURBATIONS`: the same perturbed images for every system), the robustness a user drawing a digit
needs. `--variant "KEY=VALUE ..."` adds an hf-jepa system trained with those overrides on top of `--hf-set` (e.g.
`--variant max_shift=2` for the shift augmentation), interleaved with the others.

Writes `research/speed/time_to_accuracy/time_to_accuracy.md` and `research/speed/time_to_accuracy/time_to_accuracy.png` (mean and min..max over repeats) with the
machine's load average at start and end.

Run: `python benchmarks/time_to_accuracy.py [--threads 2] [--repeats 2] [--hf-set max_steps=600 ...] [--variant ...]`
"""

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bro_reference  # noqa: E402

from hf_jepa.data import PERTURBATIONS, MnistSplits, perturb_images  # noqa: E402
from hf_jepa.metrics import evaluate_modular_arithmetic, zero_shot_under_perturbations  # noqa: E402
from hf_jepa.recipes.bro_jepa import FAMILIES, BroJepaDataArguments, BroJepaRecipe  # noqa: E402
from hf_jepa.trainers import JepaTrainer, TrainingArguments  # noqa: E402

FAMILY = FAMILIES[0]
CHECKPOINT_FRACTIONS = (0.25, 0.5, 0.75, 1.0)


class _CheckpointedRecipe(BroJepaRecipe):
    """The BRo-JEPA recipe, evaluating the model at chosen steps from `on_log` and timing those evaluations."""

    def __init__(self, *args, eval_steps=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.eval_steps, self.eval_seconds, self.rows = set(eval_steps), 0.0, []

    def on_log(self, model, step, record):
        if step not in self.eval_steps:
            return {}
        start = time.perf_counter()
        was_training = model.training
        self.finalize(model)
        pixels = self._pixels(self.splits.test_images)
        metrics = evaluate_modular_arithmetic(model, pixels, self.splits.test_labels)
        perturbed = zero_shot_under_perturbations(model, self.splits.test_images, self.splits.test_labels, self._pixels)
        model.train(was_training)
        # elapsed_s was taken before this call; earlier evaluations are inside it and come off the clock.
        self.rows.append(
            (
                record["elapsed_s"] - self.eval_seconds,
                step,
                metrics["zero_shot_accuracy"],
                metrics["seen_accuracy"],
                {name: perturbed[f"zero_shot_accuracy_{name}"] for name in PERTURBATIONS},
            )
        )
        self.eval_seconds += time.perf_counter() - start
        return {}


def parse_overrides(items):
    values = {}
    for item in items or ():
        key, _, value = item.partition("=")
        values[key] = yaml.safe_load(value)
    return values


def run_hf_jepa(splits, overrides, seed=0, fractions=CHECKPOINT_FRACTIONS):
    """One `hf-jepa train bro-jepa` run (family defaults + `overrides`), evaluated at CHECKPOINT_FRACTIONS of its
    steps; returns `[(train_seconds, step, zero_shot, seen, {perturbation: zero_shot}), ...]`."""
    train_keys = set(TrainingArguments.__dataclass_fields__)
    train = {**FAMILY.training_defaults, **{k: v for k, v in overrides.items() if k in train_keys}}
    data_keys = set(BroJepaDataArguments.__dataclass_fields__)
    data = {k: v for k, v in overrides.items() if k in data_keys}
    model = {k: v for k, v in overrides.items() if k not in train_keys | data_keys}
    steps = train["max_steps"]
    eval_steps = sorted({max(1, round(f * steps)) for f in fractions})
    with tempfile.TemporaryDirectory() as output_dir:
        args = TrainingArguments(
            **train,
            output_dir=output_dir,
            overwrite_output_dir=True,
            disable_progress_bar=True,
            save_model=False,
            logging_steps=min(eval_steps) if len(eval_steps) == 1 else _gcd(eval_steps),
            seed=seed,
        )
        recipe = _CheckpointedRecipe(
            FAMILY.make_config(**model),
            BroJepaDataArguments(**{**data, "plot": False}),
            seed=seed,
            splits=splits,
            eval_steps=eval_steps,
        )
        JepaTrainer(recipe, args).train()
    return recipe.rows


def _gcd(values):
    import math

    out = 0
    for v in values:
        out = math.gcd(out, v)
    return out


def run_reference(splits, seconds, seed=0):
    checkpoints = [seconds * f for f in CHECKPOINT_FRACTIONS]
    perturbed = {name: perturb_images(splits.test_images, name) for name in PERTURBATIONS}
    return bro_reference.train(
        splits.train_images,
        splits.train_labels,
        splits.test_images,
        splits.test_labels,
        checkpoints,
        seed=seed,
        perturbed_test_images=perturbed,
    )


def first_time_at(rows, threshold):
    return next((row[0] for row in rows if row[2] >= threshold), None)


def _spread(values, digits=2):
    values = list(values)
    return f"{sum(values) / len(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def summarise(name, runs):
    """Markdown rows: per checkpoint, mean (min-max) over the repeats of seconds, zero-shot clean and perturbed."""
    lines = []
    for index in range(len(runs[0])):
        at = [r[index] for r in runs]
        perturbed = " | ".join(_spread(100 * row[4][p] for row in at) for p in PERTURBATIONS)
        lines.append(
            f"| {name} | {at[0][1]} | {_spread((row[0] for row in at), 1)} | {_spread(100 * row[2] for row in at)} "
            f"| {sum(100 * row[3] for row in at) / len(at):.2f} | {perturbed} |"
        )
    return lines


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for name, runs in results.items():
        seconds = [sum(r[i][0] for r in runs) / len(runs) for i in range(len(runs[0]))]
        accs = [[100 * r[i][2] for r in runs] for i in range(len(runs[0]))]
        mean = [sum(a) / len(a) for a in accs]
        line = axis.plot(seconds, mean, marker="o", label=name)[0]
        axis.fill_between(seconds, [min(a) for a in accs], [max(a) for a in accs], alpha=0.2, color=line.get_color())
    axis.axhline(99.0, color="grey", lw=0.8, ls="--")
    axis.set_ylim(80, 100)  # the region that matters; earlier, lower checkpoints are in the table
    axis.set_xlabel("training seconds (evaluation excluded)")
    axis.set_ylabel("zero-shot accuracy, ops +-2..+-9 (%)")
    axis.set_title("BRo-JEPA time to accuracy (MNIST)")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"
    parser.add_argument("--data", default=str(default) if default.exists() else "embedded")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--reference-seconds", type=float, default=80.0, help="training seconds of each reference run")
    parser.add_argument("--hf-set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides of the hf-jepa run")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar='"KEY=VALUE ..."',
        help="an extra hf-jepa system: these overrides on top of --hf-set (repeatable)",
    )
    parser.add_argument("--systems", nargs="+", default=["hf-jepa", "reference"], choices=["hf-jepa", "reference"])
    parser.add_argument("--seed", type=int, default=0, help="seed of the first repeat (repeat r uses seed + r)")
    parser.add_argument("--label", default="", help="suffix of the report's file names")
    parser.add_argument(
        "--out", default=str(Path(__file__).resolve().parents[1] / "research" / "speed" / "time_to_accuracy")
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_start = os.getloadavg()
    splits = MnistSplits(args.data)
    overrides = parse_overrides(args.hf_set)
    # name -> hf-jepa overrides (None: the reference)
    systems = {name: (overrides if name == "hf-jepa" else None) for name in args.systems}
    for variant in args.variant:
        systems[f"hf-jepa {variant}"] = {**overrides, **parse_overrides(variant.split())}
    results = {name: [] for name in systems}
    for repeat in range(args.repeats):
        for name, system_overrides in systems.items():
            seed = args.seed + repeat  # the spread covers the seed as well as the machine
            rows = (
                run_reference(splits, args.reference_seconds, seed=seed)
                if system_overrides is None
                else run_hf_jepa(splits, system_overrides, seed=seed)
            )
            results[name].append(rows)
            print(name, repeat, [(round(r[0], 1), r[1], round(100 * r[2], 2), r[4]) for r in rows], flush=True)
    load_end = os.getloadavg()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "time_to_accuracy" + (f"_{args.label}" if args.label else "")
    plot(results, out / f"{stem}.png")
    hf_label = "hf-jepa train bro-jepa" + (" " + " ".join(args.hf_set) if args.hf_set else " (defaults)")
    lines = [
        "# BRo-JEPA time to accuracy",
        "",
        f"`python benchmarks/time_to_accuracy.py {' '.join(sys.argv[1:])}`",
        "",
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {os.cpu_count()} cores, "
        f"{platform.processor() or platform.machine()}, data: {splits.source}",
        f"load average (1/5/15 min) at start {tuple(round(x, 2) for x in load_start)}, "
        f"at end {tuple(round(x, 2) for x in load_end)}",
        f"{args.repeats} repeats per system, interleaved; seconds of training with evaluation excluded; "
        "mean (min-max) over the repeats.",
        f"hf-jepa: `{hf_label}`; `hf-jepa KEY=VALUE`: the same with those overrides; "
        "reference: `benchmarks/bro_reference.py` (fp32, batch 256, AdamW 2e-3, EMA 0.99).",
        "Zero-shot (ops +-2..+-9) on the clean test digits, on the same digits moved by 2 px in one of the 8 directions "
        "and turned by +-15 degrees (`hf_jepa.data.perturb_images`, seed 0; prototypes from the clean training digits).",
        "",
        "| system | step | train seconds | zero-shot % | seen % | zero-shot, moved 2 px % | zero-shot, turned 15° % |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        lines += summarise(name, runs)
    lines += [
        "",
        "Side by side: first checkpoint at >= 99.0% clean zero-shot (seconds, per repeat) and the last checkpoint's "
        "accuracies (mean over the repeats):",
        "",
        "| system | seconds to 99% clean | clean % | moved 2 px % | turned 15° % |",
        "|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        times = [first_time_at(r, 0.99) for r in runs]
        last = [r[-1] for r in runs]
        perturbed = " | ".join(f"{sum(100 * row[4][p] for row in last) / len(last):.2f}" for p in PERTURBATIONS)
        lines.append(
            f"| {name} | {', '.join('not reached' if t is None else f'{t:.1f}' for t in times)} "
            f"| {sum(100 * row[2] for row in last) / len(last):.2f} | {perturbed} |"
        )
    lines.append("")
    (out / f"{stem}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
