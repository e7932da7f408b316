"""The `latent-world-model` pipeline on EPM-JEPA: from a saved directory, outputs equal to the model's own methods,
input formats, lists, experience warming, bad inputs. (On every track's saved folder, and with remote code without
hf_jepa: the family tester in tests/epm_jepa/test_modeling.py.)"""

import warnings

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import pipeline

from hf_jepa import BroJepaConfig, BroJepaModel, EpmJepaConfig, EpmJepaModel
from hf_jepa.pipelines import LatentWorldModelPipeline

TASK = "latent-world-model"
OUTPUT_KEYS = {"predicted_latent", "surprisal", "num_frames"}
K = EpmJepaConfig.tiny().context_length  # 3


def make_model(track: str = "epm", seed: int = 0) -> EpmJepaModel:
    """A tiny model whose outputs depend on everything the pipeline touches: a few training-mode passes move the
    gate's statistics, the EMA target differs from the context encoder, and the LoRA delta / injection and the
    hypernetwork are non-zero (at initialisation they are exactly neutral, so the buffer would not matter)."""
    torch.manual_seed(seed)
    model = EpmJepaModel(EpmJepaConfig.tiny(track=track)).train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.rand(4, 6, 1, 64, 64))
        for parameter in model.target_encoder.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
        if track == "epm":
            for name, parameter in model.named_parameters():
                if ".lora_B." in name or name.startswith("hypernetwork.output.weight"):
                    parameter.normal_(0.0, 0.3)
        elif track == "ei":
            model.experience_injection.weight.normal_(0.0, 0.3)
    model.reset_experience()
    return model.eval()


