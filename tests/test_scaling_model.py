"""Model-side scaling support of the transformer families (issue 13, point 2): `_no_split_modules` (no block split
across devices on the 0.9B reasoner), activation checkpointing of every block (same loss and gradients), attention
through transformers' attention interface ("eager" / "sdpa" equal to tolerance, the choice recorded in the config,
unsupported values refused, the flash-attention mask contract checked against a CPU reference of flash's semantics)
and unchanged saved weight names. Tiny presets only; the 0.9B preset is built on the meta device."""

import hashlib

import pytest
import torch
from accelerate import infer_auto_device_map, init_empty_weights
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from hf_jepa.modeling.i_jepa import IJepaConfig, IJepaModel
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
from hf_jepa.modeling.t_jepa import TJepaConfig, TJepaModel

PAD, BOS, EOS = 0, 2, 3
T_JEPA_OBJECTIVES = ("jepa", "mlm", "vicreg", "barlow_twins", "byol")

BUILDERS = {
    "reasoner": lambda **kw: JepaReasonerModel(JepaReasonerConfig.tiny(**kw)),
    "mono": lambda **kw: MonoTalkerModel(MonoTalkerConfig.tiny(**kw)),
    "dual": lambda **kw: DualTalkerModel(DualTalkerConfig.tiny(**kw)),
    "coupled": lambda **kw: CoupledTransformerLM(CoupledTransformerConfig.tiny(**kw)),
    "coconut": lambda **kw: CoconutLM(CoconutConfig.tiny(**kw)),
    "pair_mono": lambda **kw: JepaReasonerWithTalker(JepaReasonerWithTalkerConfig.tiny(**kw)),
    "pair_dual": lambda **kw: JepaReasonerWithTalker(JepaReasonerWithTalkerConfig.tiny(talker_type="dual", **kw)),
    **{
        f"t_jepa_{objective}": (lambda o: lambda **kw: TJepaModel(TJepaConfig.tiny(objective=o, **kw)))(objective)
        for objective in T_JEPA_OBJECTIVES
    },
    "i_jepa": lambda **kw: IJepaModel(IJepaConfig.tiny(**kw)),
}
# One model of each class (the T-JEPA objectives share one class; "jepa" is the one with the predictor).
ONE_PER_CLASS = ["reasoner", "mono", "dual", "coupled", "coconut", "pair_dual", "t_jepa_jepa", "i_jepa"]
# Every model whose own attention code can take flash attention (T-JEPA does not declare it).
FLASH_MODELS = ["reasoner", "mono", "dual", "coupled", "coconut", "pair_mono", "pair_dual", "i_jepa"]


def build(name: str, seed: int = 0, **config_kwargs):
    torch.manual_seed(seed)
    return BUILDERS[name](**config_kwargs)


def text_batch(vocab: int, rows: int = 3, prompt_length: int = 6, answer_length: int = 5) -> dict:
    """Prompts left-padded (row 0 by 2 tokens), answers = tokens + EOS + right padding (row 1 padded from 3)."""
    generator = torch.Generator().manual_seed(0)
    prompt_ids = torch.randint(5, vocab, (rows, prompt_length), generator=generator)
    prompt_mask = torch.ones_like(prompt_ids)
    prompt_ids[0, :2], prompt_mask[0, :2] = PAD, 0
    answer_ids = torch.randint(5, vocab, (rows, answer_length), generator=generator)
    answer_ids[:, -1] = EOS
    answer_mask = torch.ones_like(answer_ids)
    answer_ids[1, 2], answer_ids[1, 3:], answer_mask[1, 3:] = EOS, PAD, 0
    return dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, answer_ids=answer_ids, answer_mask=answer_mask)


