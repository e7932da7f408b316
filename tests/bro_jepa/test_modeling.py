import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hf_jepa.modeling.bro_jepa import BroJepaConfig, BroJepaImageProcessor, BroJepaModel
from hf_jepa.modeling.bro_jepa.modeling_bro_jepa import (
    BroJepaAdditivePredictor,
    BroJepaBlockRotationPredictor,
    rotation_harmonics,
    vicreg_covariance_loss,
    vicreg_variance_loss,
)
from hf_jepa.testing.family_tester import BadInput, FamilyTester, Variant


def tiny_model(**overrides) -> BroJepaModel:
    torch.manual_seed(0)
    return BroJepaModel(BroJepaConfig.tiny(**overrides))


def images(batch=4, seed=0):
    return torch.randn(batch, 1, 28, 28, generator=torch.Generator().manual_seed(seed))


def all_ops(batch):
    return torch.arange(batch) % 19 - 9  # -9 .. 9


# ----------------------------------------------------------------------------------------------- block rotation


def test_block_rotation_quarter_turn_rotates_true_pairs():
    model = tiny_model(latent_dim=4, rotation_frequencies="single", initial_angle=math.pi / 2)
    z = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    # R(pi/2) (x, y) = (-y, x), applied to the pairs (z0, z1) and (z2, z3) - not (z0, z2), (z1, z3).
    assert torch.allclose(model.predict(z, 1), torch.tensor([[-2.0, 1.0, -4.0, 3.0]]), atol=1e-6)
    assert torch.allclose(model.predict(z, -1), torch.tensor([[2.0, -1.0, 4.0, -3.0]]), atol=1e-6)
    assert torch.allclose(model.predict(z, 2), torch.tensor([[-1.0, -2.0, -3.0, -4.0]]), atol=1e-6)
    assert torch.allclose(model.predict(z, 0), z)


def test_block_rotation_multi_frequency_hand_values():
    # Harmonics (1, 2): block 0 turns by pi/2, block 1 by pi.
    model = tiny_model(latent_dim=4, rotation_frequencies="multi", initial_angle=math.pi / 2)
    z = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    assert torch.allclose(model.predict(z, 1), torch.tensor([[-2.0, 1.0, -3.0, -4.0]]), atol=1e-6)
    # A general angle against the explicit 2x2 rotation matrix.
    model = tiny_model(latent_dim=4, rotation_frequencies="single", initial_angle=0.3)
    c, s = math.cos(0.9), math.sin(0.9)
    rotation = torch.tensor([[c, -s], [s, c]])
    expected = torch.cat([rotation @ torch.tensor([1.0, 2.0]), rotation @ torch.tensor([3.0, 4.0])])[None]
    assert torch.allclose(model.predict(z, 3), expected, atol=1e-6)


@pytest.mark.parametrize("frequencies", ["single", "multi"])
def test_block_rotation_preserves_norms(frequencies):
    model = tiny_model(rotation_frequencies=frequencies)
    z = torch.randn(19, 16, generator=torch.Generator().manual_seed(1))
    rotated = model.predict(z, all_ops(19))
    assert torch.allclose(rotated.norm(dim=-1), z.norm(dim=-1), atol=1e-5)
    # Each 2-D block keeps its own norm (it is a block-diagonal rotation).
    assert torch.allclose(rotated.view(19, 8, 2).norm(dim=-1), z.view(19, 8, 2).norm(dim=-1), atol=1e-5)


@pytest.mark.parametrize("frequencies", ["single", "multi"])
def test_block_rotation_composes(frequencies):
    """R(a) R(b) = R(a + b): P(P(z, a), b) == P(z, a + b)."""
    model = tiny_model(rotation_frequencies=frequencies)
    z = torch.randn(3, 16, generator=torch.Generator().manual_seed(2))
    predictor = model.predictor
    for a in range(-9, 10):
        for b in (-7, -1, 1, 4, 9):
            ops_a, ops_b = torch.full((3,), a), torch.full((3,), b)
            composed = predictor(predictor(z, ops_a), ops_b)
            assert torch.allclose(composed, predictor(z, ops_a + ops_b), atol=1e-5), (a, b)
            if abs(a + b) < 10:
                assert torch.allclose(model.predict(model.predict(z, a), b), model.predict(z, a + b), atol=1e-5)


