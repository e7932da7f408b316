"""The key mappings of I-JEPA checkpoints onto hf-jepa's `IJepaModel` state dict, complete and strict.

Two source layouts:

* **transformers** (`IJepaModel`, `model_type="ijepa"`; the encoder only): `embeddings.patch_embeddings.projection`,
  `embeddings.position_embeddings` `(1, N, D)`, the layers (transformers 5 names `layers.N.attention.q_proj`,
  `...o_proj`, `mlp.fc1`, `mlp.fc2`; or transformers 4 names `encoder.layer.N.attention.attention.query`,
  `attention.output.dense`, `intermediate.dense`, `output.dense`), `layernorm`; optionally behind an `ijepa.` prefix
  (`IJepaForImageClassification`). Mapped onto BOTH encoders; the predictor has no source.
* **meta** (facebookresearch/ijepa's training checkpoint): a dict with `encoder`, `target_encoder` (its
  `VisionTransformer`: `patch_embed.proj`, `pos_embed` `(1, N, D)`, `blocks.N.norm1` / `attn.qkv` (q, k, v fused) /
  `attn.proj` / `norm2` / `mlp.fc1` / `mlp.fc2`, `norm`) and `predictor` (its `VisionTransformerPredictor`:
  `predictor_embed`, `mask_token` `(1, 1, d)`, `predictor_pos_embed` `(1, N, d)`, `predictor_blocks.N...`,
  `predictor_norm`, `predictor_proj`), keys usually behind DDP's `module.`; plus training state (`opt`, `scaler`,
  `epoch`, ...), which is not weights.

Every source key is mapped or listed in `ignored` with the reason; a key no rule knows raises `ConversionError` naming
it. `check_complete` then refuses any target key left unfilled (besides the parts the caller initialises on purpose)
and any shape that does not match, naming the keys.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import torch

__all__ = [
    "META_TRAINING_STATE",
    "ConversionError",
    "MappedWeights",
    "check_complete",
    "map_meta",
    "map_transformers",
    "strip_prefix",
]

# Top-level entries of Meta's checkpoint that are training state, not weights: why each is not converted.
META_TRAINING_STATE = {
    "opt": "optimiser state (AdamW moments): not weights; `hf-jepa train` starts a new optimiser",
    "scaler": "AMP grad-scaler state: not weights",
    "epoch": "training progress counter, recorded in the conversion metadata",
    "loss": "the last logged training loss, recorded in the conversion metadata",
    "batch_size": "training setting, recorded in the conversion metadata",
    "world_size": "training setting, recorded in the conversion metadata",
    "lr": "the last learning rate, recorded in the conversion metadata",
}
META_PARTS = {"encoder": "context_encoder.", "target_encoder": "target_encoder.", "predictor": "predictor."}
# Source keys of a transformers checkpoint that are not I-JEPA's pre-training model: why each is left out.
TRANSFORMERS_IGNORED = (
    (r"pooler\.dense\.(weight|bias)", "transformers' optional pooler (add_pooling_layer=True): not part of I-JEPA"),
    (r"classifier\.(weight|bias)", "IJepaForImageClassification's head: the converted model is the pre-training model"),
    (r"embeddings\.mask_token", "transformers' masked-image-modelling token (use_mask_token=True): unused by I-JEPA"),
)
_LAYER_V5 = r"layers\.(\d+)\.(attention\.[qkvo]_proj|layernorm_before|layernorm_after|mlp\.fc1|mlp\.fc2)\.(weight|bias)"
_LAYER_V4 = {
    "attention.attention.query": "attention.q_proj",
    "attention.attention.key": "attention.k_proj",
    "attention.attention.value": "attention.v_proj",
    "attention.output.dense": "attention.o_proj",
    "intermediate.dense": "mlp.fc1",
    "output.dense": "mlp.fc2",
    "layernorm_before": "layernorm_before",
    "layernorm_after": "layernorm_after",
}
_LAYER_V4_RE = r"encoder\.layer\.(\d+)\.(" + "|".join(re.escape(k) for k in _LAYER_V4) + r")\.(weight|bias)"
_META_BLOCK = {
    "norm1": "layernorm_before",
    "attn.proj": "attention.o_proj",
    "norm2": "layernorm_after",
    "mlp.fc1": "mlp.fc1",
    "mlp.fc2": "mlp.fc2",
}
_META_PREDICTOR_BLOCK = {
    "norm1": "norm1",
    "attn.qkv": "qkv",
    "attn.proj": "proj",
    "norm2": "norm2",
    "mlp.fc1": "fc1",
    "mlp.fc2": "fc2",
}


class ConversionError(ValueError):
    """A checkpoint that does not map completely onto the model: the message names the keys."""


def _listed(keys: Iterable[str], limit: int = 12) -> str:
    keys = sorted(keys)
    shown = ", ".join(keys[:limit])
    return shown + (f" (and {len(keys) - limit} more)" if len(keys) > limit else "")


@dataclass
class MappedWeights:
    """The converted tensors by target key, the source keys each came from, and the source keys left out with the
    reason (`ignored`)."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # target key -> source key
    ignored: dict[str, str] = field(default_factory=dict)  # source key -> reason

    def put(self, target: str, tensor: torch.Tensor, source: str) -> None:
        if target in self.tensors:
            raise ConversionError(f"two source keys map onto {target!r}: {self.sources[target]!r} and {source!r}")
        self.tensors[target] = tensor
        self.sources[target] = source


