"""I-JEPA model: forward/backward, the context encoder seeing only context patches, per-block prediction, the fixed
sin-cos tables after loading, the EMA pairs, the init scheme, and the family tester (config validation, bit-exact
save/load, strict loading, input checks, the exact parameter formula, ViT-H/16 on the meta device, remote code)."""

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModel, BertConfig

from hf_jepa import IJepaConfig, IJepaImageProcessor, IJepaModel, IJepaOutput
from hf_jepa.modeling.i_jepa.modeling_i_jepa import gather_patches, sincos_2d_position_embeddings
from hf_jepa.testing.family_tester import BadInput, FamilyTester
from hf_jepa.trainers.ema import ema_update_

GRID = 4  # tiny: 28 x 28 images, patch 7


def tiny(seed=0, **overrides) -> IJepaModel:
    torch.manual_seed(seed)
    return IJepaModel(IJepaConfig.tiny(**overrides))


def images(batch=3, seed=0):
    return torch.randn(batch, 1, 28, 28, generator=torch.Generator().manual_seed(seed))


def block(row, col, height, width, grid=GRID):
    """Row-major indices of a `height x width` block of patches with top-left patch (row, col)."""
    return [r * grid + c for r in range(row, row + height) for c in range(col, col + width)]


def masks(batch=3):
    """Hand-built multi-block masks on the 4 x 4 grid: 2 target blocks of 2 patches (bottom-right region, they
    overlap each other at patch 15), context = 6 patches of the top half, disjoint from the targets."""
    target_blocks = [block(3, 2, 1, 2), block(2, 3, 2, 1)]  # [14, 15], [11, 15]
    context = block(0, 0, 1, 4) + [4, 5]
    return (torch.tensor([context] * batch), torch.tensor([target_blocks] * batch))


def patch_slice(index, patch=7, grid=GRID):
    row, col = divmod(index, grid)
    return (slice(None), slice(None), slice(row * patch, (row + 1) * patch), slice(col * patch, (col + 1) * patch))


