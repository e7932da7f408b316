import json
import logging
import math
import os

import pytest
import torch

from hf_jepa.metrics import (
    CollapseDiagnostics,
    CollapseWatchdog,
    DiagnosticsHistory,
    centroid_loss_decomposition,
    cosine_similarity_stats,
    detect_loss_divergence,
    effective_rank,
    embedding_std,
    irreducible_conditional_variance,
    mi_proxy,
    mi_proxy_details,
    plot_failure_signature,
)


def generator(seed=0):
    return torch.Generator().manual_seed(seed)


def matrix_with_singular_values(singular_values, n=50, d=20, seed=0):
    """An (n, d) matrix with zero-mean columns whose singular values are exactly `singular_values` (the rest 0), so
    centring leaves them unchanged."""
    g = generator(seed)
    k = len(singular_values)
    a = torch.randn(n, k, generator=g, dtype=torch.float64)
    u, _ = torch.linalg.qr(a - a.mean(0))  # orthonormal columns, each zero-mean
    v, _ = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))
    return u @ torch.diag(torch.tensor(singular_values, dtype=torch.float64)) @ v.T


def entropy_rank(weights, eps=1e-7, total_values=None):
    """exp(-sum p log p), p = w / sum(w) + eps, padded with zero weights up to `total_values`."""
    weights = list(weights) + [0.0] * ((total_values or len(weights)) - len(weights))
    p = [w / sum(weights) + eps for w in weights]
    return math.exp(-sum(x * math.log(x) for x in p))


# ---------------------------------------------------------------------------------------------------------- rank


@pytest.mark.parametrize("k", [1, 3, 7])
def test_effective_rank_of_equal_singular_values_is_k(k):
    x = matrix_with_singular_values([2.5] * k)
    for variant in ("rankme", "squared"):
        assert effective_rank(x, variant=variant) == pytest.approx(k, rel=1e-4)
    assert effective_rank(x.float()) == pytest.approx(k, rel=1e-4)


def test_effective_rank_of_two_unequal_singular_values_matches_hand_formula():
    x = matrix_with_singular_values([3.0, 1.0])
    # rankme: p = (3/4, 1/4) (+ 1e-7 everywhere, 20 singular values in all)
    assert effective_rank(x) == pytest.approx(entropy_rank([3.0, 1.0], total_values=20), rel=1e-9)
    assert effective_rank(x) == pytest.approx(math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25))), rel=1e-4)
    # squared: p = (9/10, 1/10)
    assert effective_rank(x, variant="squared") == pytest.approx(entropy_rank([9.0, 1.0], total_values=20), rel=1e-9)
    assert effective_rank(x, variant="squared") < effective_rank(x)


def test_effective_rank_rank_one_isotropic_and_centring():
    g = generator(1)
    rank_one = torch.randn(64, 1, generator=g) @ torch.randn(1, 16, generator=g)
    assert effective_rank(rank_one) == pytest.approx(1.0, abs=1e-3)
    isotropic = torch.randn(4000, 32, generator=g)
    assert 0.97 * 32 < effective_rank(isotropic) <= 32
    assert 0.95 * 32 < effective_rank(isotropic, variant="squared") <= effective_rank(isotropic)
    # a big common offset is one extra direction for the raw RankMe, invisible to the centred (covariance) rank
    shifted = rank_one + 100.0
    assert effective_rank(shifted) == pytest.approx(1.0, abs=1e-3)
    assert effective_rank(shifted, center=False) < effective_rank(rank_one, center=False) + 1
    assert effective_rank(torch.ones(8, 4)) == 1.0  # no variation at all


def test_effective_rank_validates_inputs():
    with pytest.raises(ValueError, match="2-D"):
        effective_rank(torch.randn(4, 3, 2))
    with pytest.raises(ValueError, match="N >= 2"):
        effective_rank(torch.randn(1, 3))
    with pytest.raises(ValueError, match="variant"):
        effective_rank(torch.randn(4, 3), variant="nuclear")