@pytest.mark.parametrize("frequencies", ["single", "multi"])
def test_modulus_turns_are_identity(frequencies):
    """R(modulus * theta) = I for every block (integer harmonics), so op 10 == op 0 and op k == op k - 10."""
    model = tiny_model(rotation_frequencies=frequencies)
    z = torch.randn(5, 16, generator=torch.Generator().manual_seed(3))
    for k in (10, -10, 20):
        # The model rejects |k| >= modulus, so call the predictor module directly.
        assert torch.allclose(model.predictor(z, torch.full((5,), k)), z, atol=1e-5)
    with pytest.raises(ValueError, match="operations"):
        model.predict(z, 10)
    for k in range(1, 10):
        assert torch.allclose(model.predict(z, k), model.predict(z, k - 10), atol=1e-5)


def test_multi_frequency_harmonics_cycle():
    config = BroJepaConfig.tiny(latent_dim=24)
    assert config.num_blocks == 12
    assert rotation_harmonics(config).tolist() == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]
    model = BroJepaModel(config)
    expected = torch.tensor([1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2], dtype=torch.float32) * (2 * math.pi / 10)
    assert torch.allclose(model.predictor.angles, expected)
    assert rotation_harmonics(BroJepaConfig.tiny(latent_dim=8, modulus=7)).tolist() == [1, 2, 3, 1]


def test_single_frequency_shares_one_angle():
    model = tiny_model(latent_dim=8, rotation_frequencies="single")
    assert model.predictor.angles.shape == (1,)
    assert model.predictor.angles.item() == pytest.approx(2 * math.pi / 10)
    # Every block turns by the same angle: a latent with identical blocks stays block-identical.
    z = torch.tensor([[1.0, -0.5] * 4])
    rotated = model.predict(z, 3).view(4, 2)
    assert torch.allclose(rotated, rotated[:1].expand(4, 2))


def test_learnable_angle_gets_gradients_fixed_angle_is_a_buffer():
    learnable = tiny_model(learnable_angle=True)
    assert "predictor.angles" in dict(learnable.named_parameters())
    out = learnable(images(), all_ops(4)[:4] % 3 - 1, target_pixel_values=images(seed=1))
    out.loss.backward()
    grad = learnable.predictor.angles.grad
    assert grad is not None and grad.abs().sum() > 0
    # The EMA target encoder gets no gradients.
    assert all(p.grad is None and not p.requires_grad for p in learnable.target_encoder.parameters())

    fixed = tiny_model(learnable_angle=False)
    assert "predictor.angles" not in dict(fixed.named_parameters())
    assert "predictor.angles" in dict(fixed.named_buffers())
    assert "predictor.angles" in fixed.state_dict()
    assert not fixed.predictor.angles.requires_grad


def test_additive_predictor_uses_k_times_v():
    model = tiny_model(predictor_type="additive_mlp")
    predictor = model.predictor
    assert isinstance(predictor, BroJepaAdditivePredictor)
    z = torch.randn(19, 16, generator=torch.Generator().manual_seed(4))
    ops = all_ops(19)
    expected = predictor.mlp(z + ops[:, None].float() * predictor.operation_direction[None, :])
    assert torch.allclose(model.predict(z, ops), expected, atol=1e-6)
    assert torch.allclose(model.predict(z, 0), predictor.mlp(z), atol=1e-6)
    with torch.no_grad():
        predictor.operation_direction.zero_()
    assert torch.allclose(model.predict(z, 5), model.predict(z, -5), atol=1e-6)


# ---------------------------------------------------------------------------------------------------------- losses


def test_vicreg_variance_hand_values():
    # dim 0: unbiased var 4 -> std ~2 -> hinge 0; dim 1: var 0 -> std sqrt(1e-4) = 0.01 -> hinge 0.99.
    latent = torch.tensor([[0.0, 0.0], [2.0, 0.0], [4.0, 0.0]])
    assert vicreg_variance_loss(latent).item() == pytest.approx(0.495, abs=1e-6)
    # unbiased var of (0, 1) is 0.5.
    assert vicreg_variance_loss(torch.tensor([[0.0], [1.0]])).item() == pytest.approx(1 - math.sqrt(0.5001), abs=1e-6)


