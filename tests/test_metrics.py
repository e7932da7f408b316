import math

import pytest
import torch
from torch import nn

from hf_jepa.metrics import (
    evaluate_modular_arithmetic,
    evaluate_module_path,
    load_metric,
    modular_accuracy,
    modular_targets,
    pca_project,
    plot_latent_pca,
    prototype_off_diagonal_cosine,
    summarize_operation_accuracies,
)
from hf_jepa.modeling.bro_jepa import BroJepaConfig, BroJepaModel

THETA = 2 * math.pi / 10


def circle(indices):
    """Point `c` of the 10-gon on the unit circle: (cos c*theta, sin c*theta)."""
    angles = indices.float() * THETA
    return torch.stack((angles.cos(), angles.sin()), dim=-1)


class ClassIndexEncoder(nn.Module):
    """A hand-made "encoder": an image whose pixels all equal `c` maps to the 10-gon point `c`."""

    def forward(self, pixel_values):
        return circle(pixel_values[:, 0, 0, 0].round().long())


def test_modular_targets_and_accuracy():
    assert modular_targets(torch.tensor([0, 9, 5]), torch.tensor([-1, 1, -7]), 10).tolist() == [9, 0, 8]
    labels = torch.tensor([0, 9, 5, 3])
    operations = torch.tensor([1, 1, -1, -4])  # targets 1, 0, 4, 9
    assert modular_accuracy(torch.tensor([1, 0, 4, 8]), labels, operations) == pytest.approx(0.75)
    assert modular_accuracy(torch.tensor([1, 0, 4, 9]), labels, operations) == 1.0
    assert modular_accuracy([2, 1, 6, 4], [0, 9, 4, 2], 2) == 1.0  # a scalar op, lists
    assert modular_accuracy(torch.tensor([1, 1]), torch.tensor([0, 0]), 1, modulus=3) == 1.0
    with pytest.raises(ValueError, match="shape"):
        modular_accuracy(torch.tensor([1, 2]), torch.tensor([1, 2, 3]), 1)


def test_summarize_operation_accuracies():
    summary = summarize_operation_accuracies({-1: 1.0, 1: 0.5, 2: 0.25, -2: 0.75, 0: 0.0})
    assert summary == {"seen_accuracy": 0.75, "zero_shot_accuracy": 0.5}  # op 0 counts as neither
    summary = summarize_operation_accuracies({1: 1.0, 3: 0.0}, seen_operations=(1, 3))
    assert summary["seen_accuracy"] == 0.5 and math.isnan(summary["zero_shot_accuracy"])
    assert math.isnan(summarize_operation_accuracies({5: 1.0})["seen_accuracy"])


def test_prototype_off_diagonal_cosine():
    assert prototype_off_diagonal_cosine(torch.eye(10, 16)) == pytest.approx(0.0, abs=1e-7)
    assert prototype_off_diagonal_cosine(torch.ones(10, 16) * 3.0) == pytest.approx(1.0, abs=1e-6)
    assert prototype_off_diagonal_cosine(torch.tensor([[1.0, 0.0], [-2.0, 0.0]])) == pytest.approx(-1.0)
    # The regular 10-gon: sum of cos over distinct pairs is (|sum p|^2 - 10) = -10, over 90 pairs.
    assert prototype_off_diagonal_cosine(circle(torch.arange(10))) == pytest.approx(-1 / 9, abs=1e-6)


def _hand_made_model(angle_error=0.0, wrong_class=None):
    model = BroJepaModel(BroJepaConfig.tiny(latent_dim=2, rotation_frequencies="single"))
    model.context_encoder = ClassIndexEncoder()
    with torch.no_grad():
        model.class_prototypes.copy_(circle(torch.arange(10)))
        model.predictor.angles.fill_(THETA * (1 + angle_error))
    pixels = torch.arange(20).remainder(10).float().view(20, 1, 1, 1).expand(20, 1, 28, 28).clone()
    labels = torch.arange(20) % 10
    if wrong_class is not None:  # one image of `wrong_class` is encoded as the next class
        pixels[wrong_class] += 1
    return model, pixels, labels


