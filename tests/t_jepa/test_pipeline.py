"""The `jepa-feature-extraction` pipeline on T-JEPA text: outputs equal `model.embed`, batches, every objective and
training mode, text errors, other models refused. (On every objective's saved folder and without hf_jepa: the family
tester in tests/t_jepa/test_modeling.py.)"""

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, pipeline

from hf_jepa import BroJepaConfig, BroJepaModel, EpmJepaConfig, EpmJepaModel, TJepaConfig, TJepaModel
from hf_jepa.pipelines import JepaFeatureExtractionPipeline

TASK = "jepa-feature-extraction"
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Python lists are mutable sequences of arbitrary objects.",
    "A dictionary maps hashable keys to arbitrary values.",
    "Every function returns None unless it returns something else.",
    "Strings are immutable sequences of Unicode code points.",
    "The with statement wraps a block in the methods of a context manager.",
    "An exception interrupts the normal flow of a program.",
    "Integers have unlimited precision in this language.",
] * 3
TEXTS = [
    "Lists are mutable.",
    "A dictionary maps keys to values and never forgets a key it was given.",
    "The fox jumps.",
    "Every exception interrupts the flow of the program, unless it is caught.",
    "Strings.",
]


def make_tokenizer():
    """A small BERT-style WordPiece tokenizer ([PAD] 0, [MASK] 4): `hf_jepa.data.text`'s trainer, or the same
    recipe built here with `tokenizers` when that module is unavailable."""
    try:
        from hf_jepa.data.text import train_wordpiece_tokenizer
    except ImportError:
        from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
        from transformers import BertTokenizerFast

        tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece()
        tokenizer.train_from_iterator(
            CORPUS,
            trainers.WordPieceTrainer(
                vocab_size=300,
                min_frequency=1,
                special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                show_progress=False,
            ),
        )
        tokenizer.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
        )
        return BertTokenizerFast(
            tokenizer_object=tokenizer,
            unk_token="[UNK]",
            sep_token="[SEP]",
            pad_token="[PAD]",
            cls_token="[CLS]",
            mask_token="[MASK]",
        )
    return train_wordpiece_tokenizer(CORPUS, vocab_size=300, min_frequency=1)


def make_model(objective: str = "jepa", seed: int = 0) -> TJepaModel:
    """A tiny model whose EMA target differs from its context encoder (so using the wrong encoder shows)."""
    torch.manual_seed(seed)
    model = TJepaModel(TJepaConfig.tiny(objective=objective))
    with torch.no_grad():
        for _, target in model.ema_pairs():
            for parameter in target.parameters():
                parameter.add_(0.05 * torch.randn_like(parameter))
    return model.eval()


@torch.no_grad()
def reference(model, tokenizer, text, use_target_encoder=True, **tokenizer_kwargs) -> torch.Tensor:
    encoded = tokenizer(text, return_tensors="pt", **tokenizer_kwargs)
    return model.embed(encoded["input_ids"], encoded["attention_mask"], use_target_encoder=use_target_encoder)[0]


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


@pytest.fixture(scope="module")
def model():
    return make_model()


@pytest.fixture(scope="module")
def model_dir(model, tokenizer, tmp_path_factory):
    directory = tmp_path_factory.mktemp("t-jepa-tiny")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def pipe(model_dir):
    return pipeline(TASK, model=str(model_dir))


# ------------------------------------------------------------------------------------------------ text pipeline


def test_outputs_equal_model_embed(pipe, model, tokenizer):
    assert isinstance(pipe, JepaFeatureExtractionPipeline) and isinstance(pipe.model, TJepaModel)
    assert pipe.tokenizer is not None and len(pipe.tokenizer) == len(tokenizer) <= 512
    for text in TEXTS:
        assert pipe(text) == reference(model, tokenizer, text).tolist()
    results = pipe(TEXTS)
    assert isinstance(results, list) and len(results) == len(TEXTS)
    assert all(len(r) == 32 and all(isinstance(v, float) for v in r) for r in results)
    assert results == [reference(model, tokenizer, t).tolist() for t in TEXTS]
    assert pipe(tuple(TEXTS)) == results

    tensor = pipe(TEXTS[1], return_tensors=True)
    assert isinstance(tensor, torch.Tensor) and tensor.shape == (32,)
    assert torch.equal(tensor, reference(model, tokenizer, TEXTS[1]))
    # The target encoder by default; the context encoder on request (they differ in this model).
    context = pipe(TEXTS[1], use_target_encoder=False, return_tensors=True)
    assert torch.equal(context, reference(model, tokenizer, TEXTS[1], use_target_encoder=False))
    assert not torch.allclose(context, tensor)
    assert not pipe.model.training


