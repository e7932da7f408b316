"""Issue 15 tooling: the wall-clock learning-curve protocol of the JEPA-Reasoner reproduction, the accuracy
decomposition (reasoner alone by nearest target latent, Talker on the oracle chain, cosine by chain position),
scheduled sampling in the reasoner and the Talker's training-chain sources."""

import copy
import json
import math

import pytest
import torch

from hf_jepa.cli import main
from hf_jepa.data.reasoning import ReasoningData
from hf_jepa.metrics import reasoning as reasoning_metrics
from hf_jepa.metrics.reasoning import (
    answer_candidate_ids,
    cosine_by_position,
    decompose_accuracy,
    nearest_latent_decode,
    reasoner_chains,
    talker_answers,
    with_free_running_tail,
)
from hf_jepa.modeling.jepa_reasoner import (
    CoupledTransformerConfig,
    CoupledTransformerLM,
    JepaReasonerConfig,
    JepaReasonerModel,
    MonoTalkerConfig,
    MonoTalkerModel,
)
from hf_jepa.recipes.jepa_reasoner import JepaReasonerDataArguments, TalkerRecipe, talker_training_chains
from hf_jepa.reproductions.jepa_reasoner import reproduce_jepa_reasoner
from hf_jepa.reproductions.jepa_reasoner_curves import (
    _summarise_tree,
    at_checkpoint,
    combine_curve_runs,
    first_budget_reaching,
    format_curve_tables,
)


@pytest.fixture(scope="module")
def tree():
    args = JepaReasonerDataArguments(
        task="tree_search", num_nodes=5, node_vocab_size=10, num_train_examples=64, num_eval_examples=24, plot=False
    )
    data = ReasoningData(args)
    torch.manual_seed(0)
    length = data.max_prompt_length + 1 + data.max_answer_length + 4
    reasoner = JepaReasonerModel(
        JepaReasonerConfig.tiny(
            vocab_size=data.vocab_size, max_position_embeddings=length, num_reasoning_steps=data.max_answer_length
        )
    ).eval()
    return args, data, reasoner


# ------------------------------------------------------------------------------------------- decomposition metrics


def test_cosine_by_position_hand_computed():
    predicted = torch.tensor([[[1.0, 0.0], [1.0, 1.0]], [[0.0, 1.0], [3.0, 0.0]]])
    targets = torch.tensor([[[2.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 5.0]]])
    # cosines: row 0 -> (1, 1/sqrt 2), row 1 -> (0, 0)
    assert cosine_by_position(predicted, targets, torch.ones(2, 2)) == pytest.approx([0.5, 0.5 / math.sqrt(2)])
    # masked: position 0 from row 0 only, position 1 from no row
    by_position = cosine_by_position(predicted, targets, torch.tensor([[1, 0], [0, 0]]))
    assert by_position[0] == pytest.approx(1.0) and math.isnan(by_position[1])
    with pytest.raises(ValueError, match="mask must have shape"):
        cosine_by_position(predicted, targets, torch.ones(2, 3))


def test_nearest_latent_decoding_reads_the_oracle_chain_back(tree):
    """The target encoder's own latents of the true answers decode to exactly those answers (the alignment of chain
    step i with answer token i, the context of each step and the KV-cached candidates are right); another row's
    chain decodes to other answers."""
    _, data, reasoner = tree
    ev = data.eval
    chains = reasoner_chains(reasoner, ev, data.max_answer_length)
    candidates = answer_candidate_ids(data)
    assert data.tokenizer.eos_token_id in candidates.tolist() and data.tokenizer.sep_token_id not in candidates
    tokens = nearest_latent_decode(reasoner, ev["prompt_ids"], ev["prompt_mask"], chains["targets"], candidates, 5)
    assert data.decode(tokens) == [e.answer for e in data.eval_examples]
    shuffled = nearest_latent_decode(
        reasoner, ev["prompt_ids"], ev["prompt_mask"], chains["targets"].roll(1, 0), candidates
    )
    assert data.accuracy(data.eval_examples, data.decode(shuffled)) < 0.5
    # teacher-forced and free-running chains start from the same input ([prompt, SEP]): equal at position 0
    assert torch.allclose(chains["teacher_forced"][:, 0], chains["free_running"][:, 0], atol=1e-5)


