"""The `latent-reasoning` pipeline on a tiny (untrained) reasoner + Talker pair: outputs equal `pair.generate` by hand,
batching, latents, seeded sampling, generation arguments, bad inputs, other models and missing tokenizers refused. (The
pair folder as one model, and the pipeline without hf_jepa: the family tester in tests/jepa_reasoner/test_modeling.py;
the Hub round trip: tests/jepa_reasoner/test_hub.py.)"""

import pytest
import torch
from transformers import pipeline

import hf_jepa.pipelines  # noqa: F401 - registers the task
from hf_jepa.data.reasoning import TreeSearchTask
from hf_jepa.modeling.jepa_reasoner import (
    DualTalkerModel,
    JepaReasonerWithTalker,
    JepaReasonerWithTalkerConfig,
    MonoTalkerModel,
)
from hf_jepa.pipelines import LatentReasoningPipeline

TASK = "latent-reasoning"
EOS, NUM_SPECIAL = 3, 5
STEPS = 4  # JepaReasonerConfig.tiny().num_reasoning_steps
WIDTH = 32
TREE = TreeSearchTask(num_nodes=5, node_vocab_size=12)
PROMPTS = [example.prompt for example in TREE.generate(5)] + ["n1", "n3 n7 , n3 n9 ? n9"]  # lengths 14, 14, ..., 1, 8


def make_pair(kind: str, vocab_size: int, seed: int = 0) -> JepaReasonerWithTalker:
    """An untrained pair whose Talker has a sharpened LM head (x30) and never predicts PAD/UNK/BOS/SEP, so greedy
    text is non-empty and differs between prompts; the EMA target differs from the encoder (as after training)."""
    torch.manual_seed(seed)
    pair = JepaReasonerWithTalker(JepaReasonerWithTalkerConfig.tiny(talker_type=kind, vocab_size=vocab_size))
    with torch.no_grad():
        pair.talker.lm_head.weight.mul_(30.0)
        pair.talker.lm_head.weight[[0, 1, 2, 4]] = 0.0
        for parameter in pair.reasoner.target_encoder.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    return pair.eval()


def encode(tokenizer, prompt: str) -> torch.Tensor:
    return torch.tensor([tokenizer(prompt, add_special_tokens=False)["input_ids"]])


def words(tokenizer, ids) -> str:
    """Decode by hand: tokens up to the first EOS, special tokens dropped, joined by spaces."""
    ids = list(ids)
    ids = ids[: ids.index(EOS)] if EOS in ids else ids
    return " ".join(tokenizer.convert_ids_to_tokens([i for i in ids if i >= NUM_SPECIAL]))


@torch.no_grad()
def reference(pair, tokenizer, prompt, steps=STEPS, **generation):
    """(text, chain (steps, hidden)) from `pair.generate` by hand, with the pipeline's default max_new_tokens."""
    generation.setdefault("max_new_tokens", steps + 1)
    tokens, chain = pair.generate(encode(tokenizer, prompt), num_reasoning_steps=steps, **generation)
    return words(tokenizer, tokens[0].tolist()), chain[0]


@pytest.fixture(scope="module")
def tokenizer():
    return TREE.build_tokenizer()


@pytest.fixture(scope="module")
def pairs(tokenizer):
    return {kind: make_pair(kind, len(tokenizer), seed) for seed, kind in enumerate(("mono", "dual"))}


@pytest.fixture(scope="module")
def pair_dirs(pairs, tokenizer, tmp_path_factory):
    directories = {}
    for kind, pair in pairs.items():
        directory = tmp_path_factory.mktemp(f"pair-{kind}")
        pair.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        directories[kind] = directory
    return directories


@pytest.fixture(scope="module")
def pipes(pair_dirs):
    return {kind: pipeline(TASK, model=str(directory)) for kind, directory in pair_dirs.items()}


# ------------------------------------------------------------------------------------------------ outputs


