"""JEPA-Reasoner family: hybrid norm and scaled cosine loss by hand, the EMA target, the training loss positions,
latent generation (cache vs recomputation, noise, left padding), error containment, Talker generation through
GenerationMixin (greedy / beam / sampling, cache vs no cache, Mono and Dual), the coupled baselines, the pair's config
and construction, and the family tester on all seven models (config validation, bit-exact save/load, strict loading,
the trust_remote_code export with the latent-reasoning pipeline, bad inputs, the full-size parameter counts on the
meta device)."""

import json

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import AutoConfig

from hf_jepa.data.reasoning import TreeSearchTask
from hf_jepa.modeling.jepa_reasoner import (
    CoconutConfig,
    CoconutLM,
    CoupledTransformerConfig,
    CoupledTransformerLM,
    DualTalkerConfig,
    DualTalkerModel,
    HybridNorm,
    JepaReasonerConfig,
    JepaReasonerModel,
    JepaReasonerWithTalker,
    JepaReasonerWithTalkerConfig,
    MonoTalkerConfig,
    MonoTalkerModel,
    decoder_inputs_from_answers,
    hybrid_normalize,
    scaled_cosine_loss,
)
from hf_jepa.testing.family_tester import BadInput, FamilyTester, Variant
from hf_jepa.trainers.ema import ema_update_
from hf_jepa.trainers.recipe import Recipe

PAD, BOS, EOS, SEP = 0, 2, 3, 4
VOCAB = JepaReasonerConfig.tiny().vocab_size  # 64
WIDTH = JepaReasonerConfig.tiny().hidden_size  # 32


def reasoner(seed: int = 0, **overrides) -> JepaReasonerModel:
    torch.manual_seed(seed)
    return JepaReasonerModel(JepaReasonerConfig.tiny(**overrides)).eval()


def mono(seed: int = 1, **overrides) -> MonoTalkerModel:
    torch.manual_seed(seed)
    return MonoTalkerModel(MonoTalkerConfig.tiny(**overrides)).eval()


def dual(seed: int = 2, **overrides) -> DualTalkerModel:
    torch.manual_seed(seed)
    return DualTalkerModel(DualTalkerConfig.tiny(**overrides)).eval()


def batch(seed: int = 0, rows: int = 3, prompt_length: int = 6, answer_length: int = 5):
    """Prompts left-padded (row 0 by 2 tokens), answers = tokens + EOS + right padding (row 1 padded from 3)."""
    generator = torch.Generator().manual_seed(seed)
    prompt_ids = torch.randint(5, VOCAB, (rows, prompt_length), generator=generator)
    prompt_mask = torch.ones_like(prompt_ids)
    prompt_ids[0, :2], prompt_mask[0, :2] = PAD, 0
    answer_ids = torch.randint(5, VOCAB, (rows, answer_length), generator=generator)
    answer_ids[:, -1] = EOS
    answer_mask = torch.ones_like(answer_ids)
    answer_ids[1, 2], answer_ids[1, 3:], answer_mask[1, 3:] = EOS, PAD, 0
    return prompt_ids, prompt_mask, answer_ids, answer_mask


def bos_column(rows: int) -> torch.Tensor:
    return torch.full((rows, 1), BOS, dtype=torch.long)


def assert_state_dicts_equal(a: dict, b: dict):
    assert a.keys() == b.keys()
    for name, tensor in a.items():
        assert torch.equal(b[name], tensor), name


# ------------------------------------------------------------------------------------------------------ configs


def test_reasoner_config_defaults():
    default = JepaReasonerConfig()
    assert (default.pad_token_id, default.bos_token_id, default.eos_token_id, default.sep_token_id) == (0, 2, 3, 4)
    assert default.latent_norm == "rms_l2" and default.cosine_loss_scale == 4.0


# ------------------------------------------------------------------------------------------------ norm and loss


def test_hybrid_norm_by_hand():
    x = torch.tensor([[3.0, 4.0], [1.0, -1.0], [0.5, 2.0]])
    weight = torch.tensor([2.0, 1.0])
    eps = 1e-6
    rms = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
    expected = rms / rms.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(hybrid_normalize(x, weight, eps), expected)
    # RMS scaling is a positive scalar per row, so the result is the direction of x * weight.
    torch.testing.assert_close(expected[0], torch.tensor([6.0, 4.0]) / 52**0.5)

    norm = HybridNorm(2, rms_eps=eps)
    with torch.no_grad():
        norm.rms.weight.copy_(weight)
    torch.testing.assert_close(norm(x), expected)
    wide = torch.randn(4, 7, 32) * 50
    out = HybridNorm(32)(wide)
    torch.testing.assert_close(out.norm(dim=-1), torch.ones(4, 7))
    torch.testing.assert_close(HybridNorm(32, use_rms=False)(wide), F.normalize(wide, dim=-1))
    assert HybridNorm(32, use_rms=False).rms is None


def test_scaled_cosine_loss_by_hand():
    k = 3.0
    a = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
    assert scaled_cosine_loss(a, a.clone(), k).item() == pytest.approx(0.0, abs=1e-6)  # identical
    assert scaled_cosine_loss(a, 5 * a, k).item() == pytest.approx(0.0, abs=1e-6)  # scale does not matter
    assert scaled_cosine_loss(a, -a, k).item() == pytest.approx(2 * k)  # opposite
    orthogonal = torch.stack([-a[:, 1], a[:, 0]], -1)
    assert scaled_cosine_loss(a, orthogonal, k).item() == pytest.approx(k, abs=1e-6)  # orthogonal
    # Masking: rows 0 and 2 count (0 and 2k), row 1 (k) does not.
    target = torch.stack([a[0], orthogonal[1], -a[2]])
    assert scaled_cosine_loss(target[None], a[None], k, torch.tensor([[1, 0, 1]])).item() == pytest.approx(k)
    assert scaled_cosine_loss(target, a, k).item() == pytest.approx((0 + k + 2 * k) / 3)
    assert scaled_cosine_loss(target, a, k, torch.zeros(3)).item() == 0.0
    pred, goal = a.clone().requires_grad_(), a.clone().requires_grad_()
    scaled_cosine_loss(pred, -goal, k).backward()
    assert goal.grad is None and pred.grad is not None  # the target side is detached