# ------------------------------------------------------------------------------------------------------- MI proxy


def test_mi_proxy_two_by_two_by_hand():
    # cos = [[1, 0], [0, 1]] at temperature 1: each row's loss is -log(e / (e + 1)) = log(1 + 1/e)
    eye = torch.eye(2)
    expected = math.log(2) - math.log(1 + math.exp(-1))
    assert mi_proxy(eye, eye, temperature=1.0) == pytest.approx(expected, abs=1e-12)
    # an off-diagonal example: p = [[1, 0], [1, 1]], t = [[1, 0], [0, 1]] -> cos rows [1, 0] and [1/r2, 1/r2]
    p, t = torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.eye(2)
    loss = (math.log(1 + math.exp(-1)) + math.log(2)) / 2  # row 2: both logits equal -> log 2
    details = mi_proxy_details(p, t, temperature=1.0)
    assert details["infonce_loss"] == pytest.approx(loss, abs=1e-12)
    assert details["mi_proxy"] == pytest.approx(math.log(2) - loss, abs=1e-12)
    assert details["log_n"] == pytest.approx(math.log(2))
    # unnormalised: the dot products are used as they are; p row 2 . t = [1, 1]
    assert mi_proxy(2 * p, t, temperature=1.0, normalize=False) == pytest.approx(
        math.log(2) - (math.log(1 + math.exp(-2)) + math.log(2)) / 2, abs=1e-12
    )


def test_mi_proxy_identical_pairs_reach_log_n_independent_pairs_zero():
    n = 32
    one_hot = torch.eye(n)
    assert mi_proxy(one_hot, one_hot, temperature=0.05) == pytest.approx(math.log(n), abs=0.05)
    assert mi_proxy_details(one_hot, one_hot, temperature=0.05)["top1_accuracy"] == 1.0
    g = generator(2)
    a, b = torch.randn(256, 512, generator=g), torch.randn(256, 512, generator=g)
    assert abs(mi_proxy(a, b, temperature=0.5)) < 0.05
    assert abs(mi_proxy(a, a[torch.randperm(256, generator=g)], temperature=0.5)) < 0.1  # shuffled pairs
    assert mi_proxy(a, a + 0.1 * b, temperature=0.1) > math.log(256) - 0.05


def test_mi_proxy_validates_inputs():
    with pytest.raises(ValueError, match="differ in shape"):
        mi_proxy(torch.randn(4, 3), torch.randn(5, 3))
    with pytest.raises(ValueError, match="2-D"):
        mi_proxy(torch.randn(4), torch.randn(4))
    with pytest.raises(ValueError, match="N >= 2"):
        mi_proxy(torch.randn(1, 3), torch.randn(1, 3))
    with pytest.raises(ValueError, match="temperature"):
        mi_proxy(torch.randn(4, 3), torch.randn(4, 3), temperature=0.0)


# ------------------------------------------------------------------------------------------------- cosine and std


def test_cosine_similarity_stats_hand_made_set():
    # pairwise cosines: (a, b) = 0, (a, c) = 1/sqrt 2, (b, c) = 1/sqrt 2
    x = torch.tensor([[1.0, 0.0], [0.0, 3.0], [2.0, 2.0]])
    cosines = [0.0, 1 / math.sqrt(2), 1 / math.sqrt(2)]
    mean = sum(cosines) / 3
    variance = sum((c - mean) ** 2 for c in cosines) / 3
    stats = cosine_similarity_stats(x)
    assert stats["mean"] == pytest.approx(mean, abs=1e-12)
    assert stats["variance"] == pytest.approx(variance, abs=1e-12)
    assert stats["std"] == pytest.approx(math.sqrt(variance), abs=1e-12)
    assert stats["num_pairs"] == 3
    collapsed = cosine_similarity_stats(torch.ones(10, 5) * torch.arange(1, 11.0)[:, None])
    assert collapsed["mean"] == pytest.approx(1.0) and collapsed["variance"] == pytest.approx(0.0, abs=1e-12)


