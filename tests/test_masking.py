"""hf_jepa.data.masking: T-JEPA span masks on token sequences and I-JEPA multi-block masks on patch grids."""

import pytest
import torch

from hf_jepa.data.masking import MultiBlockMaskSampler, SpanMaskingCollator
from hf_jepa.data.text import AmbiguityCorpus, embedded_sentences, train_wordpiece_tokenizer


@pytest.fixture(scope="module")
def texts():
    return [row["text"] for row in embedded_sentences()]


@pytest.fixture(scope="module")
def tokenizer(texts):
    return train_wordpiece_tokenizer(texts, vocab_size=800)


# -- SpanMaskingCollator -----------------------------------------------------------------------------------------------


def _spans(row_span_ids: torch.Tensor) -> dict[int, list[int]]:
    spans = {}
    for position, span in enumerate(row_span_ids.tolist()):
        if span >= 0:
            spans.setdefault(span, []).append(position)
    return spans


def _check_batch(batch, tokenizer, collator):
    specials = torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    target = batch["target_mask"]
    assert not (target & torch.isin(batch["input_ids"], specials)).any()
    assert not (target & (batch["attention_mask"] == 0)).any()
    assert torch.equal(target, batch["span_ids"] >= 0)
    assert torch.equal(batch["context_mask"], batch["attention_mask"].bool() & ~target)
    assert torch.equal(batch["context_input_ids"][~target], batch["input_ids"][~target])
    assert (batch["context_input_ids"][target] == tokenizer.mask_token_id).all()
    for row in range(target.shape[0]):
        spans = _spans(batch["span_ids"][row])
        assert sorted(spans) == list(range(int(batch["num_spans"][row])))
        ends = []
        for span in sorted(spans):
            positions = spans[span]
            assert positions == list(range(positions[0], positions[-1] + 1))  # contiguous
            if ends:
                assert positions[0] > ends[-1] + 1  # left to right, at least one visible token in between
            ends.append(positions[-1])


def test_token_spans_properties(tokenizer, texts):
    low, high = 0.15, 0.3
    collator = SpanMaskingCollator(tokenizer, max_length=64, mask_ratio=(low, high), span_unit="token")
    for step in range(6):
        batch = collator(texts[step * 64 : (step + 1) * 64], step=step)
        _check_batch(batch, tokenizer, collator)
        maskable = (batch["attention_mask"].sum(dim=1) - 2).float()  # [CLS] and [SEP] excluded
        masked = batch["target_mask"].sum(dim=1).float()
        assert (masked >= 1).all() and (masked <= maskable - 1).all()
        ratio = masked / maskable
        slack = 0.5 / maskable  # rounding of ratio * n
        assert ((ratio >= low - slack) | (masked == 1)).all() and (ratio <= high + slack).all()
        spans = [len(p) for row in batch["span_ids"] for p in _spans(row).values()]
        assert max(spans) <= collator.max_span and min(spans) >= 1
    assert batch["input_ids"].shape[1] <= 64


def test_word_spans_never_split_words(tokenizer, texts):
    collator = SpanMaskingCollator(tokenizer, max_length=96, mask_ratio=0.3, num_spans=(1, 3), max_span=3)
    batch = collator(texts[:64], step=0)
    _check_batch(batch, tokenizer, collator)
    encoding = tokenizer(texts[:64], max_length=96, truncation=True)
    for row in range(64):
        word_ids = encoding.word_ids(row)
        masked_words = {word_ids[p] for p in range(len(word_ids)) if batch["target_mask"][row, p]}
        for position, word in enumerate(word_ids):
            if word in masked_words:
                assert batch["target_mask"][row, position], "a word is split between target and context"
        num_words = len({w for w in word_ids if w is not None})
        assert abs(len(masked_words) - 0.3 * num_words) <= 0.5 + 1e-9 or len(masked_words) in (1, num_words - 1)
        spans = _spans(batch["span_ids"][row])
        assert all(len({word_ids[p] for p in positions}) <= 3 for positions in spans.values())  # max_span words


def test_span_masks_are_deterministic_per_seed_and_step(tokenizer, texts):
    batch_texts = texts[100:132]
    collator = SpanMaskingCollator(tokenizer, seed=7)
    first = collator(batch_texts, step=3, rank=1)
    assert torch.equal(collator(batch_texts, step=3, rank=1)["span_ids"], first["span_ids"])
    assert not torch.equal(collator(batch_texts, step=4, rank=1)["span_ids"], first["span_ids"])
    assert not torch.equal(collator(batch_texts, step=3, rank=0)["span_ids"], first["span_ids"])
    other_seed = SpanMaskingCollator(tokenizer, seed=8)(batch_texts, step=3, rank=1)
    assert not torch.equal(other_seed["span_ids"], first["span_ids"])
    # Without an explicit step, the call index is the step (as a DataLoader collate_fn).
    counted = SpanMaskingCollator(tokenizer, seed=7)
    assert torch.equal(counted(batch_texts)["span_ids"], collator(batch_texts, step=0)["span_ids"])
    assert torch.equal(counted(batch_texts)["span_ids"], collator(batch_texts, step=1)["span_ids"])
    generated = [collator(batch_texts, generator=torch.Generator().manual_seed(5))["span_ids"] for _ in range(2)]
    assert torch.equal(*generated)