def test_vicreg_covariance_hand_values():
    # mean (3, 3); centred rows (-2,-1), (0,-2), (2,3); cov01 = (2 + 0 + 6) / (3 - 1) = 4;
    # off-diagonal squares 2 * 16 = 32, divided by dim 2 -> 16.
    latent = torch.tensor([[1.0, 2.0], [3.0, 1.0], [5.0, 6.0]])
    assert vicreg_covariance_loss(latent).item() == pytest.approx(16.0)
    # One-hot rows plus a zero row: every off-diagonal covariance is -1/12; 6 * (1/144) / 3 = 1/72.
    latent = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [0, 0, 0]])
    assert vicreg_covariance_loss(latent).item() == pytest.approx(1 / 72)
    # Diagonal covariance (uncorrelated dimensions) -> 0.
    assert vicreg_covariance_loss(torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]])).item() == 0.0


def test_jepa_loss_is_the_weighted_sum():
    model = tiny_model()
    out = model(images(8), all_ops(8) % 3 - 1, target_pixel_values=images(8, seed=1))
    expected = 25 * out.prediction_loss + 25 * out.variance_loss + 1 * out.covariance_loss
    assert torch.allclose(out.loss, expected)
    assert torch.allclose(out.prediction_loss, F.mse_loss(out.predicted_latent, out.target_latent))
    assert torch.allclose(out.variance_loss, vicreg_variance_loss(out.context_latent))
    assert out.composition_loss is None
    assert out.target_latent.shape == out.predicted_latent.shape == out.context_latent.shape == (8, 16)


def test_composition_loss_zero_for_rotation_positive_for_additive():
    rotation = tiny_model(composition_weight=1.0)
    out = rotation(images(8), all_ops(8) % 5 - 2, target_pixel_values=images(8, seed=1))
    assert out.composition_loss.item() < 1e-10  # exact up to float rounding: R(2k) = R(k) R(k)
    base = 25 * out.prediction_loss + 25 * out.variance_loss + out.covariance_loss
    assert torch.allclose(out.loss, base + out.composition_loss)

    additive = tiny_model(composition_weight=2.0, predictor_type="additive_mlp")
    out = additive(images(8), all_ops(8) % 5 - 2, target_pixel_values=images(8, seed=1))
    assert out.composition_loss.item() > 1e-6
    base = 25 * out.prediction_loss + 25 * out.variance_loss + out.covariance_loss
    assert torch.allclose(out.loss, base + 2.0 * out.composition_loss)


def test_composition_loss_matches_hand_computed_chain():
    """mean over n = 2..9 of ||P(z, n k) - P(...P(P(z, k), k)..., k)||^2, written out step by step."""
    model = tiny_model(predictor_type="additive_mlp")
    latent = torch.randn(6, 16, generator=torch.Generator().manual_seed(3))
    ops = torch.tensor([1, -1, 1, -1, 1, -1])
    expected, rolled = [], latent
    for n in range(1, 10):
        rolled = model.predictor(rolled, ops)
        if n >= 2:
            expected.append(((model.predictor(latent, n * ops) - rolled) ** 2).mean())
    assert torch.allclose(model.composition_loss(latent, ops), torch.stack(expected).mean())
    # n = 2 alone is the "applying +2 once must match applying +1 twice"
    two = ((model.predictor(latent, 2 * ops) - model.predictor(model.predictor(latent, ops), ops)) ** 2).mean()
    assert torch.allclose(expected[0], two)


# --------------------------------------------------------------------------------------------------------- rollout


@pytest.mark.parametrize("predictor_type", ["block_rotation", "additive_mlp"])
def test_rollout_applies_unit_steps(predictor_type):
    model = tiny_model(predictor_type=predictor_type)
    z = torch.randn(19, 16, generator=torch.Generator().manual_seed(5))
    ops = all_ops(19)
    rolled = model.rollout(z, ops)
    for i, k in enumerate(ops.tolist()):
        expected = z[i : i + 1]
        for _ in range(abs(k)):
            expected = model.predict(expected, 1 if k > 0 else -1)
        assert torch.allclose(rolled[i : i + 1], expected, atol=1e-6), k
    if predictor_type == "block_rotation":
        assert torch.allclose(rolled, model.predict(z, ops), atol=1e-5)


