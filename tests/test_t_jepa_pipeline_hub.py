"""The `jepa-feature-extraction` pipeline (T-JEPA text, I-JEPA images), sharing a saved T-JEPA folder (model +
tokenizer + card) through the loopback Hub, and the T-JEPA / I-JEPA model cards. (The pipeline on every objective's
saved folder and without hf_jepa: the family testers in tests/test_t_jepa_model.py and tests/test_i_jepa_model.py.)"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from huggingface_hub import ModelCard
from PIL import Image
from transformers import AutoModel, AutoTokenizer, pipeline

from hf_jepa import BroJepaConfig, BroJepaModel, EpmJepaConfig, EpmJepaModel, TJepaConfig, TJepaModel
from hf_jepa.cards.common import MODEL_ID_PLACEHOLDER, template_text
from hf_jepa.cards.i_jepa import CARD_TAGS as I_JEPA_CARD_TAGS
from hf_jepa.cards.i_jepa import render_card as render_i_jepa_card
from hf_jepa.cards.i_jepa import result_rows as i_jepa_result_rows
from hf_jepa.cards.t_jepa import CARD_TAGS as T_JEPA_CARD_TAGS
from hf_jepa.cards.t_jepa import render_card as render_t_jepa_card
from hf_jepa.cards.t_jepa import result_rows as t_jepa_result_rows
from hf_jepa.hub import card_for_repo, push_to_hub
from hf_jepa.pipelines import JepaFeatureExtractionPipeline
from hf_jepa.testing.hub_server import use_loopback_hub

TASK = "jepa-feature-extraction"
REPO_ROOT = Path(__file__).resolve().parents[1]
REPO_ID = "org/t-jepa-tiny"
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


# ------------------------------------------------------------------------------------------------ image pipeline


@pytest.fixture(scope="module")
def image_model():
    i_jepa = pytest.importorskip("hf_jepa.modeling.i_jepa", reason="the I-JEPA family is not in this checkout")
    torch.manual_seed(0)
    model = i_jepa.IJepaModel(i_jepa.IJepaConfig.tiny())
    with torch.no_grad():
        for parameter in model.target_encoder.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model.eval()


def _normalised(pixels: np.ndarray, config) -> torch.Tensor:
    tensor = torch.from_numpy(pixels).to(torch.float32) / 255.0
    mean = torch.tensor(config.pixel_mean, dtype=torch.float32).reshape(-1, 1, 1)
    std = torch.tensor(config.pixel_std, dtype=torch.float32).reshape(-1, 1, 1)
    return ((tensor.reshape(-1, config.image_size, config.image_size) - mean) / std)[None]


def test_image_outputs_equal_model_embed(image_model):
    config = image_model.config
    assert config.model_type == "i_jepa" and config.num_channels == 1 and config.image_size == 28
    extract = pipeline(TASK, model=image_model)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(3, 28, 28), dtype=np.uint8)
    with torch.no_grad():
        expected = [image_model.embed(_normalised(image, config))[0] for image in images]
    first = expected[0].tolist()
    assert extract(images[0]) == first and len(first) == config.hidden_size
    for name, value in {
        "pil": Image.fromarray(images[0]),
        "pil_rgb": Image.fromarray(images[0]).convert("RGB"),
        "chw": images[0][None],
        "hwc": images[0][..., None],
        "torch_uint8": torch.from_numpy(images[0]),
        "float32": images[0].astype(np.float32) / 255.0,
        "int64": images[0].astype(np.int64),
    }.items():
        torch.testing.assert_close(torch.tensor(extract(value)), expected[0], rtol=1e-5, atol=1e-6, msg=name)
    assert extract(list(images)) == [e.tolist() for e in expected]
    batch = extract(images[:, None], return_tensors=True)  # a 4-D array is N images
    assert all(torch.equal(got, e) for got, e in zip(batch, expected))
    for got, e in zip(extract(list(images), batch_size=2, return_tensors=True), expected):
        torch.testing.assert_close(got, e, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        context = image_model.embed(_normalised(images[0], config), use_target_encoder=False)[0]
    assert torch.equal(extract(images[0], use_target_encoder=False, return_tensors=True), context)
    # Another size is resized to config.image_size.
    assert len(extract(np.zeros((56, 40), dtype=np.uint8))) == config.hidden_size


def test_image_errors(image_model):
    extract = pipeline(TASK, model=image_model)
    cases = [
        (np.full((28, 28), 2.0, dtype=np.float32), ValueError, r"^inputs: floating-point images must hold pixels"),
        (np.full((28, 28), np.nan, dtype=np.float32), ValueError, r"\[0, 1\]"),
        (np.full((28, 28), 300, dtype=np.int64), ValueError, r"inputs: integer images must hold pixels in 0\.\.255"),
        (np.zeros((28, 28), dtype=bool), TypeError, "inputs: boolean images"),
        (np.zeros((3, 28, 28), dtype=np.uint8), ValueError, r"inputs: images must have shape \(H, W\), \(1, H, W\)"),
        ([np.zeros((28, 28), dtype=np.uint8), "a cat"], TypeError, r"inputs\[1\]: this I-JEPA model embeds images"),
        ("a cat", TypeError, "inputs: this I-JEPA model embeds images"),
    ]
    for value, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            extract(value)


# ------------------------------------------------------------------------------------------------ Hub round trip


HUB_METRICS = {  # a partial set: retrieval, irreducible variance, step metrics etc. were not measured
    "objective": "jepa",
    "val_loss": 0.41234,
    "mi_proxy": 0.28765,
    "effective_rank": 3.2109,
    "probe_accuracy": 0.3125,
    "data_source": "embedded CPython documentation sentences",
    "device": "cpu",
    "diagnostics_plot": "diagnostics.png",
}


@pytest.fixture(scope="module")
def pushed(hub, model, tokenizer, tmp_path_factory):
    directory = tmp_path_factory.mktemp("t-jepa-run")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    Image.fromarray(np.arange(32 * 32, dtype=np.uint32).reshape(32, 32).astype(np.uint8)).save(
        directory / "diagnostics.png"
    )
    (directory / "eval_results.json").write_text(json.dumps(HUB_METRICS))
    render_t_jepa_card(model.config, HUB_METRICS).save(str(directory / "README.md"))
    (directory / "checkpoints").mkdir()
    (directory / "checkpoints" / "junk.bin").write_bytes(b"never uploaded")
    with use_loopback_hub(hub, cache_dir=tmp_path_factory.mktemp("push-cache")):
        url = push_to_hub(directory, REPO_ID)
    assert url.endswith("/" + REPO_ID)
    return directory


def test_pushed_files(hub, pushed):
    stored = hub.files(REPO_ID)
    local = {p.relative_to(pushed).as_posix(): p for p in pushed.rglob("*") if p.is_file()}
    expected = {
        "config.json",
        "model.safetensors",
        "configuration_t_jepa.py",
        "modeling_t_jepa.py",
        "README.md",
        "tokenizer.json",
        "tokenizer_config.json",
        "diagnostics.png",
        "eval_results.json",
    }
    assert expected <= set(stored)
    assert not any(path.startswith("checkpoints/") for path in stored)
    for path in expected:  # the card as uploaded: the local one (never rewritten) with the repo id filled in
        want = card_for_repo(local[path].read_bytes(), REPO_ID) if path == "README.md" else local[path].read_bytes()
        assert stored[path] == want, path
    assert MODEL_ID_PLACEHOLDER in local["README.md"].read_text(encoding="utf-8")
    readme = stored["README.md"].decode()
    assert MODEL_ID_PLACEHOLDER not in readme and f'from_pretrained("{REPO_ID}")' in readme
    assert f'pipeline("jepa-feature-extraction", model="{REPO_ID}", trust_remote_code=True)' in readme
    # hf_jepa installed: the registered classes serve the folder, without trust_remote_code (docs/guides/remote-code.md)
    assert f'extract = pipeline("jepa-feature-extraction", model="{REPO_ID}")  # hf_jepa installed' in readme


def test_from_hub_bit_identical(model, tokenizer, pipe, pushed, online):
    loaded = AutoModel.from_pretrained(REPO_ID)
    assert type(loaded) is TJepaModel and loaded.config.objective == "jepa"
    reference_state, state = model.state_dict(), loaded.state_dict()
    assert reference_state.keys() == state.keys()
    for name, tensor in reference_state.items():
        assert torch.equal(state[name], tensor), name
    assert not any(p.requires_grad for p in loaded.target_encoder.parameters())

    hub_pipe = pipeline(TASK, model=REPO_ID)
    assert hub_pipe.tokenizer is not None and hub_pipe.tokenizer.get_vocab() == tokenizer.get_vocab()
    results = hub_pipe(TEXTS, return_tensors=True)
    for text, got in zip(TEXTS, results):
        assert torch.equal(got, reference(model, tokenizer, text))
    assert hub_pipe(TEXTS) == pipe(TEXTS)

    card = ModelCard.load(REPO_ID)
    assert str(card) == card_for_repo((pushed / "README.md").read_bytes(), REPO_ID).decode()
    assert card.data.library_name == "transformers"  # the saved config has auto_map
    assert {(r.metric_config, r.metric_value) for r in card.data.eval_results} == {("linear_probe", 0.3125)}
    assert "| MI proxy, InfoNCE bound (nats) | 0.2877 |" in card.text and "![](diagnostics.png)" in card.text


# ------------------------------------------------------------------------------------------------ cards


CARD_METRICS = {
    "objective": "jepa",
    "val_loss": 0.123456,
    "mi_proxy": 0.28712,
    "effective_rank": 1.87654,
    "cosine_mean": 0.91234,
    "cosine_variance": 0.000123,
    "embedding_std": 0.04567,
    "probe_accuracy": 0.2345,
    "retrieval_recall_at_1": 0.0125,
    "retrieval_recall_at_10": 0.0875,
    "irreducible_variance": 0.34567,
    "mi_saturation_step": 400,
    "divergence_step": None,
    "rank_collapse_step": 1200,
    "data_source": "embedded CPython documentation sentences",
    "diagnostics_plot": "diagnostics.png",
    "train_time_s": 321.5,
    "train_steps": 2000,
    "device": "cpu",
    "num_processes": 2,
    "probe_chance_accuracy": 0.142857,
}


def _front_matter(card: ModelCard) -> dict:
    text = str(card)
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def _tables_are_blocks(text: str) -> None:
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        if lines and lines[0].startswith("|"):
            assert all(line.startswith("|") for line in lines), block


def test_templates_are_found():
    for name in ("t_jepa.md", "i_jepa.md"):
        assert template_text(name) == (REPO_ROOT / "model_cards" / name).read_text(encoding="utf-8")


def test_t_jepa_card_metadata_and_numbers():
    card = render_t_jepa_card(
        TJepaConfig.cpu_fast(),
        CARD_METRICS,
        {"max_steps": 2000, "output_dir": "runs/x", "per_device_batch_size": 32},
        {"data": "embedded", "max_length": 64},
    )
    meta = _front_matter(card)
    assert meta["library_name"] == "hf-jepa" and meta["license"] == "apache-2.0"
    assert meta["pipeline_tag"] == "feature-extraction" and "datasets" not in meta
    assert set(T_JEPA_CARD_TAGS) <= set(meta["tags"]) and "hf-jepa" in meta["tags"]
    (entry,) = meta["model-index"]
    assert entry["name"] == "t-jepa"
    values = {(m["type"], m["value"]) for result in entry["results"] for m in result["metrics"]}
    assert values == {("accuracy", 0.2345), ("recall_at_1", 0.0125), ("recall_at_10", 0.0875)}
    parsed = ModelCard(str(card)).data
    assert {r.metric_value for r in parsed.eval_results} == {0.2345, 0.0125, 0.0875}

    text = card.text
    assert "# T-JEPA: I-JEPA's latent prediction on text (BERT backbone)" in text
    for row in (
        "| Objective | T-JEPA (`jepa`) |",
        "| Validation loss (the objective's own) | 0.1235 |",
        "| MI proxy, InfoNCE bound (nats) | 0.2871 |",
        "| Effective rank of the validation embeddings | 1.88 |",
        "| Mean pairwise cosine similarity of embeddings | 0.9123 |",
        "| Variance of pairwise cosine similarity | 0.000123 |",
        "| Embedding std (mean over dimensions) | 0.0457 |",
        "| Irreducible conditional target variance | 0.3457 |",
        "| Linear-probe accuracy (topic classification) | 23.45% |",
        "| Retrieval recall@1 (next sentence) | 1.25% |",
        "| Retrieval recall@10 (next sentence) | 8.75% |",
        "| MI proxy saturation step | 400 |",
        "| Train/validation loss divergence step | not observed |",
        "| Effective-rank collapse step | 1,200 |",
        "| Training time | 321.5 s (2000 steps) |",
        "| Data source | embedded CPython documentation sentences |",
        "| Device | cpu × 2 processes |",
        "| `probe_chance_accuracy` | 0.142857 |",  # a metric the card has no wording for: a generic row
        "| `max_steps` | 2000 |",
        "| `effective batch size` | 64 |",
        "| `max_length` | 64 |",
        "| `predictor_hidden_size` | 128 |",
    ):
        assert row in text, row
    assert "| `output_dir` |" not in text and "| `backbone_config` |" not in text
    assert "![](diagnostics.png)" in text
    assert "MI proxy 0.2871 nats (paper: saturates below 0.35 nats)" in text
    # The model, the claim and the paper's figures, labelled as the paper's.
    for phrase in (
        "context encoder",
        "target encoder",
        "predictor",
        "centroid degeneracy",
        "conditional concentration",
        "published figures of the paper",
        "below 0.35 nats",
        "step 9,340",
        "~1.57",
        "chance level",
        "keeps rising",
        "VICReg, Barlow Twins, BYOL",
        "CPython documentation sentences",
        "locally trained WordPiece vocabulary of 8000",
    ):
        assert phrase.lower() in text.lower(), phrase
    assert "AutoTokenizer.from_pretrained" in text and 'pipeline("jepa-feature-extraction"' in text
    assert MODEL_ID_PLACEHOLDER in text and "trust_remote_code" not in text
    assert "\n\n- " not in text.split("## Limitations")[1].split("## Citation")[0].strip()  # one tight list
    _tables_are_blocks(text)


def test_t_jepa_card_omits_absent_metrics():
    metrics = {"mi_proxy": 0.5, "data_source": "Hub allenai/c4 (first 20,000 sentences)"}
    card = render_t_jepa_card(TJepaConfig.tiny(objective="mlm"), metrics, repo_id="org/mlm")
    meta = _front_matter(card)
    assert "model-index" not in meta and meta["datasets"] == ["allenai/c4"] and "mlm" in meta["tags"]
    text = card.text
    assert "# MLM baseline (text JEPA study, BERT backbone)" in text and "*baseline* of the study" in text
    assert "| MI proxy, InfoNCE bound (nats) | 0.5000 |" in text
    for absent in (
        "Validation loss",
        "Effective rank of",
        "Linear-probe accuracy",
        "Retrieval recall",
        "divergence step |",
        "Training time",
        "| Device |",
        "![](",
        "Objective comparison",
        "Against the paper's T-JEPA figures",
        "| `mi_proxy`",
        "| `data_source`",
        "Training (`",
    ):
        assert absent not in text, absent
    assert "This baseline: MI proxy 0.5000 nats" in text
    assert 'from_pretrained("org/mlm")' in text and MODEL_ID_PLACEHOLDER not in text
    assert "C4 sentences here are a sample" in text
    _tables_are_blocks(text)

    empty = render_t_jepa_card(TJepaConfig.tiny(), {})
    assert "model-index" not in _front_matter(empty) and "No evaluation metrics were recorded" in empty.text
    assert "## Comparison" not in empty.text and "Against the paper" not in empty.text

    bert_large = render_t_jepa_card(TJepaConfig(), {}).text
    assert "BERT-Large, the paper's backbone" in bert_large and "far smaller than the paper's" not in bert_large


def test_t_jepa_card_with_auto_map_and_reproduction():
    config = TJepaConfig.tiny(objective="byol")
    config.auto_map = {"AutoConfig": "configuration_t_jepa.TJepaConfig", "AutoModel": "modeling_t_jepa.TJepaModel"}
    reproduction = {
        "runs": {
            "jepa": {"probe_accuracy": 0.15, "mi_proxy": 0.31, "divergence_step": None},
            "mlm": {"probe_accuracy": 0.62, "mi_proxy": 1.25, "divergence_step": None},
            "byol": {"probe_accuracy": 0.55},
        },
        "train_steps": 3000,
        "seed": 0,
    }
    card = render_t_jepa_card(
        config, json.loads(json.dumps(CARD_METRICS | {"objective": "byol"})), reproduction=reproduction
    )
    assert card.data.library_name == "transformers" and "trust_remote_code=True" in card.text
    text = card.text
    assert "second_target_mask" in text and "| Objective | BYOL baseline (`byol`) |" in text
    assert "Settings: train_steps: 3000; seed: 0." in text
    assert "| Objective | Probe accuracy | MI proxy (nats) | Divergence step |" in text
    assert "| T-JEPA | 15.00% | 0.3100 | not observed |" in text
    assert "| MLM baseline | 62.00% | 1.2500 | not observed |" in text
    assert "| BYOL baseline | 55.00% | – | – |" in text
    _tables_are_blocks(text)


def test_result_rows():
    assert t_jepa_result_rows({}) == [] and i_jepa_result_rows({}) == []
    assert t_jepa_result_rows({"mi_proxy": float("nan"), "probe_accuracy": None, "extra": float("inf")}) == []
    rows = dict(
        t_jepa_result_rows(
            {"divergence_step": 9340, "rank_collapse_step": None, "num_processes": 1, "device": "cpu", "note": "x|y"}
        )
    )
    assert rows == {
        "Train/validation loss divergence step": "9,340",
        "Effective-rank collapse step": "not observed",
        "Device": "cpu × 1 process",
        "`note`": "x\\|y",
    }
    image_rows = dict(i_jepa_result_rows({"probe_accuracy": 0.9876, "objective": "i_jepa"}))
    assert image_rows == {"Objective": "i_jepa", "Linear-probe accuracy (digit classification)": "98.76%"}


def test_i_jepa_card():
    i_jepa = pytest.importorskip("hf_jepa.modeling.i_jepa", reason="the I-JEPA family is not in this checkout")
    config = i_jepa.IJepaConfig.tiny()
    metrics = {
        "mi_proxy": 2.3456,
        "effective_rank": 12.345,
        "probe_accuracy": 0.9123,
        "data_source": "Hub ylecun/mnist",
        "device": "cpu",
    }
    card = render_i_jepa_card(config, metrics, {"max_steps": 100}, repo_id="org/i-jepa")
    meta = _front_matter(card)
    assert meta["pipeline_tag"] == "image-feature-extraction" and meta["datasets"] == ["ylecun/mnist"]
    assert set(I_JEPA_CARD_TAGS) <= set(meta["tags"])
    (result,) = meta["model-index"][0]["results"]
    assert result["task"]["type"] == "image-classification" and result["metrics"][0]["value"] == 0.9123
    text = card.text
    for row in (
        "| MI proxy, InfoNCE bound (nats) | 2.3456 |",
        "| Effective rank of the validation embeddings | 12.35 |",
        "| Linear-probe accuracy (digit classification) | 91.23% |",
        "| Data source | Hub ylecun/mnist |",
    ):
        assert row in text, row
    for phrase in (
        "keeps rising",
        "below 0.35 nats",
        "9,340",
        "~1.57",
        "ViT-H/16",
        "28x28",
        "[0.1307]",
        "[0.3081]",
        'from_pretrained("org/i-jepa")',
        'pipeline("jepa-feature-extraction", model="org/i-jepa")',
    ):
        assert phrase in text, phrase
    for absent in ("Retrieval recall", "Validation loss", "![](", "| `backbone_config` |", "These are not MNIST"):
        assert absent not in text, absent
    assert "| `predictor_hidden_size` | 16 |" in text and "| `max_steps` | 100 |" in text
    _tables_are_blocks(text)
    embedded = render_i_jepa_card(config, {"data_source": "embedded scikit-learn digits"}).text
    assert "These are not MNIST digits" in embedded and "datasets" not in _front_matter(
        render_i_jepa_card(config, {"data_source": "embedded scikit-learn digits"})
    )