def test_decompose_accuracy_reports_every_part(tree):
    _, data, reasoner = tree
    torch.manual_seed(1)
    talker = MonoTalkerModel(MonoTalkerConfig.tiny(vocab_size=data.vocab_size, latent_size=32)).eval()
    parts = decompose_accuracy(reasoner, talker, data)
    steps = data.max_answer_length
    assert len(parts["cosine_teacher_forced"]) == len(parts["cosine_free_running"]) == steps
    assert parts["cosine_teacher_forced"][0] == pytest.approx(parts["cosine_free_running"][0], abs=1e-5)
    for key in ("reasoner_alone_accuracy", "talker_oracle_accuracy", "pair_accuracy"):
        assert 0.0 <= parts[key] <= 1.0
    assert -1.0 <= parts["cosine_free_running_mean"] <= 1.0


def test_decompose_accuracy_feeds_the_oracle_the_free_running_tail(tree, monkeypatch):
    """The Talker's oracle chain: the targets up to [EOS], the free-running chain after it (the targets there are
    padding tokens' latents). A recording wrapper around the real `talker_answers` sees the chains it is fed."""
    _, data, reasoner = tree
    torch.manual_seed(1)
    talker = MonoTalkerModel(MonoTalkerConfig.tiny(vocab_size=data.vocab_size, latent_size=32)).eval()
    fed = []

    def recording(talker, data, chain, *args, **kwargs):
        fed.append(chain.clone())
        return talker_answers(talker, data, chain, *args, **kwargs)

    monkeypatch.setattr(reasoning_metrics, "talker_answers", recording)
    decompose_accuracy(reasoner, talker, data, pair_answers=[""] * len(data.eval_examples))
    steps = data.max_answer_length
    chains = reasoner_chains(reasoner, data.eval, steps)
    answer = data.eval["answer_mask"][:, :steps].bool()
    assert len(fed) == 1 and (~answer).any()
    assert torch.equal(fed[0][answer], chains["targets"][answer])
    assert torch.equal(fed[0][~answer], chains["free_running"][~answer])


def test_with_free_running_tail_keeps_the_answer_and_continues_free_running():
    chain = torch.arange(12.0).reshape(2, 3, 2)
    free = -torch.arange(12.0).reshape(2, 3, 2)
    spliced = with_free_running_tail(chain, free, torch.tensor([[1, 1, 0], [1, 0, 0]]))
    expected = torch.tensor([[[0.0, 1.0], [2.0, 3.0], [-4.0, -5.0]], [[6.0, 7.0], [-8.0, -9.0], [-10.0, -11.0]]])
    assert torch.equal(spliced, expected)
    bool_mask = torch.tensor([[True, True, False], [True, False, False]])
    assert torch.equal(with_free_running_tail(chain, free, bool_mask), expected)
    with pytest.raises(ValueError, match="answer_mask must have shape"):
        with_free_running_tail(chain, free, torch.ones(2, 2))
    with pytest.raises(ValueError, match="share a"):
        with_free_running_tail(chain, free[:, :2], torch.ones(2, 3))


# ------------------------------------------------------------------------------------------- training options


def test_talker_training_chain_sources(tree):
    _, data, reasoner = tree
    batch = {k: data.train[k][:6] for k in ("prompt_ids", "prompt_mask", "answer_ids", "answer_mask")}
    steps = data.max_answer_length
    with torch.no_grad():
        out = reasoner(**batch)
    free = talker_training_chains(reasoner, batch, steps, "free_running")
    answer = batch["answer_mask"][:, :steps].bool()
    assert (~answer).any()  # some rows end before the chain does
    target = talker_training_chains(reasoner, batch, steps, "target")
    assert torch.equal(target[answer], out.targets.float()[answer]) and torch.equal(target[~answer], free[~answer])
    teacher = talker_training_chains(reasoner, batch, steps, "teacher_forced")
    assert torch.equal(teacher[answer], out.predictions.float()[answer])
    assert torch.equal(teacher[~answer], free[~answer])
    assert torch.allclose(free[:, 0], teacher[:, 0], atol=1e-5) and not torch.allclose(free, teacher, atol=1e-3)
    noisy = talker_training_chains(reasoner, batch, steps, "target", 0.5, torch.Generator().manual_seed(0))
    assert torch.allclose(noisy.norm(dim=-1), torch.ones(noisy.shape[:2]), atol=1e-5)
    cosine = torch.nn.functional.cosine_similarity(noisy, target, dim=-1)
    assert 0.5 < float(cosine.mean()) < 0.999  # noise of half a unit latent's RMS per dimension
    with pytest.raises(ValueError, match="source must be one of"):
        talker_training_chains(reasoner, batch, steps, "oracle")


