"""BroJepaModel save -> load: bit-exact round trips, frozen EMA target, strict loading, trust_remote_code export."""

import json
import os
from pathlib import Path

import pytest
import torch
from conftest import run_without_hf_jepa
from transformers import AutoConfig, AutoImageProcessor, AutoModel

from hf_jepa import BroJepaConfig, BroJepaImageProcessor, BroJepaModel

VARIANTS = {
    "jepa": {},
    "learnable_angle": {"learnable_angle": True},
    "supervised": {"objective": "supervised"},
    "additive_single": {"predictor_type": "additive_mlp", "rotation_frequencies": "single"},
}


def make_model(seed: int = 0, **overrides) -> BroJepaModel:
    """A tiny model whose state looks trained: BatchNorm statistics moved, an EMA target that differs from the
    context encoder, moved learnable angles and filled class prototypes."""
    torch.manual_seed(seed)
    model = BroJepaModel(BroJepaConfig.tiny(**overrides))
    model.train()
    with torch.no_grad():
        pixel_values = torch.randn(16, 1, 28, 28)
        model(
            pixel_values,
            torch.randint(-3, 4, (16,)),
            target_pixel_values=torch.randn(16, 1, 28, 28),
            labels=torch.randint(0, 10, (16,)),
        )
        if model.target_encoder is not None:
            for parameter in model.target_encoder.parameters():
                parameter.add_(0.01 * torch.randn_like(parameter))
        if model.config.learnable_angle:
            model.predictor.angles.add_(0.05)
    model.eval()
    model.fill_class_prototypes(torch.randn(40, 1, 28, 28), torch.arange(40) % 10)
    return model


def assert_state_dicts_equal(expected: dict, actual: dict):
    assert expected.keys() == actual.keys()
    for name, tensor in expected.items():
        assert actual[name].dtype == tensor.dtype, name
        assert torch.equal(actual[name], tensor), name


def assert_target_frozen(model: BroJepaModel):
    if model.target_encoder is None:
        return
    assert not model.target_encoder.training
    assert all(not module.training for module in model.target_encoder.modules())
    assert all(not parameter.requires_grad for parameter in model.target_encoder.parameters())


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_save_load_bit_exact(variant, tmp_path):
    model = make_model(**VARIANTS[variant])
    if model.target_encoder is not None:  # the test is only meaningful if the EMA target is not a copy
        assert not torch.equal(
            model.target_encoder.backbone.projection.weight, model.context_encoder.backbone.projection.weight
        )
    assert model.has_class_prototypes()
    model.save_pretrained(tmp_path)

    config = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(config, BroJepaConfig)
    reference = model.config.to_dict()
    assert {k: v for k, v in config.to_dict().items() if k != "_name_or_path"} == {
        k: v for k, v in reference.items() if k != "_name_or_path"
    }

    loaded = AutoModel.from_pretrained(tmp_path)
    assert type(loaded) is BroJepaModel
    assert_state_dicts_equal(model.state_dict(), loaded.state_dict())
    assert "class_prototypes" in loaded.state_dict()
    if model.target_encoder is not None:
        assert any(name.startswith("target_encoder.") for name in loaded.state_dict())

    # Frozen, eval-mode EMA target after loading and after switching the model to training.
    assert not loaded.training
    assert_target_frozen(loaded)
    assert all(p.requires_grad for p in loaded.context_encoder.parameters())
    if model.config.learnable_angle:
        assert isinstance(loaded.predictor.angles, torch.nn.Parameter) and loaded.predictor.angles.requires_grad
    loaded.train()
    assert loaded.training and loaded.context_encoder.training
    assert_target_frozen(loaded)
    loaded.eval()

    pixel_values, operations = torch.randn(6, 1, 28, 28), torch.tensor([1, -1, 2, 5, -9, 0])
    with torch.no_grad():
        expected, actual = model(pixel_values, operations), loaded(pixel_values, operations)
    for field in ("logits", "predicted_latent", "context_latent"):
        assert torch.equal(getattr(expected, field), getattr(actual, field)), field


def test_direct_class_from_pretrained_and_loading_info(tmp_path):
    model = make_model()
    model.save_pretrained(tmp_path)
    loaded, info = BroJepaModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert_state_dicts_equal(model.state_dict(), loaded.state_dict())
    assert_target_frozen(loaded)


