"""`attend` (the families' attention entry point, copied into T-JEPA, I-JEPA and the reasoner family) runs an SDPA
call that autograd records in fp32 when the inputs are bf16 on CPU and there are fewer than 256 keys (where
PyTorch's bf16 CPU flash-attention backward is several times slower than fp32), and leaves every other call alone:
256 keys and more, no autograd, eager attention. The values and gradients match an fp32 reference."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import PretrainedConfig

from hf_jepa.modeling.i_jepa.modeling_i_jepa import attend as i_jepa_attend
from hf_jepa.modeling.jepa_reasoner.modeling_jepa_reasoner_blocks import attend
from hf_jepa.modeling.t_jepa.modeling_t_jepa import attend as t_jepa_attend


class _SdpaDtypes(TorchDispatchMode):
    """The dtype of every fused-attention call (forward and backward) below autocast."""

    def __init__(self):
        super().__init__()
        self.dtypes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._overloadpacket.__name__.startswith("_scaled_dot_product"):
            self.dtypes.append(args[0].dtype)
        return func(*args, **(kwargs or {}))


def _module(implementation: str) -> nn.Module:
    module = nn.Module()
    module.config = PretrainedConfig()
    module.config._attn_implementation = implementation
    module.training, module.is_causal = True, False
    return module


def _inputs(keys: int, dtype=torch.bfloat16):
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(2, 4, keys, 16, generator=generator).to(dtype).requires_grad_() for _ in range(3)]


def _run(module, q, k, v, mask=None, grad=True):
    recorder = _SdpaDtypes()
    with recorder, torch.set_grad_enabled(grad):
        output, _ = attend(module, q, k, v, mask, dropout=0.0, scaling=0.25, is_causal=False)
        if grad:
            output.float().square().sum().backward()
    return output, recorder.dtypes


def test_short_bf16_training_attention_runs_in_fp32_with_fp32_values_and_gradients():
    q, k, v = _inputs(31)
    output, dtypes = _run(_module("sdpa"), q, k, v)
    assert output.dtype == torch.bfloat16 and output.shape == (2, 31, 4, 16)
    assert dtypes == [torch.float32, torch.float32]  # forward and backward
    assert all(t.grad is not None and t.grad.dtype == torch.bfloat16 for t in (q, k, v))
    reference = [t.detach().float().requires_grad_() for t in (q, k, v)]
    expected = F.scaled_dot_product_attention(*reference, scale=0.25).transpose(1, 2)
    expected.square().sum().backward()
    torch.testing.assert_close(output.float(), expected, atol=1e-2, rtol=1e-2)
    for got, want in zip((q, k, v), reference):
        torch.testing.assert_close(got.grad.float(), want.grad, atol=5e-2, rtol=5e-2)


def test_long_keys_inference_fp32_and_eager_are_left_alone():
    assert _run(_module("sdpa"), *_inputs(256))[1] == [torch.bfloat16, torch.bfloat16]
    assert _run(_module("sdpa"), *_inputs(31), grad=False)[1] == [torch.bfloat16]
    assert _run(_module("sdpa"), *_inputs(31, torch.float32))[1] == [torch.float32, torch.float32]
    output, dtypes = _run(_module("eager"), *_inputs(31))
    assert dtypes == [] and output.dtype == torch.bfloat16


def test_additive_float_mask_is_cast_with_the_inputs():
    """An additive bf16 mask (the dtype's minimum where a query may not attend) gives the same output as the boolean
    mask it encodes, in the fp32 path (SDPA refuses a mask whose dtype differs from the query's)."""
    q, k, v = _inputs(8)
    allowed = torch.ones(2, 1, 8, 8, dtype=torch.bool).tril()
    additive = torch.zeros(allowed.shape, dtype=torch.bfloat16).masked_fill(~allowed, torch.finfo(torch.bfloat16).min)
    with_additive, dtypes = _run(_module("sdpa"), q, k, v, additive)
    with_boolean, _ = _run(_module("sdpa"), q, k, v, allowed)
    assert dtypes == [torch.float32, torch.float32]
    torch.testing.assert_close(with_additive, with_boolean, atol=0, rtol=0)


@pytest.mark.parametrize("copy", [t_jepa_attend, i_jepa_attend])
def test_copies_choose_the_same_path(copy):
    q, k, v = _inputs(31)
    recorder = _SdpaDtypes()
    with recorder:
        copy(_module("sdpa"), q, k, v, None, dropout=0.0, scaling=0.25, is_causal=False)
    assert recorder.dtypes == [torch.float32]