def test_talker_recipe_trains_on_the_chosen_chains(tree):
    args, data, reasoner = tree
    config = MonoTalkerConfig.tiny(vocab_size=data.vocab_size, latent_size=32)
    target_args = JepaReasonerDataArguments(**{**args.__dict__, "talker_chain_source": "target"})
    recipe = TalkerRecipe(config, target_args, data=data, reasoner=reasoner)
    with torch.no_grad():
        expected = reasoner(**{k: data.train[k] for k in ("prompt_ids", "prompt_mask", "answer_ids", "answer_mask")})
    answer = data.train["answer_mask"][:, : data.max_answer_length].bool()
    assert torch.allclose(recipe.train_chains[answer], expected.targets.float()[answer], atol=1e-6)
    free = talker_training_chains(reasoner, data.train, data.max_answer_length, "free_running")
    assert torch.allclose(recipe.train_chains[~answer], free[~answer], atol=1e-6)
    with pytest.raises(ValueError, match="talker_chain_source must be one of"):
        JepaReasonerDataArguments(task="tree_search", talker_chain_source="noisy")
    with pytest.raises(ValueError, match="talker_chain_noise_std"):
        JepaReasonerDataArguments(task="tree_search", talker_chain_noise_std=-0.1)


def test_scheduled_sampling_feeds_back_the_reasoners_own_predictions(tree):
    """Probability 1: every answer input latent is the first pass's prediction (checked against a hand-built
    second pass); probability 0 or eval mode: plain teacher forcing; the config refuses a probability above 1."""
    _, data, _ = tree
    torch.manual_seed(0)
    length = data.max_prompt_length + 1 + data.max_answer_length + 4
    config = JepaReasonerConfig.tiny(vocab_size=data.vocab_size, max_position_embeddings=length)
    model = JepaReasonerModel(config)
    batch = {k: data.train[k][:4] for k in ("prompt_ids", "prompt_mask", "answer_ids", "answer_mask")}
    model.eval()
    teacher = model(**batch)
    model.train()
    assert torch.allclose(model(**batch).loss, teacher.loss)  # probability 0 (the default)
    model.config.scheduled_sampling_prob = 1.0
    mixed = model(**batch)
    ids = torch.cat([batch["prompt_ids"], torch.full_like(batch["prompt_ids"][:, :1], 4), batch["answer_ids"]], 1)
    mask = torch.cat([batch["prompt_mask"], torch.ones_like(batch["prompt_mask"][:, :1]), batch["answer_mask"]], 1)
    start, answer = batch["prompt_ids"].shape[1], batch["answer_mask"].bool()
    with torch.no_grad():
        latents = model.encoder(ids, mask)
        first = model.reason(latents, mask)[:, start : start + answer.shape[1]]
        inputs = latents.clone()
        inputs[:, start + 1 :][answer] = first[answer]
        expected = model.reason(inputs, mask)[:, start : start + answer.shape[1]]
    assert torch.allclose(mixed.predictions, expected, atol=1e-5)
    assert not torch.allclose(mixed.predictions, teacher.predictions, atol=1e-3)
    model.eval()
    assert torch.allclose(model(**batch).loss, teacher.loss)  # evaluation never mixes
    with pytest.raises(ValueError, match="scheduled_sampling_prob"):
        JepaReasonerConfig.tiny(scheduled_sampling_prob=1.5)


