"""Catch "tensor not moved to the model's device" bugs on a CPU-only machine.

On a GPU, code that feeds CPU tensors to a CUDA model fails at the first op that mixes them; on a CPU-only machine
(this project's CI) both live on the CPU and the bug hides until someone runs on a GPU. `simulated_accelerator(model)`
pretends the model lives on a second device, `cpu:0` (`torch.device("cpu:0") != torch.device("cpu")`): the model's
parameters and buffers, everything computed from them, every tensor moved with `.to(<that device>)` and every tensor
created with `device=<that device>` are "on the accelerator", and `model.device` / `tensor.device` report it. An op
that mixes such tensors with ordinary CPU tensors raises `DevicePlacementError`, as CUDA would. Allowed like on CUDA:
0-dim CPU tensors (scalars) and CPU index tensors in `tensor[index]`.
"""

from __future__ import annotations

import contextlib

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

SIMULATED = torch.device("cpu", 0)
_CPU = torch.device("cpu")
# Calls that compare or swap tensors without computing (Module.to's `param.data = moved` goes through these).
_METADATA = ("_has_compatible_shallow_copy_type", "__get__", "__set__")
_DEVICE_GETTER = torch.Tensor.device.__get__  # compares equal (not identical) to what the mode receives


class DevicePlacementError(RuntimeError):
    """An op mixed tensors on the simulated accelerator with tensors left on the CPU."""


def _as_device(value) -> torch.device | None:
    if isinstance(value, torch.device):
        return value
    if isinstance(value, str):
        try:
            return torch.device(value)
        except RuntimeError:
            return None
    return None


class _PlacementMode(TorchFunctionMode):
    """Tags live as long as the context (their tensors are kept alive so an address is never reused): meant for
    tests of evaluation code on tiny models, not for long runs."""

    def __init__(self):
        super().__init__()
        self._tagged: dict = {}  # storage address (or ("empty", id)) -> a tensor keeping it alive

    def tag(self, tensor: torch.Tensor) -> torch.Tensor:
        address = tensor.untyped_storage().data_ptr()
        # Empty tensors all have address 0: those are tagged one by one (by identity), not through the address.
        self._tagged[address or ("empty", id(tensor))] = tensor
        return tensor

    def on_device(self, tensor: torch.Tensor) -> bool:
        address = tensor.untyped_storage().data_ptr()
        return (address or ("empty", id(tensor))) in self._tagged

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if func == _DEVICE_GETTER:
            return SIMULATED if self.on_device(args[0]) else _CPU
        if name in ("to", "cuda", "cpu") and isinstance(args[0], torch.Tensor):
            return self._move(func, name, args, kwargs)
        target = _as_device(kwargs.get("device"))
        if target is not None and target == SIMULATED:  # a factory placing its result on the accelerator
            kwargs = {**kwargs, "device": _CPU}
            return self._tag_all(func(*args, **kwargs))
        with torch._C.DisableTorchFunction():
            on = [t for t in tensors if self.on_device(t)]
            off = [t for t in tensors if not self.on_device(t) and t.dim() > 0]
            indexing = name in ("__getitem__", "__setitem__") and all(not t.is_floating_point() for t in off)
        if on and off and not indexing and name not in _METADATA:
            raise DevicePlacementError(
                f"{name}: tensors on the model's device ({SIMULATED}) mixed with CPU tensors of shapes "
                f"{[tuple(t.shape) for t in off]}: move them with .to(model.device)"
            )
        result = func(*args, **kwargs)
        return self._tag_all(result) if on else result

    def _move(self, func, name, args, kwargs):
        tensor = args[0]
        target = None
        if name == "cuda":
            target = SIMULATED
        elif name == "to":
            for value in (*args[1:], kwargs.get("device"), kwargs.get("other")):
                if isinstance(value, torch.Tensor):
                    target = SIMULATED if self.on_device(value) else _CPU
                elif _as_device(value) is not None:
                    target = _as_device(value)
        else:  # .cpu()
            target = _CPU
        clean_args = tuple(_CPU if _as_device(a) == SIMULATED else a for a in args[1:])
        clean_kwargs = {k: (_CPU if _as_device(v) == SIMULATED else v) for k, v in kwargs.items()}
        with torch._C.DisableTorchFunction():
            moved = tensor.to(*clean_args, **clean_kwargs) if name == "to" else tensor.cpu()
            if target is None:  # a dtype change: the result stays where the input was
                return self.tag(moved) if self.on_device(tensor) else moved
            if target == SIMULATED:
                if not self.on_device(tensor):
                    # `.to(device)` of a tensor already on that device returns the tensor itself: copy, so the
                    # CPU original stays a CPU tensor
                    moved = (
                        moved.clone()
                        if moved.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr()
                        else moved
                    )
                return self.tag(moved)
            if self.on_device(tensor):  # back to the CPU: a copy, as from a real accelerator
                return moved.clone()
            return moved

    def _tag_all(self, result):
        def tag(value):
            return self.tag(value) if isinstance(value, torch.Tensor) else value

        return tree_map(tag, result)


@contextlib.contextmanager
def simulated_accelerator(*models: torch.nn.Module):
    """Inside: `models` live on a simulated second device; mixing their tensors with CPU tensors raises."""
    mode = _PlacementMode()
    for model in models:
        for tensor in (*model.parameters(), *model.buffers()):
            mode.tag(tensor)
    with mode:
        yield mode


__all__ = ["SIMULATED", "DevicePlacementError", "simulated_accelerator"]
