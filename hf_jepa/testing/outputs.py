"""Comparing what models return: outputs of an installed class and of its remote-code copy, of a model before and
after save/load, of pipelines (the family tester's comparisons)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch

__all__ = ["assert_same", "assert_state_dicts_equal", "plain"]


def plain(value: Any) -> Any:
    """`value` with every `ModelOutput` / `BatchFeature` / mapping as a dict and every tuple or list as a list, so
    outputs of an installed class and of its remote-code copy compare (and pickle) alike. The same code runs in the
    subprocess (`hf_jepa.testing.remote_code`)."""
    if isinstance(value, torch.Tensor):
        return value.detach()
    if hasattr(value, "items") and callable(value.items):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def assert_state_dicts_equal(expected: Mapping[str, torch.Tensor], actual: Mapping[str, torch.Tensor], what=""):
    """Same names, and every tensor of the same dtype, shape and values (bit for bit)."""
    assert expected.keys() == actual.keys(), (what, sorted(set(expected) ^ set(actual)))
    for name, tensor in expected.items():
        assert actual[name].dtype == tensor.dtype, (what, name, actual[name].dtype, tensor.dtype)
        assert torch.equal(actual[name], tensor), (what, name)


def assert_same(expected: Any, actual: Any, where: str = "output", atol: float = 0.0) -> None:
    """`actual` equals `expected` (tensors, arrays, numbers, strings, dicts and lists, nested): bit for bit, or within
    `atol` for floating values when `atol > 0`."""
    expected, actual = plain(expected), plain(actual)
    if isinstance(expected, (torch.Tensor, np.ndarray)):
        expected_t, actual_t = torch.as_tensor(expected), torch.as_tensor(actual)
        assert actual_t.shape == expected_t.shape and actual_t.dtype == expected_t.dtype, (where, actual_t, expected_t)
        if atol and expected_t.is_floating_point():
            torch.testing.assert_close(actual_t, expected_t, rtol=0, atol=atol, equal_nan=True, msg=where)
        else:
            assert torch.equal(actual_t, expected_t), f"{where}: {actual_t} != {expected_t}"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), (where, actual, expected)
        for key in expected:
            assert_same(expected[key], actual[key], f"{where}[{key!r}]", atol)
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), (where, actual, expected)
        for index, (a, b) in enumerate(zip(expected, actual)):
            assert_same(a, b, f"{where}[{index}]", atol)
    elif isinstance(expected, float) and atol:
        assert actual == pytest.approx(expected, rel=0, abs=atol), (where, actual, expected)
    else:
        assert actual == expected, (where, actual, expected)
