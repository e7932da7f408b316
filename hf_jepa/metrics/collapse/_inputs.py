"""Checks of the collapse measures' tensor inputs, shared by the information, rank and similarity measures."""

from __future__ import annotations

import torch


def _as_matrix(x, name: str, min_rows: int = 2) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (N, D) tensor, got shape {tuple(x.shape)}")
    if x.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows (N >= {min_rows}), got N = {x.shape[0]}")
    if x.shape[1] < 1:
        raise ValueError(f"{name} needs at least one dimension, got shape {tuple(x.shape)}")
    return x.detach()


def _check_same_shape(a: torch.Tensor, b: torch.Tensor, names: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{names} differ in shape: {tuple(a.shape)} vs {tuple(b.shape)}")