def test_evaluate_exact_rotation_model_is_perfect():
    model, pixels, labels = _hand_made_model()
    metrics = evaluate_modular_arithmetic(model, pixels, labels, batch_size=7)
    expected_ops = [k for k in range(-9, 10) if k != 0]
    assert sorted(metrics["accuracy_per_operation"]) == expected_ops
    assert sorted(metrics["rollout_accuracy_per_operation"]) == expected_ops
    assert all(v == 1.0 for v in metrics["accuracy_per_operation"].values())
    for key in ("seen_accuracy", "zero_shot_accuracy", "rollout_accuracy", "rollout_seen_accuracy"):
        assert metrics[key] == 1.0, key


def test_evaluate_known_errors():
    # One of 20 images is encoded as the wrong class: every op gets 19/20 right.
    model, pixels, labels = _hand_made_model(wrong_class=3)
    metrics = evaluate_modular_arithmetic(model, pixels, labels)
    assert all(v == pytest.approx(0.95) for v in metrics["accuracy_per_operation"].values())
    assert metrics["zero_shot_accuracy"] == pytest.approx(0.95)

    # Angle 12% too large: op k lands k * 0.12 of a step off, wrong once that exceeds half a step (|k| >= 5).
    model, pixels, labels = _hand_made_model(angle_error=0.12)
    metrics = evaluate_modular_arithmetic(model, pixels, labels)
    for k, accuracy in metrics["accuracy_per_operation"].items():
        assert accuracy == (1.0 if abs(k) <= 4 else 0.0), k
    assert metrics["seen_accuracy"] == 1.0
    assert metrics["zero_shot_accuracy"] == pytest.approx(6 / 16)  # +-2, +-3, +-4 of the 16 unseen ops
    assert metrics["rollout_accuracy"] == pytest.approx(6 / 16)  # |k| unit steps accumulate the same error

    # A subset of ops, with other "seen" ops.
    metrics = evaluate_modular_arithmetic(model, pixels, labels, operations=[1, 5, -6], seen_operations=(5,))
    assert sorted(metrics["accuracy_per_operation"]) == [-6, 1, 5]
    assert metrics["seen_accuracy"] == 0.0 and metrics["zero_shot_accuracy"] == 0.5


def test_bundled_evaluate_module_offline():
    metric = load_metric("modular_arithmetic_accuracy")
    # targets (x + k) mod 10: 1, 0, 4 | 5, 8, 9
    metric.add_batch(predictions=[1, 0, 3], references=[0, 9, 5], operations=[1, 1, -1])
    metric.add_batch(predictions=[5, 8, 0], references=[3, 2, 7], operations=[2, -4, 2])
    result = metric.compute()
    assert result["accuracy"] == pytest.approx(4 / 6)
    assert result["accuracy_per_operation"] == {-4: 1.0, -1: 0.0, 1: 1.0, 2: 0.5}
    assert result["seen_accuracy"] == pytest.approx(0.5)  # mean of op +1 (1.0) and op -1 (0.0)
    assert result["zero_shot_accuracy"] == pytest.approx(0.75)  # mean of op 2 (0.5) and op -4 (1.0)
    result = metric.compute(
        predictions=[0, 1], references=[1, 2], operations=[2, 2], modulus=3, seen_operations=[2]
    )  # (1 + 2) mod 3 = 0, (2 + 2) mod 3 = 1
    assert result["accuracy"] == 1.0 and result["seen_accuracy"] == 1.0 and math.isnan(result["zero_shot_accuracy"])
    with pytest.raises(ValueError, match="unknown metric"):
        evaluate_module_path("accuracy")


def test_pca_project():
    points = torch.tensor([[-2.0, 0.0, 1.0], [0.0, 0.0, 1.0], [2.0, 0.0, 1.0]])
    projected = pca_project(points, components=1)
    assert projected.shape == (3, 1)
    assert torch.allclose(projected.abs().flatten(), torch.tensor([2.0, 0.0, 2.0]), atol=1e-5)
    assert torch.allclose(
        pca_project(torch.tensor([[4.0, 0.0, 1.0]]), basis_from=points, components=1).abs(),
        torch.tensor([[4.0]]),
        atol=1e-5,
    )


def test_plot_latent_pca_writes_png(tmp_path):
    generator = torch.Generator().manual_seed(0)
    latents = torch.randn(60, 16, generator=generator)
    labels = torch.arange(60) % 10
    prototypes = torch.stack([latents[labels == c].mean(0) for c in range(10)])
    path = plot_latent_pca(prototypes, latents, labels, tmp_path / "plots" / "pca.png")
    assert path == str(tmp_path / "plots" / "pca.png")
    data = (tmp_path / "plots" / "pca.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