def t_jepa_batch(vocab: int, rows: int = 4, length: int = 12) -> dict:
    """The last row padded from position 9; target spans [2, 4) and [6, 9); second-view spans [1, 3) and [5, 7)."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, vocab, (rows, length), generator=generator)
    attention_mask = torch.ones(rows, length, dtype=torch.long)
    attention_mask[-1, 9:] = 0
    input_ids[-1, 9:] = 0
    target_mask = torch.zeros(rows, length, dtype=torch.bool)
    target_mask[:, 2:4] = target_mask[:, 6:9] = True
    second = torch.zeros(rows, length, dtype=torch.bool)
    second[:, 1:3] = second[:, 5:7] = True
    return dict(input_ids=input_ids, attention_mask=attention_mask, target_mask=target_mask, second_target_mask=second)


def i_jepa_batch() -> tuple:
    pixel_values = torch.randn(3, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    return pixel_values, torch.tensor([[0, 1, 2, 3, 4, 5]] * 3), torch.tensor([[[14, 15], [11, 15]]] * 3)


def latent_chain(rows: int = 3, steps: int = 4, width: int = 32) -> torch.Tensor:
    return torch.randn(rows, steps, width, generator=torch.Generator().manual_seed(1))


def talker_kwargs(name: str, batch: dict, generation: bool) -> dict:
    kwargs = dict(latents=latent_chain())
    if generation:
        kwargs["input_ids"] = torch.full((3, 1), BOS)
    else:
        kwargs.update(answer_ids=batch["answer_ids"], answer_mask=batch["answer_mask"])
    if name == "dual":
        kwargs.update(prompt_ids=batch["prompt_ids"], prompt_mask=batch["prompt_mask"])
    return kwargs


def coupled_inputs(batch: dict) -> dict:
    """`[prompt, answer]` with labels on the answer tokens only (-100 on the prompt and the padding), as the data
    layer builds them."""
    ids = torch.cat([batch["prompt_ids"], batch["answer_ids"]], 1)
    mask = torch.cat([batch["prompt_mask"], batch["answer_mask"]], 1)
    labels = torch.cat([torch.full_like(batch["prompt_ids"], -100), batch["answer_ids"]], 1)
    return dict(input_ids=ids, attention_mask=mask, labels=labels.masked_fill(mask == 0, -100))


def losses(name: str, model) -> torch.Tensor:
    """The training loss of `model` on fixed inputs (the pair: its reasoner's loss plus its Talker's)."""
    if name == "reasoner":
        return model(**text_batch(model.config.vocab_size)).loss
    if name in ("mono", "dual"):
        return model(**talker_kwargs(name, text_batch(model.config.vocab_size), generation=False)).loss
    if name == "coupled":
        return model(**coupled_inputs(text_batch(model.config.vocab_size))).loss
    if name == "coconut":
        return model(**text_batch(model.config.vocab_size)).loss
    if name.startswith("pair"):
        talker_name = "dual" if model.is_dual else "mono"
        batch = text_batch(model.config.reasoner_config.vocab_size)
        return model.reasoner(**batch).loss + losses(talker_name, model.talker)
    if name.startswith("t_jepa"):
        return model(**t_jepa_batch(model.config.backbone_config.vocab_size)).loss
    return model(*i_jepa_batch()).loss


@torch.no_grad()
def outputs(name: str, model) -> dict:
    """Forward tensors and generated tokens (greedy) of `model` in eval mode on fixed inputs."""
    model.eval()
    if name == "reasoner":
        batch = text_batch(model.config.vocab_size)
        out = model(**batch)
        chain = model.generate_latents(batch["prompt_ids"], batch["prompt_mask"], num_steps=4)
        return dict(loss=out.loss, predictions=out.predictions, latents=out.encoder_latents, chain=chain)
    if name in ("mono", "dual"):
        batch = text_batch(model.config.vocab_size)
        out = model(**talker_kwargs(name, batch, generation=False))
        tokens = model.generate(**talker_kwargs(name, batch, generation=True), max_new_tokens=6, min_new_tokens=6)
        return dict(loss=out.loss, logits=out.logits, tokens=tokens)
    if name == "coupled":
        batch = text_batch(model.config.vocab_size)
        out = model(**coupled_inputs(batch))
        tokens = model.generate(
            input_ids=batch["prompt_ids"], attention_mask=batch["prompt_mask"], max_new_tokens=6, min_new_tokens=6
        )
        return dict(loss=out.loss, logits=out.logits, tokens=tokens)
    if name == "coconut":
        batch = text_batch(model.config.vocab_size)
        out = model(**batch)
        tokens = model.generate(batch["prompt_ids"], batch["prompt_mask"], max_new_tokens=6, min_new_tokens=6)
        return dict(loss=out.loss, logits=out.logits, thoughts=out.thoughts, tokens=tokens)
    if name.startswith("pair"):
        batch = text_batch(model.config.reasoner_config.vocab_size)
        tokens, chain = model.generate(
            batch["prompt_ids"], batch["prompt_mask"], num_reasoning_steps=3, max_new_tokens=5, min_new_tokens=5
        )
        return dict(tokens=tokens, chain=chain)
    if name.startswith("t_jepa"):
        out = model(**t_jepa_batch(model.config.backbone_config.vocab_size))
        return dict(loss=out.loss, hidden=out.last_hidden_state, predictions=out.predictions)
    out = model(*i_jepa_batch())
    return dict(loss=out.loss, predictions=out.predictions, hidden=out.last_hidden_state)


def assert_outputs_close(actual: dict, expected: dict, keys=None):
    for key in keys or expected:
        if expected[key] is None:
            assert actual[key] is None, key
        elif expected[key].is_floating_point():
            torch.testing.assert_close(actual[key], expected[key], rtol=1e-4, atol=1e-5, msg=key)
        else:
            assert torch.equal(actual[key], expected[key]), key  # same greedy tokens


def configs_of(model) -> list:
    """The model's config and every sub-config that drives attention (backbone, reasoner, Talker)."""
    config = model.config
    return [config] + [getattr(config, key) for key in config.sub_configs if getattr(config, key, None) is not None]