@pytest.mark.parametrize("kind", ["mono", "dual"])
def test_outputs_equal_pair_generate(pipes, pairs, tokenizer, kind):
    pipe, pair = pipes[kind], pairs[kind]
    assert isinstance(pipe, LatentReasoningPipeline) and type(pipe.model) is JepaReasonerWithTalker
    assert type(pipe.model.talker) is (DualTalkerModel if kind == "dual" else MonoTalkerModel)
    assert pipe.tokenizer.get_vocab() == tokenizer.get_vocab()
    expected = [reference(pair, tokenizer, prompt)[0] for prompt in PROMPTS]
    assert any(expected) and len(set(expected)) > 1  # the comparison is not vacuous
    for prompt, text in zip(PROMPTS, expected):
        assert pipe(prompt) == {"generated_text": text, "num_reasoning_steps": STEPS}
    assert pipe(PROMPTS) == [{"generated_text": text, "num_reasoning_steps": STEPS} for text in expected]
    assert pipe(tuple(PROMPTS[:2])) == pipe(PROMPTS[:2])
    assert list(pipe(prompt for prompt in PROMPTS[:3])) == pipe(PROMPTS[:3])  # a generator streams
    longer = pipe(PROMPTS[0], num_reasoning_steps=7)
    assert longer == {"generated_text": reference(pair, tokenizer, PROMPTS[0], steps=7)[0], "num_reasoning_steps": 7}
    assert not pipe.model.training


@pytest.mark.parametrize("kind", ["mono", "dual"])
def test_batches_equal_single_prompts(pipes, pair_dirs, kind):
    pipe = pipes[kind]
    assert len({len(prompt.split()) for prompt in PROMPTS}) > 1  # batches are left-padded
    single = pipe(PROMPTS, return_latents=True, return_tensors=True)
    for batched in (
        pipe(PROMPTS, batch_size=2, return_latents=True, return_tensors=True),
        pipeline(TASK, model=str(pair_dirs[kind]), batch_size=3)(PROMPTS, return_latents=True, return_tensors=True),
    ):
        assert len(batched) == len(PROMPTS)
        for got, expected in zip(batched, single):
            assert got["generated_text"] == expected["generated_text"]
            torch.testing.assert_close(got["latents"], expected["latents"], rtol=1e-5, atol=1e-6)
    beams = pipe(PROMPTS, num_beams=2)
    assert pipe(PROMPTS, num_beams=2, batch_size=4) == beams


def test_return_latents(pipes, pairs, tokenizer):
    pipe, pair = pipes["mono"], pairs["mono"]
    plain = pipe(PROMPTS[0])
    assert set(plain) == {"generated_text", "num_reasoning_steps"}
    result = pipe(PROMPTS[0], return_latents=True, num_reasoning_steps=6)
    latents = result["latents"]
    assert result["num_reasoning_steps"] == 6 and len(latents) == 6
    assert all(len(row) == WIDTH and all(isinstance(v, float) for v in row) for row in latents)
    tensor = pipe(PROMPTS[0], return_latents=True, return_tensors=True, num_reasoning_steps=6)["latents"]
    assert isinstance(tensor, torch.Tensor) and tensor.shape == (6, WIDTH)
    assert torch.equal(tensor, torch.tensor(latents))
    torch.testing.assert_close(tensor.norm(dim=-1), torch.ones(6))  # on the unit sphere
    assert torch.equal(tensor, reference(pair, tokenizer, PROMPTS[0], steps=6)[1])


def test_seeded_sampling_and_latent_noise(pipes, pairs, tokenizer):
    pipe, pair = pipes["dual"], pairs["dual"]
    sampled = [pipe(PROMPTS, do_sample=True, temperature=2.0, seed=seed, max_new_tokens=8) for seed in (0, 0, 1)]
    assert sampled[0] == sampled[1] and sampled[0] != sampled[2]
    # A seeded call restores the global RNG (checked on a single prompt: a list goes through a DataLoader, which
    # draws its own base seed from the global RNG).
    state = torch.get_rng_state()
    single = pipe(PROMPTS[0], do_sample=True, temperature=2.0, seed=0, max_new_tokens=8)
    assert torch.equal(torch.get_rng_state(), state) and single == sampled[0][0]
    # By hand: a seeded global RNG (the Talker samples from it) and a seeded generator (latent noise). (On the
    # in-memory pair: the loaded copy can differ from it in the last bit of a float, memory layout.)
    torch.manual_seed(5)
    expected = reference(
        pair,
        tokenizer,
        PROMPTS[1],
        do_sample=True,
        temperature=2.0,
        max_new_tokens=8,
        latent_noise_std=0.3,
        generator=torch.Generator().manual_seed(5),
    )
    got = pipeline(TASK, model=pair, tokenizer=tokenizer)(
        PROMPTS[1],
        do_sample=True,
        temperature=2.0,
        max_new_tokens=8,
        latent_noise_std=0.3,
        seed=5,
        return_latents=True,
        return_tensors=True,
    )
    assert got["generated_text"] == expected[0] and torch.equal(got["latents"], expected[1])
    clean = pipe(PROMPTS[1], return_latents=True, return_tensors=True)["latents"]
    noisy = [
        pipe(PROMPTS[1], latent_noise_std=0.3, seed=s, return_latents=True, return_tensors=True)["latents"]
        for s in (0, 0, 1)
    ]
    assert torch.equal(noisy[0], noisy[1]) and not torch.allclose(noisy[0], noisy[2])
    assert not torch.allclose(noisy[0], clean)
    torch.testing.assert_close(noisy[0].norm(dim=-1), torch.ones(STEPS))
    # top_k=1 sampling is greedy.
    assert pipe(PROMPTS, do_sample=True, top_k=1, seed=0) == pipe(PROMPTS)