Rule = tuple[str, Callable[[re.Match, torch.Tensor], dict[str, torch.Tensor]]]


def _apply_rules(
    state: Mapping[str, torch.Tensor],
    rules: list[Rule],
    where: str,
    out: MappedWeights,
    source_name: Callable[[str], str],
    ignore: Iterable[tuple[str, str]] = (),
) -> None:
    """Map each key of `state` by the first rule whose pattern matches it whole, or record it as ignored (with the
    reason) when an `ignore` pattern matches; unknown keys raise, named by `source_name(key)`."""
    unknown = []
    for key, tensor in state.items():
        reason = next((why for pattern, why in ignore if re.fullmatch(pattern, key)), None)
        if reason is not None:
            out.ignored[source_name(key)] = reason
            continue
        for pattern, convert in rules:
            match = re.fullmatch(pattern, key)
            if match:
                for target, value in convert(match, tensor).items():
                    out.put(target, value, source_name(key))
                break
        else:
            unknown.append(source_name(key))
    if unknown:
        raise ConversionError(
            f"{where}: {len(unknown)} source key(s) no rule maps or ignores: {_listed(unknown)}. Is this an I-JEPA "
            "checkpoint of the layout given (--layout)?"
        )


def strip_prefix(state: Mapping[str, torch.Tensor], prefix: str) -> tuple[dict[str, torch.Tensor], bool]:
    """`state` without `prefix` when every key has it (DDP's `module.`, a task model's `ijepa.`), else unchanged."""
    if state and all(key.startswith(prefix) for key in state):
        return {key[len(prefix) :]: value for key, value in state.items()}, True
    return dict(state), False


def _renamed(target: str, reshape: Callable[[torch.Tensor], torch.Tensor] | None = None):
    return lambda match, tensor: {match.expand(target): reshape(tensor) if reshape else tensor}


def _flat_table(tensor: torch.Tensor) -> torch.Tensor:
    """A `(1, N, D)` position table as hf-jepa's `(N, D)` buffer."""
    if tensor.ndim != 3 or tensor.shape[0] != 1:
        raise ConversionError(f"a position table must have shape (1, N, D), got {tuple(tensor.shape)}")
    return tensor[0]


def _split_qkv(prefix: str):
    """Meta's fused `qkv` `(3D, D)` (rows: q, then k, then v, each head-major as `reshape(B, N, 3, heads, hd)` reads
    them) as transformers' separate `q_proj` / `k_proj` / `v_proj`."""

    def convert(match, tensor):
        if tensor.shape[0] % 3:
            raise ConversionError(f"{match.group(0)}: a fused qkv needs 3 x D rows, got shape {tuple(tensor.shape)}")
        q, k, v = tensor.chunk(3, dim=0)
        base = match.expand(prefix)
        kind = match.group(2)
        return {f"{base}q_proj.{kind}": q, f"{base}k_proj.{kind}": k, f"{base}v_proj.{kind}": v}

    return convert


def _encoder_rules_meta(target: str) -> list[Rule]:
    rules: list[Rule] = [
        (r"patch_embed\.proj\.(weight|bias)", _renamed(target + r"patch_embeddings.projection.\1")),
        (r"pos_embed", _renamed(target + "position_embeddings", _flat_table)),
        (r"norm\.(weight|bias)", _renamed(target + r"layernorm.\1")),
        (r"blocks\.(\d+)\.attn\.qkv\.(weight|bias)", _split_qkv(target + r"layers.\1.attention.")),
    ]
    for source, name in _META_BLOCK.items():
        rules.append(
            (rf"blocks\.(\d+)\.{re.escape(source)}\.(weight|bias)", _renamed(target + rf"layers.\1.{name}.\2"))
        )
    return rules


def _predictor_rules_meta() -> list[Rule]:
    target = "predictor."
    rules: list[Rule] = [
        (r"predictor_embed\.(weight|bias)", _renamed(target + r"embed.\1")),
        (r"mask_token", _renamed(target + "mask_token", lambda t: t.reshape(-1))),
        (r"predictor_pos_embed", _renamed(target + "position_embeddings", _flat_table)),
        (r"predictor_norm\.(weight|bias)", _renamed(target + r"norm.\1")),
        (r"predictor_proj\.(weight|bias)", _renamed(target + r"output.\1")),
    ]
    for source, name in _META_PREDICTOR_BLOCK.items():
        rules.append(
            (
                rf"predictor_blocks\.(\d+)\.{re.escape(source)}\.(weight|bias)",
                _renamed(target + rf"blocks.\1.{name}.\2"),
            )
        )
    return rules