def moving_squares(frames: int, seed: int, size: int = 64) -> np.ndarray:
    """uint8 `(frames, size, size)`: a bright noisy square drifting and falling across a dark canvas."""
    rng = np.random.default_rng(seed)
    video = rng.integers(0, 20, size=(frames, size, size), dtype=np.uint8)
    y, x = rng.integers(4, 24, size=2)
    vy, vx = rng.integers(-2, 3, size=2)
    for t in range(frames):
        top, left = int(np.clip(y + vy * t + t * t // 4, 0, size - 16)), int(np.clip(x + vx * t, 0, size - 16))
        video[t, top : top + 16, left : left + 16] = rng.integers(150, 256, size=(16, 16), dtype=np.uint8)
    return video


def as_pixels(frames: np.ndarray) -> torch.Tensor:
    """uint8 `(T, H, W)` -> the model's `(1, T, 1, H, W)` floats in [0, 1]."""
    return (torch.from_numpy(frames).float() / 255.0)[None, :, None]


@torch.no_grad()
def reference(model: EpmJepaModel, frames: np.ndarray, warm: bool = False) -> tuple[list, list]:
    """What the pipeline must return, from the model's own methods (eval mode, no grad)."""
    was_training = model.training
    model.eval()
    pixel_values = as_pixels(frames)
    if warm:
        model.warm_experience(pixel_values)
    predicted = model.predict_next_latent(pixel_values)[0].tolist()
    surprisal = []
    if len(frames) > K:
        with warnings.catch_warnings():  # one scored step: the model's sigma_embed (a std over 1 row) warns
            warnings.filterwarnings("ignore", message=r"std\(\): degrees of freedom", category=UserWarning)
            surprisal = model(pixel_values, update_experience=False).surprisal[0].tolist()
    model.train(was_training)
    return predicted, surprisal


def buffer_state(model: EpmJepaModel) -> tuple:
    gate = model.surprisal_gate
    writes = int(model.experience_buffer.num_writes) if model.experience_buffer is not None else None
    return writes, float(gate.running_mean), float(gate.running_var), int(gate.num_updates)


@pytest.fixture(scope="module")
def model():
    return make_model()


@pytest.fixture(scope="module")
def saved_dir(model, tmp_path_factory):
    directory = tmp_path_factory.mktemp("epm-tiny")
    model.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def pipe(saved_dir):
    return pipeline(TASK, model=str(saved_dir))


@pytest.fixture(scope="module")
def videos():
    return [moving_squares(8, seed) for seed in range(3)]


@pytest.fixture(autouse=True)
def empty_buffer(pipe, model):
    pipe.model.reset_experience()
    model.reset_experience()


def test_outputs_equal_the_model(pipe, model, videos):
    assert isinstance(pipe, LatentWorldModelPipeline) and isinstance(pipe.model, EpmJepaModel)
    assert not pipe.model.training
    before = buffer_state(pipe.model)
    result = pipe(videos[0])
    assert set(result) == OUTPUT_KEYS and result["num_frames"] == 8
    predicted, surprisal = reference(model, videos[0])  # the in-memory original: loading changed nothing
    assert result["predicted_latent"] == predicted and len(predicted) == model.config.latent_dim
    assert result["surprisal"] == surprisal and len(surprisal) == 8 - K
    assert all(isinstance(v, float) for v in result["predicted_latent"] + result["surprisal"])
    # The read-only default leaves the buffer and the gate alone.
    assert buffer_state(pipe.model) == before

    tensors = pipe(videos[0], return_tensors=True)
    assert isinstance(tensors["predicted_latent"], torch.Tensor) and isinstance(tensors["surprisal"], torch.Tensor)
    assert tensors["predicted_latent"].tolist() == predicted and tensors["surprisal"].tolist() == surprisal

    # One scored step runs without warnings (the model's batch-statistics diagnostics are undefined for one row).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one_step = pipe(videos[1][: K + 1])
    assert one_step["surprisal"] == reference(model, videos[1][: K + 1])[1] and len(one_step["surprisal"]) == 1

    # Exactly context_length frames: a prediction, nothing to score.
    short = pipe(videos[1][:K])
    assert short["surprisal"] == [] and short["num_frames"] == K
    assert short["predicted_latent"] == reference(model, videos[1][:K])[0]


def test_input_formats_agree(pipe, videos):
    video = videos[0]
    expected = pipe(video)
    inputs = {
        "t1hw": video[:, None],
        "thw1": video[..., None],
        "torch_uint8": torch.from_numpy(video),
        "float32": video.astype(np.float32) / 255.0,
        "torch_float": torch.from_numpy(video).float() / 255.0,
        "float64": (video.astype(np.float32) / 255.0).astype(np.float64),
        "pil_list": [Image.fromarray(frame) for frame in video],
        "pil_rgb_list": [Image.fromarray(frame).convert("RGB") for frame in video],
        "array_list": list(video),
        "frames_kwarg": None,
    }
    for name, value in inputs.items():
        result = pipe(frames=video) if name == "frames_kwarg" else pipe(value)
        assert result == expected, name


def test_list_of_sequences(pipe, model, videos):
    sequences = [videos[0], videos[1][:5], videos[2][:K]]
    results = pipe(sequences)
    assert isinstance(results, list) and len(results) == 3
    for result, frames in zip(results, sequences):
        predicted, surprisal = reference(model, frames)
        assert result == {"predicted_latent": predicted, "surprisal": surprisal, "num_frames": len(frames)}
    # A tuple, a list of lists of PIL images and a 5-D batch give the same.
    assert pipe(tuple(sequences)) == results
    assert pipe([[Image.fromarray(f) for f in s] for s in sequences]) == results
    batch = pipe(np.stack(videos)[:, :, None])
    assert [r["predicted_latent"] for r in batch] == [reference(model, v)[0] for v in videos]


def test_warm_experience_fills_the_buffer(pipe, videos):
    expected_model = make_model()  # same weights as the pipeline's model
    loaded = pipe.model
    cold = pipe(videos[0])
    assert int(loaded.experience_buffer.num_writes) == 0

    warm = pipe(videos[0], warm_experience=True)
    assert int(loaded.experience_buffer.num_writes) == 8 - K  # every transition of the sequence
    predicted, surprisal = reference(expected_model, videos[0], warm=True)
    assert warm["predicted_latent"] == predicted and warm["surprisal"] == surprisal
    assert warm["predicted_latent"] != cold["predicted_latent"]  # the buffer changed the operator
    assert torch.equal(loaded.experience_buffer.valid_entries(), expected_model.experience_buffer.valid_entries())

    # Reading again leaves the buffer as it is; a list warms sequence by sequence, each before its own prediction.
    again = pipe(videos[0])
    assert again == warm and int(loaded.experience_buffer.num_writes) == 8 - K
    results = pipe([videos[1], videos[2][:6]], warm_experience=True)
    assert int(loaded.experience_buffer.num_writes) == (8 - K) * 2 + (6 - K)
    assert results[0]["predicted_latent"] == reference(expected_model, videos[1], warm=True)[0]
    assert results[1]["predicted_latent"] == reference(expected_model, videos[2][:6], warm=True)[0]
    # Gate statistics are never touched by the pipeline.
    assert buffer_state(loaded)[1:] == buffer_state(expected_model)[1:]


def test_warm_experience_errors(pipe, videos):
    vanilla = pipeline(TASK, model=make_model("vanilla"))
    assert set(vanilla(videos[0])) == OUTPUT_KEYS  # reading works for every track
    with pytest.raises(ValueError, match=r"warm_experience=True needs a model with an experience buffer.*'vanilla'"):
        vanilla(videos[0], warm_experience=True)
    with pytest.raises(ValueError, match=r"inputs: warm_experience=True needs at least context_length \+ 1 = 4 frames"):
        pipe(videos[0][:K], warm_experience=True)
    with pytest.raises(TypeError, match="warm_experience must be True or False"):
        pipe(videos[0], warm_experience="yes")
    # A failing list is rejected before anything is written.
    with pytest.raises(ValueError, match=r"inputs\[1\]"):
        pipe([videos[0], videos[1][:K]], warm_experience=True)
    assert int(pipe.model.experience_buffer.num_writes) == 0


def test_bad_inputs(pipe, videos):
    before = buffer_state(pipe.model)
    cases = [
        (np.zeros((8, 28, 28), dtype=np.uint8), ValueError, r"inputs: this model takes 64x64 frames.*got 28x28"),
        (videos[0][:2], ValueError, r"inputs: a sequence needs at least context_length=3 frames, got 2"),
        (np.zeros((8, 3, 64, 64), dtype=np.uint8), ValueError, r"inputs: frames must have shape \(T, 64, 64\)"),
        (np.zeros((64, 64), dtype=np.uint8)[None, None, None], ValueError, "inputs"),
        (np.full((8, 64, 64), 2.0, dtype=np.float32), ValueError, r"inputs: floating-point frames .*\[0, 1\]"),
        (np.full((8, 64, 64), np.nan, dtype=np.float32), ValueError, r"\[0, 1\]"),
        (np.full((8, 64, 64), 300, dtype=np.int64), ValueError, r"inputs: integer frames must hold pixels in 0\.\.255"),
        (np.zeros((8, 64, 64), dtype=bool), TypeError, "inputs: boolean frames"),
        ("frames.gif", TypeError, "inputs: a sequence must be a numpy array or torch tensor"),
        ([], ValueError, "inputs: got an empty list"),
        ([videos[0], videos[1][:2]], ValueError, r"inputs\[1\]: a sequence needs at least context_length=3"),
        ([videos[0], "x"], TypeError, r"inputs\[1\]"),
        ([[Image.fromarray(videos[0][0]), 3]], TypeError, r"inputs\[0\]: a list sequence must hold frames"),
        ([videos[0][0], np.zeros((32, 32), dtype=np.uint8)] * 2, ValueError, "inputs: frames differ in shape"),
    ]
    for value, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            pipe(value)
    with pytest.raises(ValueError, match="batch_size=2"):
        pipe([videos[0], videos[1]], batch_size=2)
    with pytest.raises(ValueError, match="inputs"):
        pipe()
    assert buffer_state(pipe.model) == before


def test_rejects_other_models():
    with pytest.raises(TypeError, match=r"model: the latent-world-model pipeline needs an EPM-JEPA.*'bro_jepa'"):
        pipeline(TASK, model=BroJepaModel(BroJepaConfig.tiny()))


def test_training_mode_is_restored_and_buffer_untouched(videos):
    model = make_model().train()
    before = buffer_state(model)
    result = pipeline(TASK, model=model)(videos[0])
    assert model.training and not model.target_encoder.training
    assert buffer_state(model) == before  # training mode does not make the pipeline write
    assert result["predicted_latent"] == reference(make_model(), videos[0])[0]