def test_cosine_similarity_stats_subsampling_is_reproducible_and_unbiased():
    g = generator(3)
    x = torch.randn(300, 8, generator=g) + 0.5
    full = cosine_similarity_stats(x)
    assert full["num_pairs"] == 300 * 299 // 2
    first = cosine_similarity_stats(x, max_pairs=20_000, generator=generator(7))
    again = cosine_similarity_stats(x, max_pairs=20_000, generator=generator(7))
    assert first == again and first["num_pairs"] == 20_000
    assert first["mean"] == pytest.approx(full["mean"], abs=0.01)
    assert first["variance"] == pytest.approx(full["variance"], rel=0.05)
    assert cosine_similarity_stats(x[:5], max_pairs=100)["num_pairs"] == 10  # more than exist: all pairs


def test_embedding_std():
    assert embedding_std(torch.ones(16, 8) * 3.0) == 0.0  # collapsed: every row identical
    g = generator(4)
    d = 64
    ratio = embedding_std(torch.randn(2000, d, generator=g)) * math.sqrt(d)
    assert ratio == pytest.approx(1.0, abs=0.02)  # isotropic: ~1/sqrt(d)
    # two antipodal rows in one dim: normalised rows (1, 0) and (-1, 0); std (unbiased) = (sqrt 2, 0) -> mean 1/sqrt 2
    assert embedding_std(torch.tensor([[2.0, 0.0], [-5.0, 0.0]])) == pytest.approx(1 / math.sqrt(2))
    with pytest.raises(ValueError, match="N >= 2"):
        embedding_std(torch.randn(1, 4))


# ---------------------------------------------------------------------------------------- irreducible variance


def test_irreducible_variance_and_decomposition():
    # two spans, K = 2 candidates at +-1 around their centre in one dimension -> spread exactly 1.0
    centres = torch.tensor([[0.0, 5.0, -2.0], [3.0, 3.0, 3.0]])
    offset = torch.tensor([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])
    candidates = centres[:, None, :] + offset[None]
    assert irreducible_conditional_variance(candidates) == pytest.approx(1.0, abs=1e-12)
    # the default K = 16: candidates on +-e_1, +-e_2 (4 each) around a centre -> mean squared distance 1
    k16 = torch.cat([torch.eye(2), -torch.eye(2)]).repeat(4, 1)[None] + torch.tensor([7.0, -1.0])
    assert k16.shape == (1, 16, 2)
    assert irreducible_conditional_variance(k16) == pytest.approx(1.0, abs=1e-12)

    predictions = torch.tensor([[0.0, 5.0, 0.0], [3.0, 1.0, 3.0]])  # 2 and 2 away from the centroids
    parts = centroid_loss_decomposition(predictions, candidates)
    assert parts["reducible"] == pytest.approx(4.0, abs=1e-12)
    assert parts["irreducible"] == pytest.approx(1.0, abs=1e-12)
    assert parts["total"] == pytest.approx(5.0, abs=1e-12)
    assert parts["irreducible_fraction"] == pytest.approx(0.2)
    # the identity on random data, and the centroid as the best constant prediction
    g = generator(5)
    candidates = torch.randn(6, 16, 10, generator=g, dtype=torch.float64)
    predictions = torch.randn(6, 10, generator=g, dtype=torch.float64)
    parts = centroid_loss_decomposition(predictions, candidates)
    direct = (predictions[:, None] - candidates).pow(2).sum(-1).mean().item()
    assert parts["total"] == pytest.approx(direct, rel=1e-12)
    assert parts["total"] == pytest.approx(parts["reducible"] + parts["irreducible"], rel=1e-12)
    at_centroid = centroid_loss_decomposition(candidates.mean(1), candidates)
    assert at_centroid["reducible"] == pytest.approx(0.0, abs=1e-20)
    assert at_centroid["total"] == pytest.approx(irreducible_conditional_variance(candidates), rel=1e-12)