def test_generation_arguments_are_forwarded(pipes, pairs, tokenizer):
    pipe, pair = pipes["mono"], pairs["mono"]
    for prompt in PROMPTS:
        assert len(pipe(prompt, max_new_tokens=1)["generated_text"].split()) <= 1
        assert (
            pipe(prompt, max_new_tokens=3)["generated_text"] == reference(pair, tokenizer, prompt, max_new_tokens=3)[0]
        )
        assert pipe(prompt, num_beams=3)["generated_text"] == reference(pair, tokenizer, prompt, num_beams=3)[0]
        assert (
            pipe(prompt, max_new_tokens=12, generate_kwargs={"repetition_penalty": 1.8})["generated_text"]
            == reference(pair, tokenizer, prompt, max_new_tokens=12, repetition_penalty=1.8)[0]
        )
    long = [pipe(prompt, max_new_tokens=12, min_new_tokens=12)["generated_text"] for prompt in PROMPTS]
    assert max(len(text.split()) for text in long) > STEPS + 1  # beyond the default max_new_tokens
    preset = pipeline(TASK, model=pair, tokenizer=tokenizer, num_reasoning_steps=6, max_new_tokens=2)
    assert preset(PROMPTS[0]) == {
        "generated_text": reference(pair, tokenizer, PROMPTS[0], steps=6, max_new_tokens=2)[0],
        "num_reasoning_steps": 6,
    }
    assert preset(PROMPTS[0], num_reasoning_steps=STEPS)["num_reasoning_steps"] == STEPS
    pair.train()  # the pipeline runs in eval mode and restores the mode
    try:
        assert (
            preset(PROMPTS[0])["generated_text"]
            == reference(pair.eval(), tokenizer, PROMPTS[0], steps=6, max_new_tokens=2)[0]
        )
        pair.train()
        preset(PROMPTS[0])
        assert pair.training and pair.reasoner.encoder.training and not pair.reasoner.target_encoder.training
    finally:
        pair.eval()


# ------------------------------------------------------------------------------------------------ errors


