"""The helpers every hf-jepa pipeline shares (`hf_jepa.pipelines.base`): flag arguments, eval mode, pixel checks."""

import numpy as np
import pytest
import torch

from hf_jepa.pipelines.base import FlagTypeError, array_to_tensor, check_flag, eval_mode, pixels_to_unit_float


def test_check_flag_accepts_python_and_numpy_bools():
    assert check_flag(True, "rollout") is True
    assert check_flag(np.False_, "rollout") is False


@pytest.mark.parametrize("value", ["yes", 1, 0, None, np.array([True])])
def test_check_flag_names_the_argument(value):
    # Both a TypeError (the other pipelines) and a ValueError (the latent-reasoning pipeline's bad arguments).
    with pytest.raises(FlagTypeError, match=r"^return_tensors must be True or False, got ") as error:
        check_flag(value, "return_tensors")
    assert isinstance(error.value, TypeError) and isinstance(error.value, ValueError)


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_restores_the_mode_also_on_error(training):
    model = torch.nn.Sequential(torch.nn.Dropout(0.5)).train(training)
    with pytest.raises(RuntimeError), eval_mode(model) as inside:
        assert inside is model and not model.training and not model[0].training
        raise RuntimeError("inside the block")
    assert model.training is training and model[0].training is training


def test_pixels_become_unit_floats():
    uint8 = torch.tensor([[0, 255]], dtype=torch.uint8)
    assert torch.equal(
        pixels_to_unit_float(uint8, "inputs", "images", holds="the image holds"), torch.tensor([[0.0, 1.0]])
    )
    int16 = array_to_tensor(np.array([[0, 51]], dtype=np.int16), "inputs", "frames")
    assert int16.dtype == torch.uint8 and int16.tolist() == [[0, 51]]


@pytest.mark.parametrize(
    "tensor, error, message",
    [
        (torch.zeros(2, 2, dtype=torch.bool), TypeError, r"^inputs\[1\]: boolean frames are ambiguous"),
        (torch.zeros(2, 2, dtype=torch.complex64), TypeError, r"^inputs\[1\]: complex frames are not supported"),
        (torch.full((2, 2), 300), ValueError, r"^inputs\[1\]: integer frames must hold pixels in 0\.\.255"),
        (torch.full((2, 2), 1.5), ValueError, r"^inputs\[1\]: floating-point frames must hold pixels in \[0, 1\]"),
        (
            torch.tensor([[0.0, float("nan")]]),
            ValueError,
            r"^inputs\[1\]: the frames hold 1 NaN or inf value\(s\); pixels must be finite, in \[0, 1\] \(a note\)$",
        ),
    ],
)
def test_bad_pixels_name_the_input(tensor, error, message):
    with pytest.raises(error, match=message):
        pixels_to_unit_float(tensor, "inputs[1]", "frames", holds="the frames hold", note=" (a note)")


def test_arrays_of_other_dtypes_are_refused():
    with pytest.raises(TypeError, match=r"^inputs: images must hold uint8 pixels \(0\.\.255\) or floats in \[0, 1\]"):
        array_to_tensor(np.array([["a"]]), "inputs", "images")
