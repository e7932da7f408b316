"""Oracle memory: every buffer entry is g * 1 (the gravity itself), so e_agg is an exact function of g. Can the
memory path (B injection / C dynamic LoRA) use a perfectly informative buffer at all? (research/epm_jepa/memory_diagnosis/README.md, oracle rows)"""

import argparse
import json
import os
import time

import torch

from hf_jepa.data import MnistSplits
from hf_jepa.data.moving_mnist import EPISODIC_EVAL_GRAVITIES
from hf_jepa.metrics.world_model import evaluate_world_model
from hf_jepa.modeling.epm_jepa import EpmJepaConfig, EpmJepaModel
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
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--set", nargs="*", default=[])
ap.add_argument("--train-base", action="store_true")
a = ap.parse_args()
overrides = dict(s.split("=", 1) for s in a.set)
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
episodes = build_episodic_eval(splits, data_args, 64, EPISODIC_EVAL_GRAVITIES, 8)
recipe = EpmJepaRecipe(
    EpmJepaConfig.cpu_fast(track=a.track, **overrides),
    data_args,
    seed=0,
    splits=splits,
    eval_pixels=build_eval_pixels(splits, data_args, 64),
    episodic_eval=episodes,
)
current = {"g": 0.0}
original_batch = recipe.train_batch


def train_batch(step, rank, batch_size):
    current["g"] = recipe.episodes.gravity_of(step)
    return original_batch(step, rank, batch_size)


recipe.train_batch = train_batch
if a.train_base:  # the predictor base trains with the memory (not the paper's frozen base)
    original_build = recipe.build_model

    def build_model():
        model = original_build()
        for name, p in model.predictor.named_parameters():
            if "lora_" not in name:
                p.requires_grad_(True)
        return model

    recipe.build_model = build_model
original_warm = EpmJepaModel.warm_experience


def oracle_warm(self, pixel_values, gated=False):
    written = original_warm(self, pixel_values, gated)
    self.experience_buffer.entries[: self.experience_buffer.occupancy] = current["g"]
    return written


EpmJepaModel.warm_experience = oracle_warm
args = TrainingArguments(
    output_dir=a.out,
    seed=0,
    overwrite_output_dir=True,
    **{**ADAPT_DEFAULTS, "max_steps": a.steps, "learning_rate": a.lr, "logging_steps": max(1, a.steps // 5)},
)
model = JepaTrainer(recipe, args).train().model.eval()
res = {}
with torch.no_grad():
    for g, e in episodes.items():
        row = {}
        for name, gb in (("same", g), ("different", max(episodes, key=lambda o: abs(o - g))), ("empty", None)):
            model.reset_experience()
            if gb is not None:
                current["g"] = gb
                model.warm_experience(e["support"])
            row[name] = round(evaluate_world_model(model, e["query"])["normalized_error"], 4)
        res[str(g)] = row


def mean(k):
    return round(sum(r[k] for r in res.values()) / len(res), 4)


print(
    json.dumps(
        {
            "train_base": a.train_base,
            "track": a.track,
            "steps": a.steps,
            "overrides": overrides,
            **{k: mean(k) for k in ("same", "different", "empty")},
            "per_g": res,
            "wall_s": round(time.time() - t0, 1),
        }
    )
)