# ------------------------------------------------------------------------------------------ saved weight names

# Captured from the code before attention/checkpointing support (commit 7ad78c6): number of state-dict keys and the
# first 16 hex digits of the sha256 of the sorted keys joined by newlines. Folders saved by that version must load.
STATE_DICT_KEYS = {
    "reasoner": (41, "540802b71888a6ae"),
    "mono": (23, "1fbce4568c31b766"),
    "dual": (33, "0c6c313bc7f9eb88"),
    "coupled": (30, "7d034de0c59380af"),
    "coconut": (30, "7d034de0c59380af"),
    "pair_mono": (64, "6a42452260490d73"),
    "pair_dual": (74, "d1d8e7b85cbfdab3"),
    "t_jepa_jepa": (106, "3c25fc4d04f5c8c1"),
    "t_jepa_mlm": (43, "ec1c9397a3be8a9c"),
    "t_jepa_vicreg": (53, "fad5978d795e8da8"),
    "t_jepa_barlow_twins": (53, "fad5978d795e8da8"),
    "t_jepa_byol": (115, "43f38162236b1de3"),
    "i_jepa": (103, "e3f679ee46cf9127"),
}
# The keys inside each block class (captured likewise): readable when a rename breaks the hashes above.
BLOCK_KEYS = {
    "JepaBlock": [
        "attention.k_proj.weight",
        "attention.o_proj.weight",
        "attention.q_proj.weight",
        "attention.v_proj.weight",
        "input_norm.weight",
        "mlp.down_proj.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "post_attention_norm.weight",
    ],
    "TJepaPredictorBlock": [
        *(f"mlp.{i}.{p}" for i in (0, 2) for p in ("bias", "weight")),
        *(f"{m}.{p}" for m in ("norm1", "norm2", "proj", "qkv") for p in ("bias", "weight")),
    ],
    "IJepaPredictorBlock": [
        f"{m}.{p}" for m in ("fc1", "fc2", "norm1", "norm2", "proj", "qkv") for p in ("bias", "weight")
    ],
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_state_dict_keys_are_unchanged(name):
    model = build(name)
    keys = sorted(model.state_dict())
    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
    assert (len(keys), digest) == STATE_DICT_KEYS[name]
    for module in model.modules():
        if type(module).__name__ in BLOCK_KEYS:
            assert sorted(module.state_dict()) == sorted(BLOCK_KEYS[type(module).__name__])


# ----------------------------------------------------------------------------------------------- device maps


@pytest.mark.parametrize("name", list(BUILDERS))
def test_no_split_modules_name_every_block(name):
    model = build(name)
    blocks = {type(m).__name__ for m in model.modules() if isinstance(m, GradientCheckpointingLayer)}
    assert blocks and blocks <= set(model._no_split_modules)


def test_device_map_of_the_full_reasoner_never_splits_a_block():
    """The 0.9B preset on the meta device, with a max_memory (a fifth of the model per device) that forces a split:
    without `_no_split_modules` accelerate cuts blocks between their attention and MLP; with them, every block sits on
    one device."""
    with init_empty_weights():
        model = JepaReasonerModel(JepaReasonerConfig.full())
    assert model.config.num_hidden_layers + 2 * model.config.num_encoder_layers >= 20  # the paper's size
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    max_memory = {0: total // 5, 1: total // 5, 2: total // 5, 3: total // 5, "cpu": 2 * total}
    block_names = [name for name, module in model.named_modules() if type(module).__name__ == "JepaBlock"]

    def devices_per_block(device_map):
        placed = {}
        for parameter in dict(model.named_parameters()):
            owner = max((key for key in device_map if key == "" or parameter.startswith(key + ".")), key=len)
            placed[parameter] = device_map[owner]
        return {block: {d for p, d in placed.items() if p.startswith(block + ".")} for block in block_names}

    naive = infer_auto_device_map(model, max_memory=max_memory, no_split_module_classes=[])
    assert any(len(devices) > 1 for devices in devices_per_block(naive).values())  # the split this test guards
    device_map = infer_auto_device_map(
        model, max_memory=max_memory, no_split_module_classes=sorted(model._no_split_modules)
    )
    assert len(set(device_map.values())) >= 3  # the model really is spread over several devices
    assert all(len(devices) == 1 for devices in devices_per_block(device_map).values())


# ------------------------------------------------------------------------------------- activation checkpointing


def spy_on_checkpointing(model) -> set:
    """Record which checkpointing layers actually run through the checkpoint function."""
    called = set()
    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer):

            def wrapped(*args, _original=module._gradient_checkpointing_func, _module=module, **kwargs):
                called.add(id(_module))
                return _original(*args, **kwargs)

            module._gradient_checkpointing_func = wrapped
    return called


def online_blocks(model) -> set:
    """Checkpointing layers outside the EMA targets (those run without gradients, hence never checkpointed)."""
    frozen = {id(m) for _, target in model.ema_pairs() for m in target.modules()}
    return {id(m) for m in model.modules() if isinstance(m, GradientCheckpointingLayer) and id(m) not in frozen}


def dropout_kwargs(name: str) -> dict:
    """Dropout on, so the test also covers the RNG replay of the recomputed blocks."""
    if name.startswith("pair"):
        return dict(reasoner_config=dict(hidden_dropout=0.1), talker_config=dict(hidden_dropout=0.1))
    if name.startswith(("t_jepa", "i_jepa")):
        return dict(hidden_dropout_prob=0.1)
    return dict(hidden_dropout=0.1)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_gradient_checkpointing_gives_the_same_loss_and_gradients(name):
    model = build(name, **dropout_kwargs(name)).train()
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}

    def loss_and_grads():
        model.zero_grad(set_to_none=True)
        torch.manual_seed(123)
        loss = losses(name, model)
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in trainable.items() if p.grad is not None}

    reference_loss, reference_grads = loss_and_grads()
    with pytest.warns(FutureWarning):  # transformers 5.24's name is activation_checkpointing_enable
        model.gradient_checkpointing_enable()
    assert model.is_activation_checkpointing
    called = spy_on_checkpointing(model)
    loss, grads = loss_and_grads()
    assert called and called == online_blocks(model)  # every block on the gradient path was checkpointed
    torch.testing.assert_close(loss, reference_loss, rtol=1e-6, atol=1e-6)
    assert grads.keys() == reference_grads.keys() and len(grads) > 0
    for key, grad in grads.items():
        torch.testing.assert_close(grad, reference_grads[key], rtol=1e-5, atol=1e-6, msg=key)
    model.activation_checkpointing_disable()
    assert not model.is_activation_checkpointing


