"""Is g readable from one context window? ridge probe of g from a window's latents (k=3: z_{t-2}, z_{t-1}, z_t) vs
from its last two latents only (what a context_length=2 predictor sees), 5-fold over episodes (measurement (d) of research/epm_jepa/memory_diagnosis/README.md).

usage: python research/epm_jepa/memory_diagnosis/probe_context.py MODEL_DIR   (MNIST from $HF_JEPA_MNIST, default ../shared/data/mnist)"""

import os
import sys

import torch

from hf_jepa.data import MnistSplits
from hf_jepa.data.moving_mnist import EPISODIC_TRAIN_GRAVITIES, MovingMnist
from hf_jepa.modeling.epm_jepa import EpmJepaModel

if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
    sys.exit(__doc__)
model = EpmJepaModel.from_pretrained(sys.argv[1]).eval()
# The real MNIST folder the numbers were measured on (the repository's ../shared/data/mnist by default).
MNIST = os.environ.get("HF_JEPA_MNIST", "../shared/data/mnist")
splits = MnistSplits(MNIST)
world = MovingMnist(
    images=splits.train_images, labels=splits.train_labels, sequence_length=8, num_digits=2, canvas_size=64, seed=0
)
X3, X2, ys, grp = [], [], [], []
with torch.no_grad():
    for e in range(100):
        g = EPISODIC_TRAIN_GRAVITIES[e % 5]
        q = world.sample_batch(8, step=3000 + e, gravity=g)["pixel_values"]
        w = model.context_windows(model.encode(q)).flatten(0, 1)  # (N, 3, D)
        X3.append(torch.cat([w.flatten(1), w[:, 2] - 2 * w[:, 1] + w[:, 0]], 1))
        X2.append(w[:, 1:].flatten(1))
        ys.append(torch.full((w.shape[0],), g))
        grp.append(torch.full((w.shape[0],), e))
y, grp = torch.cat(ys).double(), torch.cat(grp)


def r2(X):
    X = torch.cat(X).double()
    X = (X - X.mean(0)) / (X.std(0) + 1e-8)
    X = torch.cat([X, torch.ones(len(y), 1, dtype=torch.double)], 1)
    best = -9
    for lam in (1, 10, 100, 1000):
        p = torch.empty_like(y)
        for f in range(5):
            te = (grp // 5) % 5 == f
            tr = ~te
            wgt = torch.linalg.solve(X[tr].T @ X[tr] + lam * torch.eye(X.shape[1], dtype=torch.double), X[tr].T @ y[tr])
            p[te] = X[te] @ wgt
        best = max(best, float(1 - ((p - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()))
    return best


print(
    f"per-window probe of g, {len(y)} windows: from 3 latents + 2nd difference R^2 = {r2(X3):.3f}; from the last 2 latents R^2 = {r2(X2):.3f}"
)
