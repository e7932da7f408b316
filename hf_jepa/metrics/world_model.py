"""Latent world-model evaluation: the normalised prediction error D (D_shift on the shifted distribution), its
readable baselines, the surprisal gate's firing rate, and the EPM-JEPA mechanism diagnostics plot.

Definition used for every track and in every table:

    D = E ||z_hat_{t+1} - z_{t+1}||^2 / sum_d Var(z_{t+1, d})

over all predicted steps of all evaluation sequences, where `z_{t+1}` are the EMA target encoder's latents and the
variance is the (population) variance of those target latents over the same set. Predicting the targets' mean scores
exactly 1.0; copying the last latent (`z_hat_{t+1} = z_t`) scores `copy_last_error`, reported beside it; 0 is perfect.
"""

import torch

from ..paper_figures import EPM_JEPA_SIGMA_EMBED_SAFETY_THRESHOLD
from .figures import pyplot, save_figure


def normalized_prediction_error(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """D for `(..., dim)` predictions and targets: mean squared error summed over dimensions, divided by the summed
    per-dimension variance of the targets (mean prediction = 1.0)."""
    if predicted.shape != target.shape:
        raise ValueError(f"predicted {tuple(predicted.shape)} and target {tuple(target.shape)} differ in shape")
    predicted, target = predicted.float().flatten(0, -2), target.float().flatten(0, -2)
    if target.shape[0] < 2:
        raise ValueError("normalized_prediction_error needs at least 2 target latents to estimate their variance")
    squared_error = (predicted - target).pow(2).sum(-1).mean()
    variance = target.var(dim=0, unbiased=False).sum().clamp_min(1e-12)
    return (squared_error / variance).item()


@torch.no_grad()
def evaluate_world_model(model, pixel_values: torch.Tensor, batch_size: int = 32) -> dict[str, float]:
    """Score a latent world model on `(N, T, C, H, W)` sequences in chunks of `batch_size` (read-only: the model is
    put in eval mode, so its experience buffer and surprisal gate are not updated).

    Returns `normalized_error` (D), `copy_last_error` (D of `z_hat_{t+1} = z_t`), `mean_surprisal`, `gate_fire_rate`
    (fraction of chunks whose batch-mean surprisal exceeds the gate's threshold, i.e. that would fire it in
    training), `sigma_embed` and `num_predictions`."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    k = model.config.context_length
    predicted, targets, previous, fired = [], [], [], []
    try:
        for start in range(0, pixel_values.shape[0], batch_size):
            chunk = pixel_values[start : start + batch_size].to(device)
            output = model(chunk, update_experience=False)
            predicted.append(output.predicted_latents.float().cpu())
            targets.append(output.target_latents.float().cpu())
            first = model.encode(chunk[:, k - 1 : k], use_target_encoder=True)
            previous.append(torch.cat([first, output.target_latents[:, :-1]], dim=1).float().cpu())
            fired.append(bool(output.surprisal.mean() > model.surprisal_gate.threshold()))
    finally:
        model.train(was_training)
    predicted, targets, previous = torch.cat(predicted), torch.cat(targets), torch.cat(previous)
    return {
        "normalized_error": normalized_prediction_error(predicted, targets),
        "copy_last_error": normalized_prediction_error(previous, targets),
        "mean_surprisal": (predicted - targets).pow(2).mean().item(),
        "gate_fire_rate": sum(fired) / len(fired),
        "sigma_embed": predicted.flatten(0, 1).std(dim=0).mean().item(),
        "num_predictions": predicted.shape[0] * predicted.shape[1],
    }


def parameter_drift(current: list[torch.Tensor], snapshot: list[torch.Tensor]) -> float:
    """Relative L2 distance `||theta - theta_snapshot|| / ||theta_snapshot||` over a list of tensors (EMA target
    drift between two snapshots of the target encoder)."""
    difference = sum((a.float() - b.float()).pow(2).sum() for a, b in zip(current, snapshot))
    norm = sum(b.float().pow(2).sum() for b in snapshot)
    return (difference.sqrt() / norm.sqrt().clamp_min(1e-12)).item()


SIGMA_EMBED_SAFETY_THRESHOLD = EPM_JEPA_SIGMA_EMBED_SAFETY_THRESHOLD

_DIAGNOSTIC_PANELS = [
    ("d_shift", "D_shift(n) on held-out shifted sequences", "normalised error"),
    ("buffer_occupancy", "buffer occupancy (fraction of capacity)", "occupancy"),
    ("buffer_turnover", "buffer turnover (writes / capacity)", "turnover"),
    ("ema_target_drift", "EMA target drift between log steps", "relative L2 change"),
    ("modulation_norm", "modulation norm (LoRA ||dW||_F, injection ||r||)", "norm"),
    ("sigma_embed", "sigma_embed (std of predicted latents)", "std"),
]


def plot_world_model_diagnostics(
    histories: dict[str, list[dict]], path, title: str = "EPM-JEPA mechanism diagnostics"
) -> str:
    """Save a PNG with one panel per diagnostic, one line per run. `histories`: run name -> log records with `step`
    and any of the keys `d_shift`, `buffer_occupancy`, `buffer_turnover`, `ema_target_drift`, `modulation_norm`,
    `sigma_embed`. The sigma_embed panel marks the paper's 0.5 safety threshold."""
    plt = pyplot()

    figure, axes = plt.subplots(2, 3, figsize=(15, 8))
    for axis, (key, name, ylabel) in zip(axes.flat, _DIAGNOSTIC_PANELS):
        for index, (run, records) in enumerate(histories.items()):
            points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
            if points:
                steps, values = zip(*points)
                axis.plot(steps, values, marker="o", ms=3, label=run, color=f"C{index}")  # one colour per run
        if key == "sigma_embed":
            axis.axhline(SIGMA_EMBED_SAFETY_THRESHOLD, color="red", ls="--", lw=1, label="safety threshold 0.5")
        axis.set_title(name, fontsize=10)
        axis.set_xlabel("experience step n")
        axis.set_ylabel(ylabel)
        if axis.lines:
            axis.legend(fontsize=7)
    figure.suptitle(title)
    figure.tight_layout()
    return save_figure(figure, path)
