# ruff: noqa: B023  (scratch diagnosis: closures are called inside the loop iteration that defines them)
"""Measurements (a) and (c) of research/epm_jepa/memory_diagnosis/README.md on a first-run output folder: the size of track C's generated
LoRA delta and its change across buffers, and the aggregator's attention (tracks C and B). The reusable measurement
is `hf_jepa.metrics.epm_memory.memory_path_diagnostics`.

usage: python research/epm_jepa/memory_diagnosis/diagnose.py RUN_DIR   (RUN_DIR holds the trained epm/ and ei/ folders; MNIST from
$HF_JEPA_MNIST, default ../shared/data/mnist)"""

import math
import os
import sys

import torch

from hf_jepa.data import MnistSplits
from hf_jepa.modeling.epm_jepa import EpmJepaModel
from hf_jepa.modeling.epm_jepa.modeling_epm_jepa import ADAPTER_NAME
from hf_jepa.recipes.epm_jepa import EpmJepaDataArguments, build_episodic_eval

if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
    sys.exit(__doc__)
torch.manual_seed(0)
run = sys.argv[1]
# The real MNIST folder the numbers were measured on (the repository's ../shared/data/mnist by default).
MNIST = os.environ.get("HF_JEPA_MNIST", "../shared/data/mnist")
splits = MnistSplits(MNIST)
args = EpmJepaDataArguments(data=MNIST, eval_sequences=64, episode_support=8)
eps = build_episodic_eval(splits, args, 64)
out = {}
for track in ("epm", "ei"):
    model = EpmJepaModel.from_pretrained(f"{run}/{track}").eval()
    enc = model.experience_encoder

    def e_agg_for(support, query):
        model.reset_experience()
        if support is not None:
            model.warm_experience(support)
        lat = model.encode(query)
        win = model.context_windows(lat).flatten(0, 1)
        entries = model.experience_buffer.valid_entries()
        mem = enc.encode_entries(entries)
        q = enc.query_projection(win[:, -1])[None]
        _, w = enc.aggregator(q, mem, mem, need_weights=True, average_attn_weights=True)
        e = model.aggregate_experience(win[:, -1])
        return win, e, w[0]

    with torch.no_grad():
        res = {}
        g_list = list(eps)
        q = eps[0.1]["query"]
        for name, sup in (("same", eps[0.1]["support"]), ("different", eps[0.6]["support"]), ("empty", None)):
            win, e, w = e_agg_for(sup, q)
            n = w.shape[-1]
            ent = -(w.clamp_min(1e-12).log() * w).sum(-1)
            res[name] = dict(
                e=e,
                win=win,
                entropy=float(ent.mean()),
                max_entropy=math.log(n),
                n_tokens=n,
                null_weight=float(w[:, 0].mean()),
                max_weight=float(w.max(-1).values.mean()),
            )
        print(
            track,
            "attention: ",
            {
                k: {kk: v[kk] for kk in ("entropy", "max_entropy", "n_tokens", "null_weight", "max_weight")}
                for k, v in res.items()
            },
        )
        e_s, e_d, e_0 = res["same"]["e"], res["different"]["e"], res["empty"]["e"]
        print(
            track,
            f"e_agg norm {e_s.norm(dim=-1).mean():.3f} | ||e_same-e_diff|| {(e_s - e_d).norm(dim=-1).mean():.4f} | ||e_same-e_empty|| {(e_s - e_0).norm(dim=-1).mean():.4f} | std over query rows {e_s.std(0).norm():.4f}",
        )
        if track == "epm":
            for name in ("same", "different", "empty"):
                d = model.lora_modulation(res[name]["e"])
                res[name]["d"] = d
            ds, dd, d0 = res["same"]["d"], res["different"]["d"], res["empty"]["d"]
            print(
                f"d mean {ds.mean():.4f} std(rows) {ds.std(0).mean():.5f} | mean|d_same-d_diff| {(ds - dd).abs().mean():.6f} | mean|d_same-d_empty| {(ds - d0).abs().mean():.6f}"
            )
            hw = model.hypernetwork.output.weight
            print(f"hypernet output weight norm {hw.norm():.4f} bias mean {model.hypernetwork.output.bias.mean():.4f}")
            for i, layer in enumerate(model._lora_layers):
                A = layer.lora_A[ADAPTER_NAME].weight
                B = layer.lora_B[ADAPTER_NAME].weight
                W = layer.base_layer.weight
                s = layer.scaling[ADAPTER_NAME]

                def dW(d):
                    return s * B @ torch.diag(d) @ A

                dws = torch.stack([dW(x) for x in ds[:64, i]])
                dwd = torch.stack([dW(x) for x in dd[:64, i]])
                dw1 = dW(torch.ones(A.shape[0]))
                print(
                    f"layer {i}: ||W|| {W.norm():.3f} ||B|| {B.norm():.4f} ||A|| {A.norm():.3f} scaling {s} | ||dW(same)||/||W|| {dws.flatten(1).norm(dim=1).mean() / W.norm():.5f} "
                    f"| ||dW(d=1)||/||W|| {dw1.norm() / W.norm():.5f} | ||dW_same-dW_diff||/||W|| {(dws - dwd).flatten(1).norm(dim=1).mean() / W.norm():.2e}"
                )
        else:
            inj = model.experience_injection
            i_s, i_d = inj(e_s), inj(e_d)
            print(
                f"ei injection weight norm {inj.weight.norm():.4f} | injection norm {i_s.norm(dim=-1).mean():.4f} | ||inj_same - inj_diff|| {(i_s - i_d).norm(dim=-1).mean():.5f}"
            )
            h = model.predictor.layers[0](res["same"]["win"].flatten(1))
            print(f"predictor first hidden norm {torch.nn.functional.gelu(h).norm(dim=-1).mean():.3f}")
