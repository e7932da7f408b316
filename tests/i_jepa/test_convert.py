"""`hf-jepa convert i-jepa`: a tiny random transformers IJepaModel and a tiny checkpoint in Meta's key layout (built
offline from an independent reference ViT written below, following facebookresearch/ijepa's module structure) convert
into hf-jepa folders whose outputs equal the sources' to float tolerance; incomplete mappings raise naming the keys;
the converted folder continues pre-training with `init_from`."""

import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers import IJepaConfig as TransformersIJepaConfig
from transformers import IJepaModel as TransformersIJepaModel

from hf_jepa import IJepaModel
from hf_jepa.cli import main
from hf_jepa.conversion import ConversionError, convert_i_jepa

TOLERANCE = 1e-5  # float32 (a failing assertion prints the difference it saw)


@pytest.fixture(scope="module")
def transformers_folder(tmp_path_factory):
    torch.manual_seed(0)
    config = TransformersIJepaConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8
    )
    folder = tmp_path_factory.mktemp("hf_ijepa")
    TransformersIJepaModel(config).eval().save_pretrained(folder)
    return folder


def test_transformers_folder_converts_with_parity(transformers_folder, tmp_path):
    result = convert_i_jepa(
        str(transformers_folder), tmp_path / "out", predictor={"predictor_hidden_size": 16, "predictor_num_layers": 2}
    )
    assert result.config.converted_from["predictor"] == "initialised"
    assert result.source_max_abs_diff is not None and result.source_max_abs_diff < TOLERANCE
    model = IJepaModel.from_pretrained(tmp_path / "out").eval()  # strict
    reference = TransformersIJepaModel.from_pretrained(transformers_folder).eval()
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = reference(pixels).last_hidden_state
        for target in (False, True):
            diff = (model.encode(pixels, use_target_encoder=target) - expected).abs().max()
            assert diff < TOLERANCE, float(diff)
        # another input size: bicubic interpolation as transformers' interpolate_pos_encoding
        big = torch.randn(1, 3, 48, 40, generator=torch.Generator().manual_seed(2))
        diff = model.encode(big, interpolate_pos_encoding=True) - reference(big, interpolate_pos_encoding=True)[0]
        assert diff.abs().max() < TOLERANCE, float(diff.abs().max())
    card = (tmp_path / "out" / "README.md").read_text()
    assert "NEWLY INITIALISED" in card
    summary = json.loads((tmp_path / "out" / "conversion.json").read_text())
    assert summary["initialised"] and all(k.startswith("predictor.") for k in summary["initialised"])