def map_meta(checkpoint: Mapping) -> tuple[MappedWeights, dict]:
    """facebookresearch/ijepa's checkpoint dict -> (`MappedWeights` for all three parts, the training-state entries
    kept as metadata: epoch, loss, batch_size, world_size, lr). Raises `ConversionError` naming a missing part or an
    entry or key no rule knows."""
    if not isinstance(checkpoint, Mapping):
        raise ConversionError(f"Meta's checkpoint must be a dict of state dicts, got {type(checkpoint).__name__}")
    missing = [part for part in META_PARTS if part not in checkpoint]
    if missing:
        raise ConversionError(
            f"Meta's checkpoint layout needs the entries {list(META_PARTS)}; missing: {missing} (entries found: "
            f"{_listed(map(str, checkpoint))})"
        )
    out = MappedWeights()
    metadata = {}
    unknown = [str(k) for k in checkpoint if k not in META_PARTS and k not in META_TRAINING_STATE]
    if unknown:
        raise ConversionError(
            f"Meta's checkpoint: entries no rule maps or ignores: {_listed(unknown)} (known: weights "
            f"{list(META_PARTS)}, training state {list(META_TRAINING_STATE)})"
        )
    for name, reason in META_TRAINING_STATE.items():
        if name in checkpoint:
            out.ignored[name] = reason
            value = checkpoint[name]
            if isinstance(value, (int, float, str)) and not isinstance(value, bool):
                metadata[name] = value
            elif isinstance(value, torch.Tensor) and value.numel() == 1:
                metadata[name] = value.item()
    for part, target in META_PARTS.items():
        state = checkpoint[part]
        if not isinstance(state, Mapping):
            raise ConversionError(f"Meta's checkpoint: {part!r} must be a state dict, got {type(state).__name__}")
        state, had_prefix = strip_prefix(state, "module.")
        rules = _predictor_rules_meta() if part == "predictor" else _encoder_rules_meta(target)
        name = f"{part}.{'module.' if had_prefix else ''}"
        _apply_rules(state, rules, f"Meta's checkpoint, {part!r}", out, lambda key, name=name: name + key)
    return out, metadata


def map_transformers(state: Mapping[str, torch.Tensor]) -> MappedWeights:
    """A transformers `IJepaModel` state dict (transformers 4 or 5 key names; the encoder optionally under `ijepa.`,
    as in `IJepaForImageClassification`) -> `MappedWeights` filling BOTH the context and the target encoder (the same
    values, the target's cloned). Raises `ConversionError` naming a key no rule knows."""
    prefix = "ijepa."
    original = {(key[len(prefix) :] if key.startswith(prefix) else key): key for key in state}
    if len(original) != len(state):
        raise ConversionError("transformers checkpoint: a key appears both with and without the 'ijepa.' prefix")
    stripped = {name: state[key] for name, key in original.items()}
    out = MappedWeights()
    for target in ("context_encoder.", "target_encoder."):

        def v4_layer(match, tensor, target=target):
            return {f"{target}layers.{match.group(1)}.{_LAYER_V4[match.group(2)]}.{match.group(3)}": tensor}

        rules: list[Rule] = [
            (
                r"embeddings\.patch_embeddings\.projection\.(weight|bias)",
                _renamed(target + r"patch_embeddings.projection.\1"),
            ),
            (r"embeddings\.position_embeddings", _renamed(target + "position_embeddings", _flat_table)),
            (r"layernorm\.(weight|bias)", _renamed(target + r"layernorm.\1")),
            (_LAYER_V5, _renamed(target + r"layers.\1.\2.\3")),
            (_LAYER_V4_RE, v4_layer),
        ]
        part = MappedWeights()
        _apply_rules(
            stripped, rules, "transformers IJepaModel checkpoint", part, original.__getitem__, TRANSFORMERS_IGNORED
        )
        for key, tensor in part.tensors.items():
            out.put(key, tensor.clone() if target == "target_encoder." else tensor, part.sources[key])
        out.ignored.update(part.ignored)
    return out


def check_complete(
    mapped: MappedWeights, expected: Mapping[str, torch.Size], initialised: Iterable[str] = ()
) -> list[str]:
    """Check `mapped` against the model's state-dict shapes `expected`: every target key filled (besides the
    `initialised` ones, which the caller fills by initialising them on purpose), no key the model lacks, every shape
    equal. Returns the sorted keys left to initialisation; raises `ConversionError` naming the keys otherwise."""
    initialised = set(initialised)
    unexpected = sorted(set(mapped.tensors) - set(expected))
    missing = sorted(set(expected) - set(mapped.tensors) - initialised)
    shapes = sorted(
        f"{key} {tuple(tensor.shape)} vs the model's {tuple(expected[key])}"
        for key, tensor in mapped.tensors.items()
        if key in expected and tuple(tensor.shape) != tuple(expected[key])
    )
    problems = []
    if missing:
        problems.append(f"model keys no source key fills: {_listed(missing)}")
    if unexpected:
        named = [f"{key} (from {mapped.sources[key]})" for key in unexpected]
        problems.append(f"mapped keys the model does not have: {_listed(named)}")
    if shapes:
        problems.append(f"shapes that differ: {_listed(shapes, 6)}")
    if problems:
        raise ConversionError("the checkpoint does not fill the model exactly: " + "; ".join(problems))
    return sorted(set(expected) - set(mapped.tensors))
