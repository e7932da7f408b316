"""Every recipe's evaluation keeps its tensors on the model's device.

A GPU run of the JEPA-Reasoner recipes once failed at evaluation because prompts stayed on the CPU; on this CPU-only
machine that bug was invisible. `hf_jepa.testing.placement.simulated_accelerator` makes the model live on a simulated
second device, so any op mixing the model's tensors with CPU tensors raises, as it would on CUDA."""

import pytest
import torch

from hf_jepa.data.reasoning import ReasoningData
from hf_jepa.modeling.bro_jepa import BroJepaConfig
from hf_jepa.modeling.epm_jepa import EpmJepaConfig
from hf_jepa.modeling.i_jepa import IJepaConfig
from hf_jepa.modeling.jepa_reasoner import (
    CoconutConfig,
    CoupledTransformerConfig,
    DualTalkerConfig,
    JepaReasonerConfig,
    MonoTalkerConfig,
)
from hf_jepa.modeling.t_jepa import TJepaConfig
from hf_jepa.recipes.bro_jepa import BroJepaDataArguments, BroJepaRecipe
from hf_jepa.recipes.epm_jepa import EpmJepaDataArguments, EpmJepaRecipe
from hf_jepa.recipes.i_jepa import IJepaDataArguments, IJepaRecipe
from hf_jepa.recipes.jepa_reasoner import (
    CoconutRecipe,
    CoupledRecipe,
    JepaReasonerDataArguments,
    JepaReasonerRecipe,
    TalkerRecipe,
)
from hf_jepa.recipes.t_jepa import TJepaDataArguments, TJepaRecipe
from hf_jepa.testing.placement import SIMULATED, DevicePlacementError, simulated_accelerator


def test_the_simulation_catches_a_cpu_tensor_fed_to_the_model():
    layer = torch.nn.Linear(4, 3)
    inputs = torch.randn(2, 4)
    with simulated_accelerator(layer):
        with pytest.raises(DevicePlacementError, match="linear"):
            layer(inputs)
        moved = inputs.to(layer.weight.device)
        assert layer.weight.device == SIMULATED and moved.device == SIMULATED and inputs.device == torch.device("cpu")
        out = layer(moved)
        assert out.device == SIMULATED and out.cpu().device == torch.device("cpu")
        assert torch.zeros(3, device=out.device).device == SIMULATED
        assert out[torch.tensor([0])].device == SIMULATED  # CPU index tensors are fine, as on CUDA
        assert (out * torch.tensor(2.0)).device == SIMULATED  # so are CPU scalars


@pytest.fixture(scope="module")
def cfg():
    args = JepaReasonerDataArguments(task="cfg", num_train_examples=32, num_eval_examples=6, plot=False)
    return args, ReasoningData(args)


def _reasoning(config_class, data, **overrides):
    length = data.max_prompt_length + 1 + data.max_answer_length + 8
    kwargs = dict(vocab_size=data.vocab_size, max_position_embeddings=3 * length)
    if config_class is JepaReasonerConfig:
        kwargs.update(max_position_embeddings=length, num_reasoning_steps=data.max_answer_length)
    return config_class.tiny(**{**kwargs, **overrides})


def _recipes(embedded_splits, cfg, tmp_path):
    args, data = cfg
    reasoner_recipe = JepaReasonerRecipe(_reasoning(JepaReasonerConfig, data), args, data=data)
    reasoner = reasoner_recipe.build_model().eval()
    hidden = reasoner.config.hidden_size
    yield (
        "bro-jepa",
        BroJepaRecipe(
            BroJepaConfig.tiny(),
            BroJepaDataArguments(data="embedded", plot=False, eval_images=40),
            splits=embedded_splits,
        ),
    )
    epm_args = EpmJepaDataArguments(data="embedded", eval_sequences=4, eval_sequence_length=6, plot=False)
    yield "epm-jepa", EpmJepaRecipe(EpmJepaConfig.tiny(track="epm"), epm_args, splits=embedded_splits)
    yield (
        "i-jepa",
        IJepaRecipe(
            IJepaConfig.tiny(),
            IJepaDataArguments(data="embedded", diagnostics_images=16, probe_images=40, plot=False),
            splits=embedded_splits,
        ),
    )
    yield (
        "t-jepa",
        TJepaRecipe(
            TJepaConfig.tiny(), TJepaDataArguments(corpus="ambiguity", ambiguity=2, diagnostics_sentences=8, plot=False)
        ),
    )
    yield "jepa-reasoner", reasoner_recipe
    for kind in (MonoTalkerConfig, DualTalkerConfig):
        yield (
            kind.__name__,
            TalkerRecipe(_reasoning(kind, data, latent_size=hidden), args, data=data, reasoner=reasoner),
        )
    yield "coupled-lm", CoupledRecipe(_reasoning(CoupledTransformerConfig, data), args, data=data)
    yield "coconut", CoconutRecipe(_reasoning(CoconutConfig, data), args, data=data)


def test_every_recipe_evaluates_on_the_model_device(embedded_splits, cfg, tmp_path):
    evaluated = []
    for name, recipe in _recipes(embedded_splits, cfg, tmp_path):
        torch.manual_seed(0)
        model = recipe.build_model().eval()
        with simulated_accelerator(model):
            recipe.finalize(model)
            metrics = recipe.evaluate(model, output_dir=str(tmp_path / name))  # plots too
        assert metrics, name
        evaluated.append(name)
    assert len(evaluated) == 9
