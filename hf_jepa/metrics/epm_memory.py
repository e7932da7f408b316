"""Does EPM-JEPA's memory matter? Evaluations of a world model whose buffer is filled from chosen experience.

Every function takes a model (tracks A, B or C of `EpmJepaModel`) and episodes `{gravity: {"query": (N, T, C, H, W),
"support": (S, T, C, H, W)}}` (`hf_jepa.recipes.epm_jepa.build_episodic_eval`), and returns plain numbers: D, the
normalised one-step error of `hf_jepa.metrics.world_model` on a gravity's query sequences, with the buffer

- filled from that gravity's support sequences ("same"),
- filled from another gravity's support sequences ("different": the farthest gravity of the episodes),
- empty ("empty": the learned null entry only; for track C that is the hypernetwork's `d` for no experience).

Nothing here takes an optimiser step, and each function leaves the buffer as it found it (`kept_experience`), so
evaluating never changes a model: "adaptation without gradient steps" is only the buffer's content.
"""

import contextlib
import math

import torch

from .world_model import evaluate_world_model


@contextlib.contextmanager
def kept_experience(model):
    """Restore the experience buffer (entries and write count) on exit; a no-op for track A."""
    buffer = getattr(model, "experience_buffer", None)
    if buffer is None:
        yield
        return
    entries, writes = buffer.entries.clone(), buffer.num_writes.clone()
    try:
        yield
    finally:
        with torch.no_grad():
            buffer.entries.copy_(entries)
            buffer.num_writes.copy_(writes)


def episodic_error(model, query: torch.Tensor, support: torch.Tensor | None = None) -> dict[str, float]:
    """`evaluate_world_model` on `query` with the buffer emptied and then filled from every transition of `support`
    (None or zero sequences: left empty). Track A has no buffer and ignores `support`. The buffer is restored."""
    with kept_experience(model):
        if model.experience_buffer is not None:
            model.reset_experience()
            if support is not None and support.shape[0] > 0:
                model.warm_experience(support)
        return evaluate_world_model(model, query)


def mean_episodic_error(model, episodes: dict[float, dict[str, torch.Tensor]]) -> float:
    """D averaged over the episodes' gravities, each with its own support as experience (D_shift of the episodic
    protocol)."""
    values = [episodic_error(model, e["query"], e["support"])["normalized_error"] for e in episodes.values()]
    return sum(values) / len(values)


def farthest_gravity(gravity: float, gravities) -> float:
    """The gravity of `gravities` farthest from `gravity` (the first of ties): the "different g" of a buffer swap."""
    return max(gravities, key=lambda other: abs(other - gravity))


def buffer_swap_ablation(model, episodes: dict[float, dict[str, torch.Tensor]]) -> dict[str, dict]:
    """Per gravity: D with a same-g buffer, a different-g buffer (the farthest gravity's support) and an empty
    buffer, plus sigma_embed with the same-g buffer. Memory counts only if same-g beats different-g."""
    results = {}
    for gravity, episode in episodes.items():
        other = farthest_gravity(gravity, list(episodes))
        same = episodic_error(model, episode["query"], episode["support"])
        results[gravity] = {
            "same": same["normalized_error"],
            "different": episodic_error(model, episode["query"], episodes[other]["support"])["normalized_error"],
            "different_gravity": other,
            "empty": episodic_error(model, episode["query"], None)["normalized_error"],
            "sigma_embed": same["sigma_embed"],
        }
    return results


def support_counts(episodes: dict[float, dict[str, torch.Tensor]], counts, name: str) -> list[int]:
    """The support sizes of an adaptation curve, sorted and deduplicated, when each is >= 0 and every gravity's
    episode holds at least the largest; else `ValueError` naming `name` (the caller's argument, e.g. "ks")."""
    counts = sorted(set(int(n) for n in counts))
    if counts and counts[0] < 0:
        raise ValueError(f"{name} must be >= 0, got {counts}")
    for gravity, episode in episodes.items():
        if counts and episode["support"].shape[0] < counts[-1]:
            raise ValueError(
                f"gravity {gravity}: {episode['support'].shape[0]} support sequences, but {name} go up to {counts[-1]}"
            )
    return counts


def adaptation_curve(model, episodes: dict[float, dict[str, torch.Tensor]], ks) -> dict[float, dict[int, float]]:
    """Adaptation without gradient steps: per gravity, D on its query sequences after filling the (emptied) buffer
    from its first `k` support sequences, for each `k` in `ks` (k = 0: empty buffer). The support must hold at least
    `max(ks)` sequences."""
    ks = support_counts(episodes, ks, "ks")
    return {
        gravity: {k: episodic_error(model, episode["query"], episode["support"][:k])["normalized_error"] for k in ks}
        for gravity, episode in episodes.items()
    }


