"""Non-finite values never enter persistent state, and bad inputs get one clear error naming the argument (issue 12):
EPM-JEPA's experience buffer and surprisal gate (reload included), NaN / inf / float64 / float16 / empty inputs to the
models of every family, JEPA-Reasoner's latent noise, prompts and Talker latents, and the gaps in the pipelines."""

import math

import numpy as np
import pytest
import torch
from transformers import pipeline

import hf_jepa.pipelines  # noqa: F401 - registers the tasks
from hf_jepa import (
    BroJepaConfig,
    BroJepaModel,
    EpmJepaConfig,
    EpmJepaModel,
    IJepaConfig,
    IJepaModel,
    TJepaConfig,
    TJepaModel,
)
from hf_jepa.modeling.bro_jepa import BroJepaImageProcessor
from hf_jepa.modeling.jepa_reasoner import (
    CoconutConfig,
    CoconutLM,
    CoupledTransformerConfig,
    CoupledTransformerLM,
    DualTalkerConfig,
    DualTalkerModel,
    JepaReasonerConfig,
    JepaReasonerModel,
    JepaReasonerWithTalker,
    JepaReasonerWithTalkerConfig,
    MonoTalkerConfig,
    MonoTalkerModel,
)

NON_FINITE = [float("nan"), float("inf"), float("-inf")]


def with_value(tensor: torch.Tensor, value: float, index=None) -> torch.Tensor:
    """A copy of `tensor` with one element (the last by default) set to `value`."""
    out = tensor.clone()
    out.view(-1)[-1 if index is None else index] = value
    return out


# ------------------------------------------------------------------------------------------------- EPM-JEPA state


def trained_epm(track: str = "epm") -> EpmJepaModel:
    """A tiny model whose predictions depend on the buffer (non-zero LoRA delta / injection) and whose gate has
    seen a few batches; the buffer holds a few entries."""
    torch.manual_seed(0)
    model = EpmJepaModel(EpmJepaConfig.tiny(track=track, gate_warmup_updates=0)).train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.rand(4, 6, 1, 64, 64))
        if track == "epm":
            for name, parameter in model.named_parameters():
                if ".lora_B." in name or name.startswith("hypernetwork.output.weight"):
                    parameter.normal_(0.0, 0.3)
        elif track == "ei":
            model.experience_injection.weight.normal_(0.0, 0.3)
    model.eval()
    model.warm_experience(torch.rand(1, 5, 1, 64, 64))
    return model


def experience_state(model: EpmJepaModel) -> dict[str, torch.Tensor]:
    state = {f"gate.{k}": v.clone() for k, v in model.surprisal_gate.state_dict().items()}
    if model.experience_buffer is not None:
        state["buffer.entries"] = model.experience_buffer.entries.clone()
        state["buffer.num_writes"] = model.experience_buffer.num_writes.clone()
    return state


def assert_same_state(before: dict, after: dict, where: str = ""):
    assert before.keys() == after.keys()
    for key in before:
        assert torch.equal(before[key], after[key]), f"{where}: {key} changed"


@pytest.mark.parametrize("track", ["ei", "epm"])
@pytest.mark.parametrize("value", NON_FINITE)
def test_epm_rejected_frames_change_nothing(track, value):
    """One NaN / inf pixel is refused by every entry point before any state changes: the buffer and the gate are
    bit-equal afterwards and predictions on clean input are bit-equal to before."""
    model = trained_epm(track)
    clean = torch.rand(2, 6, 1, 64, 64, generator=torch.Generator().manual_seed(1))
    bad = with_value(clean, value, index=12345)
    with torch.no_grad():
        reference = model.predict_next_latent(clean)
        reference_surprisal = model(clean, update_experience=False).surprisal
    before = experience_state(model)
    calls = {
        "warm_experience": lambda: model.warm_experience(bad),
        "warm_experience(gated)": lambda: model.warm_experience(bad, gated=True),
        "forward(update_experience=True)": lambda: model(bad, update_experience=True),
        "forward(train mode)": lambda: model.train()(bad),
        "predict_next_latent": lambda: model.predict_next_latent(bad),
        "encode": lambda: model.encode(bad),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r"^pixel_values holds 1 non-finite value\(s\) \(NaN or inf\)"):
            call()
        model.eval()
        assert_same_state(before, experience_state(model), name)
    with torch.no_grad():
        assert torch.equal(model.predict_next_latent(clean), reference)
        assert torch.equal(model(clean, update_experience=False).surprisal, reference_surprisal)