# ------------------------------------------------------------------------------------------------------ EMA target


def test_ema_update_and_frozen_target():
    model = reasoner().train()
    assert not model.target_encoder.training and model.encoder.training
    assert not any(p.requires_grad for p in model.target_encoder.parameters())
    assert_state_dicts_equal(model.encoder.state_dict(), model.target_encoder.state_dict())
    assert model.ema_pairs() == [(model.encoder, model.target_encoder)]
    with torch.no_grad():
        for parameter in model.encoder.parameters():
            parameter.add_(1.0)
    probe_online = model.encoder.embed_tokens.weight
    probe_target = model.target_encoder.embed_tokens.weight
    old = probe_target.clone()
    # The trainer's path: an EMA step over the pairs the default `Recipe.ema_pairs` takes from the model.
    for online, target in Recipe().ema_pairs(model):
        ema_update_(target, online, 0.9)
    torch.testing.assert_close(probe_target, 0.9 * old + 0.1 * probe_online)
    model.copy_online_to_targets()
    assert_state_dicts_equal(model.encoder.state_dict(), model.target_encoder.state_dict())
    # Talkers have no EMA target; the pair's are the reasoner's.
    assert MonoTalkerModel(MonoTalkerConfig.tiny()).ema_pairs() == []
    pair = JepaReasonerWithTalker(JepaReasonerWithTalkerConfig.tiny())
    assert pair.ema_pairs() == [(pair.reasoner.encoder, pair.reasoner.target_encoder)]


# ------------------------------------------------------------------------------------------------ reasoner training


def test_reasoner_loss_positions_by_hand():
    model = reasoner()
    prompt_ids, prompt_mask, answer_ids, answer_mask = batch()
    out = model(prompt_ids, prompt_mask, answer_ids, answer_mask)
    P, A = prompt_ids.shape[1], answer_ids.shape[1]
    ids = torch.cat([prompt_ids, torch.full((3, 1), SEP), answer_ids], 1)
    mask = torch.cat([prompt_mask, torch.ones(3, 1, dtype=torch.long), answer_mask], 1)
    with torch.no_grad():
        latents = model.encode(ids, mask)
        predicted = model.reason(latents, mask)
        targets = model.encode(ids, mask, use_target_encoder=True)
    assert out.predictions.shape == out.targets.shape == (3, A, WIDTH)
    torch.testing.assert_close(out.predictions, predicted[:, P : P + A])  # read at SEP .. last answer position - 1
    torch.testing.assert_close(out.targets, targets[:, P + 1 :])  # the answer tokens' target latents
    torch.testing.assert_close(out.encoder_latents.norm(dim=-1), torch.ones(3, P + 1 + A))
    expected = scaled_cosine_loss(predicted[:, P : P + A], targets[:, P + 1 :], 4.0, answer_mask)
    torch.testing.assert_close(out.loss, expected)
    # Padding after EOS does not count; the EOS target does.
    changed = answer_ids.clone()
    changed[1, 3:] = 7
    assert torch.equal(model(prompt_ids, prompt_mask, changed, answer_mask).loss, out.loss)
    eos_changed = answer_ids.clone()
    eos_changed[1, 2] = 9
    assert not torch.equal(model(prompt_ids, prompt_mask, eos_changed, answer_mask).loss, out.loss)

    model.train()
    loss = model(prompt_ids, prompt_mask, answer_ids, answer_mask).loss
    loss.backward()
    assert (
        model.encoder.embed_tokens.weight.grad is not None
        and model.layers[-1].mlp.down_proj.weight.grad.abs().sum() > 0
    )
    assert all(p.grad is None for p in model.target_encoder.parameters())
    no_answer = model(prompt_ids, prompt_mask)
    assert no_answer.loss is None and no_answer.encoder_latents.shape == (3, P + 1, WIDTH)
    assert isinstance(model(prompt_ids, prompt_mask, answer_ids, answer_mask, return_dict=False), tuple)


# ------------------------------------------------------------------------------------------------ latent generation


