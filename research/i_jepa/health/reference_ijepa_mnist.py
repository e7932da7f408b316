"""Minimal independent I-JEPA on MNIST (plain PyTorch) with swap flags for bisection against hf_jepa
(research/i_jepa/health/README.md). Prints one JSON diagnostics line every --log steps.

usage: python research/i_jepa/health/reference_ijepa_mnist.py [--steps 800] [--until-step STOP] [FLAGS]
(--until-step stops after the diagnostics line of step STOP, as the README's table rows did)"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from hf_jepa.data import MnistSplits
from hf_jepa.metrics.collapse import effective_rank
from hf_jepa.metrics.downstream import linear_probe_accuracy

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--steps", type=int, default=800)
p.add_argument("--until-step", type=int, default=None, help="stop after the diagnostics line of this step")
p.add_argument("--data", default=os.environ.get("HF_JEPA_MNIST", "../shared/data/mnist"), help="MNIST folder")
p.add_argument("--log", type=int, default=100)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--model", default="ref")  # ref | ours (IJepaModel)
p.add_argument("--sampler", default="ref")  # ref | ours (MultiBlockMaskSampler with cpu_fast defaults)
p.add_argument("--opt", default="ref")  # ref | ours (hf_jepa.trainers optim/ema + clip 1.0)
p.add_argument("--loss", default="mse")  # mse | smooth_l1
p.add_argument("--pos", default="sincos")  # sincos | learned
p.add_argument("--bf16", action="store_true")
p.add_argument("--pred_w", type=int, default=128)
p.add_argument("--pred_l", type=int, default=2)
p.add_argument("--ema0", type=float, default=0.996)
p.add_argument("--wd", type=float, default=0.04)
p.add_argument("--probe", type=int, default=2000)
p.add_argument("--init", default="torch")  # torch | tn02 (trunc-normal 0.02 + fix_init_weight, patch kept) | tn02all
p.add_argument("--ours_init", default="cfg")  # cfg | torch | torch_fix | xavier_nofix
p.add_argument("--reinit_ours", action="store_true")  # ours with PyTorch default init of every Linear/Conv
p.add_argument("--cfg", default="")  # extra IJepaConfig.cpu_fast overrides as json for --model ours
a = p.parse_args()
torch.manual_seed(a.seed)
S = MnistSplits(a.data)


def px(u):
    return (u.float().unsqueeze(1) / 255 - 0.1307) / 0.3081


G, D, P = 7, 128, 4


def sincos(dim, g):
    q = dim // 4
    om = 1.0 / 10000 ** (torch.arange(q, dtype=torch.float64) / q)
    r, c = torch.meshgrid(torch.arange(g, dtype=torch.float64), torch.arange(g, dtype=torch.float64), indexing="ij")

    def f(x):
        return torch.cat([torch.sin(x.reshape(-1, 1) * om), torch.cos(x.reshape(-1, 1) * om)], 1)

    return torch.cat([f(c), f(r)], 1).float()


class Block(nn.Module):
    def __init__(s, d, h=4):
        super().__init__()
        s.h = h
        s.n1, s.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        s.qkv, s.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        s.f1, s.f2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(s, x):
        B, L, d = x.shape
        q, k, v = s.qkv(s.n1(x)).view(B, L, 3, s.h, -1).permute(2, 0, 3, 1, 4)
        x = x + s.o(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, L, d))
        return x + s.f2(F.gelu(s.f1(s.n2(x))))


def gather(x, idx):  # (B,N,D), (B,*s) -> (B,*s,D)
    B = x.shape[0]
    f = idx.reshape(B, -1)
    return torch.gather(x, 1, f[..., None].expand(-1, -1, x.shape[-1])).reshape(*idx.shape, x.shape[-1])


class Enc(nn.Module):
    def __init__(s):
        super().__init__()
        s.patch = nn.Linear(P * P, D)
        s.pos = nn.Parameter(sincos(D, G)[None], requires_grad=a.pos == "learned")
        if a.pos == "learned":
            nn.init.trunc_normal_(s.pos, std=0.02)
        s.blocks = nn.ModuleList([Block(D) for _ in range(4)])
        s.norm = nn.LayerNorm(D)

    def forward(s, img, idx=None):
        x = img.unfold(2, P, P).unfold(3, P, P).reshape(img.shape[0], G * G, P * P)
        x = s.patch(x) + s.pos
        if idx is not None:
            x = gather(x, idx)
        for b in s.blocks:
            x = b(x)
        return s.norm(x)


class Pred(nn.Module):
    def __init__(s, w, L):
        super().__init__()
        s.inp, s.out = nn.Linear(D, w), nn.Linear(w, D)
        s.mask = nn.Parameter(torch.zeros(w))
        nn.init.trunc_normal_(s.mask, std=0.02)
        s.register_buffer("pos", sincos(w, G))
        s.blocks = nn.ModuleList([Block(w) for _ in range(L)])
        s.norm = nn.LayerNorm(w)

    def forward(s, ctx, ci, ti):  # ti (B,M,T)
        B, M, T = ti.shape
        h = (s.inp(ctx) + s.pos[ci]).repeat(M, 1, 1)
        m = s.mask + s.pos[ti.transpose(0, 1).reshape(M * B, T)]
        h = torch.cat([h, m], 1)
        for b in s.blocks:
            h = b(h)
        return s.out(s.norm(h[:, ci.shape[1] :])).view(M, B, T, -1).transpose(0, 1)


class RefModel(nn.Module):
    def __init__(s):
        super().__init__()
        s.ctx = Enc()
        s.tgt = Enc()
        s.tgt.load_state_dict(s.ctx.state_dict())
        s.tgt.requires_grad_(False)
        s.pred = Pred(a.pred_w, a.pred_l)

    def loss(s, img, ci, ti):
        with torch.no_grad():
            t = s.tgt(img)
            t = gather(F.layer_norm(t, t.shape[-1:]), ti)
        pr = s.pred(s.ctx(img, ci), ci, ti)
        return (F.mse_loss if a.loss == "mse" else F.smooth_l1_loss)(pr.float(), t.float())

    def embed(s, img):
        return s.tgt(img).mean(1)

    def pairs(s):
        return [(s.ctx, s.tgt)]


if a.model == "ours":
    from hf_jepa.modeling.i_jepa import IJepaConfig, IJepaModel

    kw = dict(predictor_hidden_size=a.pred_w, predictor_num_layers=a.pred_l, loss_type=a.loss, ema_momentum=a.ema0)
    kw.update(json.loads(a.cfg or "{}"))
    cfg = IJepaConfig.cpu_fast(**kw)

    class Ours(nn.Module):
        def __init__(s):
            super().__init__()
            s.m = IJepaModel(cfg)

        def loss(s, img, ci, ti):
            return s.m(pixel_values=img, context_indices=ci, target_indices=ti).loss

        def embed(s, img):
            return s.m.embed(img)

        def pairs(s):
            return s.m.ema_pairs()

    model = Ours()
else:
    model = RefModel()
    if a.init.startswith("tn02"):
        for name, mod in model.named_modules():
            if isinstance(mod, nn.Linear) and (a.init == "tn02all" or not name.endswith("patch")):
                nn.init.trunc_normal_(mod.weight, std=0.02)
                nn.init.zeros_(mod.bias)
        for enc in (model.ctx, model.pred):
            for lid, b in enumerate(enc.blocks, 1):
                with torch.no_grad():
                    b.o.weight.div_(math.sqrt(2 * lid))
                    b.f2.weight.div_(math.sqrt(2 * lid))
        model.tgt.load_state_dict(model.ctx.state_dict())
if a.model == "ours" and a.reinit_ours:
    for mod in model.modules():
        if isinstance(mod, (nn.Linear, nn.Conv2d)):
            mod.reset_parameters()
    model.m.copy_online_to_targets()
if a.model == "ours" and a.ours_init != "cfg":
    if a.ours_init.startswith("torch"):
        for mod in model.modules():
            if isinstance(mod, (nn.Linear, nn.Conv2d)):
                mod.reset_parameters()
    if a.ours_init in ("torch_fix", "xavier_nofix"):
        up = a.ours_init == "xavier_nofix"
        with torch.no_grad():
            for lid, layer in enumerate(model.m.context_encoder.layers, 1):
                for w in (layer.attention.o_proj.weight, layer.mlp.fc2.weight):
                    w.mul_(math.sqrt(2 * lid)) if up else w.div_(math.sqrt(2 * lid))
            for lid, b in enumerate(model.m.predictor.blocks, 1):
                for w in (b.proj.weight, b.fc2.weight):
                    w.mul_(math.sqrt(2 * lid)) if up else w.div_(math.sqrt(2 * lid))
    model.m.copy_online_to_targets()

gen = torch.Generator().manual_seed(a.seed + 1)


def ref_masks(B):
    M = int(torch.randint(2, 5, (1,), generator=gen))
    h, w = torch.randint(2, 4, (2,), generator=gen).tolist()
    tg = torch.zeros(B, M, G, G, dtype=torch.bool)
    for b in range(B):
        for m in range(M):
            r, c = torch.randint(0, G - h + 1, (1,), generator=gen), torch.randint(0, G - w + 1, (1,), generator=gen)
            tg[b, m, r : r + h, c : c + w] = True
    tg = tg.view(B, M, -1)
    ctx = ~tg.any(1)
    keep = int(ctx.sum(1).min())
    sc = torch.rand(B, G * G, generator=gen).masked_fill(~ctx, -1)
    ci = sc.topk(keep, 1).indices.sort(1).values
    ti = torch.argsort((~tg).to(torch.uint8), dim=-1, stable=True)[..., : h * w]
    return ci, ti


if a.sampler == "ours":
    from hf_jepa.data.masking import MultiBlockMaskSampler
    from hf_jepa.modeling.i_jepa import IJepaConfig

    c0 = IJepaConfig.cpu_fast(**json.loads(a.cfg or "{}"))
    smp = MultiBlockMaskSampler(
        input_size=7,
        num_targets=c0.num_target_blocks,
        target_scale=tuple(c0.target_scale),
        target_aspect=tuple(c0.target_aspect_ratio),
        context_scale=tuple(c0.context_scale),
        min_keep=c0.min_keep,
        seed=a.seed,
    )

    def masks(B, step):
        o = smp.sample(B, step=step)
        return o["context_indices"], o["target_indices"]
else:

    def masks(B, step):
        return ref_masks(B)


params = [q for q in model.parameters() if q.requires_grad]
if a.opt == "ours":
    from hf_jepa.trainers.ema import ema_update_
    from hf_jepa.trainers.optim import build_optimizer, warmup_cosine_lambda

    opt = build_optimizer(model, 1e-3, a.wd)
else:
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=a.wd)
warm = int(0.05 * a.steps)


def lr_at(i):
    if i < warm:
        return (i + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (i - warm) / (a.steps - warm)))


sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine_lambda(warm, a.steps) if a.opt == "ours" else lr_at)

ev = px(S.test_images[:512])


@torch.no_grad()
def diag(step, loss):
    model.eval()
    e = model.embed(ev).float()
    model.train()
    n = F.normalize(e, dim=-1)
    cs = n @ n.T
    off = cs[~torch.eye(len(e), dtype=torch.bool)].mean()
    r = dict(step=step, loss=round(loss, 5), rank=round(effective_rank(e), 2), cos=round(float(off), 4))
    print(json.dumps(r), flush=True)
    return r


def probe():
    with torch.no_grad():
        model.eval()
        tr = torch.cat([model.embed(px(S.train_images[i : i + 500])).float() for i in range(0, a.probe, 500)])
        te = torch.cat([model.embed(px(S.test_images[i : i + 500])).float() for i in range(0, a.probe, 500)])
        model.train()
    return linear_probe_accuracy(tr, S.train_labels[: a.probe].tolist(), te, S.test_labels[: a.probe].tolist())


print("args", vars(a), flush=True)
p0 = probe()
print("probe_init", p0, flush=True)
diag(0, float("nan"))
t0 = time.time()
run = 0.0
for i in range(a.steps):
    idx = torch.randint(len(S.train_images), (64,))
    img = px(S.train_images[idx])
    ci, ti = masks(64, i)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
        loss = model.loss(img, ci, ti)
    opt.zero_grad()
    loss.backward()
    if a.opt == "ours":
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    mom = a.ema0 + (1 - a.ema0) * i / a.steps
    with torch.no_grad():
        for on, tg in model.pairs():
            if a.opt == "ours":
                ema_update_(tg, on, mom)
            else:
                for x, y in zip(tg.parameters(), on.parameters()):
                    x.mul_(mom).add_(y, alpha=1 - mom)
    run = 0.9 * run + 0.1 * float(loss) if i else float(loss)
    if (i + 1) % a.log == 0:
        diag(i + 1, run)
    if a.until_step is not None and i + 1 >= a.until_step:
        print("stopped at step", i + 1, "(--until-step)", flush=True)
        sys.exit(0)
print("time", round(time.time() - t0, 1), "probe_final", probe(), "probe_init", p0, flush=True)