def reference_sincos(embed_dim, grid_size):
    """facebookresearch/ijepa src/models/vision_transformer.py: get_2d_sincos_pos_embed (cls_token=False)."""

    def one_d(dim, pos):
        omega = np.arange(dim // 2, dtype=float)
        omega /= dim / 2.0
        omega = 1.0 / 10000**omega
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    grid_h = np.arange(grid_size, dtype=float)
    grid_w = np.arange(grid_size, dtype=float)
    grid = np.stack(np.meshgrid(grid_w, grid_h), axis=0)
    emb_h = one_d(embed_dim // 2, grid[0])
    emb_w = one_d(embed_dim // 2, grid[1])
    return torch.from_numpy(np.concatenate([emb_h, emb_w], axis=1)).float()


def assert_state_dicts_equal(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


# ------------------------------------------------------------------------------------------------------- config


def test_backbone_must_be_a_vit_config():
    with pytest.raises(ValueError, match="backbone_config must be a ViTConfig"):
        IJepaConfig(backbone_config=BertConfig())


def test_presets_and_defaults(tmp_path):
    full = IJepaConfig()
    assert full.model_type == "i_jepa"
    assert (
        full.hidden_size,
        full.backbone_config.num_hidden_layers,
        full.backbone_config.num_attention_heads,
        full.backbone_config.intermediate_size,
        full.patch_size,
        full.image_size,
        full.num_channels,
    ) == (1280, 32, 16, 5120, 16, 224, 3)
    assert (full.predictor_hidden_size, full.predictor_num_layers, full.grid_size) == (384, 12, 14)
    assert full.target_scale == [0.15, 0.2] and full.target_aspect_ratio == [0.75, 1.5]
    assert full.context_scale == [0.85, 1.0] and (full.num_target_blocks, full.min_keep) == (4, 4)
    assert (full.loss_type, full.normalize_targets, full.ema_momentum, full.ema_momentum_end) == (
        "smooth_l1",
        True,
        0.996,
        1.0,
    )
    assert len(full.pixel_mean) == 3

    small = IJepaConfig.tiny()
    assert (small.grid_size, small.hidden_size, small.predictor_num_layers) == (4, 32, 2)
    assert small.pixel_mean == [0.1307] and small.pixel_std == [0.3081]
    fast = IJepaConfig.cpu_fast()
    assert (
        fast.grid_size,
        fast.hidden_size,
        fast.backbone_config.num_hidden_layers,
        fast.backbone_config.num_attention_heads,
        fast.backbone_config.intermediate_size,
    ) == (7, 128, 4, 4, 512)
    assert (fast.predictor_num_layers, fast.ema_momentum, fast.loss_type) == (3, 0.996, "mse")

    # tuples are stored as lists; a dict backbone is accepted; the config round-trips through JSON
    config = IJepaConfig.tiny(target_scale=(0.1, 0.3))
    assert config.target_scale == [0.1, 0.3]
    config.save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(loaded, IJepaConfig)
    assert loaded.to_diff_dict() == config.to_diff_dict()
    assert (
        IJepaConfig(backbone_config=config.backbone_config.to_dict()).backbone_config.to_dict()
        == config.backbone_config.to_dict()
    )


# ------------------------------------------------------------------------------------------- forward / backward


@pytest.mark.parametrize("loss_type", ["smooth_l1", "mse"])
def test_forward_backward_and_loss(loss_type):
    model = tiny(loss_type=loss_type).train()
    pixel_values = images()
    context, targets = masks()
    output = model(pixel_values, context, targets)
    assert isinstance(output, IJepaOutput)
    assert output.predictions.shape == output.targets.shape == (3, 2, 2, 32)
    assert output.last_hidden_state.shape == (3, 6, 32) and output.block_losses.shape == (2,)
    assert torch.isfinite(output.loss) and output.loss.item() > 0
    torch.testing.assert_close(output.loss, output.block_losses.mean())

    # the loss is I-JEPA's: layer-normalised target encoder states of the full image, gathered per block
    with torch.no_grad():
        full = model.encode(pixel_values, use_target_encoder=True)
    expected_targets = gather_patches(F.layer_norm(full, (32,)), targets)
    torch.testing.assert_close(output.targets, expected_targets)
    loss_fn = F.mse_loss if loss_type == "mse" else F.smooth_l1_loss
    torch.testing.assert_close(output.loss, loss_fn(output.predictions, expected_targets))
    for k in range(2):
        torch.testing.assert_close(output.block_losses[k], loss_fn(output.predictions[:, k], expected_targets[:, k]))

    output.loss.backward()
    for name, parameter in [*model.context_encoder.named_parameters(), *model.predictor.named_parameters()]:
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
    assert model.predictor.mask_token.grad.abs().sum() > 0
    assert model.context_encoder.patch_embeddings.projection.weight.grad.abs().sum() > 0
    assert all(not p.requires_grad and p.grad is None for p in model.target_encoder.parameters())
    assert not model.target_encoder.training

    as_tuple = model(pixel_values, context, targets, return_dict=False)
    assert torch.equal(as_tuple[0], output.loss)


def test_context_encoder_sees_only_context_patches():
    model = tiny().eval()
    pixel_values = images()
    context, targets = masks()
    with torch.no_grad():
        reference = model(pixel_values, context, targets)

        # pixels inside a target block (patch 14) and in a patch in neither set (patch 8): nothing the context
        # encoder or the predictor sees changes, bit for bit; the targets (hence the loss) do change
        changed = pixel_values.clone()
        changed[patch_slice(14)] += 3.0
        changed[patch_slice(8)] -= 2.0
        other = model(changed, context, targets)
        assert torch.equal(other.last_hidden_state, reference.last_hidden_state)
        assert torch.equal(other.predictions, reference.predictions)
        assert not torch.equal(other.targets, reference.targets)
        assert other.loss != reference.loss

        # pixels of a context patch change both
        changed = pixel_values.clone()
        changed[patch_slice(5)] += 3.0
        other = model(changed, context, targets)
        assert not torch.equal(other.last_hidden_state, reference.last_hidden_state)
        assert not torch.equal(other.predictions, reference.predictions)
        assert not torch.equal(other.targets, reference.targets)


def test_each_target_block_is_predicted_separately():
    """A block's predictions do not depend on which other blocks are in the batch, nor on their order (each block
    gets its own predictor pass over [context; its mask tokens])."""
    model = tiny().eval()
    pixel_values = images()
    context, _ = masks()
    a, b, c = block(3, 0, 1, 2), block(2, 2, 2, 1), block(3, 3, 1, 1) + [11]
    with torch.no_grad():
        both = model(pixel_values, context, torch.tensor([[a, b]] * 3)).predictions
        swapped = model(pixel_values, context, torch.tensor([[c, a]] * 3)).predictions
        alone = model(pixel_values, context, torch.tensor([[a]] * 3)).predictions
    torch.testing.assert_close(both[:, 0], swapped[:, 1], rtol=0, atol=1e-6)
    torch.testing.assert_close(both[:, 0], alone[:, 0], rtol=0, atol=1e-6)

    # different images in a batch may use different masks (same counts)
    per_image = torch.tensor([[a, b], [b, c], [c, a]])
    with torch.no_grad():
        output = model(pixel_values, context, per_image)
        first = model(pixel_values[1:2], context[1:2], per_image[1:2])
    torch.testing.assert_close(output.predictions[1:2], first.predictions, rtol=0, atol=1e-6)


def test_encode_and_embed():
    model = tiny()
    pixel_values = images()
    with torch.no_grad():
        context_states = model.encode(pixel_values)
        target_states = model.encode(pixel_values, use_target_encoder=True)
        embeddings = model.embed(pixel_values)
    assert context_states.shape == target_states.shape == (3, 16, 32)
    assert embeddings.shape == (3, 32)
    torch.testing.assert_close(embeddings, target_states.mean(1))
    torch.testing.assert_close(context_states, target_states)  # the target starts as an exact copy

    # the context encoder on all patches equals the full-image encoding (no CLS token, nothing else prepended)
    everything = torch.arange(16).expand(3, 16)
    with torch.no_grad():
        assert torch.equal(model.context_encoder(pixel_values, everything), context_states)


def test_gradient_checkpointing_gives_the_same_loss():
    model = tiny().train()
    pixel_values, (context, targets) = images(), masks()
    reference = model(pixel_values, context, targets).loss
    model.activation_checkpointing_enable()
    output = model(pixel_values, context, targets)
    torch.testing.assert_close(output.loss, reference)
    output.loss.backward()
    assert model.context_encoder.layers[0].attention.q_proj.weight.grad is not None


# ------------------------------------------------------------------------------------------------ sin-cos tables


def test_sincos_table_matches_the_reference():
    for dim, grid in ((32, 4), (16, 4), (128, 7), (384, 14)):
        table = sincos_2d_position_embeddings(dim, grid)
        assert table.shape == (grid * grid, dim) and table.dtype == torch.float32
        assert torch.equal(table, reference_sincos(dim, grid))
    with pytest.raises(ValueError, match="divisible by 4"):
        sincos_2d_position_embeddings(18, 4)


def test_position_tables_are_right_after_from_pretrained(tmp_path):
    model = tiny()
    model.save_pretrained(tmp_path)
    loaded = IJepaModel.from_pretrained(tmp_path)
    for encoder in (loaded.context_encoder, loaded.target_encoder):
        assert torch.equal(encoder.position_embeddings, reference_sincos(32, GRID))
    assert torch.equal(loaded.predictor.position_embeddings, reference_sincos(16, GRID))


# ------------------------------------------------------------------------------------------------------ EMA pairs


def test_ema_pairs_and_update():
    model = tiny()
    ((online, target),) = model.ema_pairs()
    assert online is model.context_encoder and target is model.target_encoder
    assert_state_dicts_equal(online.state_dict(), target.state_dict())
    with torch.no_grad():
        for parameter in online.parameters():
            parameter.add_(1.0)
    before = [p.clone() for p in target.parameters()]
    ema_update_(target, online, momentum=0.9)
    for old, new, source in zip(before, target.parameters(), online.parameters()):
        torch.testing.assert_close(new, 0.9 * old + 0.1 * source)
    model.copy_online_to_targets()
    assert_state_dicts_equal(online.state_dict(), target.state_dict())


# ------------------------------------------------------------------------------------------------------- inputs


def bad_inputs():
    x, (ctx, tgt) = images(), masks()
    return [
        (
            (x[:, 0], ctx, tgt),
            r"pixel_values must be a float tensor of shape \(batch, C, H, W\) = \(batch, 1, 28, 28\)",
        ),
        ((torch.randn(3, 3, 28, 28), ctx, tgt), r"pixel_values .*\(batch, C, H, W\)"),
        ((torch.randn(3, 1, 32, 32), ctx, tgt), r"pixel_values .*\(batch, C, H, W\)"),
        ((x.to(torch.uint8), ctx, tgt), r"pixel_values must be a float tensor"),
        ((x, None, tgt), "context_indices is missing: pass both"),
        ((x, ctx.float(), tgt), "context_indices must be an integer tensor"),
        ((x, ctx[:2], tgt), r"context_indices must have shape \(batch, num_context_patches\) with batch 3"),
        ((x, ctx[:, :0], tgt), "context_indices is empty"),
        ((x, ctx + 12, tgt), r"context_indices holds patch indices in \[12, 17\], outside \[0, 16\)"),
        ((x, torch.full_like(ctx, -1), tgt), "context_indices holds patch indices"),
        ((x, torch.cat([ctx[:, :1], ctx[:, :5]], 1), tgt), "context_indices repeats a patch index"),
        ((x, ctx, tgt[:, 0]), r"target_indices must have shape .*unsqueeze\(1\)"),
        ((x, ctx, tgt[:, :0]), "target_indices is empty"),
        ((x, ctx, tgt[:, :, :0]), "target_indices is empty"),
        ((x, ctx, tgt + 5), "target_indices holds patch indices"),
        ((x, ctx, torch.full_like(tgt, 15)), "target_indices repeats a patch index"),
        ((x, ctx, torch.tensor([[[0, 15], [14, 15]]] * 3)), "context_indices and target_indices overlap in rows"),
    ]


# --------------------------------------------------------------------------------------------------- full size


def vit_encoder_parameters(hidden, layers, intermediate, patch, channels):
    """Exact parameter count of a ViT encoder without CLS token and without learned position embeddings."""
    patch_embedding = channels * patch * patch * hidden + hidden
    attention = 4 * (hidden * hidden + hidden)  # q, k, v, o with biases
    mlp = hidden * intermediate + intermediate + intermediate * hidden + hidden
    norms = 2 * 2 * hidden
    return patch_embedding + layers * (attention + mlp + norms) + 2 * hidden


def predictor_parameters(hidden, width, layers, mlp_ratio=4):
    block = (
        3 * width * width
        + 3 * width
        + width * width
        + width
        + 2 * (width * mlp_ratio * width)
        + width * mlp_ratio
        + width
        + 4 * width
    )
    return (hidden * width + width) + width + layers * block + 2 * width + (width * hidden + hidden)


def test_full_size_position_table_on_the_meta_device():
    with torch.device("meta"):
        model = IJepaModel(IJepaConfig())
    assert model.context_encoder.position_embeddings.shape == (196, 1280)  # 14 x 14 patches of ViT-H/16


def test_init_rescales_output_projections_by_depth():
    """I-JEPA's fix_init_weight: block l's attention-output and fc2 weights are divided by sqrt(2 l)."""
    torch.manual_seed(0)
    config = IJepaConfig.tiny(
        hidden_size=128, num_hidden_layers=4, intermediate_size=256, num_attention_heads=4, init_scheme="trunc_normal"
    )
    model = IJepaModel(config)
    stds = [layer.mlp.fc2.weight.std().item() for layer in model.context_encoder.layers]
    for layer_id, std in enumerate(stds, start=1):
        assert math.isclose(std, 0.02 / math.sqrt(2 * layer_id), rel_tol=0.1), (layer_id, std)
    first_fc1 = model.context_encoder.layers[0].mlp.fc1.weight.std().item()
    assert math.isclose(first_fc1, 0.02, rel_tol=0.1)
    # Xavier-uniform: std sqrt(2 / (fan_in + fan_out)), the same depth rescale; the patch projection as a
    # (hidden, C * p * p) linear layer.
    torch.manual_seed(0)
    xavier = IJepaModel(
        IJepaConfig.tiny(
            hidden_size=128,
            num_hidden_layers=4,
            intermediate_size=256,
            num_attention_heads=4,
            init_scheme="xavier_uniform",
        )
    )
    for layer_id, layer in enumerate(xavier.context_encoder.layers, start=1):
        expected = math.sqrt(2.0 / (256 + 128)) / math.sqrt(2 * layer_id)
        assert math.isclose(layer.mlp.fc2.weight.std().item(), expected, rel_tol=0.1), layer_id
    projection = xavier.context_encoder.patch_embeddings.projection.weight
    assert math.isclose(projection.std().item(), math.sqrt(2.0 / (128 + 49)), rel_tol=0.1)
    # The small presets' PyTorch default: weights and biases U(+-1 / sqrt(fan_in)) (std 1 / sqrt(3 fan_in)), the same
    # depth rescale on the weights.
    torch.manual_seed(0)
    default = IJepaModel(
        IJepaConfig.tiny(hidden_size=128, num_hidden_layers=4, intermediate_size=256, num_attention_heads=4)
    )
    for layer_id, layer in enumerate(default.context_encoder.layers, start=1):
        expected = 1.0 / math.sqrt(3 * 256) / math.sqrt(2 * layer_id)
        assert math.isclose(layer.mlp.fc2.weight.std().item(), expected, rel_tol=0.1), layer_id
        assert 0 < layer.mlp.fc2.bias.abs().max().item() <= 1.0 / math.sqrt(256)
    projection = default.context_encoder.patch_embeddings.projection
    assert math.isclose(projection.weight.std().item(), 1.0 / math.sqrt(3 * 49), rel_tol=0.1)
    assert 0 < projection.bias.abs().max().item() <= 1.0 / 7


# ------------------------------------------------------------------------------------------- the family tester


class TestIJepaFamily(FamilyTester):
    """The common contracts (hf_jepa.testing.family_tester) on I-JEPA."""

    config_class = IJepaConfig
    model_classes = (IJepaModel,)
    processor_class = IJepaImageProcessor
    pipeline_tasks = ("jepa-feature-extraction",)
    hub_variants = ("default",)  # also from a loopback Hub repo without hf_jepa
    variants = {"default": {}}
    # ViT fields go to the backbone (IJepaConfig.backbone_config.<field>); the first field a message names
    invalid_configs = [
        (dict(image_size=30), "backbone_config.image_size"),
        (dict(hidden_size=30, num_attention_heads=3), "backbone_config.hidden_size"),
        (dict(hidden_size=32, num_attention_heads=3), "backbone_config.hidden_size"),  # ... by num_attention_heads
        (dict(predictor_hidden_size=20, predictor_num_heads=3), "predictor_hidden_size"),  # ... by predictor_num_heads
        (dict(predictor_hidden_size=18, predictor_num_heads=2), "predictor_hidden_size"),
        (dict(predictor_num_layers=0), "predictor_num_layers"),
        (dict(loss_type="l2"), "loss_type"),
        (dict(num_target_blocks=0), "num_target_blocks"),
        (dict(target_scale=[0.3, 0.2]), "target_scale"),
        (dict(context_scale=[0.85, 1.2]), "context_scale"),
        (dict(target_aspect_ratio=[0.0, 1.5]), "target_aspect_ratio"),
        (dict(min_keep=0), "min_keep"),
        (dict(ema_momentum=1.5), "ema_momentum"),
        (dict(pixel_mean=[0.5, 0.5, 0.5]), "pixel_mean"),
        (dict(pixel_std=[0.0]), "pixel_std"),
    ]
    mismatched_configs = [dict(predictor_num_layers=3)]
    # ViT-H/16: ~630M per encoder (the EMA target is a frozen copy) + the 12-block, 384-wide predictor
    full_sizes = {
        "default": {"total": 2 * 630_664_960 + 22_279_424, "trainable": 630_664_960 + 22_279_424},
    }

    def parameter_count(self, config):
        backbone = config.backbone_config
        encoder = vit_encoder_parameters(
            config.hidden_size,
            backbone.num_hidden_layers,
            backbone.intermediate_size,
            config.patch_size,
            config.num_channels,
        )
        assert config.predictor_mlp_ratio == 4  # the formula's
        predictor = predictor_parameters(config.hidden_size, config.predictor_hidden_size, config.predictor_num_layers)
        return 2 * encoder + predictor

    def inputs(self, name):
        context, targets = masks()
        return dict(pixel_values=images(), context_indices=context, target_indices=targets)

    def calls(self, name):
        pixel_values = self.inputs(name)["pixel_values"]
        return {
            "forward": ("__call__", self.inputs(name)),
            "embed": ("embed", dict(pixel_values=pixel_values)),
            "encode": ("encode", dict(pixel_values=pixel_values)),
        }

    def processor_inputs(self, name):
        raw = np.random.default_rng(3).integers(0, 256, size=(3, 1, 28, 28), dtype=np.uint8)
        return dict(images=list(raw), return_tensors="pt")

    def pipeline_calls(self, name, task):
        raw = np.random.default_rng(0).integers(0, 256, size=(3, 28, 28), dtype=np.uint8)
        return [
            ((raw[0],), {}),
            ((list(raw),), dict(batch_size=2)),
            ((raw[1],), dict(use_target_encoder=False, return_tensors=True)),
        ]

    def bad_inputs(self):
        cases = []
        for (pixel_values, context, targets), match in bad_inputs():
            arguments = dict(pixel_values=pixel_values, context_indices=context, target_indices=targets)
            named = re.match(r"\w+", match).group(0)
            cases.append(BadInput(named, match=match, inputs=arguments))
        return cases + [BadInput("pixel_values", method="embed", inputs=dict(pixel_values=torch.randn(2, 28, 28)))]

    def test_auto_model_loads_the_saved_weights_bit_for_bit(self, family):
        """`AutoModel.from_pretrained(folder)` (hf_jepa's registered class) gives back the saved model's state dict:
        the same names in the same order, and every tensor (weights and persistent buffers, the EMA target off the
        context encoder) with the same dtype, shape and bytes."""
        auto = AutoModel.from_pretrained(family.folder("default"))
        assert type(auto) is IJepaModel
        original, loaded = family.model("default").state_dict(), auto.state_dict()
        assert list(loaded) == list(original)
        for name, tensor in original.items():
            assert (loaded[name].dtype, loaded[name].shape) == (tensor.dtype, tensor.shape), name
            bits = tensor.detach().reshape(-1).view(torch.uint8)
            assert torch.equal(loaded[name].detach().reshape(-1).view(torch.uint8), bits), name