def test_answer_inputs_from_the_target_encoder(tree):
    """answer_input_source="target": the answer positions read the target encoder's latents (the space generation
    feeds back), the prompt and SEP the online encoder's; with the online encoder moved away from the target, the
    predictions differ from "online" teacher forcing; an unknown source is refused by name."""
    _, data, _ = tree
    torch.manual_seed(0)
    length = data.max_prompt_length + 1 + data.max_answer_length + 4
    config = JepaReasonerConfig.tiny(vocab_size=data.vocab_size, max_position_embeddings=length)
    model = JepaReasonerModel(config).eval()
    with torch.no_grad():
        for parameter in model.encoder.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))  # the online encoder drifts; the target stays
    batch = {k: data.train[k][:4] for k in ("prompt_ids", "prompt_mask", "answer_ids", "answer_mask")}
    online = model(**batch)
    model.config.answer_input_source = "target"
    from_target = model(**batch)
    ids = torch.cat([batch["prompt_ids"], torch.full_like(batch["prompt_ids"][:, :1], 4), batch["answer_ids"]], 1)
    mask = torch.cat([batch["prompt_mask"], torch.ones_like(batch["prompt_mask"][:, :1]), batch["answer_mask"]], 1)
    start, width = batch["prompt_ids"].shape[1], batch["answer_ids"].shape[1]
    with torch.no_grad():
        inputs = torch.cat(
            [model.encoder(ids, mask)[:, : start + 1], model.target_encoder(ids, mask)[:, start + 1 :]], 1
        )
        expected = model.reason(inputs, mask)[:, start : start + width]
    assert torch.allclose(from_target.predictions, expected, atol=1e-6)
    assert not torch.allclose(from_target.predictions, online.predictions, atol=1e-3)
    # Training: scheduled sampling mixes the first pass's predictions into the target-sourced inputs, and the loss
    # reaches the online encoder only through the prompt and SEP.
    model.train()
    model.config.scheduled_sampling_prob = 1.0
    mixed = model(**batch)
    answer = batch["answer_mask"].bool()
    with torch.no_grad():
        first = model.reason(inputs, mask)[:, start : start + width]
        mixed_inputs = inputs.clone()
        mixed_inputs[:, start + 1 :][answer] = first[answer]
        expected = model.reason(mixed_inputs, mask)[:, start : start + width]
    assert torch.allclose(mixed.predictions, expected, atol=1e-5)
    model.config.scheduled_sampling_prob = 0.0
    answer_only = sorted(set(batch["answer_ids"][answer].tolist()) - set(ids[:, : start + 1].flatten().tolist()))
    model.zero_grad()
    model(**batch).loss.backward()
    gradient = model.encoder.embed_tokens.weight.grad
    assert answer_only and float(gradient[answer_only].abs().max()) == 0.0  # tokens seen only in answers: no gradient
    assert float(gradient[batch["prompt_ids"][batch["prompt_mask"].bool()]].abs().max()) > 0
    with pytest.raises(ValueError, match="answer_input_source must be one of"):
        JepaReasonerConfig.tiny(answer_input_source="teacher")


def test_context_free_latents_without_encoder_blocks(tree):
    """num_encoder_layers=0: every latent is its token's normalised embedding, whatever precedes it (the
    targets are context-free), and the nearest-latent decoding of the targets returns the answer tokens."""
    _, data, _ = tree
    torch.manual_seed(0)
    length = data.max_prompt_length + 1 + data.max_answer_length + 4
    config = JepaReasonerConfig.tiny(vocab_size=data.vocab_size, max_position_embeddings=length, num_encoder_layers=0)
    model = JepaReasonerModel(config).eval()
    assert len(model.target_encoder.layers) == 0
    ids = torch.tensor([[5, 6, 7, 8], [9, 6, 7, 8]])
    latents = model.encode(ids, use_target_encoder=True)
    assert torch.allclose(latents[0, 1:], latents[1, 1:])  # a different first token changes nothing after it
    assert torch.allclose(latents, model.target_encoder.norm(model.target_encoder.embed_tokens(ids)), atol=1e-6)
    ev = {k: v[:6] for k, v in data.eval.items()}
    targets = reasoner_chains(model, ev, data.max_answer_length)["targets"]
    decoded = nearest_latent_decode(model, ev["prompt_ids"], ev["prompt_mask"], targets, answer_candidate_ids(data))
    answer = ev["answer_mask"].bool()[:, : decoded.shape[1]]
    assert torch.equal(decoded[answer], ev["answer_ids"][:, : decoded.shape[1]][answer])
    with pytest.raises(ValueError, match="num_encoder_layers"):
        JepaReasonerConfig.tiny(num_encoder_layers=-1)