def test_checkpointed_reasoner_refuses_to_fill_a_cache_with_gradients_on():
    model = build("reasoner").train()
    model.activation_checkpointing_enable()
    batch = text_batch(model.config.vocab_size)
    with pytest.raises(ValueError, match="cannot fill a KV cache"):
        model.generate_latents(batch["prompt_ids"], batch["prompt_mask"], num_steps=3)
    recomputed = model.generate_latents(batch["prompt_ids"], batch["prompt_mask"], num_steps=3, use_cache=False)
    with torch.no_grad():
        cached = model.generate_latents(batch["prompt_ids"], batch["prompt_mask"], num_steps=3)
    torch.testing.assert_close(recomputed.detach(), cached, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------ attention backends


@pytest.mark.parametrize("name", list(BUILDERS))
def test_eager_and_sdpa_agree_and_the_config_records_the_choice(name, monkeypatch):
    sdpa_calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counting_sdpa(*args, **kwargs):
        sdpa_calls.append(1)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting_sdpa)
    results = {}
    for implementation in ("eager", "sdpa"):
        sdpa_calls.clear()
        model = build(name, attn_implementation=implementation)
        assert all(config._attn_implementation == implementation for config in configs_of(model))
        results[implementation] = outputs(name, model)
        # honoured, not silently ignored: eager never reaches torch's SDPA, sdpa always does
        assert (len(sdpa_calls) > 0) == (implementation == "sdpa")
    assert_outputs_close(results["eager"], results["sdpa"])