def test_irreducible_variance_validates_inputs():
    with pytest.raises(ValueError, match=r"\(B, K, D\)"):
        irreducible_conditional_variance(torch.randn(4, 3))
    with pytest.raises(ValueError, match="K >= 2"):
        irreducible_conditional_variance(torch.randn(4, 1, 3))
    with pytest.raises(ValueError, match="do not match"):
        centroid_loss_decomposition(torch.randn(4, 2), torch.randn(4, 3, 3))
    with pytest.raises(ValueError, match=r"\(B, D\)"):
        centroid_loss_decomposition(torch.randn(4), torch.randn(4, 3, 3))


# ------------------------------------------------------------------------------------------------- divergence


def synthetic_losses(parting_step=None, steps=range(0, 2001, 20), noise=0.004, seed=0, slope=0.0008):
    g = generator(seed)
    steps = list(steps)
    s = torch.tensor(steps, dtype=torch.float64)
    train = 2.0 * torch.exp(-s / 300) + 0.5 + noise * torch.randn(len(steps), generator=g, dtype=torch.float64)
    val = 2.0 * torch.exp(-s / 300) + 0.55 + noise * torch.randn(len(steps), generator=g, dtype=torch.float64)
    if parting_step is not None:
        val = val + slope * (s - parting_step).clamp_min(0)
    return steps, train.tolist(), val.tolist()


@pytest.mark.parametrize("parting_step", [600, 1000, 1500])
def test_detect_loss_divergence_finds_the_parting_step(parting_step):
    steps, train, val = synthetic_losses(parting_step)
    detected = detect_loss_divergence(steps, train, val)
    assert detected is not None and abs(detected - parting_step) <= 20  # within one evaluation interval
    # a slower rise while the train loss is still falling fast: the validation minimum comes late, the gap's kink not
    steps, train, val = synthetic_losses(parting_step, slope=0.0003)
    assert abs(detect_loss_divergence(steps, train, val) - parting_step) <= 60


def test_detect_loss_divergence_none_cases():
    steps, train, val = synthetic_losses(None)
    assert detect_loss_divergence(steps, train, val) is None
    # both curves blow up together: instability, not parting
    blow_up = [v + 0.01 * max(0, s - 1000) for s, v in zip(steps, train)]
    assert detect_loss_divergence(steps, blow_up, [v + 0.05 for v in blow_up]) is None
    # a one-evaluation spike is not sustained (patience)
    spiky = list(val)
    spiky[50] += 1.0
    assert detect_loss_divergence(steps, train, spiky, window=1) is None
    # validation turns non-finite while train stays finite: parted
    broken = val[:60] + [float("nan")] * (len(val) - 60)
    assert detect_loss_divergence(steps, train, broken) is not None


