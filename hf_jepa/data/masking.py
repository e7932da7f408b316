"""Mask samplers for JEPAs: contiguous target spans on token sequences (T-JEPA) and multi-block masks on patch grids
(I-JEPA).

Both are deterministic: a batch depends only on `(seed, step, rank)` (and the DataLoader worker id for the text
collator), or on an explicit `torch.Generator`.

`SpanMaskingCollator` (text). Per sequence, with `n` maskable units (words by default, or tokens; `[CLS]`, `[SEP]`
and padding are never maskable):

1. a ratio `r` is drawn uniformly in `mask_ratio` and the target size is `T = clamp(round(r * n), 1, n - 1)` units,
   so at least one unit is masked and at least one stays visible (the ratio is honoured exactly up to rounding);
2. the number of spans `S` is drawn uniformly in `num_spans`, clipped to what `T` allows with span lengths in
   `[min_span, max_span]` and a gap between spans (`ceil(T / max_span) <= S <= min(T // min_span, n - T + 1)`):
   long sequences get more spans than `num_spans[1]` when `T` needs them, short ones fewer than `num_spans[0]`;
3. the `S` span lengths are drawn uniformly in `[min_span, max_span]` and then adjusted one unit at a time (at random
   spans, within the bounds) until they sum to `T`. The bounds give way only where step 2 could not satisfy them:
   when `T < min_span` (a very short sequence) the single span is shorter than `min_span`, and when the gaps leave
   room for too few spans, spans grow beyond `max_span`;
4. the spans are placed left to right, uniformly among the placements that keep at least one visible unit between
   two spans (so each span is a maximal contiguous run of the target mask), numbered 0..S-1 from left to right.

`MultiBlockMaskSampler` (images): I-JEPA's multi-block masks with the two faults of the reference sampler fixed (see
`shared/docs/anchors.md`): block scale and aspect ratio come from independent draws, and a block's top-left corner is
drawn with an inclusive upper bound (`randint(0, H - h + 1)`), so blocks reach the last row and column. A block may
also span the full height or width (the reference shrinks any block to at most `H - 1` rows / `W - 1` columns).
"""

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


def _as_range(value, name: str, cast=float) -> tuple:
    if isinstance(value, (int, float)):
        return cast(value), cast(value)
    try:
        low, high = value
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or a (low, high) pair, got {value!r}") from None
    if low > high:
        raise ValueError(f"{name} must satisfy low <= high, got {value!r}")
    return cast(low), cast(high)


def _numpy_rng(seed: int, step: int, rank: int, generator: torch.Generator | None, extra: int = 0):
    if generator is not None:
        return np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator)))
    if min(seed, step, rank, extra) < 0:
        raise ValueError(f"seed, step and rank must be >= 0, got seed={seed}, step={step}, rank={rank}")
    return np.random.default_rng([seed, step, rank, extra])


# ---------------------------------------------------------------------------------------------------------------------
# Text: contiguous target spans