def test_cpu_fast_reasoner_is_context_free_and_parameter_matched():
    """The reproduction's reasoner: no encoder blocks, teacher forcing on the target latents, 6 reasoning blocks, and
    the parameter count README quotes for tree search (vocabulary 39), within 1% of the coupled baseline's."""
    config = JepaReasonerConfig.cpu_fast(vocab_size=39)
    assert (config.num_encoder_layers, config.num_hidden_layers, config.answer_input_source) == (0, 6, "target")
    reasoner = JepaReasonerModel(config)
    coupled = CoupledTransformerLM(CoupledTransformerConfig.cpu_fast(vocab_size=39))

    def trainable(model):
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    assert trainable(reasoner) == 1_284_736
    assert abs(trainable(reasoner) - trainable(coupled)) / trainable(coupled) < 0.01


# ------------------------------------------------------------------------------------------- the curves protocol


def test_budget_of_the_coupled_transformers_95_percent():
    def curve(*accuracies):
        return {
            "label": "x",
            "curve": [{"checkpoint_minutes": i + 1.0, "accuracy": a} for i, a in enumerate(accuracies)],
        }

    tree = {"eval_examples": 10, "systems": {"coupled": curve(0.5, 0.96, 0.99), "dual": curve(0.2, 0.4, 0.97)}}
    assert first_budget_reaching(tree["systems"]["coupled"]["curve"]) == 2.0
    assert first_budget_reaching(tree["systems"]["dual"]["curve"], 0.98) is None
    assert at_checkpoint(tree["systems"]["dual"]["curve"], 2.5)["accuracy"] == 0.4
    _summarise_tree(tree)
    assert tree["target_minutes"] == 2.0 and tree["at_target"]["dual"]["accuracy"] == 0.4
    for system in tree["systems"].values():
        system["curve"][-1]["train_minutes"] = 3.0
    table = format_curve_tables({"trees": {"7": tree}})
    assert "first reaches 95% at 2 min" in table and "| x | 40.0% | 97.0% (3.0) |" in table
    never = {"eval_examples": 10, "systems": {"coupled": curve(0.5, 0.9)}}
    _summarise_tree(never)
    assert never["target_minutes"] == 2.0 and not never["coupled_reached_target"]


