"""Property-based tests (hypothesis): the data builders (shapes, dtypes, ranges, invariants, determinism for a seed)
and the public forward signatures of the five families on tiny presets (random valid inputs -> finite outputs of the
documented shapes; a NaN / inf anywhere -> ValueError, never a NaN output). Few examples each, so the file stays fast
on a 2-core machine."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hf_jepa import (
    BroJepaConfig,
    BroJepaModel,
    EpmJepaConfig,
    EpmJepaModel,
    IJepaConfig,
    IJepaModel,
    TJepaConfig,
    TJepaModel,
)
from hf_jepa.data.masking import MultiBlockMaskSampler, SpanMaskingCollator
from hf_jepa.data.modular_arithmetic import ModularArithmeticTask
from hf_jepa.data.moving_mnist import MovingMnist, simulate_trajectories
from hf_jepa.data.reasoning import ArithmeticWordProblems, CfgTask, TreeSearchTask, encode_reasoning_examples
from hf_jepa.modeling.jepa_reasoner import (
    DualTalkerConfig,
    DualTalkerModel,
    JepaReasonerConfig,
    JepaReasonerModel,
    MonoTalkerConfig,
    MonoTalkerModel,
)

# No example database: nothing is written into the checkout, and CI explores fresh examples on every run.
FAST = settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
MODEL = settings(max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**16)
bad_values = st.sampled_from([float("nan"), float("inf"), float("-inf")])


# ------------------------------------------------------------------------------------------------------ data builders

PIXEL_MEAN, PIXEL_STD = 0.1307, 0.3081
# Image i of class c is the constant 20 * c + 5 (distinct per class), so a class can be read off any pixel.
_LABELS = torch.arange(40) % 10
_IMAGES = (20 * _LABELS + 5).to(torch.uint8)[:, None, None].expand(40, 28, 28).contiguous()


def _read_class(pixel_values: torch.Tensor) -> torch.Tensor:
    """Class of each normalised constant image, read at the centre (inside any shift of up to 13 pixels)."""
    raw = (pixel_values[:, 0, 14, 14] * PIXEL_STD + PIXEL_MEAN) * 255.0
    return ((raw - 5) / 20).round().long()


@FAST
@given(
    batch=st.integers(1, 32),
    operations=st.lists(st.integers(-9, 9), min_size=1, max_size=4, unique=True),
    max_shift=st.integers(0, 4),
    seed=seeds,
    step=st.integers(0, 1000),
    rank=st.integers(0, 3),
)
def test_modular_arithmetic_batches(batch, operations, max_shift, seed, step, rank):
    task = ModularArithmeticTask(_IMAGES, _LABELS, operations=tuple(operations), seed=seed, max_shift=max_shift)
    out = task.sample_batch(batch, step=step, rank=rank)
    assert out["pixel_values"].shape == out["target_pixel_values"].shape == (batch, 1, 28, 28)
    assert out["pixel_values"].dtype == out["target_pixel_values"].dtype == torch.float32
    assert out["operations"].shape == out["labels"].shape == (batch,)
    assert out["operations"].dtype == out["labels"].dtype == torch.int64
    assert set(out["operations"].tolist()) <= set(operations)
    assert torch.isfinite(out["pixel_values"]).all() and torch.isfinite(out["target_pixel_values"]).all()
    x = _read_class(out["pixel_values"])
    assert torch.equal(out["labels"], (x + out["operations"]) % 10)  # y = (x + k) mod 10
    assert torch.equal(_read_class(out["target_pixel_values"]), out["labels"])
    again = task.sample_batch(batch, step=step, rank=rank)
    assert all(torch.equal(out[k], again[k]) for k in out)


@FAST
@given(
    batch=st.integers(1, 4),
    digits=st.integers(1, 2),
    steps=st.integers(1, 24),
    limit=st.floats(1.0, 100.0),
    speed=st.floats(0.0, 300.0),
    gravity=st.floats(-5.0, 5.0),
    seed=seeds,
)
def test_simulated_trajectories_stay_on_the_canvas(batch, digits, steps, limit, speed, gravity, seed):
    generator = torch.Generator().manual_seed(seed)
    positions0 = torch.rand(batch, digits, 2, generator=generator, dtype=torch.float64) * limit
    velocities0 = (torch.rand(batch, digits, 2, generator=generator, dtype=torch.float64) * 2 - 1) * speed
    positions, velocities = simulate_trajectories(positions0, velocities0, gravity, steps, limit)
    assert positions.shape == velocities.shape == (batch, steps, digits, 2)
    assert positions.dtype == torch.float64
    assert torch.equal(positions[:, 0], positions0)
    assert ((positions >= 0) & (positions <= limit)).all()
    assert torch.isfinite(velocities).all()


@FAST
@given(
    batch=st.integers(1, 3),
    length=st.integers(2, 6),
    num_digits=st.sampled_from([1, 2, (1, 2)]),
    canvas=st.integers(29, 48),
    seed=seeds,
    step=st.integers(0, 100),
)
def test_moving_mnist_batches(batch, length, num_digits, canvas, seed, step):
    data = MovingMnist(
        _IMAGES[:10], _LABELS[:10], sequence_length=length, num_digits=num_digits, canvas_size=canvas, seed=seed
    )
    out = data.sample_batch(batch, step=step)
    digits = 1 if num_digits == 1 else 2
    assert out["pixel_values"].shape == (batch, length, 1, canvas, canvas)
    assert out["pixel_values"].dtype == torch.float32
    assert ((out["pixel_values"] >= 0) & (out["pixel_values"] <= 1)).all()
    assert out["positions"].shape == (batch, length, digits, 2)
    assert ((out["positions"] >= 0) & (out["positions"] <= canvas - 28)).all()
    assert out["digit_mask"].shape == out["digit_labels"].shape == (batch, digits)
    assert out["digit_mask"][:, 0].all()  # the first digit is always drawn
    assert torch.equal(out["digit_labels"] == -1, ~out["digit_mask"])
    assert out["gravity"].shape == (batch,) and torch.isfinite(out["gravity"]).all()
    again = data.sample_batch(batch, step=step)
    assert all(torch.equal(out[k], again[k]) for k in out)


@FAST
@given(
    size=st.integers(4, 14),
    num_targets=st.integers(1, 4),
    batch=st.integers(1, 4),
    min_keep=st.integers(1, 4),
    seed=seeds,
    step=st.integers(0, 100),
)
def test_multi_block_masks(size, num_targets, batch, min_keep, seed, step):
    sampler = MultiBlockMaskSampler(input_size=size, num_targets=num_targets, min_keep=min_keep, seed=seed)
    try:
        out = sampler.sample(batch, step=step)
    except ValueError as error:  # a documented outcome when the targets leave too little context
        assert "could not keep" in str(error)
        return
    n = size * size
    context, targets = out["context_mask"], out["target_masks"]
    assert context.shape == (batch, n) and targets.shape == (batch, num_targets, n)
    assert not (context & targets.any(dim=1)).any()  # context and targets are disjoint
    ctx, tgt = out["context_indices"], out["target_indices"]
    assert ctx.dtype == tgt.dtype == torch.int64
    assert ctx.shape[1] >= min_keep and ((ctx >= 0) & (ctx < n)).all() and ((tgt >= 0) & (tgt < n)).all()
    assert (ctx[:, 1:] > ctx[:, :-1]).all() and (tgt[..., 1:] > tgt[..., :-1]).all()  # ascending, distinct
    h, w = out["block_draws"]["target_shape"]
    assert tgt.shape == (batch, num_targets, h * w)
    assert torch.equal(torch.zeros_like(context).scatter_(1, ctx, True), context)
    assert torch.equal(torch.zeros_like(targets).scatter_(2, tgt, True), targets)
    again = sampler.sample(batch, step=step)
    assert torch.equal(again["context_indices"], ctx) and torch.equal(again["target_indices"], tgt)


_SPAN_TOKENIZER = SimpleNamespace(mask_token_id=1, pad_token_id=0)


@FAST
@given(
    num_units=st.integers(2, 200),
    ratio=st.tuples(st.floats(0.01, 0.9), st.floats(0.0, 0.09)),
    spans=st.tuples(st.integers(1, 6), st.integers(0, 4)),
    span_bounds=st.tuples(st.integers(1, 5), st.integers(0, 5)),
    seed=seeds,
)
def test_span_sampler(num_units, ratio, spans, span_bounds, seed):
    low_ratio, high_ratio = ratio[0], ratio[0] + ratio[1]
    collator = SpanMaskingCollator(
        _SPAN_TOKENIZER,
        mask_ratio=(low_ratio, high_ratio),
        num_spans=(spans[0], spans[0] + spans[1]),
        min_span=span_bounds[0],
        max_span=span_bounds[0] + span_bounds[1],
    )
    result = collator.sample_spans(num_units, np.random.default_rng(seed))
    assert result == collator.sample_spans(num_units, np.random.default_rng(seed))
    assert len(result) >= 1
    masked = sum(end - start for start, end in result)
    assert 1 <= masked <= num_units - 1  # at least one target and one visible unit
    previous_end = -1
    for start, end in result:
        assert 0 <= start < end <= num_units
        assert start > previous_end  # left to right, disjoint and separated by a gap
        previous_end = end
    assert masked == min(max(round(low_ratio * num_units), 1), num_units - 1) or high_ratio > low_ratio


_TASKS = {
    "tree": TreeSearchTask(num_nodes=7, node_vocab_size=16),
    "cfg": CfgTask(min_length=6, max_length=16),
    "arithmetic": ArithmeticWordProblems(),
}
_TOKENIZERS = {}


def _tokenizer(name):
    if name not in _TOKENIZERS:
        _TOKENIZERS[name] = _TASKS[name].build_tokenizer()
    return _TOKENIZERS[name]


@FAST
@given(name=st.sampled_from(sorted(_TASKS)), count=st.integers(1, 6), seed=seeds)
def test_reasoning_tasks_generate(name, count, seed):
    task = _TASKS[name]
    examples = task.generate(count, seed=seed)
    assert len(examples) == count
    assert examples == task.generate(count, seed=seed)  # determinism for a seed
    assert examples[:1] == task.generate(1, seed=seed)  # example i does not depend on how many are drawn
    vocab = set(task.vocab())
    for example in examples:
        prompt, answer = example.prompt.split(), example.answer.split()
        assert prompt and answer
        assert set(prompt) <= vocab and set(answer) <= vocab
        assert len(prompt) <= task.max_prompt_length and len(answer) + 1 <= task.max_answer_length
        assert task.score(example, example.answer)
        if name == "cfg":
            assert CfgTask.is_valid(prompt + answer)


@FAST
@given(name=st.sampled_from(sorted(_TASKS)), count=st.integers(1, 6), seed=seeds, slack=st.integers(0, 3))
def test_encode_reasoning_examples(name, count, seed, slack):
    task, tokenizer = _TASKS[name], _tokenizer(name)
    examples = task.generate(count, seed=seed)
    prompt_length, answer_length = task.max_prompt_length + slack, task.max_answer_length + slack
    out = encode_reasoning_examples(examples, tokenizer, prompt_length, answer_length)
    assert all(v.dtype == torch.int64 for v in out.values())
    assert out["prompt_ids"].shape == out["prompt_mask"].shape == (count, prompt_length)
    assert out["answer_ids"].shape == out["answer_mask"].shape == (count, answer_length)
    total = prompt_length + 1 + answer_length
    assert out["input_ids"].shape == out["attention_mask"].shape == out["labels"].shape == (count, total)
    assert torch.equal(out["prompt_mask"].sum(1), out["prompt_lengths"])
    assert torch.equal(out["answer_mask"].sum(1), out["answer_lengths"] + 1)  # + [EOS]
    # Prompts flush right (left padding), answers flush left (right padding).
    assert (out["prompt_mask"][:, 1:] >= out["prompt_mask"][:, :-1]).all()
    assert (out["answer_mask"][:, 1:] <= out["answer_mask"][:, :-1]).all()
    rows = torch.arange(count)
    eos = tokenizer.convert_tokens_to_ids("[EOS]")
    assert (out["answer_ids"][rows, out["answer_lengths"]] == eos).all()
    assert torch.equal(out["labels"] != -100, out["attention_mask"].bool() & (torch.arange(total) > prompt_length))
    assert torch.equal(out["input_ids"][:, :prompt_length], out["prompt_ids"])
    assert torch.equal(out["input_ids"][:, prompt_length + 1 :], out["answer_ids"])
    vocab_size = len(tokenizer)
    assert ((out["input_ids"] >= 0) & (out["input_ids"] < vocab_size)).all()


# ------------------------------------------------------------------------------------------- forward signatures

_MODELS = {}


def _model(name):
    """Tiny models built once (seeded), kept in eval mode; the property tests never change their state."""
    if name not in _MODELS:
        torch.manual_seed(0)
        factories = {
            "bro": lambda: BroJepaModel(BroJepaConfig.tiny()),
            "epm-vanilla": lambda: EpmJepaModel(EpmJepaConfig.tiny(track="vanilla")),
            "epm-ei": lambda: EpmJepaModel(EpmJepaConfig.tiny(track="ei")),
            "epm-epm": lambda: EpmJepaModel(EpmJepaConfig.tiny(track="epm")),
            "i_jepa": lambda: IJepaModel(IJepaConfig.tiny()),
            "t_jepa": lambda: TJepaModel(TJepaConfig.tiny()),
            "reasoner": lambda: JepaReasonerModel(JepaReasonerConfig.tiny()),
            "mono": lambda: MonoTalkerModel(MonoTalkerConfig.tiny()),
            "dual": lambda: DualTalkerModel(DualTalkerConfig.tiny()),
        }
        _MODELS[name] = factories[name]().eval()
    return _MODELS[name]


floating = st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16])


def _poison(tensor: torch.Tensor, data, value) -> torch.Tensor:
    out = tensor.clone()
    out.view(-1)[data.draw(st.integers(0, out.numel() - 1), label="index")] = value
    return out


@MODEL
@given(batch=st.integers(2, 6), operation=st.integers(-9, 9), dtype=floating, seed=seeds, data=st.data())
def test_bro_forward(batch, operation, dtype, seed, data):
    model = _model("bro")
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 1, 28, 28, generator=generator).to(dtype)
    target = torch.randn(batch, 1, 28, 28, generator=generator).to(dtype)
    with torch.no_grad():
        out = model(x, operation, target_pixel_values=target)
    assert out.predicted_latent.shape == out.context_latent.shape == out.target_latent.shape == (batch, 16)
    assert out.predicted_latent.dtype == torch.float32
    for value in (out.loss, out.predicted_latent, out.context_latent, out.target_latent):
        assert torch.isfinite(value).all()
    bad = data.draw(bad_values, label="bad")
    with pytest.raises(ValueError, match="^pixel_values holds 1 non-finite"):
        model(_poison(x, data, bad), operation)
    with pytest.raises(ValueError, match="^target_pixel_values holds 1 non-finite"):
        model(x, operation, target_pixel_values=_poison(target, data, bad))


@MODEL
@given(
    track=st.sampled_from(["vanilla", "ei", "epm"]),
    batch=st.integers(1, 2),
    frames=st.integers(4, 6),
    dtype=floating,
    seed=seeds,
    data=st.data(),
)
def test_epm_forward(track, batch, frames, dtype, seed, data):
    model = _model(f"epm-{track}")
    k = model.config.context_length
    pixels = torch.rand(batch, frames, 1, 64, 64, generator=torch.Generator().manual_seed(seed)).to(dtype)
    with torch.no_grad():
        out = model(pixels, update_experience=False)
        predicted = model.predict_next_latent(pixels)
    assert out.predicted_latents.shape == out.target_latents.shape == (batch, frames - k, 16)
    assert out.context_latents.shape == (batch, frames, 16)
    assert out.surprisal.shape == (batch, frames - k)
    assert predicted.shape == (batch, 16)
    for value in (out.loss, out.predicted_latents, out.target_latents, out.surprisal, predicted):
        assert torch.isfinite(value).all()
    if track != "vanilla":
        assert out.experience.shape == (batch, frames - k, model.config.memory_dim)
    with pytest.raises(ValueError, match="^pixel_values holds 1 non-finite"):
        model(_poison(pixels, data, data.draw(bad_values, label="bad")), update_experience=True)


@MODEL
@given(batch=st.integers(1, 3), num_targets=st.integers(1, 3), dtype=floating, seed=seeds, data=st.data())
def test_i_jepa_forward(batch, num_targets, dtype, seed, data):
    model = _model("i_jepa")
    grid = model.config.grid_size
    sampler = MultiBlockMaskSampler(
        input_size=grid, num_targets=num_targets, target_scale=(0.1, 0.2), min_keep=2, seed=seed
    )
    try:
        masks = sampler.sample(batch)
    except ValueError:
        assume(False)
    pixels = torch.randn(batch, 1, 28, 28, generator=torch.Generator().manual_seed(seed)).to(dtype)
    context, targets = masks["context_indices"], masks["target_indices"]
    with torch.no_grad():
        out = model(pixels, context, targets)
        embeddings = model.embed(pixels)
    hidden = model.config.hidden_size
    assert out.predictions.shape == out.targets.shape == (batch, num_targets, targets.shape[-1], hidden)
    assert out.last_hidden_state.shape == (batch, context.shape[1], hidden)
    assert out.block_losses.shape == (num_targets,) and embeddings.shape == (batch, hidden)
    for value in (out.loss, out.predictions, out.last_hidden_state, embeddings):
        assert torch.isfinite(value).all()
    with pytest.raises(ValueError, match="^pixel_values holds 1 non-finite"):
        model(_poison(pixels, data, data.draw(bad_values, label="bad")), context, targets)


@MODEL
@given(batch=st.integers(1, 3), length=st.integers(3, 16), seed=seeds, data=st.data())
def test_t_jepa_forward(batch, length, seed, data):
    model = _model("t_jepa")
    vocab = model.config.backbone_config.vocab_size
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab, (batch, length), generator=generator)
    # One contiguous target span per row, leaving context on at least one side.
    starts = torch.randint(0, length - 1, (batch,), generator=generator)
    ends = starts + 1 + (torch.rand(batch, generator=generator) * (length - 1 - starts)).long().clamp_max(length - 2)
    positions = torch.arange(length)
    target_mask = (positions >= starts[:, None]) & (positions < ends[:, None])
    assume(bool(((~target_mask).sum(1) > 0).all()))
    with torch.no_grad():
        out = model(input_ids, target_mask=target_mask)
        embeddings = model.embed(input_ids)
    hidden = model.config.backbone_config.hidden_size
    assert torch.isfinite(out.loss) and embeddings.shape == (batch, hidden) and torch.isfinite(embeddings).all()
    assert out.last_hidden_state.shape[:2] == (batch, length)
    bad_id = data.draw(st.sampled_from([-1, vocab, vocab + 100]), label="bad id")
    with pytest.raises(ValueError, match="^input_ids holds token ids"):
        model(_poison(input_ids, data, bad_id), target_mask=target_mask)
    with pytest.raises(ValueError, match=r"^input_ids is empty \(batch size 0\)"):
        model(input_ids[:0], target_mask=target_mask[:0])


@MODEL
@given(
    batch=st.integers(1, 3),
    length=st.integers(1, 12),
    steps=st.integers(1, 5),
    std=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(0.0)),
    seed=seeds,
)
def test_reasoner_generate_latents(batch, length, steps, std, seed):
    model = _model("reasoner")
    generator = torch.Generator().manual_seed(seed)
    prompt = torch.randint(5, model.config.vocab_size, (batch, length), generator=generator)
    if not (math.isfinite(std) and std >= 0):
        with pytest.raises(ValueError, match="^latent_noise_std must be a finite number >= 0"):
            model.generate_latents(prompt, num_steps=steps, latent_noise_std=std)
        return
    with torch.no_grad():
        chain = model.generate_latents(prompt, num_steps=steps, latent_noise_std=min(std, 1e6), generator=generator)
    assert chain.shape == (batch, steps, model.config.hidden_size)
    assert torch.isfinite(chain).all()
    assert torch.allclose(chain.norm(dim=-1), torch.ones(batch, steps), atol=1e-4)  # unit latents


@MODEL
@given(
    kind=st.sampled_from(["mono", "dual"]),
    batch=st.integers(1, 3),
    steps=st.integers(1, 6),
    tokens=st.integers(1, 5),
    seed=seeds,
    data=st.data(),
)
def test_talker_forward(kind, batch, steps, tokens, seed, data):
    model = _model(kind)
    generator = torch.Generator().manual_seed(seed)
    latents = torch.randn(batch, steps, model.config.latent_size, generator=generator)
    input_ids = torch.randint(5, model.config.vocab_size, (batch, tokens), generator=generator)
    extra = {"prompt_ids": torch.randint(5, 60, (batch, 3), generator=generator)} if kind == "dual" else {}
    with torch.no_grad():
        out = model(input_ids, latents=latents, labels=input_ids, **extra)
    assert out.logits.shape == (batch, tokens, model.config.vocab_size)
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss)
    with pytest.raises(ValueError, match="^latents holds 1 non-finite"):
        model(input_ids, latents=_poison(latents, data, data.draw(bad_values, label="bad")), **extra)