@pytest.mark.parametrize("name", list(BUILDERS))
def test_default_is_sdpa(name):
    model = build(name)
    assert all(config._attn_implementation == "sdpa" for config in configs_of(model))


@pytest.mark.parametrize("name", ONE_PER_CLASS)
def test_from_pretrained_honours_attn_implementation(tmp_path, name):
    model = build(name)
    model.save_pretrained(tmp_path)
    expected = outputs(name, model)
    for implementation in ("eager", "sdpa"):
        loaded = type(model).from_pretrained(tmp_path, attn_implementation=implementation)
        assert all(config._attn_implementation == implementation for config in configs_of(loaded))
        assert_outputs_close(outputs(name, loaded), expected)
    # Switching at run time goes through the same dispatch.
    loaded.set_attn_implementation("eager")
    assert all(config._attn_implementation == "eager" for config in configs_of(loaded))
    assert_outputs_close(outputs(name, loaded), expected)


def test_pairing_components_keeps_their_attention_choice():
    reasoner = build("reasoner", attn_implementation="eager")
    talker = build("mono", seed=1)
    pair = JepaReasonerWithTalker.from_components(reasoner, talker)
    assert reasoner.config._attn_implementation == "eager" and talker.config._attn_implementation == "sdpa"
    assert pair.reasoner is reasoner and pair.talker is talker


@pytest.mark.parametrize("name", ONE_PER_CLASS)
def test_unsupported_attn_implementation_raises(name):
    with pytest.raises(ValueError, match='attn_implementation="not-an-attention"` is not supported'):
        build(name, attn_implementation="not-an-attention")
    with pytest.raises(ValueError, match="flex_attention"):  # no family declares flex attention
        build(name, attn_implementation="flex_attention")


