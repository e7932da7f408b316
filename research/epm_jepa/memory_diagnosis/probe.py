"""Measurement (d) of research/epm_jepa/memory_diagnosis/README.md: ridge probe of g from per-episode buffer summaries (150 episodes,
5-fold over episodes, CV-chosen ridge); for WHICH=base also the base's D per gravity.

usage: python research/epm_jepa/memory_diagnosis/probe.py RUN_DIR base|epm|ei   (MNIST from $HF_JEPA_MNIST, default ../shared/data/mnist)"""

import os
import sys

import torch

from hf_jepa.data import MnistSplits
from hf_jepa.data.moving_mnist import EPISODIC_TRAIN_GRAVITIES, GravityEpisodes, MovingMnist
from hf_jepa.metrics.world_model import evaluate_world_model
from hf_jepa.modeling.epm_jepa import EpmJepaModel

if len(sys.argv) != 3 or sys.argv[1].startswith("-"):
    sys.exit(__doc__)
run, which = sys.argv[1], sys.argv[2]
# The real MNIST folder the numbers were measured on (the repository's ../shared/data/mnist by default).
MNIST = os.environ.get("HF_JEPA_MNIST", "../shared/data/mnist")
splits = MnistSplits(MNIST)
world = MovingMnist(
    images=splits.train_images, labels=splits.train_labels, sequence_length=8, num_digits=2, canvas_size=64, seed=0
)
episodes = GravityEpisodes(world, EPISODIC_TRAIN_GRAVITIES, 8)
model = EpmJepaModel.from_pretrained(f"{run}/{which}").eval()
L = model.config.latent_dim
with torch.no_grad():
    if which == "base":
        for g in (0.0, 0.1, 0.3, 0.6):
            q = world.sample_batch(64, step=5000, gravity=g)["pixel_values"]
            r = evaluate_world_model(model, q)
            print(f"base D at g={g}: {r['normalized_error']:.4f}")
    feats = {
        "buffer mean z_t,z_t+1": [],
        "buffer mean residual": [],
        "buffer mean (z_t+1 - z_t)": [],
        "pixel row centre-of-mass 2nd diff (oracle)": [],
    }
    gs = []
    N = 150
    for e in range(N):
        g = EPISODIC_TRAIN_GRAVITIES[e % 5]
        sup = episodes.support(1000 + e, g)
        t = model.encode(sup, use_target_encoder=True)
        k = model.config.context_length
        win = model.context_windows(model.encode(sup))
        pred = model.predictor(win.flatten(0, 1)).unflatten(0, win.shape[:2])
        cur, nxt = t[:, k - 1 : -1], t[:, k:]
        feats["buffer mean z_t,z_t+1"].append(torch.cat([cur, nxt], -1).flatten(0, 1).mean(0))
        feats["buffer mean residual"].append((nxt - pred).flatten(0, 1).mean(0))
        feats["buffer mean (z_t+1 - z_t)"].append((nxt - cur).flatten(0, 1).mean(0))
        img = sup[:, :, 0]  # (S,T,H,W)
        rows = torch.arange(img.shape[-2]).float()
        com = (img.sum(-1) * rows).sum(-1) / img.sum((-1, -2))
        feats["pixel row centre-of-mass 2nd diff (oracle)"].append(
            (com[:, 2:] - 2 * com[:, 1:-1] + com[:, :-2]).mean()[None]
        )
        gs.append(g)
y = torch.tensor(gs, dtype=torch.double)


def cv_r2(X, lam):
    X = (X - X.mean(0)) / (X.std(0) + 1e-8)
    Xa = torch.cat([X, torch.ones(len(y), 1, dtype=torch.double)], 1)
    preds = torch.empty(len(y), dtype=torch.double)
    folds = torch.arange(len(y)) % 5  # 5-fold; each fold holds every gravity
    for f in range(5):
        tr, te = folds != (f), folds == f
        tr = torch.arange(len(y)) // 5 % 5 != f
        te = ~tr
        w = torch.linalg.solve(Xa[tr].T @ Xa[tr] + lam * torch.eye(Xa.shape[1], dtype=torch.double), Xa[tr].T @ y[tr])
        preds[te] = Xa[te] @ w
    return float(1 - ((preds - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())


for name, rows in feats.items():
    X = torch.stack(rows).double()
    best = max((cv_r2(X, lam), lam) for lam in (0.1, 1, 10, 100, 1000))
    print(
        f"[{which}] probe g <- {name} ({X.shape[1]} dims): 5-fold R^2 = {best[0]:.3f} (ridge {best[1]}, {N} episodes)"
    )