def test_collator_accepts_rows_features_and_column_batches(tokenizer, texts):
    collator = SpanMaskingCollator(tokenizer, max_length=48)
    batch_texts = texts[:16]
    expected = collator(batch_texts, step=2)
    rows = collator([{"text": text} for text in batch_texts], step=2)
    assert torch.equal(rows["span_ids"], expected["span_ids"])
    features = [{"input_ids": ids} for ids in tokenizer(batch_texts, max_length=48, truncation=True)["input_ids"]]
    from_features = collator(features, step=2)
    for key in ("input_ids", "attention_mask", "span_ids", "context_input_ids"):
        assert torch.equal(from_features[key], expected[key]), key
    assert torch.equal(collator({"text": batch_texts}, step=2)["span_ids"], expected["span_ids"])
    odd = ["An unknown \u4e2d character and a literal [MASK] token stay maskable here."]  # [UNK], [MASK]
    as_text = collator(odd, step=1)
    as_features = collator([{"input_ids": tokenizer(odd[0])["input_ids"]}], step=1)
    assert tokenizer.unk_token_id in as_text["input_ids"][0].tolist()
    assert all(torch.equal(as_text[key], as_features[key]) for key in as_text)
    padded = SpanMaskingCollator(tokenizer, max_length=48, padding="max_length")(batch_texts, step=2)
    assert padded["input_ids"].shape == (16, 48)


def test_collator_errors_and_truncation(tokenizer, texts):
    collator = SpanMaskingCollator(tokenizer, max_length=16)
    with pytest.raises(ValueError, match="text 1 is empty"):
        collator(["A fine sentence here.", "   "])
    with pytest.raises(ValueError, match="text 0 has 1 maskable"):
        collator(["Hello"])
    long_text = " ".join(["word"] * 40) + "."
    truncated = collator([long_text, texts[0]])
    assert truncated["input_ids"].shape[1] == 16 and truncated["input_ids"][0, -1] == tokenizer.sep_token_id
    with pytest.raises(ValueError, match=r"text 0 has \d+ tokens > max_length=16 and truncation=False"):
        SpanMaskingCollator(tokenizer, max_length=16, truncation=False)([long_text])
    for bad in ({"mask_ratio": 0.0}, {"mask_ratio": 1.0}, {"mask_ratio": (0.3, 0.1)}):
        with pytest.raises(ValueError, match="mask_ratio"):
            SpanMaskingCollator(tokenizer, **bad)
    with pytest.raises(ValueError, match="min_span"):
        SpanMaskingCollator(tokenizer, min_span=4, max_span=2)
    with pytest.raises(ValueError, match="num_spans"):
        SpanMaskingCollator(tokenizer, num_spans=0)
    with pytest.raises(ValueError, match="span_unit"):
        SpanMaskingCollator(tokenizer, span_unit="char")
    with pytest.raises(ValueError, match="list"):
        collator("a single string is not a batch")


def test_short_sequences_still_mask_one_and_keep_one(tokenizer):
    collator = SpanMaskingCollator(tokenizer, mask_ratio=0.9 - 1e-6, min_span=3, max_span=6, span_unit="token")
    batch = collator(["Two words", "Three short words", "Names are bound here."], step=0)
    _check_batch(batch, tokenizer, collator)
    maskable = batch["attention_mask"].sum(dim=1) - 2
    assert (batch["target_mask"].sum(dim=1) >= 1).all()
    assert (batch["target_mask"].sum(dim=1) <= maskable - 1).all()


def test_mask_char_spans_masks_the_ambiguous_slot(tokenizer):
    sample = AmbiguityCorpus(ambiguity=4).sample(8)
    collator = SpanMaskingCollator(tokenizer)
    spans = [[(start, end)] for start, end in zip(sample.span_char_start, sample.span_char_end)]
    batch = collator.mask_char_spans(sample.texts, spans)
    for row, filler in enumerate(sample.fillers):
        masked = batch["input_ids"][row][batch["target_mask"][row]]
        assert tokenizer.decode(masked).replace(" ", "").replace("##", "") == filler
    assert (batch["num_spans"] == 1).all()
    with pytest.raises(ValueError, match="covers no"):
        collator.mask_char_spans(["the cat sat"], [[(40, 45)]])