def test_epm_gate_ignores_non_finite_surprisal_and_reload_keeps_it_finite(tmp_path):
    model = trained_epm("epm")
    gate = model.surprisal_gate
    before = {k: v.clone() for k, v in gate.state_dict().items()}
    for value in NON_FINITE:
        assert gate.observe(torch.tensor(value)) is False
    assert_same_state(before, gate.state_dict())
    assert gate.observe(torch.tensor(1e6)) is True  # a finite surprisal still updates and fires
    assert int(gate.num_updates) == int(before["num_updates"]) + 1
    # A rejected batch, then save and reload: the stored statistics are finite and equal the live ones.
    with pytest.raises(ValueError, match="pixel_values"):
        model(with_value(torch.rand(2, 6, 1, 64, 64), float("nan")), update_experience=True)
    model.save_pretrained(tmp_path)
    loaded = EpmJepaModel.from_pretrained(tmp_path)
    for name, tensor in loaded.surprisal_gate.state_dict().items():
        assert torch.isfinite(tensor.float()).all(), name
        assert torch.equal(tensor, gate.state_dict()[name]), name
    # The reloaded gate still fires on a surprising batch.
    assert loaded.surprisal_gate.observe(torch.tensor(1e6)) is True


def test_epm_buffer_never_stores_non_finite_entries():
    model = trained_epm("epm")
    buffer = model.experience_buffer
    width = buffer.entries.shape[1]
    writes = int(buffer.num_writes)
    entries = torch.randn(5, width)
    entries[1, 0], entries[3, -1] = float("nan"), float("inf")
    assert buffer.write(entries) == 3
    assert int(buffer.num_writes) == writes + 3
    assert torch.isfinite(buffer.entries).all()
    assert torch.equal(buffer.ordered_entries()[-3:], entries[[0, 2, 4]])
    assert buffer.write(torch.full((2, width), float("nan"))) == 0
    assert int(buffer.num_writes) == writes + 3


# ---------------------------------------------------------------------------------------------- pixels, all families


def bro_model() -> BroJepaModel:
    torch.manual_seed(0)
    return BroJepaModel(BroJepaConfig.tiny()).eval()


def i_jepa_inputs(batch=2):
    context = torch.tensor([[0, 1, 2, 3, 4, 5]] * batch)
    targets = torch.tensor([[[10, 11], [14, 15]]] * batch)
    return torch.rand(batch, 1, 28, 28), context, targets