def test_generate_latents_cache_matches_recomputation_and_noise():
    model = reasoner()
    prompt_ids, prompt_mask, _, _ = batch()
    with torch.no_grad():
        cached = model.generate_latents(prompt_ids, prompt_mask, num_steps=6)
        recomputed = model.generate_latents(prompt_ids, prompt_mask, num_steps=6, use_cache=False)
        default = model.generate_latents(prompt_ids, prompt_mask)
    assert cached.shape == (3, 6, WIDTH) and default.shape == (3, model.config.num_reasoning_steps, WIDTH)
    torch.testing.assert_close(cached, recomputed, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cached.norm(dim=-1), torch.ones(3, 6))
    torch.testing.assert_close(default, cached[:, :4], rtol=1e-5, atol=1e-6)
    # The first latent is the reasoner's prediction at SEP, the same as in teacher forcing.
    with torch.no_grad():
        first = model(prompt_ids, prompt_mask).reasoner_latents[:, -1]
    torch.testing.assert_close(cached[:, 0], first, rtol=1e-5, atol=1e-6)
    # The left-padded row equals the same prompt without padding.
    with torch.no_grad():
        alone = model.generate_latents(prompt_ids[:1, 2:], num_steps=6)
    torch.testing.assert_close(cached[:1], alone, rtol=1e-5, atol=1e-6)

    def noisy(use_cache, seed=0):
        with torch.no_grad():
            return model.generate_latents(
                prompt_ids,
                prompt_mask,
                num_steps=6,
                latent_noise_std=0.3,
                generator=torch.Generator().manual_seed(seed),
                use_cache=use_cache,
            )

    perturbed = noisy(True)
    assert not torch.allclose(perturbed, cached, atol=1e-3)
    torch.testing.assert_close(perturbed.norm(dim=-1), torch.ones(3, 6))
    assert torch.equal(noisy(True), perturbed)  # reproducible with a generator
    torch.testing.assert_close(noisy(False), perturbed, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(noisy(True, seed=1), perturbed, atol=1e-3)


def test_error_containment():
    model, talker = reasoner(), mono()
    prompt_ids, prompt_mask, _, _ = batch()
    chain = model.generate_latents(prompt_ids, prompt_mask, num_steps=5)  # gradients on
    reference = chain.detach().clone()
    samples = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        samples.append(
            talker.generate(input_ids=bos_column(3), latents=chain.detach(), do_sample=True, top_k=0, max_new_tokens=8)
        )
        with torch.no_grad():
            again = model.generate_latents(prompt_ids, prompt_mask, num_steps=5)
        assert torch.equal(again, reference)  # the chain never sees the Talker's sampled tokens
    assert not torch.equal(samples[0], samples[1])
    # Perturbing the Talker's token embeddings changes its tokens, never the chain.
    with torch.no_grad():
        talker.embed_tokens.weight.add_(torch.randn_like(talker.embed_tokens.weight))
        assert torch.equal(model.generate_latents(prompt_ids, prompt_mask, num_steps=5), reference)
    # d chain / d talker token embeddings: not connected (None), while the reasoner's encoder does reach it.
    grads = torch.autograd.grad(
        chain.sum(), [talker.embed_tokens.weight, model.encoder.embed_tokens.weight], allow_unused=True
    )
    assert grads[0] is None and grads[1] is not None and grads[1].abs().sum() > 0
    # A different prompt does change the chain.
    other = prompt_ids.clone()
    other[:, -1] = (other[:, -1] - 5 + 17) % (VOCAB - 5) + 5
    with torch.no_grad():
        assert not torch.allclose(model.generate_latents(other, prompt_mask, num_steps=5), reference, atol=1e-4)
    # And the pair wrapper: two sampling seeds, identical chains.
    pair = JepaReasonerWithTalker.from_components(model, mono())
    torch.manual_seed(0)
    tokens_a, chain_a = pair.generate(prompt_ids, prompt_mask, num_reasoning_steps=5, do_sample=True, max_new_tokens=6)
    torch.manual_seed(1)
    tokens_b, chain_b = pair.generate(prompt_ids, prompt_mask, num_reasoning_steps=5, do_sample=True, max_new_tokens=6)
    assert torch.equal(chain_a, reference) and torch.equal(chain_b, reference)


# ------------------------------------------------------------------------------------------------------ talkers


def talker_inputs(talker, chain, prompt_ids, prompt_mask):
    kwargs = dict(input_ids=bos_column(chain.shape[0]), latents=chain)
    if isinstance(talker, DualTalkerModel):
        kwargs.update(prompt_ids=prompt_ids, prompt_mask=prompt_mask)
    return kwargs


@pytest.mark.parametrize("kind", ["mono", "dual"])
def test_talker_generate_cache_matches_no_cache(kind):
    talker = mono() if kind == "mono" else dual()
    prompt_ids, prompt_mask, _, _ = batch()
    with torch.no_grad():
        chain = reasoner().generate_latents(prompt_ids, prompt_mask, num_steps=5)
    inputs = talker_inputs(talker, chain, prompt_ids, prompt_mask)
    for options in (dict(), dict(num_beams=3), dict(num_beams=2, num_return_sequences=2)):
        cached = talker.generate(**inputs, max_new_tokens=7, min_new_tokens=7, **options)
        uncached = talker.generate(**inputs, max_new_tokens=7, min_new_tokens=7, use_cache=False, **options)
        rows = 3 * options.get("num_return_sequences", 1)
        assert cached.shape == (rows, 8) and torch.equal(cached, uncached), options
        assert (cached[:, 0] == BOS).all()
    torch.manual_seed(5)
    sampled = talker.generate(**inputs, do_sample=True, max_new_tokens=7)
    torch.manual_seed(5)
    assert torch.equal(talker.generate(**inputs, do_sample=True, max_new_tokens=7), sampled)
    torch.manual_seed(5)
    assert torch.equal(talker.generate(**inputs, do_sample=True, max_new_tokens=7, use_cache=False), sampled)

    # The greedy tokens are the argmax of a full forward pass (teacher forcing = generation).
    greedy = talker.generate(**inputs, max_new_tokens=5, min_new_tokens=5)
    forward_inputs = dict(inputs, input_ids=greedy[:, :-1])
    with torch.no_grad():
        logits = talker(**forward_inputs).logits
    assert torch.equal(logits.argmax(-1), greedy[:, 1:])
    # The latents (and for the Dual-Talker the prompt, not its padding) reach the logits.
    with torch.no_grad():
        moved = talker(**dict(forward_inputs, latents=chain.flip(1))).logits
        assert not torch.allclose(moved, logits, atol=1e-5)
        if kind == "dual":
            other_prompt = prompt_ids.clone()
            other_prompt[:, -1] = (other_prompt[:, -1] - 5 + 11) % (VOCAB - 5) + 5
            assert not torch.allclose(talker(**dict(forward_inputs, prompt_ids=other_prompt)).logits, logits, atol=1e-5)
            padding_changed = prompt_ids.clone()
            padding_changed[0, :2] = 9
            torch.testing.assert_close(talker(**dict(forward_inputs, prompt_ids=padding_changed)).logits, logits)


@pytest.mark.parametrize("kind", ["mono", "dual"])
def test_talker_teacher_forcing_loss(kind):
    talker = mono() if kind == "mono" else dual()
    prompt_ids, prompt_mask, answer_ids, answer_mask = batch()
    chain = torch.randn(3, 4, WIDTH)
    built = decoder_inputs_from_answers(answer_ids, answer_mask, BOS)
    assert torch.equal(built["input_ids"][:, 0], torch.full((3,), BOS))
    assert built["labels"][:, 0].eq(-100).all() and built["labels"][1, 4:].eq(-100).all()
    extra = dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask) if kind == "dual" else {}
    out = talker(latents=chain, answer_ids=answer_ids, answer_mask=answer_mask, **extra)
    assert out.logits.shape == (3, 6, VOCAB) and out.cache is None
    labels = built["labels"][:, 1:]
    expected = F.cross_entropy(out.logits[:, :-1].reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(out.loss, expected)
    out.loss.backward()
    assert talker.latent_proj.weight.grad.abs().sum() > 0


# ------------------------------------------------------------------------------------------------------ baselines


def test_coupled_lm_forward_generate_and_noise():
    torch.manual_seed(3)
    model = CoupledTransformerLM(CoupledTransformerConfig.tiny()).eval()
    prompt_ids, prompt_mask, answer_ids, answer_mask = batch()
    input_ids = torch.cat([prompt_ids, torch.full((3, 1), SEP), answer_ids], 1)
    attention_mask = torch.cat([prompt_mask, torch.ones(3, 1, dtype=torch.long), answer_mask], 1)
    labels = torch.where(attention_mask.bool(), input_ids, -100)
    labels[:, : prompt_ids.shape[1] + 1] = -100
    out = model(input_ids, attention_mask, labels=labels)
    assert out.logits.shape == (3, 12, VOCAB) and torch.isfinite(out.loss)

    context = input_ids[:, : prompt_ids.shape[1] + 1]
    context_mask = attention_mask[:, : prompt_ids.shape[1] + 1]
    for options in (dict(), dict(num_beams=3)):
        cached = model.generate(
            input_ids=context, attention_mask=context_mask, max_new_tokens=6, min_new_tokens=6, **options
        )
        uncached = model.generate(
            input_ids=context,
            attention_mask=context_mask,
            max_new_tokens=6,
            min_new_tokens=6,
            use_cache=False,
            **options,
        )
        assert cached.shape == (3, 13) and torch.equal(cached, uncached)
        assert torch.equal(cached[:, :7], context)

    def noisy(use_cache, seed=0):
        return model.generate(
            input_ids=context,
            attention_mask=context_mask,
            max_new_tokens=6,
            min_new_tokens=6,
            latent_noise_std=3.0,
            noise_generator=torch.Generator().manual_seed(seed),
            use_cache=use_cache,
        )

    assert not torch.equal(noisy(True), cached)
    assert torch.equal(noisy(True), noisy(False))  # one noise draw per step, with or without a cache
    with torch.no_grad():
        clean = model(input_ids, attention_mask).logits
        perturbed = model(input_ids, attention_mask, latent_noise_std=0.5).logits
    assert not torch.allclose(clean, perturbed)


def test_coconut_forward_generate_and_noise():
    torch.manual_seed(4)
    model = CoconutLM(CoconutConfig.tiny()).eval()
    prompt_ids, prompt_mask, answer_ids, answer_mask = batch()
    out = model(prompt_ids=prompt_ids, prompt_mask=prompt_mask, answer_ids=answer_ids, answer_mask=answer_mask)
    assert out.logits.shape == (3, 6, VOCAB) and out.thoughts.shape == (3, 3, WIDTH) and torch.isfinite(out.loss)
    # The thoughts are sequential last-layer states: thought 1 is the final-norm state at SEP.
    with torch.no_grad():
        sep_ids = torch.cat([prompt_ids, torch.full((3, 1), SEP)], 1)
        sep_mask = torch.cat([prompt_mask, torch.ones(3, 1, dtype=torch.long)], 1)
        at_sep = model._decode(model.embed_tokens(sep_ids), sep_mask, None)[:, -1]
    torch.testing.assert_close(out.thoughts[:, 0], at_sep)
    # With a cache the teacher-forced logits are the same.
    with torch.no_grad():
        cached_out = model(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            answer_ids=answer_ids,
            answer_mask=answer_mask,
            use_cache=True,
        )
    torch.testing.assert_close(cached_out.logits, out.logits, rtol=1e-5, atol=1e-5)
    assert cached_out.cache.get_seq_length() == prompt_ids.shape[1] + 1 + 3 + 6

    for options in (dict(), dict(num_beams=2)):
        cached = model.generate(prompt_ids, prompt_mask, max_new_tokens=6, min_new_tokens=6, **options)
        uncached = model.generate(
            prompt_ids, prompt_mask, max_new_tokens=6, min_new_tokens=6, use_cache=False, **options
        )
        assert cached.shape == (3, 7) and torch.equal(cached, uncached) and (cached[:, 0] == BOS).all()
    greedy = model.generate(prompt_ids, prompt_mask, max_new_tokens=6, min_new_tokens=6)

    def noisy(use_cache, seed=0):
        return model.generate(
            prompt_ids,
            prompt_mask,
            latent_noise_std=5.0,
            max_new_tokens=6,
            min_new_tokens=6,
            noise_generator=torch.Generator().manual_seed(seed),
            use_cache=use_cache,
        )

    assert not torch.equal(noisy(True), greedy)
    assert torch.equal(noisy(True), noisy(False))
    with torch.no_grad():
        perturbed = model(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            answer_ids=answer_ids,
            answer_mask=answer_mask,
            latent_noise_std=1.0,
        )
    assert not torch.allclose(perturbed.thoughts, out.thoughts)


def test_every_model_takes_a_data_layer_batch():
    """`model(**batch)` with the data layer's fields: each model uses the ones meant for it."""
    prompt_ids, prompt_mask, answer_ids, answer_mask = batch()
    input_ids = torch.cat([prompt_ids, torch.full((3, 1), SEP), answer_ids], 1)
    attention_mask = torch.cat([prompt_mask, torch.ones(3, 1, dtype=torch.long), answer_mask], 1)
    labels = torch.where(attention_mask.bool(), input_ids, -100)
    labels[:, : prompt_ids.shape[1] + 1] = -100
    data = dict(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        answer_ids=answer_ids,
        answer_mask=answer_mask,
        input_ids=input_ids,
        attention_mask=attention_mask,
        labels=labels,
    )
    answers = dict(answer_ids=answer_ids, answer_mask=answer_mask)
    model = reasoner()
    with torch.no_grad():
        assert torch.equal(model(**data).loss, model(prompt_ids, prompt_mask, answer_ids, answer_mask).loss)
        chain = torch.randn(3, 4, WIDTH)
        talker = mono()
        assert torch.equal(talker(**data, latents=chain).loss, talker(latents=chain, **answers).loss)
        talker = dual()
        assert torch.equal(
            talker(**data, latents=chain).loss,
            talker(latents=chain, prompt_ids=prompt_ids, prompt_mask=prompt_mask, **answers).loss,
        )
        torch.manual_seed(4)
        coconut = CoconutLM(CoconutConfig.tiny()).eval()
        assert torch.equal(
            coconut(**data).loss, coconut(prompt_ids=prompt_ids, prompt_mask=prompt_mask, **answers).loss
        )
        torch.manual_seed(3)
        coupled = CoupledTransformerLM(CoupledTransformerConfig.tiny()).eval()
        assert torch.equal(coupled(**data).loss, coupled(input_ids, attention_mask, labels=labels).loss)


# ------------------------------------------------------------------------------------------------------ the pair


def perturbed_reasoner() -> JepaReasonerModel:
    """Online and target encoders differ (as after training)."""
    model = reasoner()
    with torch.no_grad():
        for parameter in model.target_encoder.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
        model.norm.rms.weight.add_(0.1)
    return model


def test_pair_config_round_trip_and_validation(tmp_path):
    for kind, talker_cls in (("mono", MonoTalkerConfig), ("dual", DualTalkerConfig)):
        config = JepaReasonerWithTalkerConfig.tiny(
            talker_type=kind, vocab_size=40, reasoner_config=dict(num_reasoning_steps=6)
        )
        assert type(config.reasoner_config) is JepaReasonerConfig and type(config.talker_config) is talker_cls
        assert config.reasoner_config.vocab_size == config.talker_config.vocab_size == 40
        assert config.is_dual == (kind == "dual")
        as_dict = config.to_dict()
        assert as_dict["talker_config"]["model_type"] == talker_cls.model_type
        again = JepaReasonerWithTalkerConfig.from_dict(as_dict)
        assert type(again.talker_config) is talker_cls and again.to_dict() == as_dict
        # Dicts and config objects are both accepted; the talker's class follows its model_type.
        mixed = JepaReasonerWithTalkerConfig(
            reasoner_config=config.reasoner_config.to_dict(), talker_config=config.talker_config.to_dict()
        )
        assert type(mixed.talker_config) is talker_cls and mixed.to_dict() == as_dict
        directory = tmp_path / kind
        config.save_pretrained(directory)
        saved = json.loads((directory / "config.json").read_text())
        assert saved["model_type"] == "jepa_reasoner_with_talker"
        assert saved["reasoner_config"]["num_reasoning_steps"] == 6
        for loaded in (AutoConfig.from_pretrained(directory), JepaReasonerWithTalkerConfig.from_pretrained(directory)):
            assert type(loaded) is JepaReasonerWithTalkerConfig and type(loaded.talker_config) is talker_cls
            assert loaded.reasoner_config.to_dict() == config.reasoner_config.to_dict()
            assert loaded.talker_config.to_dict() == config.talker_config.to_dict()
    default = JepaReasonerWithTalkerConfig()
    assert default.reasoner_config.hidden_size == default.talker_config.latent_size == 1536 and not default.is_dual

    reasoner_config = JepaReasonerConfig.tiny()
    with pytest.raises(ValueError, match=r"talker's latent_size \(48\) must equal the reasoner's hidden_size \(32\)"):
        JepaReasonerWithTalkerConfig(
            reasoner_config=reasoner_config, talker_config=MonoTalkerConfig.tiny(latent_size=48)
        )
    with pytest.raises(ValueError, match=r"talker's vocab_size \(80\) must equal the reasoner's vocab_size \(64\)"):
        JepaReasonerWithTalkerConfig(
            reasoner_config=reasoner_config, talker_config=DualTalkerConfig.tiny(vocab_size=80)
        )
    with pytest.raises(
        ValueError,
        match=r"talker_config must have model_type in \('jepa_mono_talker', "
        r"'jepa_dual_talker'\), got 'jepa_coupled_lm'",
    ):
        JepaReasonerWithTalkerConfig(reasoner_config=reasoner_config, talker_config=CoupledTransformerConfig.tiny())
    with pytest.raises(ValueError, match=r"talker_config must have model_type in .*, got None"):
        JepaReasonerWithTalkerConfig(reasoner_config=reasoner_config, talker_config={"latent_size": 32})
    with pytest.raises(ValueError, match=r"reasoner_config must have model_type in \('jepa_reasoner',\)"):
        JepaReasonerWithTalkerConfig(reasoner_config=MonoTalkerConfig.tiny(), talker_config=MonoTalkerConfig.tiny())
    with pytest.raises(ValueError, match="talker_type must be 'mono' or 'dual'"):
        JepaReasonerWithTalkerConfig.tiny(talker_type="triple")


def test_pair_construction_keeps_the_sub_models_init():
    """The pair's post_init neither re-initialises nor re-draws the sub-models' weights: a pair built from a config
    under a seed equals a reasoner and a Talker built one after the other under that seed, and the reasoner's EMA
    target is an exact copy of its encoder."""
    for kind in ("mono", "dual"):
        config = JepaReasonerWithTalkerConfig.tiny(talker_type=kind)
        torch.manual_seed(7)
        pair = JepaReasonerWithTalker(config)
        torch.manual_seed(7)
        reasoner_alone = JepaReasonerModel(config.reasoner_config)
        talker_alone = (DualTalkerModel if kind == "dual" else MonoTalkerModel)(config.talker_config)
        assert_state_dicts_equal(reasoner_alone.state_dict(), pair.reasoner.state_dict())
        assert_state_dicts_equal(talker_alone.state_dict(), pair.talker.state_dict())
        assert_state_dicts_equal(pair.reasoner.encoder.state_dict(), pair.reasoner.target_encoder.state_dict())
        assert not any(p.requires_grad for p in pair.reasoner.target_encoder.parameters())
        assert pair.is_dual == (kind == "dual")
        assert type(pair.talker) is (DualTalkerModel if kind == "dual" else MonoTalkerModel)
        pair.train()
        assert pair.reasoner.encoder.training and not pair.reasoner.target_encoder.training


@pytest.mark.parametrize("kind", ["mono", "dual"])
def test_pair_from_components_reuses_the_models_and_generates_with_the_talker(kind):
    reasoner_model, talker_model = perturbed_reasoner(), (mono() if kind == "mono" else dual())
    reference_state = {f"reasoner.{k}": v.clone() for k, v in reasoner_model.state_dict().items()}
    reference_state |= {f"talker.{k}": v.clone() for k, v in talker_model.state_dict().items()}
    pair = JepaReasonerWithTalker.from_components(reasoner_model, talker_model)
    # from_components reuses the two models: same modules, same configs, weights untouched.
    assert pair.reasoner is reasoner_model and pair.talker is talker_model
    assert pair.config.reasoner_config is reasoner_model.config and pair.config.talker_config is talker_model.config
    assert_state_dicts_equal(reference_state, pair.state_dict())
    prompt_ids, prompt_mask, _, _ = batch()
    tokens, chain = pair.generate(prompt_ids, prompt_mask, num_reasoning_steps=4, max_new_tokens=5, min_new_tokens=5)
    assert tokens.shape == (3, 5) and chain.shape == (3, 4, WIDTH)
    # The tokens are the Talker's generation on the chain (BOS column dropped); beams work end to end.
    direct = pair.talker.generate(
        **talker_inputs(pair.talker, chain, prompt_ids, prompt_mask), max_new_tokens=5, min_new_tokens=5
    )
    assert torch.equal(direct[:, 1:], tokens)
    beams, _ = pair.generate(prompt_ids, prompt_mask, num_reasoning_steps=4, num_beams=2, max_new_tokens=3)
    assert beams.shape[0] == 3


# ------------------------------------------------------------------------------------------------ special token ids


def test_special_token_id_defaults_match_the_reasoning_tokenizer():
    """The configs' default pad/bos/eos/sep ids (the modeling folder cannot import `hf_jepa.data`) are the ids
    `build_reasoning_tokenizer` gives those tokens, whatever the task vocabulary."""
    from hf_jepa.data.reasoning import build_reasoning_tokenizer
    from hf_jepa.modeling.jepa_reasoner.configuration_jepa_reasoner import JepaTalkerConfig

    tokenizer = build_reasoning_tokenizer(["b", "a", ","])
    config_classes = (
        JepaReasonerConfig,
        JepaTalkerConfig,
        MonoTalkerConfig,
        DualTalkerConfig,
        CoupledTransformerConfig,
        CoconutConfig,
    )
    checked = 0
    for config_class in config_classes:
        config = config_class()
        for field in ("pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id"):
            if hasattr(config, field):
                assert getattr(config, field) == getattr(tokenizer, field), (config_class.__name__, field)
                checked += 1
    assert checked == 3 * len(config_classes) + 3  # sep in the reasoner and both coupled baselines


# ------------------------------------------------------------------------------------------- the family tester

TREE = TreeSearchTask(num_nodes=5, node_vocab_size=12)
PROMPTS = [example.prompt for example in TREE.generate(3)] + ["n1", "n3 n7 , n3 n9 ? n9"]
H, FFN, V = 1536, 4096, 50304  # the paper's width, SwiGLU size and vocabulary
# The full reasoner's trainable parameters: embeddings, 4 + 25 blocks, two hybrid-norm gains (the EMA target encoder
# is a frozen copy).
REASONER_TRAINABLE = V * H + 29 * (4 * H * H + 3 * H * FFN + 2 * H) + 2 * H  # ~898M


class TestJepaReasonerFamily(FamilyTester):
    """The common contracts (hf_jepa.testing.family_tester) on every model of the family: the reasoner, both
    Talkers, both coupled baselines and both reasoner + Talker pairs (the `latent-reasoning` pipeline's model)."""

    config_class = JepaReasonerConfig
    model_classes = (
        JepaReasonerModel,
        MonoTalkerModel,
        DualTalkerModel,
        CoupledTransformerLM,
        CoconutLM,
        JepaReasonerWithTalker,
    )
    variants = {
        "reasoner": Variant(model_class=JepaReasonerModel),
        "mono": Variant(model_class=MonoTalkerModel),
        "dual": Variant(model_class=DualTalkerModel),
        "coupled": Variant(model_class=CoupledTransformerLM),
        "coconut": Variant({"num_latent_thoughts": 2}, model_class=CoconutLM),
        "pair_mono": Variant({"talker_type": "mono"}, JepaReasonerWithTalker, tasks=("latent-reasoning",)),
        "pair_dual": Variant({"talker_type": "dual"}, JepaReasonerWithTalker, tasks=("latent-reasoning",)),
    }
    hub_variants = ("pair_mono",)  # also from a loopback Hub repo without hf_jepa
    invalid_configs = [
        (JepaReasonerConfig, dict(num_reasoning_steps=0), "num_reasoning_steps"),
        (JepaReasonerConfig, dict(hidden_size=30), "hidden_size"),
        (JepaReasonerConfig, dict(latent_norm="layer"), "latent_norm"),
        (JepaReasonerConfig, dict(sep_token_id=64), "sep_token_id"),
        (JepaReasonerConfig, dict(ema_momentum=1.5), "ema_momentum"),
        (JepaReasonerConfig, dict(cosine_loss_scale=0.0), "cosine_loss_scale"),
        (JepaReasonerConfig, dict(num_encoder_layers=-1), "num_encoder_layers"),
        (MonoTalkerConfig, dict(num_context_layers=2), "num_context_layers"),
        (DualTalkerConfig, dict(num_context_layers=0), "num_context_layers"),
        (MonoTalkerConfig, dict(latent_size=0), "latent_size"),
        (CoupledTransformerConfig, dict(num_attention_heads=5), "hidden_size"),
        (CoconutConfig, dict(num_latent_thoughts=-1), "num_latent_thoughts"),
    ]
    mismatched_configs = [
        dict(num_hidden_layers=3),
        (
            "pair_mono",
            dict(
                config=JepaReasonerWithTalkerConfig.tiny(
                    talker_type="mono",
                    vocab_size=len(TREE.build_tokenizer()),
                    reasoner_config=dict(num_hidden_layers=3),
                )
            ),
        ),
        # the Dual pair too: a deeper reasoner, and a Dual-Talker context encoder of 2 layers instead of 1
        (
            "pair_dual",
            dict(
                config=JepaReasonerWithTalkerConfig.tiny(
                    talker_type="dual",
                    vocab_size=len(TREE.build_tokenizer()),
                    reasoner_config=dict(num_hidden_layers=3),
                )
            ),
        ),
        (
            "pair_dual",
            dict(
                config=JepaReasonerWithTalkerConfig.tiny(
                    talker_type="dual",
                    vocab_size=len(TREE.build_tokenizer()),
                    talker_config=dict(num_context_layers=2),
                )
            ),
        ),
    ]
    full_sizes = {
        "reasoner": {"trainable": REASONER_TRAINABLE},
        "mono": {"total": (178_200_000, 217_800_000)},  # the paper's 198M Talker (~194.5M), within 10%
        "dual": {"total": (178_200_000, 217_800_000)},
        # parameter-matched to the reasoner, within 5%
        "coupled": {"total": (int(0.95 * REASONER_TRAINABLE), int(1.05 * REASONER_TRAINABLE))},
    }

    def tiny_config(self, name):
        config = super().tiny_config(name)
        if name.startswith("pair"):  # the pipeline's tokenizer sets the vocabulary
            overrides = {**self.variant(name).overrides, "vocab_size": len(TREE.build_tokenizer())}
            config = JepaReasonerWithTalkerConfig.tiny(**overrides)
        return config

    @torch.no_grad()
    def make_trained_looking(self, name, model):
        """The EMA target off the encoder and a moved norm gain (the reasoner); a pair's Talker with a sharpened LM
        head (x30) that never predicts PAD/UNK/BOS/SEP, so greedy text is non-empty and differs between prompts."""
        super().make_trained_looking(name, model)
        if name == "reasoner":
            model.norm.rms.weight.add_(0.1)
        if name.startswith("pair"):
            model.talker.lm_head.weight.mul_(30.0)
            model.talker.lm_head.weight[[0, 1, 2, 4]] = 0.0

    def save_companions(self, name, folder):
        if name.startswith("pair"):
            TREE.build_tokenizer().save_pretrained(folder)

    def inputs(self, name):
        prompt_ids, prompt_mask, answer_ids, answer_mask = batch()
        chain = torch.randn(3, 4, WIDTH, generator=torch.Generator().manual_seed(5))
        answers = dict(answer_ids=answer_ids, answer_mask=answer_mask)
        prompts = dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask)
        if name == "coupled":
            input_ids = torch.cat([prompt_ids, torch.full((3, 1), SEP), answer_ids], 1)
            attention_mask = torch.cat([prompt_mask, torch.ones(3, 1, dtype=torch.long), answer_mask], 1)
            return dict(
                input_ids=input_ids,
                attention_mask=attention_mask,
                labels=input_ids.masked_fill(~attention_mask.bool(), -100),
            )
        return {
            "reasoner": {**prompts, **answers},
            "mono": {"latents": chain, **answers},
            "dual": {"latents": chain, **prompts, **answers},
            "coconut": {**prompts, **answers},
        }.get(name, prompts)

    def calls(self, name):
        prompt_ids, prompt_mask, _, _ = batch()
        chain = self.inputs("mono")["latents"]
        generate = {
            "reasoner": ("generate_latents", dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, num_steps=5)),
            "mono": ("generate", dict(input_ids=bos_column(3), latents=chain, max_new_tokens=5, num_beams=2)),
            "dual": (
                "generate",
                dict(
                    input_ids=bos_column(3),
                    latents=chain,
                    prompt_ids=prompt_ids,
                    prompt_mask=prompt_mask,
                    max_new_tokens=5,
                ),
            ),
            "coupled": ("generate", dict(input_ids=prompt_ids, attention_mask=prompt_mask, max_new_tokens=4)),
            "coconut": ("generate", dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, max_new_tokens=4)),
        }
        if name.startswith("pair"):  # the pair has no forward pass of its own; its vocabulary is the tokenizer's
            pair_prompts = prompt_ids % len(TREE.build_tokenizer()) * prompt_mask
            prompts = dict(prompt_ids=pair_prompts, prompt_mask=prompt_mask, num_reasoning_steps=4)
            return {
                "generate": ("generate", dict(prompts, max_new_tokens=5, min_new_tokens=5)),
                "beams": ("generate", dict(prompts, num_beams=2, max_new_tokens=3)),
            }
        return {"forward": ("__call__", self.inputs(name)), "generate": generate[name]}

    def pipeline_calls(self, name, task):
        return [
            ((PROMPTS,), {}),
            ((PROMPTS,), dict(batch_size=2, num_beams=2)),
            ((PROMPTS[0],), dict(return_latents=True)),
            ((PROMPTS,), dict(do_sample=True, seed=3, max_new_tokens=8, latent_noise_std=0.2)),
        ]

    def bad_inputs(self):
        prompt_ids, prompt_mask, answer_ids, answer_mask = batch()
        out_of_vocabulary = prompt_ids.clone()
        out_of_vocabulary[0, -1] = VOCAB
        chain = torch.randn(3, 4, WIDTH)
        return [
            BadInput(
                "num_steps",
                method="generate_latents",
                inputs=dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, num_steps=0),
                match="must be an integer >= 1, got 0",
            ),
            BadInput(
                "prompt_ids",
                method="generate_latents",
                inputs=dict(prompt_ids=torch.full((1, 61), 7), num_steps=4),
                match="has length 61, longer than max_position_embeddings - num_steps",
            ),
            BadInput(
                "prompt_ids",
                method="generate_latents",
                inputs=dict(prompt_ids=out_of_vocabulary),
                match=rf"holds token ids in \[0, {VOCAB}\], outside the model's vocabulary",
            ),
            BadInput("answer_ids", answer_ids - 10, match="holds token ids"),
            BadInput(
                "prompt_mask",
                method="generate_latents",
                inputs=dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask[:, 1:]),
                match="must have the shape",
            ),
            BadInput(
                "prompt_ids",
                inputs=dict(prompt_ids=torch.full((1, 40), 7), answer_ids=torch.full((1, 30), 7)),
                match=r"longer than max_position_embeddings \(64\)",
            ),
            BadInput(
                "latent_size",
                call=lambda model: JepaReasonerWithTalker.from_components(model, mono(latent_size=48)),
                match=r"latent_size \(48\) must equal the reasoner's hidden_size \(32\)",
            ),
            BadInput(
                "vocab_size",
                call=lambda model: JepaReasonerWithTalker.from_components(model, dual(vocab_size=80)),
                match=r"vocab_size \(80\) must equal the reasoner's vocab_size \(64\)",
            ),
            BadInput(
                "talker",
                call=lambda model: JepaReasonerWithTalker.from_components(model, reasoner()),
                match="must be a MonoTalkerModel or DualTalkerModel, got JepaReasonerModel",
            ),
            BadInput(
                "reasoner",
                call=lambda model: JepaReasonerWithTalker.from_components(mono(), mono()),
                match="must be a JepaReasonerModel, got MonoTalkerModel",
            ),
            BadInput(
                "latents",
                method="generate",
                inputs=dict(input_ids=bos_column(3), latents=torch.randn(3, 4, 16), max_new_tokens=2),
                match=r"must have shape \(batch, steps, latent_size=32\)",
                variant="mono",
            ),
            BadInput("latents", inputs=dict(input_ids=bos_column(3)), match="needs latents", variant="mono"),
            BadInput(
                "input_ids",
                inputs=dict(input_ids=torch.full((3, 1), VOCAB), latents=chain),
                match="holds token ids",
                variant="mono",
            ),
            BadInput(
                "prompt_ids",
                inputs=dict(input_ids=bos_column(3), latents=chain),
                match="DualTalkerModel needs prompt_ids",
                variant="dual",
            ),
            BadInput(
                "prompt_ids",
                method="generate",
                inputs=dict(max_new_tokens=2),
                match="CoconutLM.generate needs prompt_ids",
                variant="coconut",
            ),
        ]

    def test_a_prompt_that_exactly_fits_is_accepted(self, family):
        # 60 prompt tokens + SEP + 3 fed-back latents = max_position_embeddings (64)
        family.model("reasoner").generate_latents(torch.full((1, 60), 7), num_steps=4)

    def test_the_full_talkers_read_the_full_reasoners_latents(self):
        hidden = JepaReasonerConfig.full().hidden_size
        assert MonoTalkerConfig.full().latent_size == DualTalkerConfig.full().latent_size == hidden

    def test_the_pair_folder_is_one_model(self, family):
        """One folder: config.json with both sub-configs, one model.safetensors (reasoner.* / talker.*), no
        subfolders; it writes text, so AutoModelForCausalLM loads it too (pipeline("text-generation"))."""
        for name, kind in (("pair_mono", "jepa_mono_talker"), ("pair_dual", "jepa_dual_talker")):
            folder = family.folder(name)
            assert not (folder / "reasoner").exists() and not (folder / "talker").exists()
            saved = json.loads((folder / "config.json").read_text())
            assert saved["model_type"] == "jepa_reasoner_with_talker" and saved["talker_config"]["model_type"] == kind
            assert saved["auto_map"] == {
                "AutoConfig": "configuration_jepa_reasoner.JepaReasonerWithTalkerConfig",
                "AutoModel": "modeling_jepa_talker.JepaReasonerWithTalker",
                "AutoModelForCausalLM": "modeling_jepa_talker.JepaReasonerWithTalker",
            }
            keys = set(load_file(str(folder / "model.safetensors")))
            assert {key.split(".")[0] for key in keys} == {"reasoner", "talker"}