def test_convert_to_another_image_size_interpolates_tables(transformers_folder, tmp_path):
    result = convert_i_jepa(
        str(transformers_folder),
        tmp_path / "out",
        image_size=48,
        predictor={"predictor_hidden_size": 16, "predictor_num_layers": 2},
    )
    assert result.config.image_size == 48
    model = IJepaModel.from_pretrained(tmp_path / "out").eval()
    reference = TransformersIJepaModel.from_pretrained(transformers_folder).eval()
    pixels = torch.randn(1, 3, 48, 48, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        diff = (model.encode(pixels) - reference(pixels, interpolate_pos_encoding=True)[0]).abs().max()
    assert diff < TOLERANCE, float(diff)


# ------------------------------------------------------------------- Meta's layout, from an independent reference


class MetaBlock(nn.Module):
    """facebookresearch/ijepa's Block: norm1, attn (qkv fused, proj), norm2, mlp (fc1, GELU, fc2)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.Module()
        self.attn.qkv, self.attn.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Module()
        self.mlp.fc1, self.mlp.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.attn.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = ((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5).softmax(-1)
        x = x + self.attn.proj((a @ v).transpose(1, 2).reshape(b, n, c))
        return x + self.mlp.fc2(F.gelu(self.mlp.fc1(self.norm2(x))))


def sincos(dim, grid):
    omega = 1.0 / 10000 ** (torch.arange(dim // 4, dtype=torch.float64) / (dim / 4))
    h, w = torch.meshgrid(
        torch.arange(grid, dtype=torch.float64), torch.arange(grid, dtype=torch.float64), indexing="ij"
    )

    def one(p):
        out = p.reshape(-1, 1) * omega[None]
        return torch.cat([out.sin(), out.cos()], 1)

    return torch.cat([one(w), one(h)], 1).float()[None]


class MetaEncoder(nn.Module):
    def __init__(self, dim=32, depth=2, heads=2, patch=8, grid=4):
        super().__init__()
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, dim, patch, patch)
        self.pos_embed = nn.Parameter(sincos(dim, grid), requires_grad=False)
        self.blocks = nn.ModuleList([MetaBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x, keep=None):
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2) + self.pos_embed
        if keep is not None:
            x = torch.gather(x, 1, keep[..., None].expand(-1, -1, x.shape[-1]))
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


class MetaPredictor(nn.Module):
    def __init__(self, dim=32, width=16, depth=2, heads=2, grid=4):
        super().__init__()
        self.predictor_embed = nn.Linear(dim, width)
        self.mask_token = nn.Parameter(torch.randn(1, 1, width))
        self.predictor_pos_embed = nn.Parameter(sincos(width, grid), requires_grad=False)
        self.predictor_blocks = nn.ModuleList([MetaBlock(width, heads) for _ in range(depth)])
        self.predictor_norm = nn.LayerNorm(width, eps=1e-6)
        self.predictor_proj = nn.Linear(width, dim)

    def forward(self, x, context, target):  # one target block: (B, T)
        pos = self.predictor_pos_embed.expand(x.shape[0], -1, -1)
        take = lambda t, i: torch.gather(t, 1, i[..., None].expand(-1, -1, t.shape[-1]))  # noqa: E731
        x = self.predictor_embed(x) + take(pos, context)
        x = torch.cat([x, self.mask_token + take(pos, target)], 1)
        for block in self.predictor_blocks:
            x = block(x)
        return self.predictor_proj(self.predictor_norm(x)[:, context.shape[1] :])


@pytest.fixture(scope="module")
def meta_checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    encoder, target, predictor = MetaEncoder(), MetaEncoder(), MetaPredictor()
    ddp = lambda m: {f"module.{k}": v for k, v in m.state_dict().items()}  # noqa: E731
    state = {"encoder": ddp(encoder), "predictor": ddp(predictor), "target_encoder": ddp(target)}
    state.update(opt={"state": {}, "param_groups": []}, scaler=None, epoch=3, loss=0.25, batch_size=8, world_size=1)
    state["lr"] = 1e-3
    path = tmp_path_factory.mktemp("meta") / "IN1K-tiny.pth.tar"
    torch.save(state, path)
    return path, (encoder.eval(), target.eval(), predictor.eval())


def test_meta_checkpoint_converts_all_three_parts_with_parity(meta_checkpoint, tmp_path):
    path, (encoder, target, predictor) = meta_checkpoint
    result = convert_i_jepa(str(path), tmp_path / "out", num_heads=2)
    assert result.layout == "meta" and result.initialised == []
    assert result.training_state["epoch"] == 3 and "opt" in result.ignored
    model = IJepaModel.from_pretrained(tmp_path / "out").eval()
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(4))
    context = torch.tensor([[0, 1, 2, 3, 4, 5]] * 2)
    targets = torch.tensor([[[10, 11, 14, 15]]] * 2)
    with torch.no_grad():
        for ours, theirs in ((False, encoder), (True, target)):
            diff = (model.encode(pixels, use_target_encoder=ours) - theirs(pixels)).abs().max()
            assert diff < TOLERANCE, float(diff)
        expected = predictor(encoder(pixels, context), context, targets[:, 0])
        got = model.predictor(model.context_encoder(pixels, context), context, targets)[:, 0]
        assert (got - expected).abs().max() < TOLERANCE, float((got - expected).abs().max())


def test_incomplete_or_unknown_keys_raise_naming_them(meta_checkpoint, tmp_path):
    path, _ = meta_checkpoint
    state = torch.load(path, weights_only=True)
    missing = {**state, "predictor": {k: v for k, v in state["predictor"].items() if "predictor_norm.bias" not in k}}
    torch.save(missing, tmp_path / "missing.pth")
    with pytest.raises(ConversionError, match=r"no source key fills: predictor\.norm\.bias"):
        convert_i_jepa(str(tmp_path / "missing.pth"), tmp_path / "a", num_heads=2)
    extra = {**state, "encoder": {**state["encoder"], "module.cls_token": torch.zeros(1, 1, 32)}}
    torch.save(extra, tmp_path / "extra.pth")
    with pytest.raises(ConversionError, match=r"no rule maps or ignores: encoder\.module\.cls_token"):
        convert_i_jepa(str(tmp_path / "extra.pth"), tmp_path / "b", num_heads=2)


def test_cli_convert_then_continue_pretraining(meta_checkpoint, tmp_path, capsys):
    path, _ = meta_checkpoint
    assert main(["convert", "i-jepa", str(path), "--output-dir", str(tmp_path / "conv"), "--num-heads", "2"]) == 0
    assert "predictor: converted" in capsys.readouterr().out
    with pytest.raises(SystemExit) as error:
        main(["convert", "i-jepa", str(path), "--output-dir", str(tmp_path / "conv"), "--num-heads", "2"])
    assert error.value.code == 2
    start = IJepaModel.from_pretrained(tmp_path / "conv")
    data = tmp_path / "rgb"  # synthetic: random colour squares, two classes
    for label in ("a", "b"):
        (data / "train" / label).mkdir(parents=True)
        for i in range(12):
            from PIL import Image

            colour = (200, 30, 30) if label == "a" else (30, 30, 200)
            array = (
                torch.randint(0, 60, (32, 32, 3), generator=torch.Generator().manual_seed(i)).numpy().astype("uint8")
            )
            array[4:20, 4:20] = colour
            Image.fromarray(array).save(data / "train" / label / f"{i}.png")
    args = ["train", "i-jepa", "--output-dir", str(tmp_path / "cont"), "--set", f"init_from={tmp_path / 'conv'}"]
    args += [f"data={data}", "max_steps=3", "per_device_batch_size=4", "diagnostics_images=4", "probe_images=20"]
    args += ["mixed_precision=no", "plot=false", "num_target_blocks=2", "min_keep=1"]
    assert main(args) == 0
    trained = IJepaModel.from_pretrained(tmp_path / "cont")
    assert trained.config.num_channels == 3 and trained.config.converted_from["layout"] == "meta"
    moved = [k for k, v in trained.state_dict().items() if not torch.equal(v, start.state_dict()[k])]
    assert moved and not any(k.endswith("position_embeddings") for k in moved)
    assert math.isfinite(json.loads((tmp_path / "cont" / "eval_results.json").read_text())["probe_accuracy"])


def test_converted_folder_classifies_as_transformers_ijepa_classifier(transformers_folder, tmp_path):
    """The image-classification head on a converted checkpoint is transformers' `IJepaForImageClassification`
    (average-pooled last hidden states, a linear layer): same head weights, same logits, RGB, at the trained size and
    at another one (`interpolate_pos_encoding`)."""
    from transformers import IJepaForImageClassification as TransformersClassifier

    from hf_jepa import IJepaForImageClassification

    convert_i_jepa(str(transformers_folder), tmp_path / "out")
    ours = IJepaForImageClassification.from_pretrained(tmp_path / "out", num_labels=3).eval()  # strict
    reference = TransformersClassifier.from_pretrained(transformers_folder, num_labels=3).eval()
    ours.classifier.load_state_dict(reference.classifier.state_dict())
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        pixels = torch.randn(2, 3, 32, 32, generator=generator)
        diff = (ours(pixels).logits - reference(pixels).logits).abs().max()
        assert diff < TOLERANCE, float(diff)
        big = torch.randn(1, 3, 48, 40, generator=generator)
        diff = ours(big, interpolate_pos_encoding=True).logits - reference(big, interpolate_pos_encoding=True).logits
        assert diff.abs().max() < TOLERANCE, float(diff.abs().max())