@pytest.mark.parametrize("value", NON_FINITE)
def test_non_finite_pixels_raise_naming_the_argument(value):
    bro = bro_model()
    x = torch.randn(3, 1, 28, 28)
    with pytest.raises(ValueError, match=r"^pixel_values holds 1 non-finite"):
        bro(with_value(x, value), 1)
    with pytest.raises(ValueError, match=r"^target_pixel_values holds 1 non-finite"):
        bro(x, 1, target_pixel_values=with_value(x, value))
    with pytest.raises(ValueError, match=r"^pixel_values holds"):
        bro.encode(with_value(x, value), use_target_encoder=True)
    prototypes = bro.class_prototypes.clone()
    with pytest.raises(ValueError, match=r"^pixel_values holds"):
        bro.fill_class_prototypes(with_value(torch.randn(10, 1, 28, 28), value), torch.arange(10))
    assert torch.equal(bro.class_prototypes, prototypes)

    epm = EpmJepaModel(EpmJepaConfig.tiny()).eval()
    with pytest.raises(ValueError, match=r"^pixel_values holds 1 non-finite"):
        epm(with_value(torch.rand(1, 4, 1, 64, 64), value))

    ijepa = IJepaModel(IJepaConfig.tiny()).eval()
    pixels, context, targets = i_jepa_inputs()
    with pytest.raises(ValueError, match=r"^pixel_values holds 1 non-finite"):
        ijepa(with_value(pixels, value), context, targets)
    with pytest.raises(ValueError, match=r"^pixel_values holds 1 non-finite"):
        ijepa.embed(with_value(pixels, value))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_any_floating_dtype_is_cast_to_the_model_dtype(dtype):
    """float64 / float16 / bfloat16 pixels are cast to the parameters' dtype (as transformers' vision models do):
    the output equals that of the input cast by hand."""
    bro = bro_model()
    x = torch.randn(3, 1, 28, 28).to(dtype)
    with torch.no_grad():
        assert torch.equal(bro(x, 2).predicted_latent, bro(x.float(), 2).predicted_latent)
    epm = EpmJepaModel(EpmJepaConfig.tiny()).eval()
    frames = torch.rand(1, 4, 1, 64, 64).to(dtype)
    with torch.no_grad():
        assert torch.equal(epm(frames).predicted_latents, epm(frames.float()).predicted_latents)
        assert torch.equal(epm.predict_next_latent(frames), epm.predict_next_latent(frames.float()))
    ijepa = IJepaModel(IJepaConfig.tiny()).eval()
    pixels, context, targets = i_jepa_inputs()
    pixels = pixels.to(dtype)
    with torch.no_grad():
        assert torch.equal(ijepa(pixels, context, targets).loss, ijepa(pixels.float(), context, targets).loss)


def test_overflow_in_the_cast_is_reported():
    with pytest.raises(ValueError, match=r"after the cast from torch.float64 to torch.float32"):
        bro_model()(with_value(torch.zeros(2, 1, 28, 28, dtype=torch.float64), 1e300), 1)


def test_integer_pixels_raise():
    with pytest.raises(
        TypeError, match="pixel_values must be a normalised floating-point tensor.*BroJepaImageProcessor"
    ):
        bro_model()(torch.zeros(2, 1, 28, 28, dtype=torch.uint8), 1)
    with pytest.raises(TypeError, match="pixel_values must be a floating-point tensor"):
        EpmJepaModel(EpmJepaConfig.tiny())(torch.zeros(1, 4, 1, 64, 64, dtype=torch.uint8))
    pixels, context, targets = i_jepa_inputs()
    with pytest.raises(ValueError, match="pixel_values must be a float tensor"):
        IJepaModel(IJepaConfig.tiny())(pixels.to(torch.uint8), context, targets)


