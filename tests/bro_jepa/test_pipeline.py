"""The `modular-arithmetic` pipeline: from a model object, input formats, batched, rollout, bad inputs, training mode.
(On every saved variant's folder, with and without an image processor, and with remote code: the family tester in
tests/bro_jepa/test_modeling.py.)"""

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import pipeline

from hf_jepa import BroJepaConfig, BroJepaImageProcessor, BroJepaModel
from hf_jepa.pipelines import ModularArithmeticPipeline

TASK = "modular-arithmetic"
OUTPUT_KEYS = {"digit", "score", "operation", "source_digit", "source_score", "latent"}


def random_digits(count: int, seed: int) -> np.ndarray:
    """uint8 (count, 28, 28) images: random strokes on black, like MNIST's value range (no trained model needed)."""
    rng = np.random.default_rng(seed)
    images = np.zeros((count, 28, 28), dtype=np.uint8)
    for image in images:
        top, left = rng.integers(2, 12, size=2)
        image[top : top + 14, left : left + 14] = rng.integers(0, 256, size=(14, 14), dtype=np.uint8)
    return images


def make_model(seed: int = 0, prototypes: bool = True, **overrides) -> BroJepaModel:
    torch.manual_seed(seed)
    model = BroJepaModel(BroJepaConfig.tiny(**overrides)).eval()
    if prototypes:
        images = random_digits(200, seed=seed + 100)
        pixel_values = BroJepaImageProcessor()(images=list(images[:, None]), return_tensors="pt")["pixel_values"]
        model.fill_class_prototypes(pixel_values, torch.arange(200) % 10)
    return model


@pytest.fixture(scope="module")
def model():
    return make_model()


@pytest.fixture(scope="module")
def processor():
    return BroJepaImageProcessor()


@pytest.fixture(scope="module")
def pipe(model, processor):
    return pipeline(TASK, model=model, image_processor=processor)


@pytest.fixture(scope="module")
def images():
    return random_digits(8, seed=7)


def reference(model, processor, images, operations):
    """What the pipeline should return, computed with the model API directly."""
    pixel_values = processor(images=list(images[:, None]), return_tensors="pt")["pixel_values"]
    operations = torch.as_tensor(operations).expand(len(images))
    with torch.no_grad():
        out = model(pixel_values, operations)
        source = model.class_logits(model.predict(out.context_latent, 0))
    return out.logits.argmax(-1).tolist(), source.argmax(-1).tolist(), out.predicted_latent


def check_result(result, digit, source_digit, latent, operation):
    assert set(result) == OUTPUT_KEYS
    assert result["digit"] == digit and result["source_digit"] == source_digit
    assert result["operation"] == operation and isinstance(result["operation"], int)
    assert 0.0 < result["score"] <= 1.0 and 0.0 < result["source_score"] <= 1.0
    assert isinstance(result["latent"], list) and len(result["latent"]) == latent.shape[-1]
    np.testing.assert_allclose(result["latent"], latent.numpy(), rtol=0, atol=1e-5)


def test_pipeline_from_model_object(pipe, model, processor, images):
    assert isinstance(pipe, ModularArithmeticPipeline)
    digits, sources, latents = reference(model, processor, images[:1], 3)
    result = pipe(Image.fromarray(images[0]), operation=3)
    check_result(result, digits[0], sources[0], latents[0], 3)
    # The score is the softmax probability of the predicted digit.
    with torch.no_grad():
        probabilities = model.class_logits(latents).softmax(-1)[0]
    assert result["score"] == pytest.approx(probabilities.max().item(), abs=1e-5)
    # return_tensors gives the latent as a tensor.
    tensor_result = pipe(images[0], operation=3, return_tensors=True)
    assert isinstance(tensor_result["latent"], torch.Tensor) and tensor_result["latent"].shape == latents[0].shape


def test_input_formats_agree(pipe, images, tmp_path):
    image = images[1]
    path = tmp_path / "digit.png"
    Image.fromarray(image).save(path)
    inputs = {
        "pil": Image.fromarray(image),
        "pil_rgb": Image.fromarray(image).convert("RGB"),
        "hw": image,
        "hw1": image[:, :, None],
        "1hw": image[None],
        "rgb_array": np.repeat(image[:, :, None], 3, axis=-1),
        "torch_uint8": torch.from_numpy(image),
        "float01": image.astype(np.float32) / 255.0,
        "path": str(path),
        "dict": {"image": image, "operation": -2},
    }
    expected = pipe(image, operation=-2)
    for name, value in inputs.items():
        result = pipe(value, operation=None if name == "dict" else -2)
        assert result["digit"] == expected["digit"], name
        np.testing.assert_allclose(result["latent"], expected["latent"], rtol=0, atol=1e-5, err_msg=name)
    # Other sizes are resized by the image processor.
    big = np.asarray(Image.fromarray(image).resize((56, 56)))
    assert set(pipe(big, operation=1)) == OUTPUT_KEYS


