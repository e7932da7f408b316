"""EPM-JEPA's k-step rollout readout: does knowing the episode's gravity pay over several predicted steps?

D_k is the normalised error of `hf_jepa.metrics.world_model` (squared error divided by the summed variance of the
targets) of the `k`-th step of an autoregressive latent rollout (`EpmJepaModel.rollout`: each prediction fed back as
the newest context entry, the buffer held fixed) against the EMA target encoder's latent of that frame. Every context
window with `k` frames after it counts, so D_1 is the one-step D of `evaluate_world_model` exactly, and each k has its
own copy-last baseline (`z_hat_{t+k} = z_t`). One-step D barely depends on g (research/epm_jepa/memory_diagnosis/
README.md); an unknown gravity's position error grows with the horizon, so D_k at k = 5, 10 is where a memory that
knows g can pay.

As in `hf_jepa.metrics.epm_memory`, every function leaves the model as it found it: eval mode during the readout, the
buffer restored (`kept_experience`), no optimiser step.

Precision: the rollout calls the model's methods, not `forward`, so it computes in the weights' dtype (fp32) even on
a model fresh from `JepaTrainer.train()`, whose `forward` accelerate leaves wrapped in the run's bf16 autocast. On such
a model D_1 here and `evaluate_world_model`'s D differ by that rounding (~0.1%); on a loaded model they are equal.
"""

import torch

from .epm_memory import farthest_gravity, kept_experience, support_counts
from .world_model import normalized_prediction_error


def check_readout_steps(steps, sequence_length: int, context_length: int, name: str = "readout_steps") -> list[int]:
    """The sorted distinct rollout lengths of `steps`, checked: a non-empty collection of integers >= 1 whose largest
    fits the sequences (`sequence_length >= context_length + max(steps)`). Raises `ValueError` naming `name`."""
    if isinstance(steps, int):
        steps = (steps,)
    steps = list(steps)
    if not steps or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in steps):
        raise ValueError(f"{name} must be a non-empty list of integers >= 1, got {steps!r}")
    if sequence_length < context_length + max(steps):
        raise ValueError(
            f"{name} goes up to {max(steps)}, but the sequences have {sequence_length} frames: a {max(steps)}-step "
            f"rollout from a {context_length}-frame context needs at least {context_length + max(steps)}"
        )
    return sorted(set(steps))


@torch.no_grad()
def rollout_errors(model, pixel_values: torch.Tensor, steps, batch_size: int = 32) -> dict[int, dict[str, float]]:
    """D_k on `(N, T, C, H, W)` sequences for each k in `steps`: `{k: {"normalized_error", "copy_last_error",
    "num_predictions"}}`. The rollouts start from every context window (the longest one's predictions past the last
    frame are dropped); step k is scored on the windows with a frame k steps ahead. Reads, never writes, the buffer."""
    k_context = model.config.context_length
    steps = check_readout_steps(steps, pixel_values.shape[1], k_context, "steps")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    predicted: dict[int, list] = {k: [] for k in steps}
    targets: dict[int, list] = {k: [] for k in steps}
    previous: dict[int, list] = {k: [] for k in steps}
    try:
        for start in range(0, pixel_values.shape[0], batch_size):
            chunk = pixel_values[start : start + batch_size].to(device)
            context = model.encode(chunk)
            target = model.encode(chunk, use_target_encoder=True).float().cpu()
            windows = model.context_windows(context)  # (B, W, k, D), W = T - context_length
            rolled = model.rollout(windows.flatten(0, 1), steps[-1]).unflatten(0, tuple(windows.shape[:2]))
            rolled = rolled.float().cpu()
            count = windows.shape[1]
            for k in steps:
                # Window s ends at frame s + context_length - 1; its k-th step predicts frame s + context_length - 1 + k.
                predicted[k].append(rolled[:, : count - k + 1, k - 1])
                targets[k].append(target[:, k_context - 1 + k :])
                previous[k].append(target[:, k_context - 1 : target.shape[1] - k])
    finally:
        model.train(was_training)
    results = {}
    for k in steps:
        p, t, c = torch.cat(predicted[k]), torch.cat(targets[k]), torch.cat(previous[k])
        results[k] = {
            "normalized_error": normalized_prediction_error(p, t),
            "copy_last_error": normalized_prediction_error(c, t),
            "num_predictions": p.shape[0] * p.shape[1],
        }
    return results


def episodic_rollout_errors(model, query: torch.Tensor, support: torch.Tensor | None, steps) -> dict[int, float]:
    """`{k: D_k}` on `query` with the buffer emptied and then filled from every transition of `support` (None or zero
    sequences: left empty; track A has no buffer and ignores it). The buffer is restored."""
    with kept_experience(model):
        if model.experience_buffer is not None:
            model.reset_experience()
            if support is not None and support.shape[0] > 0:
                model.warm_experience(support)
        return {k: v["normalized_error"] for k, v in rollout_errors(model, query, steps).items()}


def rollout_swap_ablation(model, episodes: dict[float, dict[str, torch.Tensor]], steps) -> dict[float, dict]:
    """Per gravity of `episodes` (`build_episodic_eval`): `{"same", "different", "empty"}` each `{k: D_k}` (buffer from
    this gravity's support, from the farthest gravity's support, empty), `different_gravity`, and `copy_last`
    `{k: D_k of z_hat_{t+k} = z_t}`. Track A's three readings are one (it has no buffer), computed once."""
    results = {}
    for gravity, episode in episodes.items():
        other = farthest_gravity(gravity, list(episodes))
        with kept_experience(model):
            if model.experience_buffer is not None:
                model.reset_experience()
                model.warm_experience(episode["support"])
            same = rollout_errors(model, episode["query"], steps)
        row = {
            "same": {k: v["normalized_error"] for k, v in same.items()},
            "copy_last": {k: v["copy_last_error"] for k, v in same.items()},
            "different_gravity": other,
        }
        if model.experience_buffer is None:
            row["different"], row["empty"] = dict(row["same"]), dict(row["same"])
        else:
            row["different"] = episodic_rollout_errors(model, episode["query"], episodes[other]["support"], steps)
            row["empty"] = episodic_rollout_errors(model, episode["query"], None, steps)
        results[gravity] = row
    return results


def rollout_adaptation_curve(model, episodes: dict[float, dict[str, torch.Tensor]], supports, steps) -> dict:
    """Adaptation without gradient steps on D_k: per gravity, `{n: {k: D_k}}` with the (emptied) buffer filled from
    the first `n` support sequences, for each `n` in `supports` (0: empty). The support must hold `max(supports)`."""
    supports = support_counts(episodes, supports, "supports")
    return {
        gravity: {n: episodic_rollout_errors(model, episode["query"], episode["support"][:n], steps) for n in supports}
        for gravity, episode in episodes.items()
    }


__all__ = [
    "check_readout_steps",
    "episodic_rollout_errors",
    "rollout_adaptation_curve",
    "rollout_errors",
    "rollout_swap_ablation",
]
