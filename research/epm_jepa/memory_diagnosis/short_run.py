"""One experience-phase run from an existing base, then the buffer swap and adaptation-k readouts (1 seed;
research/epm_jepa/memory_diagnosis/README.md, short-run rows)."""

import argparse
import json
import os
import time
from pathlib import Path

import torch

from hf_jepa.data import MnistSplits
from hf_jepa.data.moving_mnist import EPISODIC_EVAL_GRAVITIES, EPISODIC_UNSEEN_GRAVITIES
from hf_jepa.metrics.epm_memory import adaptation_curve, buffer_swap_ablation
from hf_jepa.modeling.epm_jepa import EpmJepaConfig
from hf_jepa.recipes.epm_jepa import (
    ADAPT_DEFAULTS,
    EpmJepaDataArguments,
    EpmJepaRecipe,
    build_episodic_eval,
    build_eval_pixels,
)
from hf_jepa.trainers import JepaTrainer, TrainingArguments

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--base")
ap.add_argument("--out")
ap.add_argument("--track")
ap.add_argument("--steps", type=int, default=60)
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--set", nargs="*", default=[])
ap.add_argument("--gravities", type=float, nargs="*")
a = ap.parse_args()
overrides = {k: json.loads(v) if v[0] in "0123456789[-" else v for k, v in (s.split("=", 1) for s in a.set)}
t0 = time.time()
# The real MNIST folder the numbers were measured on (the repository's ../shared/data/mnist by default).
MNIST = os.environ.get("HF_JEPA_MNIST", "../shared/data/mnist")
splits = MnistSplits(MNIST)
data_args = EpmJepaDataArguments(
    data=MNIST,
    eval_sequences=64,
    episode_support=8,
    eval_every=0,
    stage="adapt",
    init_from=a.base,
    protocol="episodic",
    plot=False,
)
eval_pixels = build_eval_pixels(splits, data_args, 64)
episodes = build_episodic_eval(splits, data_args, 64, EPISODIC_EVAL_GRAVITIES, 16)
recipe = EpmJepaRecipe(
    EpmJepaConfig.cpu_fast(track=a.track, **overrides),
    data_args,
    seed=0,
    splits=splits,
    eval_pixels=eval_pixels,
    episodic_eval={g: {**e, "support": e["support"][:8]} for g, e in episodes.items()},
)
if a.gravities:
    from hf_jepa.data.moving_mnist import GravityEpisodes

    recipe.episodes = GravityEpisodes(recipe.world, tuple(a.gravities), 8)
args = TrainingArguments(
    output_dir=a.out,
    seed=0,
    overwrite_output_dir=True,
    **{**ADAPT_DEFAULTS, "max_steps": a.steps, "learning_rate": a.lr, "logging_steps": max(1, a.steps // 5)},
)
model = JepaTrainer(recipe, args).train().model
model.eval()
with torch.no_grad():
    swap = buffer_swap_ablation(model, episodes)
    adapt = adaptation_curve(model, episodes, [0, 1, 4, 16]) if a.track != "vanilla" else {}


def mean(xs):
    return sum(xs) / len(xs)


res = {k: mean([v[k] for v in swap.values()]) for k in ("same", "different", "empty")}
res["per_g"] = {str(g): {k: round(v[k], 4) for k in ("same", "different", "empty")} for g, v in swap.items()}
res["adapt_unseen"] = (
    {k: mean([adapt[g][k] for g in EPISODIC_UNSEEN_GRAVITIES]) for k in (0, 1, 4, 16)} if adapt else {}
)
res["wall_s"] = round(time.time() - t0, 1)
res.update(gravities=a.gravities, track=a.track, steps=a.steps, lr=a.lr, overrides=overrides)
print(json.dumps(res))
Path(a.out, "short_run.json").write_text(json.dumps(res, indent=1))