# ------------------------------------------------------------------------------------------------------ prototypes


def test_fill_class_prototypes_are_class_means():
    model = tiny_model()
    # At initialisation the target encoder is an exact copy of the context encoder.
    context, target = model.context_encoder.state_dict(), model.target_encoder.state_dict()
    assert all(torch.equal(context[k], target[k]) for k in context)
    pixels, labels = images(40, seed=7), torch.arange(40) % 10
    model.eval()
    assert model.class_logits(torch.randn(3, 16)) is None  # no prototypes yet
    assert model(pixels[:3], 1).logits is None
    with torch.no_grad():
        latents = model.context_encoder(pixels)
    expected = torch.stack([latents[labels == c].mean(0) for c in range(10)])
    model.train()
    prototypes = model.fill_class_prototypes(pixels, labels, batch_size=16)
    assert model.training  # restored
    assert torch.allclose(prototypes, expected, atol=1e-5)
    assert torch.allclose(model.class_prototypes, expected, atol=1e-5)

    logits = model.class_logits(model.class_prototypes)
    assert logits.shape == (10, 10)
    assert torch.allclose(logits.diagonal(), torch.full((10,), 10.0), atol=1e-4)  # cosine 1 / temperature 0.1
    assert logits.argmax(-1).tolist() == list(range(10))
    with pytest.raises(ValueError, match="labels"):
        model.fill_class_prototypes(pixels, torch.arange(40) % 9)


def test_euclidean_prototype_logits():
    model = tiny_model(prototype_metric="euclidean")
    with torch.no_grad():
        model.class_prototypes.copy_(torch.eye(10, 16))
    latent = torch.zeros(1, 16)
    latent[0, 3] = 2.0
    logits = model.class_logits(latent)
    expected = -torch.tensor([[5.0, 5.0, 5.0, 1.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]])  # -||z - e_c||^2
    assert torch.allclose(logits, expected, atol=1e-5)


def test_supervised_objective():
    model = tiny_model(objective="supervised")
    assert model.target_encoder is None and model.classifier is not None
    assert not any(k.startswith("target_encoder") for k in model.state_dict())
    labels = torch.tensor([0, 3, 9, 5])
    out = model(images(), torch.tensor([1, -1, 1, -1]), labels=labels)
    assert torch.allclose(out.loss, F.cross_entropy(out.logits, labels))
    assert torch.allclose(out.loss, out.prediction_loss)
    assert out.variance_loss is None and out.target_latent is None
    assert out.logits.shape == (4, 10)
    assert model(images(), 1).loss is None  # no labels, no loss


# ---------------------------------------------------------------------------------------------------- config


def test_config_defaults_and_the_angle_derived_from_the_modulus():
    config = BroJepaConfig()
    assert (config.encoder_type, config.latent_dim, config.modulus) == ("resnet18", 128, 10)
    assert (config.predictor_type, config.rotation_frequencies, config.learnable_angle) == (
        "block_rotation",
        "multi",
        False,
    )
    assert config.initial_angle == pytest.approx(2 * math.pi / 10)
    assert (config.invariance_weight, config.variance_weight, config.covariance_weight) == (25.0, 25.0, 1.0)
    again = BroJepaConfig.from_dict(BroJepaConfig.tiny(modulus=7).to_dict())
    assert again.modulus == 7 and again.initial_angle == pytest.approx(2 * math.pi / 7)


# ---------------------------------------------------------------------------------------------------- full size


def test_default_resnet18_model():
    torch.manual_seed(0)
    model = BroJepaModel(BroJepaConfig())
    assert isinstance(model.predictor, BroJepaBlockRotationPredictor)
    blocks = sum(p.numel() for p in model.context_encoder.backbone.blocks.parameters())
    assert blocks == 11_166_976  # torchvision resnet18's layer1..layer4, exactly
    encoder = sum(p.numel() for p in model.context_encoder.parameters())
    assert 11.1e6 < encoder < 11.3e6  # + 3x3 one-channel stem and the 512 -> 128 projection
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == encoder  # fixed-angle predictor: only the context encoder trains
    pixels = images(2)
    out = model(pixels, torch.tensor([1, -1]), target_pixel_values=images(2, seed=1))
    assert torch.isfinite(out.loss)
    assert out.predicted_latent.shape == out.target_latent.shape == (2, 128)