@pytest.mark.parametrize("batch_size", [1, 3])
def test_batched_list(pipe, model, processor, images, batch_size):
    operations = [1, -1, 2, 5, -9, 0, 9, -4]
    digits, sources, latents = reference(model, processor, images, operations)
    results = pipe(list(images), operation=operations, batch_size=batch_size)
    assert isinstance(results, list) and len(results) == len(images)
    for index, result in enumerate(results):
        check_result(result, digits[index], sources[index], latents[index], operations[index])
    # One operation for the whole list, a numpy array of operations, a 4-D batch and a list of dicts.
    same_op = pipe(list(images), operation=4, batch_size=batch_size)
    assert [r["digit"] for r in same_op] == reference(model, processor, images, 4)[0]
    assert [r["operation"] for r in same_op] == [4] * len(images)
    from_array = pipe(list(images), operation=np.array(operations), batch_size=batch_size)
    assert [r["digit"] for r in from_array] == digits
    batch = pipe(torch.from_numpy(images)[:, None], operation=operations, batch_size=batch_size)
    assert [r["digit"] for r in batch] == digits
    dicts = pipe([{"image": im, "operation": k} for im, k in zip(images, operations)], batch_size=batch_size)
    assert [r["digit"] for r in dicts] == digits


def test_rollout(pipe, model, processor, images):
    pixel_values = processor(images=list(images[:, None]), return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        expected = model.class_logits(model.rollout(model.encode(pixel_values), 3)).argmax(-1).tolist()
    results = pipe(list(images), operation=3, rollout=True, batch_size=4)
    assert [r["digit"] for r in results] == expected
    # For the block-rotation predictor, rolling out +1 three times is rotating by 3 (up to rounding).
    direct = pipe(list(images), operation=3, batch_size=4)
    for a, b in zip(results, direct):
        np.testing.assert_allclose(a["latent"], b["latent"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("operation", [10, -10, 25])
def test_operation_out_of_range(pipe, images, operation):
    with pytest.raises(ValueError, match=r"operation must lie in \[-9, 9\].*modulus 10"):
        pipe(images[0], operation=operation)
    with pytest.raises(ValueError, match="operation"):
        pipe(list(images[:3]), operation=[1, operation, 2], batch_size=2)


@pytest.mark.parametrize("operation", [1.5, True, "3"])
def test_operation_wrong_type(pipe, images, operation):
    with pytest.raises(ValueError, match="operation must be an integer"):
        pipe(images[0], operation=operation)


def test_operation_missing_or_mismatched(pipe, images):
    with pytest.raises(ValueError, match="operation is required"):
        pipe(images[0])
    with pytest.raises(ValueError, match="operation is required"):
        pipe(list(images[:2]))
    with pytest.raises(ValueError, match="operation has 2 entries but 3 images"):
        pipe(list(images[:3]), operation=[1, 2])
    with pytest.raises(ValueError, match="single image"):
        pipe(images[0], operation=[1, 2])


def test_bad_images(pipe):
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        pipe(np.full((28, 28), 3.0, dtype=np.float32), operation=1)
    with pytest.raises(ValueError, match="shape"):
        pipe(np.zeros((2, 5, 28, 28, 1), dtype=np.uint8), operation=1)
    with pytest.raises(TypeError, match="PIL images"):
        pipe(12345, operation=1)


def test_model_without_prototypes(processor, images):
    bare = make_model(prototypes=False)
    bare_pipe = pipeline(TASK, model=bare, image_processor=processor)  # building it is fine
    with pytest.raises(RuntimeError, match="fill_class_prototypes"):
        bare_pipe(images[0], operation=1)
    with pytest.raises(RuntimeError, match="no class prototypes"):
        bare_pipe(list(images[:4]), operation=1, batch_size=2)
    # The supervised baseline classifies with its head: no prototypes needed.
    supervised = make_model(prototypes=False, objective="supervised")
    result = pipeline(TASK, model=supervised, image_processor=processor)(images[0], operation=1)
    assert set(result) == OUTPUT_KEYS


def test_model_in_training_mode_is_left_as_it_was(processor, images):
    model = make_model()
    model.train()
    result = pipeline(TASK, model=model, image_processor=processor)(list(images[:2]), operation=1, batch_size=2)
    assert model.training and not model.target_encoder.training
    expected = reference(make_model(), processor, images[:2], 1)[0]
    assert [r["digit"] for r in result] == expected