def test_batches_equal_single_inputs(pipe, model_dir):
    single = pipe(TEXTS, batch_size=1, return_tensors=True)
    for batch_size in (2, 5):
        batched = pipe(TEXTS, batch_size=batch_size, return_tensors=True)
        assert len(batched) == len(TEXTS)
        for got, expected in zip(batched, single):
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    preset = pipeline(TASK, model=str(model_dir), batch_size=2)
    for got, expected in zip(preset(TEXTS, return_tensors=True), single):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_every_objective_and_training_mode(tokenizer):
    for objective in ("mlm", "vicreg", "barlow_twins", "byol"):
        model = make_model(objective).train()
        extract = pipeline(TASK, model=model, tokenizer=tokenizer)
        result = extract(TEXTS[0], return_tensors=True)
        assert model.training  # the pipeline runs in eval mode and restores the mode
        model.eval()
        assert torch.equal(result, reference(model, tokenizer, TEXTS[0]))


def test_text_errors(pipe, model, tokenizer, model_dir, tmp_path):
    long_text = " ".join(["lists"] * 80)  # 80 words + [CLS] + [SEP] > 64 positions
    cases = [
        ("", ValueError, r"^inputs: empty text"),
        ("   \n", ValueError, r"^inputs: empty text"),
        (["Fine.", "Also fine.", " "], ValueError, r"^inputs\[2\]: empty text"),
        (
            long_text,
            ValueError,
            r"^inputs: the text is 82 tokens long, longer than the model's "
            r"max_position_embeddings \(64\); pass truncation=True",
        ),
        (["Fine.", long_text], ValueError, r"^inputs\[1\]: the text is 82 tokens long"),
        ([], ValueError, "inputs: got an empty list"),
        (["Fine.", 3], TypeError, r"inputs\[1\]: this T-JEPA model embeds text"),
        (np.zeros((8, 8), dtype=np.uint8), TypeError, "inputs: this T-JEPA model embeds text"),
    ]
    for value, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            pipe(value)
    with pytest.raises(TypeError, match="truncation must be True or False"):
        pipe("Fine.", truncation="yes")

    truncated = pipe(long_text, truncation=True, return_tensors=True)
    expected = reference(model, tokenizer, long_text, truncation=True, max_length=64)
    assert torch.equal(truncated, expected)
    assert len(tokenizer(long_text, truncation=True, max_length=64)["input_ids"]) == 64
    assert len(pipe(["Fine.", long_text], truncation=True)) == 2

    # A tokenizer larger than the model's vocabulary is refused when the pipeline is created.
    big = AutoTokenizer.from_pretrained(model_dir)
    big.add_tokens([f"extra{i}" for i in range(600)])
    with pytest.raises(ValueError, match=rf"tokenizer: it has {len(big)} tokens but the model's vocabulary has 512"):
        pipeline(TASK, model=model, tokenizer=big)
    model.save_pretrained(tmp_path)
    big.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="the tokenizer does not belong to this model"):
        pipeline(TASK, model=str(tmp_path))
    # No tokenizer at all: creating works, embedding text says what is missing.
    bare = pipeline(TASK, model=model)
    with pytest.raises(ValueError, match="this pipeline has no tokenizer"):
        bare("Fine.")


def test_rejects_other_models():
    with pytest.raises(TypeError, match=r"model: the jepa-feature-extraction pipeline needs a T-JEPA.*'epm_jepa'"):
        pipeline(TASK, model=EpmJepaModel(EpmJepaConfig.tiny()))
    with pytest.raises(TypeError, match=r"'bro_jepa'"):
        pipeline(TASK, model=BroJepaModel(BroJepaConfig.tiny()))