def test_quick_curves_keep_evaluation_off_the_clock(tmp_path):
    result = reproduce_jepa_reasoner(
        output_dir=str(tmp_path),
        quick=True,
        protocol="curves",
        systems=("dual", "coupled"),
        tree_nodes=(4,),
        budget_minutes=0.03,
        eval_every_seconds=0.6,
        talker_share=0.25,
    )
    saved = json.loads((tmp_path / "results.json").read_text())
    tree = saved["trees"]["4"]
    dual, coupled = tree["systems"]["dual"]["curve"], tree["systems"]["coupled"]["curve"]
    assert [row["checkpoint_minutes"] for row in dual] == pytest.approx([0.01, 0.02, 0.03])
    for row in dual:
        # each checkpoint is reached by the training clock alone (the stages' time), never by evaluation time
        assert row["train_minutes"] == pytest.approx(row["reasoner_minutes"] + row["talker_minutes"])
        assert row["checkpoint_minutes"] <= row["train_minutes"] < row["checkpoint_minutes"] + 0.02
    # the whole budget was trained on top of the evaluations (had they counted, the run would end sooner)
    for system in tree["systems"].values():
        assert system["wall_seconds"] >= 60 * 0.03 + system["eval_seconds"]
        assert {"reasoner_alone_accuracy", "talker_oracle_accuracy", "cosine_free_running"} <= set(row)
    assert dual[-1]["talker_minutes"] / dual[-1]["train_minutes"] == pytest.approx(0.25, abs=0.1)
    assert sum(row["eval_seconds"] for row in dual) > 0
    assert "reasoner_alone_accuracy" not in coupled[0]
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert (tmp_path / "decomposition.png").stat().st_size > 1000 and saved["decomposition_plot"] == "decomposition.png"
    assert "JEPA-Reasoner + Dual-Talker" in result.table and "4-node trees" in result.table

    # The same systems run apart (one run each, e.g. side by side on two cores) combine into the same tables.
    def alone(system):
        run = copy.deepcopy(saved)
        run["options"]["systems"] = [system]
        run["trees"]["4"]["systems"] = {system: saved["trees"]["4"]["systems"][system]}
        return run

    combined = combine_curve_runs([alone("dual"), alone("coupled")], tmp_path / "combined")
    assert combined.table.splitlines()[1:] == result.table.splitlines()[1:]
    assert combined.summary["options"]["systems"] == ["dual", "coupled"]
    assert (tmp_path / "combined" / "curves.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="appear in more than one run"):
        combine_curve_runs([alone("dual"), alone("dual")], tmp_path / "bad")
    other_seed = alone("coupled")
    other_seed["seed"] = 1
    with pytest.raises(ValueError, match="same seed"):
        combine_curve_runs([alone("dual"), other_seed], tmp_path / "bad")

    # A reasoner variant beside the coupled transformer: its overrides concern a model the other run never trains.
    def alone_as(system):  # the dual run relabelled as another reasoner + Talker system (same reasoner)
        run = alone("dual")
        run["options"]["systems"] = [system]
        run["trees"]["4"]["systems"] = {system: run["trees"]["4"]["systems"]["dual"]}
        return run

    variant = alone("dual")
    variant["options"]["config_overrides"] = {"reasoner": {"num_encoder_layers": 0}, "coupled": {"hidden_size": 64}}
    combined = combine_curve_runs([variant, alone("coupled")], tmp_path / "variant")
    assert combined.summary["options"]["config_overrides"] == {"reasoner": {"num_encoder_layers": 0}}
    with pytest.raises(ValueError, match=r"the \['reasoner'\] config overrides differ"):
        combine_curve_runs([variant, alone_as("mono")], tmp_path / "bad")  # mono trains the same reasoner


def test_sequential_talker_schedule_and_option_errors(tmp_path):
    reproduce_jepa_reasoner(
        output_dir=str(tmp_path),
        quick=True,
        protocol="curves",
        systems=("mono",),
        tree_nodes=(4,),
        budget_minutes=0.02,
        eval_every_seconds=0.3,
        talker_share=0.5,
        talker_schedule="sequential",
        decompose=False,
        config_overrides={"reasoner": {"latent_norm": "l2"}},
    )
    curve = json.loads((tmp_path / "results.json").read_text())["trees"]["4"]["systems"]["mono"]["curve"]
    assert curve[0]["talker_steps"] == 0 and curve[-1]["talker_steps"] > 0  # the reasoner's share comes first
    assert "reasoner_alone_accuracy" not in curve[0] and not (tmp_path / "decomposition.png").exists()
    with pytest.raises(ValueError, match="options of protocol=curves only"):
        reproduce_jepa_reasoner(output_dir=str(tmp_path), quick=True, budget_minutes=1.0)
    with pytest.raises(ValueError, match="systems must be"):
        reproduce_jepa_reasoner(output_dir=str(tmp_path), quick=True, protocol="curves", systems=("gpt",))
    with pytest.raises(ValueError, match="has no field 'num_blocks'"):
        reproduce_jepa_reasoner(
            output_dir=str(tmp_path),
            quick=True,
            protocol="curves",
            systems=("coupled",),
            tree_nodes=(4,),
            config_overrides={"coupled": {"num_blocks": 2}},
        )


def test_cli_runs_the_curves_protocol(tmp_path, capsys):
    code = main(
        [
            "reproduce",
            "jepa-reasoner",
            "--quick",
            "--no-progress",
            "--output-dir",
            str(tmp_path),
            "--set",
            "protocol=curves",
            "systems=[coconut]",
            "tree_nodes=[4]",
            "budget_minutes=0.01",
            "eval_every_seconds=0.3",
        ]
    )
    assert code == 0
    assert "COCONUT" in capsys.readouterr().out
    assert json.loads((tmp_path / "results.json").read_text())["options"]["systems"] == ["coconut"]