def test_detect_loss_divergence_validates_inputs():
    with pytest.raises(ValueError, match="same length"):
        detect_loss_divergence([0, 1, 2], [1.0, 1.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="at least 2"):
        detect_loss_divergence([0], [1.0], [1.0])
    with pytest.raises(ValueError, match="increasing"):
        detect_loss_divergence([0, 2, 1], [1.0] * 3, [1.0] * 3)


# ------------------------------------------------------------------------------------- diagnostics and watchdog


def collapsed_batch(n=256, d=64, seed=6):
    """Everything at one point, with residual variation along a single direction."""
    g = generator(seed)
    centre, direction = torch.randn(d, generator=g), torch.randn(d, generator=g)
    return centre + 1e-3 * torch.randn(n, 1, generator=g) * direction


def test_collapse_diagnostics_compute():
    g = generator(8)
    targets = torch.randn(128, 32, generator=g)
    predictions = targets + 0.05 * torch.randn(128, 32, generator=g)
    metrics = CollapseDiagnostics().compute(predictions, targets)
    assert set(metrics) >= {"mi_proxy", "effective_rank", "cosine_mean", "cosine_variance", "embedding_std"}
    assert all(isinstance(v, float) for v in metrics.values())
    assert metrics["mi_proxy"] > math.log(128) - 0.1
    assert metrics["effective_rank"] > 25 and abs(metrics["cosine_mean"]) < 0.05
    assert metrics["embedding_std_ratio"] == pytest.approx(metrics["embedding_std"] * math.sqrt(32))
    # (B, L, D) token latents are flattened; explicit embeddings are used for rank, cosine and std
    tokens = CollapseDiagnostics().compute(
        predictions.view(8, 16, 32), targets.view(8, 16, 32), embeddings=collapsed_batch(d=16)
    )
    assert tokens["mi_proxy"] == pytest.approx(metrics["mi_proxy"], rel=1e-6)
    assert tokens["effective_rank"] == pytest.approx(1.0, abs=0.01) and tokens["cosine_mean"] > 0.99
    with pytest.raises(ValueError, match="differ in shape"):
        CollapseDiagnostics().compute(torch.randn(4, 3), torch.randn(4, 5))


def test_watchdog_fires_on_collapse_and_not_on_isotropic(caplog):
    diagnostics = CollapseDiagnostics()
    collapsed = collapsed_batch()
    isotropic = torch.randn(256, 64, generator=generator(9))
    with caplog.at_level(logging.WARNING, logger="hf_jepa.metrics.collapse"):
        healthy = diagnostics.update(10, isotropic, isotropic, split="val")
        assert not caplog.records and diagnostics.watchdog.warnings == []
        bad = diagnostics.update(20, collapsed, collapsed, split="val", loss=1.5)
    assert bad["val/loss"] == 1.5 and healthy["val/effective_rank"] > 40
    messages = [r.getMessage() for r in caplog.records]
    assert all(r.name == "hf_jepa.metrics.collapse" and r.levelno == logging.WARNING for r in caplog.records)
    assert len(messages) == 3
    assert any("val/effective_rank" in m and "step 20" in m for m in messages)
    assert any("val/cosine_mean" in m for m in messages)
    assert any("val/embedding_std" in m for m in messages)
    assert [step for step, _ in diagnostics.watchdog.warnings] == [20, 20, 20]
    assert diagnostics.history.records[-1]["val/loss"] == 1.5 and len(diagnostics.history) == 2


def test_watchdog_rules_and_the_point_collapse_caveat():
    watchdog = CollapseWatchdog(rank_fraction=0.1)
    assert watchdog.check({"effective_rank": 5.0, "cosine_mean": 0.1, "embedding_std_ratio": 0.9}, dim=32) == []
    assert len(watchdog.check({"effective_rank": 5.0}, dim=64)) == 1  # below 0.1 * 64 = 6.4
    assert len(watchdog.check({"embedding_std": 0.01}, dim=64)) == 1  # 0.01 * 8 = 0.08 < 0.1
    assert watchdog.check({"embedding_std": 0.01}) == []  # no dim, no std rule without the ratio
    # a point collapse with isotropic jitter: the centred rank stays high, cosine and std fire
    g = generator(10)
    point = torch.randn(64, generator=g) + 1e-4 * torch.randn(256, 64, generator=g)
    metrics = CollapseDiagnostics(watchdog=False).compute(point, point)
    assert metrics["effective_rank"] > 40
    messages = CollapseWatchdog().check(metrics, step=3, dim=64)
    assert len(messages) == 2 and not any("effective_rank" in m for m in messages)


# ---------------------------------------------------------------------------------------- history and signature


def synthetic_run(mi_saturates_at=800, parting_step=1500, collapse_at=2000, rising_mi=False, seed=0):
    """Records every 50 steps: MI rising to 0.3 nats then flat, val loss parting, val rank collapsing to 1.57
    while the train rank inflates."""
    steps, train, val = synthetic_losses(parting_step, steps=range(0, 3001, 50), seed=seed, slope=0.001)
    g = generator(seed + 100)
    records = []
    for step, train_loss, val_loss in zip(steps, train, val):
        if rising_mi:
            mi = 0.1 + 2.0 * step / 3000
        else:
            mi = 0.3 * min(step, mi_saturates_at) / mi_saturates_at
        mi += 0.003 * torch.randn(1, generator=g).item()
        if collapse_at is None or step <= collapse_at:
            val_rank, train_rank = 20.0, 22.0
        else:
            val_rank = max(1.57, 20.0 - (step - collapse_at) * 0.1)
            train_rank = 22.0 + (step - collapse_at) * 0.02
        records.append(
            {
                "step": step,
                "loss": train_loss,
                "val/loss": val_loss,
                "train/mi_proxy": mi,
                "val/mi_proxy": mi - 0.02,
                "train/effective_rank": train_rank,
                "val/effective_rank": val_rank,
                "train/cosine_mean": 0.1,
                "train/cosine_variance": 0.01,
                "val/cosine_mean": 0.2,
                "val/cosine_variance": 0.02,
                "val/irreducible_variance": 4.0 if val_rank > 2 else 0.5,
            }
        )
    return records


def test_failure_signature_order_on_synthetic_records():
    history = DiagnosticsHistory.from_records(synthetic_run())
    signature = history.failure_signature()
    assert abs(signature["mi_saturation_step"] - 800) <= 100
    assert abs(signature["divergence_step"] - 1500) <= 100
    assert 2000 < signature["rank_collapse_step"] <= 2200  # 20 -> below 0.25 * 20 = 5 by step 2200
    assert signature["order_matches_paper"] is True
    assert signature["mi_below_paper_ceiling"] is True
    assert signature["val_effective_rank_final"] == pytest.approx(1.57)
    # collapse before divergence: the events exist, the order is not the paper's
    early = DiagnosticsHistory.from_records(synthetic_run(collapse_at=1000)).failure_signature()
    assert early["rank_collapse_step"] < early["divergence_step"] and early["order_matches_paper"] is False
    # an I-JEPA-like run: MI keeps rising, no parting, no collapse
    healthy = DiagnosticsHistory.from_records(
        synthetic_run(parting_step=None, collapse_at=None, rising_mi=True)
    ).failure_signature()
    assert healthy["mi_saturation_step"] is None and healthy["divergence_step"] is None
    assert healthy["rank_collapse_step"] is None and healthy["order_matches_paper"] is None
    assert healthy["mi_below_paper_ceiling"] is False


def test_history_records_round_trip_and_alignment():
    history = DiagnosticsHistory()
    history.add(100, train={"loss": 1.0, "mi_proxy": 0.1})
    history.add(200, train={"loss": 0.8})
    history.add(200, val={"loss": 0.9, "effective_rank": 7.0})  # merged into step 200
    history.add_record({"step": 50, "loss": 1.2, "lr": 1e-3})  # the trainer's unprefixed loss
    history.add(300, val={"loss": 0.85})  # validation only: paired with the step-200 train loss
    assert [r["step"] for r in history.records] == [50, 100, 200, 300]
    assert history.series("train/loss") == ([50, 100, 200], [1.2, 1.0, 0.8])
    assert history.aligned_losses() == ([200, 300], [0.8, 0.8], [0.9, 0.85])
    restored = DiagnosticsHistory.from_dict(json.loads(json.dumps(history.to_dict())))
    assert restored.records == history.records
    with pytest.raises(ValueError, match="step"):
        history.add_record({"loss": 1.0})
    empty = DiagnosticsHistory().failure_signature()
    assert empty["mi_saturation_step"] is None and empty["order_matches_paper"] is None


def test_plot_failure_signature_writes_png(tmp_path):
    i_jepa = DiagnosticsHistory.from_records(synthetic_run(parting_step=None, collapse_at=None, rising_mi=True))
    runs = {"t-jepa": synthetic_run(), "i-jepa": i_jepa}
    path = plot_failure_signature(runs, tmp_path / "plots" / "signature.png")
    with open(path, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 10_000