def test_flash_attention_support_is_declared_where_the_code_path_takes_it():
    for name in FLASH_MODELS:
        assert type(build(name))._supports_flash_attn, name
    # T-JEPA's predictor needs a per-span mask, which flash attention (a padding mask only) cannot take.
    assert not TJepaModel._supports_flash_attn
    with pytest.raises(ValueError, match="does not support Flash Attention"):
        build("t_jepa_jepa", attn_implementation="flash_attention_2")


def flash_reference(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """What transformers' flash-attention path computes (varlen unpadding, bottom-right causal alignment), written out
    on CPU. `attention_mask` is a `(B, K)` padding mask or None; padded queries are dropped (zero output); with `nq`
    valid new queries and `nk` valid keys, the i-th valid query sees the valid keys `0 .. nk - nq + i` (causal) or all
    of them. One query (decoding) is always kept, as transformers' `_upad_input` does."""
    assert attention_mask is None or attention_mask.ndim == 2, "flash attention takes a (batch, keys) padding mask"
    batch, heads, query_length, head_dim = query.shape
    key_length = key.shape[2]
    is_causal = module.is_causal if is_causal is None else is_causal
    scaling = head_dim**-0.5 if scaling is None else scaling
    valid = torch.ones(batch, key_length, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    output = torch.zeros(batch, query_length, heads, value.shape[-1], dtype=query.dtype)
    for row in range(batch):
        keys = valid[row].nonzero().flatten()
        queries = torch.zeros(1, dtype=torch.long) if query_length == 1 else valid[row, -query_length:].nonzero()[:, 0]
        scores = query[row][:, queries] @ key[row][:, keys].transpose(-1, -2) * scaling
        if is_causal:
            allowed = torch.arange(len(keys))[None] <= (len(keys) - len(queries) + torch.arange(len(queries)))[:, None]
            scores = scores.masked_fill(~allowed, float("-inf"))
        output[row, queries] = (scores.softmax(-1) @ value[row][:, keys]).transpose(0, 1)
    return output, None


@pytest.mark.parametrize("name", FLASH_MODELS)
def test_flash_attention_masks_match_a_reference_of_flash_semantics(name):
    """flash attention cannot run here (no GPU, no flash-attn): a CPU reference of its semantics, registered under a
    flash name, checks what the models hand it (a padding mask, causality, cached decoding, padding mid-sequence in
    the Dual-Talker's prefix). Outputs at padded positions legitimately differ (flash leaves them zero), so the
    comparison keeps the losses, the predictions without padding, latent chains and greedy tokens."""
    model = build(name)
    expected = outputs(name, model)
    ALL_ATTENTION_FUNCTIONS["flash_reference_cpu"] = flash_reference
    try:
        model.config._attn_implementation = "flash_reference_cpu"  # sets the sub-configs too
        actual = outputs(name, model)
    finally:
        del ALL_ATTENTION_FUNCTIONS["flash_reference_cpu"]
    keys = [k for k in ("loss", "chain", "thoughts", "tokens") if k in expected]
    assert_outputs_close(actual, expected, keys + (["predictions", "hidden"] if name == "i_jepa" else []))


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_unpadded_cached_passes_match_recomputation(implementation):
    """Without padding SDPA gets no mask where `is_causal` covers it; a cached pass of several new positions (COCONUT
    feeds its last thought and the answer after the cached prompt and thoughts) still needs the mask."""
    model = build("coconut", attn_implementation=implementation).eval()
    batch = text_batch(model.config.vocab_size)
    batch["prompt_mask"] = torch.ones_like(batch["prompt_mask"])
    batch["answer_mask"] = torch.ones_like(batch["answer_mask"])
    with torch.no_grad():
        cached = model(**batch, use_cache=True)
        recomputed = model(**batch)
    assert cached.cache.get_seq_length() > cached.logits.shape[1]
    torch.testing.assert_close(cached.logits, recomputed.logits, rtol=1e-5, atol=1e-5)
