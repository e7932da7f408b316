"""The EPM-JEPA experience adapter through peft's own API: `PeftModel.from_pretrained` restores the input-conditioned
LoRA bit for bit on a track-C model built from the base, and refuses (naming the tensors it would drop) on a base
without memory and hypernetwork, instead of silently loading a static LoRA."""

import json

import pytest
import torch
from peft import PeftConfig, PeftModel

from hf_jepa.modeling.epm_jepa import EpmJepaConfig, EpmJepaModel
from hf_jepa.modeling.epm_jepa.modeling_epm_jepa import ADAPTER_NAME


def frames(seed, batch=3, length=6):
    return torch.rand(batch, length, 1, 64, 64, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A vanilla base saved to disk, a track-C model started from it with trained-looking adapter weights, its
    adapter folder and its reference predictions (after warming the experience buffer)."""
    root = tmp_path_factory.mktemp("epm-adapter")
    torch.manual_seed(0)
    EpmJepaModel(EpmJepaConfig.tiny(track="vanilla")).save_pretrained(root / "base")
    model = EpmJepaModel.from_base(str(root / "base"), track="epm", lora_rank=3, hypernetwork_hidden_size=24)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if ".lora_" in name or name.startswith(("hypernetwork.", "experience_encoder.")):
                parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.3)
    model.save_experience_adapter(str(root / "adapter"))
    model.eval()
    model.warm_experience(frames(11))
    # Compared under no_grad: with and without autograd, CPU kernels may differ in the last bit (seen: 3.6e-6), and
    # peft < 0.21 freezes every parameter of a loaded PeftModel.
    with torch.no_grad():
        reference = model(frames(12), update_experience=False).predicted_latents
    modulator = [k for k in model.state_dict() if k.startswith(("hypernetwork.", "experience_encoder."))]
    return root, reference, modulator


@torch.no_grad()
def restored_predictions(model):
    model.eval()
    model.warm_experience(frames(11))
    return model(frames(12), update_experience=False).predicted_latents


def test_adapter_config_names_its_base(saved):
    root, _, _ = saved
    config = PeftConfig.from_pretrained(str(root / "adapter"))
    assert config.base_model_name_or_path == str(root / "base")
    record = json.loads((root / "adapter" / "experience_adapter.json").read_text())
    assert record["config"]["lora_rank"] == 3 and record["config"]["hypernetwork_hidden_size"] == 24


def test_peft_from_pretrained_on_a_track_c_model_restores_the_dynamic_adapter_bit_for_bit(saved):
    root, reference, _ = saved
    shell = EpmJepaModel.from_base(str(root / "base"), track="epm", lora_rank=3, hypernetwork_hidden_size=24)
    assert not torch.equal(restored_predictions(shell), reference)  # the shell alone computes something else
    shell = EpmJepaModel.from_base(str(root / "base"), track="epm", lora_rank=3, hypernetwork_hidden_size=24)
    peft_model = PeftModel.from_pretrained(shell, str(root / "adapter"), adapter_name=ADAPTER_NAME)
    inner = peft_model.base_model.model
    assert inner is shell and list(peft_model.peft_config) == [ADAPTER_NAME]
    inner.eval()
    inner.warm_experience(frames(11))
    with torch.no_grad():
        assert torch.equal(peft_model(pixel_values=frames(12), update_experience=False).predicted_latents, reference)


def test_from_experience_adapter_reads_the_base_from_the_adapter_config(saved):
    root, reference, _ = saved
    model = EpmJepaModel.from_experience_adapter(root / "adapter")
    assert model.config.track == "epm" and model.config.lora_rank == 3
    assert torch.equal(restored_predictions(model), reference)


def test_peft_from_pretrained_on_a_vanilla_base_refuses_naming_the_missing_tensors(saved):
    root, _, modulator = saved
    base = EpmJepaModel.from_pretrained(str(root / "base"))
    with pytest.raises(RuntimeError, match="experience adapter holds") as error:
        PeftModel.from_pretrained(base, str(root / "adapter"))
    message = str(error.value)
    assert f"holds {len(modulator)} memory/hypernetwork tensors" in message
    assert all(name in message for name in modulator)
    assert "from_experience_adapter" in message and "adapter_name='experience'" in message


def test_peft_from_pretrained_under_another_adapter_name_refuses(saved):
    root, _, _ = saved
    shell = EpmJepaModel.from_base(str(root / "base"), track="epm", lora_rank=3, hypernetwork_hidden_size=24)
    with pytest.raises(RuntimeError, match=r"loaded as adapter \['default'\].*static LoRA"):
        PeftModel.from_pretrained(shell, str(root / "adapter"))