@dataclass
class SpanMaskingCollator:
    """Tokenise texts and sample T-JEPA target spans (module docstring); usable as a DataLoader `collate_fn`.

    Call it on a list of texts, of `{"text": ...}` rows (`text_column`), or of tokenised features (`{"input_ids": ...}`,
    e.g. from `datasets.map`; words are then recovered from the WordPiece `##` continuation prefix). Returns a dict of
    tensors, all `(B, L)`:

    - `input_ids`, `attention_mask`: the full sequence (the target encoder's input);
    - `context_input_ids`: `input_ids` with every target token replaced by `[MASK]`;
    - `target_mask` (bool): the target tokens; `context_mask` (bool): real tokens that are not targets (specials
      included), for encoders that drop the targets instead of masking them;
    - `span_ids` (int64): `-1` outside the targets, `0..S-1` for the tokens of span `s` (left to right);
    - and `num_spans` `(B,)`.

    Args:
        tokenizer: a fast tokenizer with a mask token (e.g. from `train_wordpiece_tokenizer`).
        max_length: longest sequence in tokens, `[CLS]`/`[SEP]` included.
        padding: `"longest"` (pad to the longest sequence of the batch) or `"max_length"`.
        truncation: `True` cuts longer texts to `max_length` tokens (their end is lost); `False` raises instead.
        mask_ratio: target fraction of the maskable units, a float or a `(low, high)` range drawn per sequence.
        num_spans: number of spans, an int or a `(low, high)` range drawn per sequence (adapted to the length).
        min_span, max_span: span length bounds, in units.
        span_unit: `"word"` (spans never split a word; the ratio counts words) or `"token"`.
        seed: base seed. A call's masks depend on `(seed, step, rank, DataLoader worker id)`; `step` defaults to the
            number of earlier calls without an explicit step. A `torch.Generator` passed to the call overrides this.
    """

    tokenizer: Any
    max_length: int = 128
    padding: str = "longest"
    truncation: bool = True
    mask_ratio: float | tuple[float, float] = (0.15, 0.3)
    num_spans: int | tuple[int, int] = (1, 4)
    min_span: int = 1
    max_span: int = 5
    span_unit: str = "word"
    seed: int = 0
    text_column: str = "text"
    _calls: int = field(default=0, init=False, repr=False)

    def __post_init__(self):
        self._ratio = _as_range(self.mask_ratio, "mask_ratio")
        if not 0.0 < self._ratio[0] <= self._ratio[1] < 1.0:
            raise ValueError(
                f"mask_ratio must lie in (0, 1): 0 would mask nothing, 1 everything; got {self.mask_ratio}"
            )
        self._spans = _as_range(self.num_spans, "num_spans", int)
        if self._spans[0] < 1:
            raise ValueError(f"num_spans must be >= 1, got {self.num_spans}")
        if not 1 <= self.min_span <= self.max_span:
            raise ValueError(f"need 1 <= min_span <= max_span, got min_span={self.min_span}, max_span={self.max_span}")
        if self.span_unit not in ("word", "token"):
            raise ValueError(f"span_unit must be 'word' or 'token', got {self.span_unit!r}")
        if self.padding not in ("longest", "max_length"):
            raise ValueError(f"padding must be 'longest' or 'max_length', got {self.padding!r}")
        if self.max_length < 4:
            raise ValueError(f"max_length must be >= 4 ([CLS] + two units + [SEP]), got {self.max_length}")
        if getattr(self.tokenizer, "mask_token_id", None) is None:
            raise ValueError("tokenizer has no mask token ([MASK]); train one with train_wordpiece_tokenizer")
        if getattr(self.tokenizer, "pad_token_id", None) is None:
            raise ValueError("tokenizer has no padding token ([PAD])")

    # -- tokenisation ---------------------------------------------------------------------------------------------

    def _encode(self, examples) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[list[int | None]]]:
        """`(input_ids, attention_mask, maskable, word_ids)` for a batch of examples."""
        if isinstance(examples, dict):  # a batch of columns (datasets' batched format)
            key = self.text_column if self.text_column in examples else "input_ids"
            if key not in examples:
                raise ValueError(f"examples has neither a {self.text_column!r} nor an 'input_ids' column")
            examples = (
                list(examples[key])
                if key == self.text_column
                else [{"input_ids": ids} for ids in examples["input_ids"]]
            )
        if isinstance(examples, (str, bytes)) or not isinstance(examples, (list, tuple)):
            raise ValueError(f"examples must be a list of texts or features, got {type(examples).__name__}")
        if not examples:
            raise ValueError("examples is empty")
        if all(isinstance(example, str) for example in examples):
            return self._encode_texts(list(examples))
        if all(isinstance(example, dict) for example in examples):
            if all(self.text_column in example for example in examples):
                return self._encode_texts([example[self.text_column] for example in examples])
            if all("input_ids" in example for example in examples):
                return self._encode_features(examples)
        raise ValueError(
            f"examples must all be texts, all be rows with a {self.text_column!r} field, or all be features with "
            "'input_ids'"
        )

    def _encode_texts(self, texts: list[str]):
        for index, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"text {index} is empty (examples[{index}] = {text!r})")
        if not self.truncation:
            lengths = [len(ids) for ids in self.tokenizer(texts, add_special_tokens=True)["input_ids"]]
            for index, length in enumerate(lengths):
                if length > self.max_length:
                    raise ValueError(
                        f"text {index} has {length} tokens > max_length={self.max_length} and truncation=False"
                    )
        encoding = self.tokenizer(
            texts,
            max_length=self.max_length,
            truncation=True,
            padding=self.padding,
            return_special_tokens_mask=True,
            return_tensors="pt",
        )
        word_ids = [encoding.word_ids(index) for index in range(len(texts))]
        maskable = (encoding["special_tokens_mask"] == 0) & (encoding["attention_mask"] == 1)
        return encoding["input_ids"], encoding["attention_mask"], maskable, word_ids

    def _encode_features(self, features: list[dict]):
        rows = []
        for index, feature in enumerate(features):
            ids = list(feature["input_ids"])
            if not ids:
                raise ValueError(f"features {index} has empty input_ids")
            if len(ids) > self.max_length:
                if not self.truncation:
                    raise ValueError(
                        f"features {index} has {len(ids)} tokens > max_length={self.max_length} and truncation=False"
                    )
                # Cut the end of the text, keeping a final [SEP] (as the tokenizer's truncation does).
                keeps_sep = ids[-1] == self.tokenizer.sep_token_id
                ids = ids[: self.max_length - 1] + [ids[-1]] if keeps_sep else ids[: self.max_length]
            rows.append(ids)
        length = self.max_length if self.padding == "max_length" else max(len(ids) for ids in rows)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(rows), length), pad, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), length), dtype=torch.long)
        special = torch.ones((len(rows), length), dtype=torch.bool)
        # Words from the WordPiece continuation prefix ("##"); without one, every token is its own word.
        backend_model = getattr(getattr(self.tokenizer, "backend_tokenizer", None), "model", None)
        prefix = getattr(backend_model, "continuing_subword_prefix", None)
        # The tokens the post-processor adds and padding (as `return_special_tokens_mask` marks them for texts):
        # [UNK] and a literal [MASK] in the input stay maskable, as on the text path.
        names = ("cls_token_id", "sep_token_id", "pad_token_id", "bos_token_id", "eos_token_id")
        structural = torch.tensor([i for i in (getattr(self.tokenizer, name, None) for name in names) if i is not None])
        word_ids = []
        for index, ids in enumerate(rows):
            input_ids[index, : len(ids)] = torch.tensor(ids)
            attention_mask[index, : len(ids)] = 1
            special[index, : len(ids)] = torch.isin(torch.tensor(ids), structural)
            tokens = self.tokenizer.convert_ids_to_tokens(ids)
            words, word = [], -1
            for token, is_special in zip(tokens, special[index, : len(ids)].tolist()):
                if is_special:
                    words.append(None)
                    continue
                if not (prefix and token.startswith(prefix) and word >= 0):
                    word += 1
                words.append(word)
            word_ids.append(words + [None] * (length - len(ids)))
        maskable = ~special & (attention_mask == 1)
        return input_ids, attention_mask, maskable, word_ids

    # -- span sampling ---------------------------------------------------------------------------------------------

    def _units(self, maskable_row: list[bool], word_row: list[int | None]) -> list[list[int]]:
        """Maskable positions grouped into units (words or single tokens), in order."""
        units: list[list[int]] = []
        previous = None
        for position, (ok, word) in enumerate(zip(maskable_row, word_row)):
            if not ok:
                previous = None
                continue
            if self.span_unit == "word" and word is not None and word == previous and units:
                units[-1].append(position)
            else:
                units.append([position])
            previous = word
        return units

    def sample_spans(self, num_units: int, rng: np.random.Generator) -> list[tuple[int, int]]:
        """`[(start, end), ...]` unit intervals (end exclusive), left to right, for a sequence of `num_units` units."""
        if num_units < 2:
            raise ValueError(f"need at least 2 maskable units (one target, one context), got {num_units}")
        ratio = rng.uniform(*self._ratio) if self._ratio[0] < self._ratio[1] else self._ratio[0]
        total = int(min(max(round(ratio * num_units), 1), num_units - 1))
        # Span count: the drawn number, clipped to [spans needed at max_span, spans possible at min_span with gaps].
        lowest = math.ceil(total / self.max_span)
        highest = max(1, min(total // self.min_span, num_units - total + 1))
        low = min(max(self._spans[0], lowest), highest)
        high = min(max(self._spans[1], lowest), highest)
        count = int(rng.integers(low, high + 1))
        # Length bounds, relaxed only when the counts above could not satisfy them (very short or long sequences).
        floor, cap = min(self.min_span, total // count), max(self.max_span, math.ceil(total / count))
        lengths = rng.integers(floor, cap, count, endpoint=True)
        while lengths.sum() != total:  # move one unit at a time, at random spans, within the bounds
            if lengths.sum() < total:
                lengths[rng.choice(np.flatnonzero(lengths < cap))] += 1
            else:
                lengths[rng.choice(np.flatnonzero(lengths > floor))] -= 1
        free = num_units - total - (count - 1)
        cuts = np.sort(rng.choice(free + count, count, replace=False))
        starts = cuts + np.concatenate([[0], np.cumsum(lengths)[:-1]])
        return [(int(start), int(start + length)) for start, length in zip(starts, lengths)]

    def _rng(self, step: int | None, rank: int, generator: torch.Generator | None) -> np.random.Generator:
        worker = 0
        if generator is None and step is None:
            step = self._calls
            self._calls += 1
            # Counted calls repeat in every DataLoader worker: tell the workers apart. An explicit `step` names the
            # batch, so its masks are the same in whichever worker builds it.
            info = torch.utils.data.get_worker_info()
            worker = 0 if info is None else info.id
        return _numpy_rng(self.seed, step or 0, rank, generator, extra=worker)

    def __call__(self, examples, step: int | None = None, rank: int = 0, generator: torch.Generator | None = None):
        input_ids, attention_mask, maskable, word_ids = self._encode(examples)
        rng = self._rng(step, rank, generator)
        span_ids = torch.full(input_ids.shape, -1, dtype=torch.long)
        num_spans = torch.zeros(input_ids.shape[0], dtype=torch.long)
        maskable_rows = maskable.tolist()
        for row, (maskable_row, word_row) in enumerate(zip(maskable_rows, word_ids)):
            units = self._units(maskable_row, word_row)
            if len(units) < 2:
                raise ValueError(
                    f"text {row} has {len(units)} maskable {self.span_unit}(s) after tokenisation; at least 2 are "
                    "needed (one target, one visible)"
                )
            spans = self.sample_spans(len(units), rng)
            for span, (start, end) in enumerate(spans):
                positions = [position for unit in units[start:end] for position in unit]
                span_ids[row, positions] = span
            num_spans[row] = len(spans)
        return self._outputs(input_ids, attention_mask, span_ids, num_spans)

    def _outputs(self, input_ids, attention_mask, span_ids, num_spans) -> dict[str, torch.Tensor]:
        target_mask = span_ids >= 0
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "context_input_ids": input_ids.masked_fill(target_mask, self.tokenizer.mask_token_id),
            "target_mask": target_mask,
            "context_mask": attention_mask.bool() & ~target_mask,
            "span_ids": span_ids,
            "num_spans": num_spans,
        }

    def mask_char_spans(self, texts: list[str], char_spans: list[list[tuple[int, int]]]) -> dict[str, torch.Tensor]:
        """Like `__call__`, with given targets: every token overlapping `char_spans[i][s]` (`(start, end)` character
        offsets in `texts[i]`) belongs to span `s`. E.g. the ambiguous slot of `AmbiguityCorpus.sample` rows."""
        if len(texts) != len(char_spans):
            raise ValueError(f"texts and char_spans differ in length: {len(texts)} vs {len(char_spans)}")
        for index, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"text {index} is empty (texts[{index}] = {text!r})")
        encoding = self.tokenizer(
            list(texts),
            max_length=self.max_length,
            truncation=self.truncation,
            padding=self.padding,
            return_special_tokens_mask=True,
            return_offsets_mapping=True,
            return_tensors="pt",
        )
        offsets = encoding["offset_mapping"]
        real = (encoding["special_tokens_mask"] == 0) & (encoding["attention_mask"] == 1)
        span_ids = torch.full(encoding["input_ids"].shape, -1, dtype=torch.long)
        num_spans = torch.zeros(len(texts), dtype=torch.long)
        for row, spans in enumerate(char_spans):
            for span, (start, end) in enumerate(spans):
                hit = real[row] & (offsets[row, :, 0] < end) & (offsets[row, :, 1] > start)
                if not hit.any():
                    raise ValueError(f"char span {span} {(start, end)} of text {row} covers no (untruncated) token")
                span_ids[row, hit] = span
            if real[row].sum() <= (span_ids[row] >= 0).sum():
                raise ValueError(f"the char spans of text {row} cover every token: nothing is left as context")
            num_spans[row] = len(spans)
        return self._outputs(encoding["input_ids"], encoding["attention_mask"], span_ids, num_spans)


# ---------------------------------------------------------------------------------------------------------------------
# Images: I-JEPA multi-block masks


@dataclass
class MultiBlockMaskSampler:
    """I-JEPA multi-block masks on an `H x W` patch grid, with the reference sampler's faults fixed.

    Per batch (as in I-JEPA, so that every sample's blocks have the same size and the masks stack): a target block
    shape from an independent scale draw `U(target_scale)` and aspect-ratio draw `U(target_aspect)`
    (`h = round(sqrt(n * aspect))`, `w = round(sqrt(n / aspect))` with `n = int(H * W * scale)`, clamped to
    `[1, H]` x `[1, W]`), and likewise a context block shape. Per sample: `num_targets` target blocks and one context
    block at uniform top-left corners, rows in `0..H-h` and columns in `0..W-w` inclusive; the context is the context
    block minus the union of the targets (targets may overlap each other). A sample whose context keeps fewer than
    `min_keep` patches is redrawn (all its blocks), up to `max_tries` times, then a `ValueError` is raised.

    All samples have the same number of patches per target block; context sizes differ, so every context is cut to
    the smallest one in the batch by keeping a uniformly random subset of its patches (the reference keeps the first
    indices, which favours the top rows); `context_mask` reflects that cut.

    `sample(batch_size, step, rank)` returns a dict: `context_mask` `(B, N)` bool, `target_masks` `(B, M, N)` bool,
    `context_indices` `(B, K_ctx)` and `target_indices` `(B, M, K_tgt)` int64 patch indices (row-major, ascending),
    and `block_draws` (the batch's `target_scale`, `target_aspect`, `context_scale`, `context_aspect` floats and
    `target_shape`, `context_shape`).

    Defaults are I-JEPA's ImageNet settings (facebookresearch/ijepa): 4 targets of scale 0.15-0.2 and aspect 0.75-1.5,
    a context of scale 0.85-1.0 and aspect 1, `min_keep=4`.
    """

    input_size: int | tuple[int, int] = (14, 14)
    num_targets: int = 4
    target_scale: tuple[float, float] = (0.15, 0.2)
    target_aspect: tuple[float, float] = (0.75, 1.5)
    context_scale: tuple[float, float] = (0.85, 1.0)
    context_aspect: tuple[float, float] = (1.0, 1.0)
    min_keep: int = 4
    seed: int = 0
    max_tries: int = 100

    def __post_init__(self):
        size = (self.input_size, self.input_size) if isinstance(self.input_size, int) else tuple(self.input_size)
        if len(size) != 2 or min(size) < 1:
            raise ValueError(f"input_size must be a positive int or (height, width) in patches, got {self.input_size}")
        self.height, self.width = int(size[0]), int(size[1])
        self.num_patches = self.height * self.width
        for name in ("target_scale", "context_scale"):
            low, high = _as_range(getattr(self, name), name)
            if not 0.0 < low <= high <= 1.0:
                raise ValueError(f"{name} must lie in (0, 1], got {getattr(self, name)}")
        for name in ("target_aspect", "context_aspect"):
            low, _ = _as_range(getattr(self, name), name)
            if low <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_targets < 1:
            raise ValueError(f"num_targets must be >= 1, got {self.num_targets}")
        if not 1 <= self.min_keep < self.num_patches:
            raise ValueError(f"min_keep must lie in [1, {self.num_patches - 1}] (H*W - 1), got {self.min_keep}")
        if self.max_tries < 1:
            raise ValueError(f"max_tries must be >= 1, got {self.max_tries}")

    def block_shape(self, scale: float, aspect: float) -> tuple[int, int]:
        """Block `(h, w)` in patches for a scale (fraction of the grid) and an aspect ratio (h / w)."""
        area = max(1, int(self.num_patches * scale))
        h = int(round(math.sqrt(area * aspect)))
        w = int(round(math.sqrt(area / aspect)))
        return min(max(h, 1), self.height), min(max(w, 1), self.width)

    def _generator(self, step: int, rank: int) -> torch.Generator:
        if min(step, rank) < 0:
            raise ValueError(f"step and rank must be >= 0, got step={step}, rank={rank}")
        # The same mixing as the other data builders: a distinct stream per (seed, step, rank).
        return torch.Generator().manual_seed((self.seed * 1_000_003 + step) * 10_007 + rank)

    @staticmethod
    def _uniform(bounds, generator) -> float:
        low, high = _as_range(bounds, "range")
        return low + float(torch.rand((), generator=generator)) * (high - low)

    def _blocks(self, count: int, shape: tuple[int, int], generator: torch.Generator) -> torch.Tensor:
        """`(count, H, W)` bool masks of `shape` blocks at uniform corners (inclusive upper bounds)."""
        h, w = shape
        tops = torch.randint(0, self.height - h + 1, (count, 1, 1), generator=generator)
        lefts = torch.randint(0, self.width - w + 1, (count, 1, 1), generator=generator)
        rows = torch.arange(self.height).view(1, -1, 1)
        cols = torch.arange(self.width).view(1, 1, -1)
        return (rows >= tops) & (rows < tops + h) & (cols >= lefts) & (cols < lefts + w)

    def sample(self, batch_size: int, step: int = 0, rank: int = 0, generator: torch.Generator | None = None) -> dict:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        generator = self._generator(step, rank) if generator is None else generator
        # Independent draws for scale and aspect (the reference derives both from one draw).
        draws = {
            "target_scale": self._uniform(self.target_scale, generator),
            "target_aspect": self._uniform(self.target_aspect, generator),
            "context_scale": self._uniform(self.context_scale, generator),
            "context_aspect": self._uniform(self.context_aspect, generator),
        }
        target_shape = self.block_shape(draws["target_scale"], draws["target_aspect"])
        context_shape = self.block_shape(draws["context_scale"], draws["context_aspect"])
        draws.update(target_shape=target_shape, context_shape=context_shape)
        targets = torch.zeros(batch_size, self.num_targets, self.num_patches, dtype=torch.bool)
        context = torch.zeros(batch_size, self.num_patches, dtype=torch.bool)
        todo = torch.arange(batch_size)
        for _ in range(self.max_tries):
            count = len(todo)
            new_targets = self._blocks(count * self.num_targets, target_shape, generator).view(
                count, self.num_targets, self.num_patches
            )
            new_context = self._blocks(count, context_shape, generator).view(count, self.num_patches)
            new_context &= ~new_targets.any(dim=1)
            targets[todo], context[todo] = new_targets, new_context
            todo = todo[new_context.sum(dim=1) < self.min_keep]
            if len(todo) == 0:
                break
        else:
            raise ValueError(
                f"could not keep min_keep={self.min_keep} context patches in {self.max_tries} tries on a "
                f"{self.height}x{self.width} grid (target block {target_shape} x {self.num_targets}, context block "
                f"{context_shape}); lower min_keep, target_scale or num_targets"
            )
        # Equal context counts across the batch: a uniformly random subset of each context, of the smallest size.
        keep = int(context.sum(dim=1).min())
        scores = torch.rand(batch_size, self.num_patches, generator=generator).masked_fill(~context, -1.0)
        context_indices = scores.topk(keep, dim=1).indices.sort(dim=1).values
        context = torch.zeros_like(context).scatter_(1, context_indices, True)
        target_size = target_shape[0] * target_shape[1]
        target_indices = torch.argsort((~targets).to(torch.uint8), dim=-1, stable=True)[..., :target_size]
        return {
            "context_mask": context,
            "target_masks": targets,
            "context_indices": context_indices,
            "target_indices": target_indices,
            "block_draws": draws,
        }

    __call__ = sample


__all__ = ["MultiBlockMaskSampler", "SpanMaskingCollator"]
