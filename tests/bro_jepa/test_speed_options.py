"""The speed levers of the cpu_fast BRo-JEPA: the stride-2 CNN with a hidden layer, and the fused AdamW step."""

import copy

import torch

from hf_jepa.modeling.bro_jepa import BroJepaConfig, BroJepaModel
from hf_jepa.modeling.bro_jepa.modeling_bro_jepa import BroJepaCnnEncoder
from hf_jepa.trainers import build_optimizer, parameter_groups


def test_strided_cnn_halves_the_side_per_stage_and_hidden_layer_sits_before_the_latent():
    config = BroJepaConfig.cpu_fast()
    assert (config.cnn_downsampling, config.cnn_hidden_size, config.ema_momentum_end) == ("stride", 256, 0.99)
    encoder = BroJepaCnnEncoder(config).eval()
    features = encoder.layers(torch.zeros(3, 1, 28, 28))
    assert features.shape == (3, 128 * 4 * 4)  # 28 -> 14 -> 7 -> 4
    assert [m.stride for m in encoder.layers if isinstance(m, torch.nn.Conv2d)] == [(2, 2)] * 3
    widths = [(m.in_features, m.out_features) for m in encoder.projection if isinstance(m, torch.nn.Linear)]
    assert widths == [(2048, 256), (256, 64)]
    assert encoder(torch.zeros(3, 1, 28, 28)).shape == (3, 64)


def test_configs_without_the_new_keys_keep_the_max_pool_encoder_and_its_weight_names():
    """A config.json written before these options existed builds the same network, so its weights load strictly."""
    saved = BroJepaConfig(encoder_type="cnn", cnn_channels=[8, 16], latent_dim=16).to_dict()
    saved.pop("cnn_downsampling"), saved.pop("cnn_hidden_size")
    config = BroJepaConfig.from_dict(saved)
    assert (config.cnn_downsampling, config.cnn_hidden_size) == ("max_pool", 0)
    names = set(BroJepaModel(config).state_dict())
    assert "context_encoder.backbone.projection.weight" in names
    assert "context_encoder.backbone.layers.4.weight" in names  # conv, BN, ReLU, max-pool, then the second conv
    assert BroJepaCnnEncoder(config).projection.in_features == 16 * 14 * 14


def test_build_optimizer_fuses_adamw_on_cpu_with_the_same_update():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.LayerNorm(5), torch.nn.Linear(5, 2))
    reference, initial = copy.deepcopy(model), copy.deepcopy(model)
    fused = build_optimizer(model, 1e-2, 0.05)
    assert fused.defaults["fused"] is True
    loop = torch.optim.AdamW(parameter_groups(reference, 0.05), lr=1e-2, foreach=False)
    inputs = torch.randn(16, 6)
    for net, optimizer in ((model, fused), (reference, loop)):
        for _ in range(3):
            net(inputs).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
    for (name, a), b in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    assert all((a != b).any() for a, b in zip(model.parameters(), initial.parameters()))  # every tensor was updated
    assert fused.state[next(model.parameters())]["step"].item() == 3