# -- MultiBlockMaskSampler ---------------------------------------------------------------------------------------------


def test_multiblock_masks_reach_every_patch_including_the_borders():
    sampler = MultiBlockMaskSampler(input_size=(14, 14))
    covered = torch.zeros(196, dtype=torch.long)
    for step in range(60):
        covered += sampler.sample(16, step=step)["target_masks"].sum(dim=(0, 1))
    assert (covered > 0).all()  # every patch, the last row and column included
    grid = covered.view(14, 14).float()
    # The reference's exclusive bound never reaches the last row/column; here the borders get a fair share.
    assert grid[-1].mean() > 0.2 * grid.mean() and grid[:, -1].mean() > 0.2 * grid.mean()
    assert grid[-1, -1] > 0 and grid[0, 0] > 0


def test_multiblock_scale_and_aspect_are_independent_draws():
    sampler = MultiBlockMaskSampler(input_size=(8, 8))
    draws = [sampler.sample(1, step=step)["block_draws"] for step in range(1500)]
    scale = torch.tensor([d["target_scale"] for d in draws])
    aspect = torch.tensor([d["target_aspect"] for d in draws])
    assert scale.min() >= 0.15 and scale.max() <= 0.2 and aspect.min() >= 0.75 and aspect.max() <= 1.5
    correlation = torch.corrcoef(torch.stack([scale, aspect]))[0, 1]
    assert abs(correlation) < 0.08  # the reference's shared draw gives a correlation of 1
    assert scale.std() > 0.01 and aspect.std() > 0.1


def test_multiblock_context_and_targets_are_disjoint_and_consistent():
    sampler = MultiBlockMaskSampler(input_size=(14, 14), min_keep=10)
    for step in range(10):
        out = sampler.sample(32, step=step)
        context, targets = out["context_mask"], out["target_masks"]
        assert context.shape == (32, 196) and targets.shape == (32, 4, 196)
        assert not (context & targets.any(dim=1)).any()
        counts = context.sum(dim=1)
        assert (counts == counts[0]).all() and counts[0] >= 10  # equal across the batch, min_keep respected
        assert torch.equal(torch.zeros_like(context).scatter_(1, out["context_indices"], True), context)
        assert (out["context_indices"].diff(dim=1) > 0).all()
        h, w = out["block_draws"]["target_shape"]
        assert out["target_indices"].shape == (32, 4, h * w)
        rebuilt = torch.zeros_like(targets).scatter_(2, out["target_indices"], True)
        assert torch.equal(rebuilt, targets)
        rows, cols = out["target_indices"] // 14, out["target_indices"] % 14
        assert ((rows.amax(-1) - rows.amin(-1) + 1) == h).all() and ((cols.amax(-1) - cols.amin(-1) + 1) == w).all()


def test_multiblock_min_keep_on_a_small_grid_and_its_error():
    sampler = MultiBlockMaskSampler(input_size=(6, 6), target_scale=(0.2, 0.25), min_keep=6)
    for step in range(20):
        assert (sampler.sample(8, step=step)["context_mask"].sum(dim=1) >= 6).all()
    impossible = MultiBlockMaskSampler(input_size=(6, 6), target_scale=(0.5, 0.5), min_keep=30, max_tries=5)
    with pytest.raises(ValueError, match="min_keep=30"):
        impossible.sample(4)


def test_multiblock_determinism_and_validation():
    sampler = MultiBlockMaskSampler(input_size=7, seed=3)
    first = sampler.sample(8, step=5, rank=1)
    again = sampler.sample(8, step=5, rank=1)
    for key in ("context_mask", "target_masks", "context_indices", "target_indices"):
        assert torch.equal(first[key], again[key])
    assert not torch.equal(sampler.sample(8, step=6, rank=1)["target_masks"], first["target_masks"])
    assert not torch.equal(sampler.sample(8, step=5, rank=0)["target_masks"], first["target_masks"])
    other = MultiBlockMaskSampler(input_size=7, seed=4).sample(8, step=5, rank=1)
    assert not torch.equal(other["target_masks"], first["target_masks"])
    # A full-size context block is allowed (the reference shrinks it to H-1 x W-1).
    assert MultiBlockMaskSampler(input_size=(14, 14)).block_shape(1.0, 1.0) == (14, 14)
    for bad in (
        {"target_scale": (0.0, 0.2)},
        {"context_scale": (0.9, 1.2)},
        {"target_aspect": (-1.0, 1.0)},
        {"min_keep": 49},
        {"num_targets": 0},
        {"input_size": (0, 4)},
    ):
        with pytest.raises(ValueError):
            MultiBlockMaskSampler(input_size=bad.pop("input_size", 7), **bad)