def _edit_config(directory: Path, **changes):
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def test_config_checkpoint_mismatch_raises(tmp_path):
    make_model().save_pretrained(tmp_path)

    # Shape mismatch (latent_dim edited in config.json, or a different config passed in).
    _edit_config(tmp_path, latent_dim=32)
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        AutoModel.from_pretrained(tmp_path)
    _edit_config(tmp_path, latent_dim=16)
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        BroJepaModel.from_pretrained(tmp_path, config=BroJepaConfig.tiny(latent_dim=8))

    # Same shapes would not catch a different architecture: missing / unexpected weights must raise too.
    _edit_config(tmp_path, predictor_type="additive_mlp")
    with pytest.raises(ValueError, match="does not match the config") as error:
        AutoModel.from_pretrained(tmp_path)
    assert "predictor.angles" in str(error.value) and "predictor.operation_direction" in str(error.value)
    with pytest.raises(ValueError, match="does not match the config"):
        BroJepaModel.from_pretrained(tmp_path, config=BroJepaConfig.tiny(objective="supervised"))
    # The escape hatch keeps transformers' warn-and-reinitialise behaviour.
    relaxed = BroJepaModel.from_pretrained(tmp_path, strict=False)
    assert relaxed.config.predictor_type == "additive_mlp"


@pytest.mark.parametrize("keep", [4, 1000, 30000, -8])
def test_truncated_safetensors_raises(tmp_path, keep):
    make_model().save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:keep])
    with pytest.raises(Exception, match="Error while deserializing header") as error:
        AutoModel.from_pretrained(tmp_path)
    assert type(error.value).__name__ == "SafetensorError"


# ------------------------------------------------------------------------------------------- trust_remote_code export

SUBPROCESS_CODE = """
import torch
from transformers import AutoConfig, AutoImageProcessor, AutoModel

export = {export!r}
config = AutoConfig.from_pretrained(export, trust_remote_code=True)
model = AutoModel.from_pretrained(export, trust_remote_code=True)
processor = AutoImageProcessor.from_pretrained(export, trust_remote_code=True)
inputs = torch.load({inputs!r}, weights_only=True)
with torch.no_grad():
    out = model(inputs["pixel_values"], inputs["operations"])
processed = processor(images=list(inputs["raw"]), return_tensors="pt")["pixel_values"]
torch.save(
    {{
        "modules": [type(config).__module__, type(model).__module__, type(processor).__module__],
        "target_frozen": not any(p.requires_grad for p in model.target_encoder.parameters()),
        "target_training": model.target_encoder.training,
        "state_dict": model.state_dict(),
        "logits": out.logits,
        "predicted_latent": out.predicted_latent,
        "context_latent": out.context_latent,
        "processed": processed,
    }},
    {result!r},
)
print("ok")
"""


def test_trust_remote_code_export_without_hf_jepa(tmp_path):
    model = make_model()
    export = tmp_path / "export"
    model.save_pretrained(export)
    BroJepaImageProcessor().save_pretrained(export)
    files = set(os.listdir(export))
    assert {"modeling_bro_jepa.py", "configuration_bro_jepa.py", "image_processing_bro_jepa.py"} <= files
    config = json.loads((export / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_bro_jepa.BroJepaConfig",
        "AutoModel": "modeling_bro_jepa.BroJepaModel",
    }
    preprocessor = json.loads((export / "preprocessor_config.json").read_text())
    assert preprocessor["auto_map"] == {"AutoImageProcessor": "image_processing_bro_jepa.BroJepaImageProcessor"}
    # Where hf_jepa is installed the registered classes are used, no remote code.
    assert type(AutoModel.from_pretrained(export)) is BroJepaModel
    assert type(AutoImageProcessor.from_pretrained(export)) is BroJepaImageProcessor

    torch.manual_seed(1)
    raw = (torch.rand(5, 1, 28, 28) * 255).to(torch.uint8)
    pixel_values = BroJepaImageProcessor()(images=list(raw), return_tensors="pt")["pixel_values"]
    operations = torch.tensor([1, -2, 3, 9, 0])
    torch.save({"raw": raw, "pixel_values": pixel_values, "operations": operations}, tmp_path / "inputs.pt")

    code = SUBPROCESS_CODE.format(
        export=str(export),
        inputs=str(tmp_path / "inputs.pt"),
        result=str(tmp_path / "result.pt"),
    )
    out = run_without_hf_jepa(code, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    result = torch.load(tmp_path / "result.pt", weights_only=True)
    assert all(m.startswith("transformers_modules.") for m in result["modules"]), result["modules"]
    assert result["target_frozen"] and not result["target_training"]
    assert_state_dicts_equal(model.state_dict(), result["state_dict"])
    assert torch.equal(result["processed"], pixel_values)
    with torch.no_grad():
        expected = model(pixel_values, operations)
    for field in ("logits", "predicted_latent", "context_latent"):
        difference = (result[field] - getattr(expected, field)).abs().max()
        assert torch.equal(result[field], getattr(expected, field)), (field, difference)
