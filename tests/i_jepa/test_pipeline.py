"""The `jepa-feature-extraction` pipeline on I-JEPA images: outputs equal `model.embed` for every input format,
batches, the context encoder on request, resizing, image errors. (On the saved folder and without hf_jepa: the family
tester in tests/i_jepa/test_modeling.py.)"""

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import pipeline

TASK = "jepa-feature-extraction"


# ------------------------------------------------------------------------------------------------ image pipeline


@pytest.fixture(scope="module")
def image_model():
    i_jepa = pytest.importorskip("hf_jepa.modeling.i_jepa", reason="the I-JEPA family is not in this checkout")
    torch.manual_seed(0)
    model = i_jepa.IJepaModel(i_jepa.IJepaConfig.tiny())
    with torch.no_grad():
        for parameter in model.target_encoder.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model.eval()


def _normalised(pixels: np.ndarray, config) -> torch.Tensor:
    tensor = torch.from_numpy(pixels).to(torch.float32) / 255.0
    mean = torch.tensor(config.pixel_mean, dtype=torch.float32).reshape(-1, 1, 1)
    std = torch.tensor(config.pixel_std, dtype=torch.float32).reshape(-1, 1, 1)
    return ((tensor.reshape(-1, config.image_size, config.image_size) - mean) / std)[None]


def test_image_outputs_equal_model_embed(image_model):
    config = image_model.config
    assert config.model_type == "i_jepa" and config.num_channels == 1 and config.image_size == 28
    extract = pipeline(TASK, model=image_model)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(3, 28, 28), dtype=np.uint8)
    with torch.no_grad():
        expected = [image_model.embed(_normalised(image, config))[0] for image in images]
    first = expected[0].tolist()
    assert extract(images[0]) == first and len(first) == config.hidden_size
    for name, value in {
        "pil": Image.fromarray(images[0]),
        "pil_rgb": Image.fromarray(images[0]).convert("RGB"),
        "chw": images[0][None],
        "hwc": images[0][..., None],
        "torch_uint8": torch.from_numpy(images[0]),
        "float32": images[0].astype(np.float32) / 255.0,
        "int64": images[0].astype(np.int64),
    }.items():
        torch.testing.assert_close(torch.tensor(extract(value)), expected[0], rtol=1e-5, atol=1e-6, msg=name)
    assert extract(list(images)) == [e.tolist() for e in expected]
    batch = extract(images[:, None], return_tensors=True)  # a 4-D array is N images
    assert all(torch.equal(got, e) for got, e in zip(batch, expected))
    for got, e in zip(extract(list(images), batch_size=2, return_tensors=True), expected):
        torch.testing.assert_close(got, e, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        context = image_model.embed(_normalised(images[0], config), use_target_encoder=False)[0]
    assert torch.equal(extract(images[0], use_target_encoder=False, return_tensors=True), context)
    # Another size is resized to config.image_size.
    assert len(extract(np.zeros((56, 40), dtype=np.uint8))) == config.hidden_size


def test_image_errors(image_model):
    extract = pipeline(TASK, model=image_model)
    cases = [
        (np.full((28, 28), 2.0, dtype=np.float32), ValueError, r"^inputs: floating-point images must hold pixels"),
        (np.full((28, 28), np.nan, dtype=np.float32), ValueError, r"\[0, 1\]"),
        (np.full((28, 28), 300, dtype=np.int64), ValueError, r"inputs: integer images must hold pixels in 0\.\.255"),
        (np.zeros((28, 28), dtype=bool), TypeError, "inputs: boolean images"),
        (np.zeros((3, 28, 28), dtype=np.uint8), ValueError, r"inputs: images must have shape \(H, W\), \(1, H, W\)"),
        ([np.zeros((28, 28), dtype=np.uint8), "a cat"], TypeError, r"inputs\[1\]: this I-JEPA model embeds images"),
        ("a cat", TypeError, "inputs: this I-JEPA model embeds images"),
    ]
    for value, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            extract(value)