def test_bad_inputs(pipes, pairs, tokenizer):
    pipe = pipes["dual"]
    too_long = " ".join(["n1"] * 61)  # > max_position_embeddings (64) - num_reasoning_steps (4)
    cases = [
        ("", ValueError, r"^inputs: empty prompt"),
        ("  \n ", ValueError, r"^inputs: empty prompt"),
        ([PROMPTS[0], " "], ValueError, r"^inputs\[1\]: empty prompt"),
        ([], ValueError, r"^inputs: got an empty list"),
        ("n1 foo n2 bar foo", ValueError, r"^inputs: 2 token\(s\) not in the tokenizer's vocabulary: 'foo', 'bar'"),
        ([PROMPTS[0], "N1"], ValueError, r"^inputs\[1\]: 1 token\(s\) not in the tokenizer's vocabulary: 'N1'"),
        ("n1 [UNK]", ValueError, r"^inputs: 1 token\(s\) not in the tokenizer's vocabulary: '\[UNK\]'"),
        ("n1 [SEP] n2", ValueError, r"^inputs: special tokens are placed by the models.*'\[SEP\]'"),
        (
            too_long,
            ValueError,
            r"^inputs: the prompt has 61 tokens, more than fit with num_reasoning_steps=4: "
            r"max_position_embeddings - num_reasoning_steps = 64 - 4 = 60",
        ),
        ([PROMPTS[0], 7], ValueError, r"^inputs\[1\]: a prompt must be a string"),
        (7, ValueError, r"^inputs: the latent-reasoning pipeline takes a prompt string"),
        (None, ValueError, r"^inputs: pass a prompt string"),
    ]
    for value, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            pipe(value)
    with pytest.raises(TypeError, match=r"inputs\[0\]: a prompt must be a string"):  # also a TypeError
        pipe([b"n1"])
    pipe(" ".join(["n1"] * 60), max_new_tokens=1)  # exactly fits: 60 + SEP + 3 fed-back latents
    with pytest.raises(ValueError, match=r"prompt has 59 tokens, more than fit with num_reasoning_steps=6"):
        pipe(" ".join(["n1"] * 59), num_reasoning_steps=6)
    # The Dual-Talker reads prompt + latents + tokens: max_position_embeddings 128.
    with pytest.raises(
        ValueError,
        match=r"^inputs: the Talker's sequence would need 129 positions .* "
        r"max_new_tokens 69 - 1\), more than its max_position_embeddings \(128\)",
    ):
        pipe(" ".join(["n1"] * 56), max_new_tokens=69)
    pipe(" ".join(["n1"] * 56), max_new_tokens=68)  # exactly fits

    argument_cases = [
        (dict(num_reasoning_steps=0), ValueError, r"num_reasoning_steps must be an integer >= 1, got 0"),
        (dict(num_reasoning_steps=2.5), ValueError, r"num_reasoning_steps must be an integer >= 1, got 2.5"),
        (dict(num_reasoning_steps=True), ValueError, r"num_reasoning_steps must be an integer >= 1, got True"),
        (dict(latent_noise_std=-0.1), ValueError, r"latent_noise_std must be a finite number >= 0, got -0.1"),
        (dict(seed=-1), ValueError, r"seed must be an integer >= 0"),
        (dict(max_new_tokens=0), ValueError, r"max_new_tokens must be an integer >= 1, got 0"),
        (dict(num_beams=0), ValueError, r"num_beams must be an integer >= 1"),
        (dict(do_sample="yes"), ValueError, r"do_sample must be True or False"),
        (dict(return_latents="yes"), ValueError, r"return_latents must be True or False"),
        (dict(generate_kwargs={"input_ids": None}), ValueError, r"generate_kwargs: \['input_ids'\] are set by"),
        (dict(generate_kwargs=[1]), ValueError, r"generate_kwargs must be a dict"),
        (dict(max_length=4), TypeError, r"unexpected argument\(s\) \['max_length'\].*generate_kwargs"),
    ]
    for kwargs, error, pattern in argument_cases:
        with pytest.raises(error, match=pattern):
            pipe(PROMPTS[0], **kwargs)
    with pytest.raises(ValueError, match="num_reasoning_steps must be an integer >= 1"):
        pipeline(TASK, model=pairs["mono"], tokenizer=tokenizer, num_reasoning_steps=0)


def test_rejects_other_models_and_missing_tokenizers(pairs, tokenizer, tmp_path):
    with pytest.raises(
        TypeError,
        match=r"^model: the latent-reasoning pipeline needs a JepaReasonerWithTalker.*"
        r"MonoTalkerModel with model_type 'jepa_mono_talker'",
    ):
        pipeline(TASK, model=pairs["mono"].talker, tokenizer=tokenizer)
    with pytest.raises(TypeError, match=r"JepaReasonerModel with model_type 'jepa_reasoner'"):
        pipeline(TASK, model=pairs["mono"].reasoner, tokenizer=tokenizer)
    with pytest.raises(
        ValueError,
        match=r"^tokenizer: the latent-reasoning pipeline needs the pair's word-level "
        r"tokenizer and none could be loaded",
    ):
        pipeline(TASK, model=pairs["mono"])
    pairs["mono"].save_pretrained(tmp_path)  # no tokenizer beside it
    with pytest.raises(ValueError, match=r"^tokenizer: .* none could be loaded"):
        pipeline(TASK, model=str(tmp_path))
    big = TreeSearchTask(num_nodes=5, node_vocab_size=40).build_tokenizer()
    with pytest.raises(
        ValueError,
        match=rf"tokenizer: it has {len(big)} tokens but the model's vocabulary has "
        rf"{len(tokenizer)}",
    ):
        pipeline(TASK, model=pairs["mono"], tokenizer=big)
