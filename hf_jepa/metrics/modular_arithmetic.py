"""Modular-arithmetic evaluation: seen-op, strict zero-shot and rollout accuracy, plus latent geometry.

All accuracies are by nearest class prototype (or the supervised head) on the predicted latent of each test image:
a prediction for image `x` (class `c`) and op `k` is correct when it is classified as `(c + k) mod modulus`.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..data.modular_arithmetic import PERTURBATIONS, perturb_images
from .figures import pyplot, save_figure


def modular_targets(labels: torch.Tensor, operations: torch.Tensor | int, modulus: int) -> torch.Tensor:
    """`(labels + operations) mod modulus` (Python's floored modulo, so negative ops wrap correctly)."""
    return torch.remainder(labels + operations, modulus)


def modular_accuracy(predictions: torch.Tensor, labels: torch.Tensor, operations, modulus: int = 10) -> float:
    """Fraction of `predictions` (predicted target digits) equal to `(labels + operations) mod modulus`."""
    predictions, labels = torch.as_tensor(predictions), torch.as_tensor(labels)
    if predictions.shape != labels.shape:
        raise ValueError(f"predictions {tuple(predictions.shape)} and labels {tuple(labels.shape)} differ in shape")
    return (predictions == modular_targets(labels, torch.as_tensor(operations), modulus)).float().mean().item()


def summarize_operation_accuracies(per_operation: dict[int, float], seen_operations=(-1, 1)) -> dict[str, float]:
    """Seen-op mean and strict zero-shot mean (over every op not in `seen_operations` and not 0)."""
    seen = [per_operation[k] for k in seen_operations if k in per_operation]
    unseen = [v for k, v in per_operation.items() if k not in seen_operations and k != 0]
    return {
        "seen_accuracy": sum(seen) / len(seen) if seen else float("nan"),
        "zero_shot_accuracy": sum(unseen) / len(unseen) if unseen else float("nan"),
    }


@torch.no_grad()
def evaluate_modular_arithmetic(
    model,
    pixel_values: torch.Tensor,
    labels: torch.Tensor,
    operations=None,
    seen_operations=(-1, 1),
    batch_size: int = 2048,
) -> dict:
    """Evaluate a `BroJepaModel` on every test image and every op.

    Returns `seen_accuracy` (mean over `seen_operations`), `zero_shot_accuracy` (mean over the other ops, each predicted
    directly with `P(z, k)`), `rollout_accuracy` (the same ops reached by applying the +-1 predictor `|k|` times),
    `rollout_seen_accuracy`, and per-op dictionaries `accuracy_per_operation` / `rollout_accuracy_per_operation`.
    """
    modulus = model.config.modulus
    if operations is None:
        operations = [k for k in range(-(modulus - 1), modulus) if k != 0]
    model.eval()
    device = model.class_prototypes.device
    latents = torch.cat(
        [
            model.encode(pixel_values[i : i + batch_size].to(device)).float()
            for i in range(0, len(pixel_values), batch_size)
        ]
    )
    labels = labels.to(device)
    direct, rolled = {}, {}
    for k in operations:
        predicted = model.class_logits(model.predict(latents, k)).argmax(-1)
        direct[int(k)] = (predicted == modular_targets(labels, k, modulus)).float().mean().item()
        predicted = model.class_logits(model.rollout(latents, k)).argmax(-1)
        rolled[int(k)] = (predicted == modular_targets(labels, k, modulus)).float().mean().item()
    summary = summarize_operation_accuracies(direct, seen_operations)
    rollout_summary = summarize_operation_accuracies(rolled, seen_operations)
    return {
        **summary,
        "rollout_accuracy": rollout_summary["zero_shot_accuracy"],
        "rollout_seen_accuracy": rollout_summary["seen_accuracy"],
        "accuracy_per_operation": direct,
        "rollout_accuracy_per_operation": rolled,
    }


def zero_shot_under_perturbations(
    model, images: torch.Tensor, labels: torch.Tensor, to_pixels: Callable[[torch.Tensor], torch.Tensor], seed: int = 0
) -> dict[str, float]:
    """Zero-shot accuracy on the uint8 test `images` moved by 2 px and turned by +-15 degrees
    (`hf_jepa.data.PERTURBATIONS`, the same perturbed images for every model given `seed`); the prototypes stay those
    of the clean training images. `to_pixels` is the model's normalisation. Keys: `zero_shot_accuracy_<perturbation>`."""
    device = model.class_prototypes.device
    return {
        f"zero_shot_accuracy_{name}": evaluate_modular_arithmetic(
            model, to_pixels(perturb_images(images, name, seed)).to(device), labels
        )["zero_shot_accuracy"]
        for name in PERTURBATIONS
    }


def prototype_off_diagonal_cosine(prototypes: torch.Tensor) -> float:
    """Mean cosine similarity between distinct class prototypes (lower = better separated)."""
    normalized = F.normalize(prototypes.float(), dim=-1)
    similarity = normalized @ normalized.T
    count = similarity.shape[0]
    return ((similarity.sum() - similarity.diagonal().sum()) / (count * (count - 1))).item()


def pca_project(points: torch.Tensor, basis_from: torch.Tensor | None = None, components: int = 2):
    """Project `points` onto the top principal components of `basis_from` (default: the points themselves)."""
    reference = (basis_from if basis_from is not None else points).float()
    mean = reference.mean(0, keepdim=True)
    _, _, v = torch.linalg.svd(reference - mean, full_matrices=False)
    return (points.float() - mean) @ v[:components].T


def plot_latent_pca(
    prototypes, latents, labels, path, title: str = "BRo-JEPA latent space", rotation_block: int | None = None
) -> str:
    """Save a PNG of test latents and class prototypes: on the first two principal components of the latents, and,
    with `rotation_block`, also in the 2-D plane of that rotation block (where a block-rotation model puts the
    classes on a circle in order)."""
    plt = pyplot()

    latents, prototypes, labels = latents.float().cpu(), prototypes.float().cpu(), labels.cpu()
    panels = [("PCA of the latent", pca_project(latents), pca_project(prototypes, basis_from=latents), "PC")]
    if rotation_block is not None:
        pair = slice(2 * rotation_block, 2 * rotation_block + 2)
        panels.append(
            (
                f"rotation block {rotation_block} (dims {2 * rotation_block}, {2 * rotation_block + 1})",
                latents[:, pair],
                prototypes[:, pair],
                "z",
            )
        )
    figure, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 5), squeeze=False)
    order = list(range(len(prototypes))) + [0]
    for axis, (name, points, centres, prefix) in zip(axes[0], panels):
        scatter = axis.scatter(points[:, 0], points[:, 1], c=labels, cmap="tab10", s=3, alpha=0.35, vmin=0, vmax=9)
        axis.plot(*centres[order].T, color="black", lw=1, alpha=0.6)
        for digit, (x, y) in enumerate(centres.tolist()):
            axis.annotate(
                str(digit),
                (x, y),
                fontsize=11,
                weight="bold",
                ha="center",
                va="center",
                bbox=dict(boxstyle="circle,pad=0.2", fc="white", ec="black"),
            )
        axis.set_title(name)
        axis.set_xlabel(f"{prefix} 1")
        axis.set_ylabel(f"{prefix} 2")
        if prefix == "z":
            axis.set_aspect("equal", adjustable="datalim")
    figure.colorbar(scatter, ax=axes[0].tolist(), label="digit")
    figure.suptitle(title)
    return save_figure(figure, path)