# ------------------------------------------------------------------------------------------- the family tester


class TestBroJepaFamily(FamilyTester):
    """The common contracts (hf_jepa.testing.family_tester) on every predictor / objective of BRo-JEPA."""

    config_class = BroJepaConfig
    model_classes = (BroJepaModel,)
    processor_class = BroJepaImageProcessor
    pipeline_tasks = ("modular-arithmetic",)
    hub_variants = ("jepa",)  # also from a loopback Hub repo without hf_jepa
    variants = {
        "jepa": {},
        "learnable_angle": {"learnable_angle": True},
        "supervised": {"objective": "supervised"},
        "additive_single": {"predictor_type": "additive_mlp", "rotation_frequencies": "single"},
        # no image processor saved: the pipeline (and without hf_jepa, transformers) builds one from the config
        "jepa_bare": Variant(companions=False),
    }
    invalid_configs = [
        (dict(latent_dim=15), "latent_dim"),
        (dict(latent_dim=0), "latent_dim"),
        (dict(encoder_type="vit"), "encoder_type"),
        (dict(modulus=1), "modulus"),
        (dict(modulus=2.5), "modulus"),
        (dict(objective="contrastive"), "objective"),
        (dict(predictor_type="transformer"), "predictor_type"),
        (dict(rotation_frequencies="many"), "rotation_frequencies"),
        (dict(loss_type="l1"), "loss_type"),
        (dict(prototype_metric="dot"), "prototype_metric"),
        (dict(cnn_channels=[]), "cnn_channels"),
        (dict(mlp_hidden_sizes=[64, 0]), "mlp_hidden_sizes"),
        (dict(image_size=0), "image_size"),
        (dict(initial_angle=float("inf")), "initial_angle"),
        (dict(variance_weight=-1.0), "variance_weight"),
        (dict(composition_weight=-0.1), "composition_weight"),
        (dict(ema_momentum=1.5), "ema_momentum"),
        (dict(ema_momentum_end=-0.1), "ema_momentum_end"),
        (dict(pixel_std=0.0), "pixel_std"),
        # the composition loss's settings (tests/bro_jepa/test_composition.py)
        (dict(composition_mode="pairs"), "composition_mode"),
        (dict(composition_max_n=1), "composition_max_n"),
        (dict(composition_max_n=10), "composition_max_n"),
        (dict(composition_max_n=2.0), "composition_max_n"),
        # the CNN speed options (tests/bro_jepa/test_speed_options.py)
        (dict(cnn_downsampling="avg_pool"), "cnn_downsampling"),
        (dict(cnn_hidden_size=-1), "cnn_hidden_size"),
        (dict(cnn_hidden_size=True), "cnn_hidden_size"),
    ]
    # The same shapes, other weights: a config.json edited to another predictor or objective is refused.
    mismatched_configs = [dict(predictor_type="additive_mlp"), dict(objective="supervised")]
    # docs/results/bro-jepa.md: the full ResNet-18 encoder has 11.2M parameters; only it trains (fixed angles).
    full_sizes = {"jepa": {"trainable": (11_100_000, 11_300_000)}}

    @torch.no_grad()
    def make_trained_looking(self, name, model):
        """BatchNorm statistics moved, the EMA target off the context encoder, moved learnable angles and filled
        class prototypes."""
        model.train()
        model(
            torch.randn(16, 1, 28, 28),
            torch.randint(-3, 4, (16,)),
            target_pixel_values=torch.randn(16, 1, 28, 28),
            labels=torch.randint(0, 10, (16,)),
        )
        super().make_trained_looking(name, model)
        if model.config.learnable_angle:
            model.predictor.angles.add_(0.05)
        model.eval()
        model.fill_class_prototypes(torch.randn(40, 1, 28, 28), torch.arange(40) % 10)

    def inputs(self, name):
        generator = torch.Generator().manual_seed(1)
        return dict(
            pixel_values=torch.randn(6, 1, 28, 28, generator=generator),
            operations=torch.tensor([1, -1, 2, 5, -9, 0]),
            target_pixel_values=torch.randn(6, 1, 28, 28, generator=generator),
            labels=torch.tensor([0, 3, 9, 5, 1, 7]),
        )

    def calls(self, name):
        inputs = self.inputs(name)
        return {"forward": ("__call__", inputs), "encode": ("encode", dict(pixel_values=inputs["pixel_values"]))}

    def processor_inputs(self, name):
        raw = np.random.default_rng(2).integers(0, 256, size=(5, 1, 28, 28), dtype=np.uint8)
        return dict(images=list(raw), return_tensors="pt")

    def pipeline_calls(self, name, task):
        images = np.random.default_rng(7).integers(0, 256, size=(8, 28, 28), dtype=np.uint8)
        return [
            ((images[0],), dict(operation=3, return_tensors=True)),
            ((list(images[:5]),), dict(operation=[1, -2, 3, 0, 9], batch_size=3)),
            ((list(images),), dict(operation=3, rollout=True, batch_size=4)),
        ]

    def bad_inputs(self):
        ones = torch.ones(6, dtype=torch.long)
        return [
            BadInput("pixel_values", torch.randn(6, 1, 32, 32), match=r"shape \(batch, 1, 28, 28\)"),
            BadInput("pixel_values", torch.randn(6, 28, 28), match=r"shape \(batch, 1, 28, 28\)"),
            BadInput("pixel_values", torch.zeros(6, 1, 28, 28, dtype=torch.uint8), TypeError, "BroJepaImageProcessor"),
            BadInput("pixel_values", torch.randn(6, 1, 28, 28).tolist(), TypeError, "torch.Tensor"),
            BadInput("operations", torch.tensor([1, 10, 1, 1, 1, 1]), match=r"\[-9, 9\] \(modulus 10\)"),
            BadInput("operations", torch.tensor([-10, 1, 1, 1, 1, 1]), match=r"\[-9, 9\]"),
            BadInput("operations", ones.float(), TypeError, "integers"),
            BadInput("operations", 1.0, TypeError, "integers"),
            BadInput("operations", torch.tensor([1, 1, 1]), match=r"shape \(6,\) or be a scalar"),
            BadInput("target_pixel_values", torch.randn(6, 1, 14, 14), match=r"shape \(batch, 1, 28, 28\)"),
            BadInput("target_pixel_values", torch.zeros(6, 1, 28, 28, dtype=torch.uint8), TypeError, "floating"),
            BadInput("target_pixel_values", torch.randn(3, 1, 28, 28), match="same batch size as pixel_values"),
        ]

    def test_loaded_model_keeps_prototypes_angles_and_target(self, variant, family):
        """What is BRo-JEPA's own in the saved folder: the prototypes, the EMA target's own weights (not a copy of
        the context encoder) and a learnable angle that stays a trainable parameter."""
        model, loaded = family.model(variant), family.load(variant)
        assert loaded.has_class_prototypes() and "class_prototypes" in loaded.state_dict()
        if model.target_encoder is not None:
            assert not torch.equal(
                loaded.target_encoder.backbone.projection.weight, loaded.context_encoder.backbone.projection.weight
            )
        if model.config.learnable_angle:
            assert isinstance(loaded.predictor.angles, torch.nn.Parameter) and loaded.predictor.angles.requires_grad

    def test_scalar_and_list_operations_are_accepted(self, family):
        model = family.model("jepa")
        good = self.inputs("jepa")["pixel_values"][:2]
        assert model(good, -1).predicted_latent.shape == (2, 16)
        assert torch.allclose(model.predict(torch.ones(2, 16), [1, 1]), model.predict(torch.ones(2, 16), 1))

    def test_remote_pipeline_uses_the_folders_image_processor(self, remote_variant, remote_results):
        """Without hf_jepa (the class's remote-code subprocess), the pipeline of a folder that saved its image
        processor preprocesses with the folder's own `BroJepaImageProcessor` (remote code); without a saved one,
        transformers builds its generic image processor (the `jepa_bare` variant)."""
        module, class_name = remote_results[remote_variant]["pipelines"]["modular-arithmetic"]["image_processor"]
        if self.variant(remote_variant).companions:
            assert module.startswith("transformers_modules.") and module.endswith(".image_processing_bro_jepa")
            assert class_name == "BroJepaImageProcessor"
        else:
            assert (module.split(".")[0], class_name) == ("transformers", "PilBackend")