@torch.no_grad()
def memory_path_diagnostics(model, query: torch.Tensor, support: torch.Tensor, other_support: torch.Tensor) -> dict:
    """Does the memory path of a track-B or -C model listen to the buffer? Measured on the context windows of `query`
    `(N, T, C, H, W)` with the buffer filled from `support` and, for the change, from `other_support` (e.g. another
    gravity's sequences). The buffer is restored. Returns plain floats:

    - `attention_entropy_ratio`: the aggregator's attention entropy over the memory tokens divided by its maximum
      `log(tokens)` (1.0: uniform, `e_agg` is the plain mean of the encoded entries whatever the query);
    - `experience_change`: mean `||e_agg(support) - e_agg(other)|| / ||e_agg(support)||` per window;
    - track C: `delta_relative_norm` (mean `||scaling U diag(d) V^T||_F / ||W||_F` over windows and targeted layers),
      `delta_change_over_buffers` (the same for the difference of the two buffers' deltas) and `d_change` (mean
      `|d(support) - d(other)|`);
    - track B: `injection_relative_norm` (`||injection|| / ||first hidden state||`) and `injection_change_over_buffers`
      (the same for the difference of the two buffers' injections)."""
    if model.experience_encoder is None:
        raise ValueError(f"track {model.config.track!r} has no memory path (use track 'ei' or 'epm')")
    encoder = model.experience_encoder
    windows = model.context_windows(model.encode(query)).flatten(0, 1)
    current = windows[:, -1]
    readings = {}
    with kept_experience(model):
        for name, sequences in (("support", support), ("other", other_support)):
            model.reset_experience()
            model.warm_experience(sequences)
            memory = encoder.encode_entries(model.experience_buffer.valid_entries())
            _, weights = encoder.aggregator(encoder.query_projection(current)[None], memory, memory, need_weights=True)
            entropy = -(weights[0] * weights[0].clamp_min(1e-12).log()).sum(-1).mean()
            readings[name] = {
                "experience": model.aggregate_experience(current),
                "entropy_ratio": float(entropy) / math.log(memory.shape[1]) if memory.shape[1] > 1 else 1.0,
            }
    first, second = readings["support"]["experience"], readings["other"]["experience"]
    result = {
        "attention_entropy_ratio": readings["support"]["entropy_ratio"],
        "experience_change": float(((first - second).norm(dim=-1) / first.norm(dim=-1).clamp_min(1e-12)).mean()),
    }
    if model.config.track == "epm":
        d_first, d_second = model.lora_modulation(first), model.lora_modulation(second)
        relative, change = [], []
        for index, layer in enumerate(model._lora_layers):
            adapter = next(iter(layer.lora_A))
            a, b = layer.lora_A[adapter].weight.float(), layer.lora_B[adapter].weight.float()
            scale = layer.scaling[adapter] / layer.base_layer.weight.float().norm()
            # ||U diag(d) V^T||_F per row, from d^T (U^T U * V^T V) d (no dense delta per row)
            gram = (b.T @ b) * (a @ a.T)
            for d, into in ((d_first[:, index], relative), (d_first[:, index] - d_second[:, index], change)):
                norms = torch.einsum("nr,rs,ns->n", d.float(), gram, d.float()).clamp_min(0).sqrt()
                into.append(float(scale * norms.mean()))
        result.update(
            delta_relative_norm=sum(relative) / len(relative),
            delta_change_over_buffers=sum(change) / len(change),
            d_change=float((d_first - d_second).abs().mean()),
        )
    else:
        hidden = torch.nn.functional.gelu(model.predictor.layers[0](windows.flatten(1))).norm(dim=-1)
        injected, other = model.experience_injection(first), model.experience_injection(second)
        result.update(
            injection_relative_norm=float((injected.norm(dim=-1) / hidden).mean()),
            injection_change_over_buffers=float(((injected - other).norm(dim=-1) / hidden).mean()),
        )
    return result


def trajectory_summary(points: list[tuple[int, float]]) -> dict[str, float]:
    """For a D_shift(n) curve `[(n, D), ...]`: the peak (best, lowest D) step and value, the final value, and the
    post-peak divergence `D(final) - D(peak)` (> 0: the curve turned back up after its best point)."""
    if not points:
        raise ValueError("trajectory_summary needs at least one (step, value) point")
    points = sorted(points)
    peak_step, peak = min(points, key=lambda point: point[1])
    final_step, final = points[-1]
    return {
        "peak_step": peak_step,
        "peak_d_shift": peak,
        "final_step": final_step,
        "final_d_shift": final,
        "post_peak_divergence": final - peak,
    }


def settling_bump(points: list[tuple[int, float]], freeze_at: int) -> dict[str, float]:
    """The LoRA settling transient after freezing at step `freeze_at`: `bump = max_{n > freeze_at} D(n) - D(freeze_at)`
    (> 0: the error rose after the freeze; the paper reports +0.021), with the step of that maximum. `points` must
    contain the step `freeze_at` and at least one later step."""
    values = dict(points)
    if freeze_at not in values:
        raise ValueError(f"no D_shift measured at the freeze step {freeze_at}; measured at {sorted(values)}")
    later = [(step, value) for step, value in sorted(values.items()) if step > freeze_at]
    if not later:
        raise ValueError(f"no D_shift measured after the freeze step {freeze_at}")
    step, worst = max(later, key=lambda point: point[1])
    return {
        "freeze_at": freeze_at,
        "d_at_freeze": values[freeze_at],
        "bump": worst - values[freeze_at],
        "bump_step": step,
    }


__all__ = [
    "adaptation_curve",
    "buffer_swap_ablation",
    "episodic_error",
    "farthest_gravity",
    "kept_experience",
    "mean_episodic_error",
    "memory_path_diagnostics",
    "settling_bump",
    "support_counts",
    "trajectory_summary",
]