def test_empty_batches_raise_naming_the_argument():
    with pytest.raises(ValueError, match=r"^pixel_values is empty \(batch size 0\)"):
        bro_model()(torch.zeros(0, 1, 28, 28), 1)
    epm = EpmJepaModel(EpmJepaConfig.tiny(track="epm")).eval()
    empty = torch.zeros(0, 6, 1, 64, 64)
    for call in (epm, epm.encode, epm.predict_next_latent, epm.warm_experience):
        with pytest.raises(ValueError, match=r"^pixel_values is empty \(batch size 0\)"):
            call(empty)
    tjepa = TJepaModel(TJepaConfig.tiny()).eval()
    ids = torch.zeros(0, 8, dtype=torch.long)
    with pytest.raises(ValueError, match=r"^input_ids is empty \(batch size 0\)"):
        tjepa(ids, target_mask=torch.zeros(0, 8, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^input_ids is empty \(batch size 0\)"):
        tjepa.embed(ids)


# ---------------------------------------------------------------------------------------------------- JEPA-Reasoner


@pytest.fixture(scope="module")
def reasoner():
    torch.manual_seed(0)
    return JepaReasonerModel(JepaReasonerConfig.tiny()).eval()


BAD_STDS = [float("nan"), float("inf"), -0.1, "0.1", True, torch.tensor(float("nan"))]


@pytest.mark.parametrize("std", BAD_STDS, ids=repr)
def test_bad_latent_noise_std_raises(reasoner, std):
    prompt = torch.randint(5, 60, (2, 5))
    with pytest.raises(ValueError, match=r"^latent_noise_std must be a finite number >= 0"):
        reasoner.generate_latents(prompt, latent_noise_std=std)
    pair = JepaReasonerWithTalker.from_components(reasoner, MonoTalkerModel(MonoTalkerConfig.tiny()))
    with pytest.raises(ValueError, match=r"^latent_noise_std must be a finite number >= 0"):
        pair.generate(prompt, latent_noise_std=std, max_new_tokens=2)
    coupled = CoupledTransformerLM(CoupledTransformerConfig.tiny())
    with pytest.raises(ValueError, match=r"^latent_noise_std must be a finite number >= 0"):
        coupled(prompt, latent_noise_std=std)
    coconut = CoconutLM(CoconutConfig.tiny())
    with pytest.raises(ValueError, match=r"^latent_noise_std must be a finite number >= 0"):
        coconut.generate(prompt, latent_noise_std=std, max_new_tokens=2)


def test_valid_latent_noise_std_still_works(reasoner):
    prompt = torch.randint(5, 60, (2, 5))
    generator = torch.Generator().manual_seed(0)
    for std in (0, 0.0, 0.5, np.float32(0.1), torch.tensor(0.2)):
        chain = reasoner.generate_latents(prompt, num_steps=3, latent_noise_std=std, generator=generator)
        assert chain.shape == (2, 3, 32) and torch.isfinite(chain).all()
    assert torch.equal(reasoner.generate_latents(prompt, latent_noise_std=0), reasoner.generate_latents(prompt))


def test_empty_reasoner_prompt_raises(reasoner):
    prompt = torch.randint(5, 60, (2, 5))
    with pytest.raises(ValueError, match=r"^prompt_ids is empty: every prompt needs at least one token"):
        reasoner.generate_latents(prompt[:, :0])
    with pytest.raises(ValueError, match=r"^prompt_ids is empty \(batch size 0\)"):
        reasoner.generate_latents(prompt[:0])
    mask = torch.ones_like(prompt)
    mask[1] = 0
    with pytest.raises(ValueError, match=r"^prompt_mask masks every token of rows \[1\]"):
        reasoner.generate_latents(prompt, mask)


@pytest.mark.parametrize("kind", ["mono", "dual"])
def test_talker_refuses_non_finite_latents(kind):
    torch.manual_seed(0)
    talker = MonoTalkerModel(MonoTalkerConfig.tiny()) if kind == "mono" else DualTalkerModel(DualTalkerConfig.tiny())
    talker.eval()
    extra = {} if kind == "mono" else {"prompt_ids": torch.randint(5, 60, (2, 4))}
    bos = torch.full((2, 1), talker.config.bos_token_id)
    latents = torch.randn(2, 4, 32)
    with torch.no_grad():
        assert torch.isfinite(talker(bos, latents=latents, **extra).logits).all()
    for value in NON_FINITE:
        with pytest.raises(ValueError, match=r"^latents holds 1 non-finite value\(s\)"):
            talker(bos, latents=with_value(latents, value), **extra)
        with pytest.raises(ValueError, match=r"^latents holds 1 non-finite value\(s\)"):
            talker.generate(input_ids=bos, latents=with_value(latents, value), max_new_tokens=3, **extra)
    with pytest.raises(ValueError, match=r"^latents holds 256 non-finite"):
        talker.generate(input_ids=bos, latents=torch.full_like(latents, float("nan")), max_new_tokens=3, **extra)
    with pytest.raises(ValueError, match=r"^latents must be a floating-point tensor"):
        talker(bos, latents=latents.long(), **extra)


def test_pair_refuses_a_non_finite_chain(reasoner):
    """A reasoner with a broken (NaN) weight gives a NaN chain: the pair's Talker refuses to decode it."""
    pair = JepaReasonerWithTalker(JepaReasonerWithTalkerConfig.tiny(talker_type="mono")).eval()
    with torch.no_grad():
        for parameter in pair.reasoner.layers[-1].parameters():
            parameter.fill_(float("nan"))
    with pytest.raises(ValueError, match=r"^latents holds \d+ non-finite"):
        pair.generate(torch.randint(5, 60, (1, 4)), max_new_tokens=2)


# -------------------------------------------------------------------------------------------------------- pipelines


@pytest.fixture(scope="module")
def arithmetic_pipe():
    model = bro_model()
    model.fill_class_prototypes(torch.randn(20, 1, 28, 28), torch.arange(20) % 10)
    return pipeline("modular-arithmetic", model=model, image_processor=BroJepaImageProcessor())


def test_modular_arithmetic_pipeline_bad_inputs(arithmetic_pipe):
    image = np.zeros((28, 28), dtype=np.uint8)
    cases = [
        ([], {"operation": 1}, ValueError, r"^inputs: got an empty list of images"),
        ([], {"operation": []}, ValueError, r"^inputs: got an empty list of images"),
        (np.zeros((0, 1, 28, 28), np.uint8), {"operation": 1}, ValueError, r"^inputs: got an empty batch of images"),
        (np.zeros((0, 28), np.uint8), {"operation": 1}, ValueError, r"^inputs: the image is empty"),
        (with_value(torch.zeros(28, 28), math.nan).numpy(), {"operation": 1}, ValueError, r"^inputs: .*1 NaN or inf"),
        (np.zeros(28, np.float32), {"operation": 1}, ValueError, r"^inputs: an image array must have shape"),
        (5, {"operation": 1}, TypeError, r"^inputs: images must be PIL images"),
        (image, {"operation": 1, "rollout": "yes"}, TypeError, r"^rollout must be True or False"),
        (image, {"operation": 1, "return_tensors": "pt"}, TypeError, r"^return_tensors must be True or False"),
    ]
    for value, kwargs, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            arithmetic_pipe(value, **kwargs)
    assert arithmetic_pipe(image, operation=1, rollout=np.bool_(True))["operation"] == 1


def test_feature_extraction_pipeline_bad_inputs():
    extract = pipeline("jepa-feature-extraction", model=IJepaModel(IJepaConfig.tiny()))
    cases = [
        (np.zeros((0, 1, 28, 28), np.uint8), {}, ValueError, r"^inputs: got an empty batch of images"),
        (np.full((28, 28), np.inf, np.float32), {}, ValueError, r"^inputs: the image holds 784 NaN or inf"),
        (np.zeros((28, 28), np.uint8), {"return_tensors": 1}, TypeError, r"^return_tensors must be True or False"),
    ]
    for value, kwargs, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            extract(value, **kwargs)
    # float64 and float16 pixels in [0, 1] are fine (converted to float32 by the pipeline).
    for dtype in (torch.float64, torch.float16):
        assert len(extract(torch.rand(28, 28).to(dtype))) == 32


def test_world_model_pipeline_bad_inputs_leave_the_buffer_alone():
    model = trained_epm("epm")
    pipe = pipeline("latent-world-model", model=model)
    before = experience_state(model)
    frames = np.random.default_rng(0).random((6, 64, 64)).astype(np.float32)
    cases = [
        (np.zeros((0, 6, 1, 64, 64), np.uint8), {}, ValueError, r"^inputs: got an empty batch of sequences"),
        (with_value(torch.from_numpy(frames), math.nan).numpy(), {"warm_experience": True}, ValueError, "1 NaN or inf"),
        (
            [frames, with_value(torch.from_numpy(frames), math.inf)],
            {"warm_experience": True},
            ValueError,
            r"inputs\[1\]",
        ),
        (frames, {"return_tensors": "yes"}, TypeError, r"^return_tensors must be True or False"),
    ]
    for value, kwargs, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            pipe(value, **kwargs)
        assert_same_state(before, experience_state(model))
    assert len(pipe(frames)["surprisal"]) == 3
