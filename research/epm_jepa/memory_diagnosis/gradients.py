"""Measurements (b) and (e) of research/epm_jepa/memory_diagnosis/README.md: the gradient norm per part of one episodic batch and which
parts train, for tracks C (epm) and B (ei) fresh from RUN_DIR/base and after RUN_DIR's experience phase; then a
leave-one-out ridge probe of g from buffer summaries (60 episodes; the README's probe numbers (d) come from probe.py).

usage: python research/epm_jepa/memory_diagnosis/gradients.py RUN_DIR   (RUN_DIR holds base/, epm/ and ei/; MNIST from $HF_JEPA_MNIST, default
../shared/data/mnist)"""

import os
import sys

import torch

from hf_jepa.data import MnistSplits
from hf_jepa.data.moving_mnist import EPISODIC_TRAIN_GRAVITIES, GravityEpisodes, MovingMnist
from hf_jepa.modeling.epm_jepa import EpmJepaModel
from hf_jepa.recipes.epm_jepa import set_trainable_parts

if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
    sys.exit(__doc__)
run = sys.argv[1]
# The real MNIST folder the numbers were measured on (the repository's ../shared/data/mnist by default).
MNIST = os.environ.get("HF_JEPA_MNIST", "../shared/data/mnist")
splits = MnistSplits(MNIST)
world = MovingMnist(
    images=splits.train_images, labels=splits.train_labels, sequence_length=8, num_digits=2, canvas_size=64, seed=0
)
episodes = GravityEpisodes(world, EPISODIC_TRAIN_GRAVITIES, 8)


def group(name):
    if ".lora_A." in name:
        return "lora_A(V)"
    if ".lora_B." in name:
        return "lora_B(U)"
    if name.startswith("experience_encoder.aggregator") or name.startswith("experience_encoder.query"):
        return "aggregator"
    if name.startswith("experience_encoder"):
        return "memory encoder"
    return name.split(".")[0]


def grads(model, ep):
    model.train()
    model.zero_grad()
    out = model(ep["pixel_values"], experience_pixel_values=ep["experience_pixel_values"])
    out.loss.backward()
    norms, trainable = {}, {}
    for n, p in model.named_parameters():
        g = group(n)
        trainable.setdefault(g, set()).add(p.requires_grad)
        if p.grad is not None:
            norms[g] = norms.get(g, 0.0) + float(p.grad.norm()) ** 2
    return {g: (round(v**0.5, 8)) for g, v in norms.items()}, {g: sorted(v) for g, v in trainable.items()}


ep = episodes.episode(32, 3)
for track in ("epm", "ei"):
    fresh = EpmJepaModel.from_base(f"{run}/base", track=track)
    set_trainable_parts(fresh, "adapt")
    g, t = grads(fresh, ep)
    print(track, "fresh-from-base grad norms:", g)
    print(track, "requires_grad:", t)
    trained = EpmJepaModel.from_pretrained(f"{run}/{track}")
    set_trainable_parts(trained, "adapt")
    g, _ = grads(trained, ep)
    print(track, "after 60 episodic steps grad norms:", g)

# (d) probe: does the buffer carry g?  per-episode summaries, ridge regression, leave-one-out R^2
model = EpmJepaModel.from_pretrained(f"{run}/epm").eval()
feats = {
    "buffer mean (raw entries)": [],
    "e_agg (mean over queries)": [],
    "query context 2nd difference (in-context)": [],
}
gs = []
with torch.no_grad():
    for e in range(60):
        gvar = EPISODIC_TRAIN_GRAVITIES[e % 5]
        sup = episodes.support(1000 + e, gvar)
        model.reset_experience()
        model.warm_experience(sup)
        entries = model.experience_buffer.valid_entries()
        feats["buffer mean (raw entries)"].append(entries.mean(0))
        q = world.sample_batch(4, step=2000 + e, gravity=gvar)["pixel_values"]
        lat = model.encode(q)
        win = model.context_windows(lat).flatten(0, 1)
        feats["e_agg (mean over queries)"].append(model.aggregate_experience(win[:, -1]).mean(0))
        # one window's own evidence: z_t - 2 z_{t-1} + z_{t-2}, averaged over one sequence's first window only
        w0 = model.context_windows(lat)[0, 0]
        feats["query context 2nd difference (in-context)"].append(torch.cat([w0.flatten(), w0[2] - 2 * w0[1] + w0[0]]))
        gs.append(gvar)
y = torch.tensor(gs)
for name, rows in feats.items():
    X = torch.stack(rows).double()
    X = (X - X.mean(0)) / (X.std(0) + 1e-8)
    preds = []
    for i in range(len(y)):
        m = torch.ones(len(y), dtype=torch.bool)
        m[i] = False
        Xm, ym = X[m], y[m].double()
        lam = 10.0
        Xa = torch.cat([Xm, torch.ones(len(ym), 1, dtype=torch.double)], 1)
        w = torch.linalg.solve(Xa.T @ Xa + lam * torch.eye(Xa.shape[1], dtype=torch.double), Xa.T @ ym)
        preds.append(float(torch.cat([X[i], torch.ones(1, dtype=torch.double)]) @ w))
    p = torch.tensor(preds)
    r2 = 1 - ((p - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    print(f"probe g <- {name}: LOO R^2 = {r2:.3f} (60 episodes, 5 gravities, ridge 10)")
