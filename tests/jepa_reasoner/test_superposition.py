"""Issue 15 point 5: mixed latents against contextual targets and candidate continuations at tree-search branches,
on hand-built chains whose answers are known (a prediction on one child, the normalised mean of both, the oracle)."""

import json
import math

import pytest
import torch

from hf_jepa.data.reasoning import ReasoningData
from hf_jepa.metrics.reasoning import answer_candidate_ids
from hf_jepa.metrics.reasoning_superposition import (
    candidate_continuations,
    contextual_mixed_latents,
    evaluate_superposition,
    format_superposition,
    tree_branch_steps,
)
from hf_jepa.modeling.jepa_reasoner import JepaReasonerConfig, JepaReasonerModel
from hf_jepa.recipes.jepa_reasoner import JepaReasonerDataArguments

NUM_PROMPTS = 12


def _reasoner(data):
    torch.manual_seed(0)
    length = data.max_prompt_length + 1 + data.max_answer_length + 4
    config = JepaReasonerConfig.tiny(
        vocab_size=data.vocab_size, max_position_embeddings=length, num_reasoning_steps=data.max_answer_length
    )
    return JepaReasonerModel(config).eval()


@pytest.fixture(scope="module")
def tree():
    args = JepaReasonerDataArguments(
        task="tree_search", num_nodes=5, node_vocab_size=10, num_train_examples=16, num_eval_examples=24, plot=False
    )
    data = ReasoningData(args)
    return data, _reasoner(data)


def _full_sequence(data, row, answer_prefix):
    """`[prompt, SEP, answer_prefix]` of eval row `row` as one unpadded sequence (the reference encoding)."""
    prompt = data.eval["prompt_ids"][row][data.eval["prompt_mask"][row].bool()]
    return torch.cat([prompt, torch.tensor([data.tokenizer.sep_token_id]), torch.as_tensor(answer_prefix)])[None]


def _contextual_latent(model, data, row, step, token):
    """The target latent of `token` after the true answer's first `step` tokens, encoded from scratch."""
    prefix = data.eval["answer_ids"][row, :step].tolist() + [token]
    return model.encode(_full_sequence(data, row, prefix), use_target_encoder=True)[0, -1].float()


def _oracle_chain(model, data):
    keys = ("prompt_ids", "prompt_mask", "answer_ids", "answer_mask")
    with torch.no_grad():
        return model(**{k: data.eval[k][:NUM_PROMPTS] for k in keys}).targets.float()


def test_branch_steps_follow_the_tree(tree):
    data, _ = tree
    branches = tree_branch_steps(data, NUM_PROMPTS)
    assert branches["row"].numel() > 0
    vocab = data.tokenizer.get_vocab()
    for row, step, correct, other, hops in zip(*(branches[k].tolist() for k in branches)):
        example = data.eval_examples[row]
        parent_of, _, _ = data.task.parse_prompt(example.prompt)
        path = example.answer.split()
        names = {index: token for token, index in vocab.items()}
        assert names[correct] == path[step] and hops == len(path) - 1 - step
        assert parent_of[names[other]] == parent_of[names[correct]] == path[step - 1] and other != correct


def test_prediction_on_one_child_and_on_the_mean_of_both(tree):
    """At every two-child step the chain is set by hand to (a) the other child's contextual target latent: cosine 1 to
    it, top-1 = that child, weight 1; (b) the normalised mean of both children's latents: equal cosines
    sqrt((1 + g) / 2), weight 0.5, both kept, and (with a tiny delta) exactly 2 candidates kept. The oracle chain
    always ranks the correct child first with cosine 1."""
    data, model = tree
    branches = tree_branch_steps(data, NUM_PROMPTS)
    oracle = _oracle_chain(model, data)
    on_other, mixed = oracle.clone(), oracle.clone()
    expected_cosines = []
    for row, step, correct, other in zip(*(branches[k].tolist() for k in ("row", "step", "correct", "other"))):
        c = _contextual_latent(model, data, row, step, correct)
        o = _contextual_latent(model, data, row, step, other)
        on_other[row, step] = o
        mixed[row, step] = torch.nn.functional.normalize(c + o, dim=0)
        expected_cosines.append(math.sqrt((1 + float(c @ o)) / 2))

    result = candidate_continuations(model, data, NUM_PROMPTS, chain=on_other)
    assert result["chain_source"] == "given" and result["branch_steps"] == branches["row"].numel()
    predicted, exact = result["predicted"], result["oracle"]
    assert predicted["cosine_other_child"] == pytest.approx(1.0, abs=1e-4)
    assert predicted["top1_is_correct_child"] == 0.0 and predicted["other_child_kept"] == 1.0
    assert predicted["other_child_weight_median"] == pytest.approx(1.0, abs=1e-3)
    assert predicted["plane_cosine_median"] == pytest.approx(1.0, abs=1e-3)
    assert exact["top1_is_correct_child"] == 1.0
    assert exact["cosine_correct_child"] == pytest.approx(1.0, abs=1e-4)
    assert exact["cosine_other_child"] == pytest.approx(result["children_cosine"], abs=1e-4)
    assert exact["other_child_weight_median"] == pytest.approx(0.0, abs=1e-3)
    assert sum(exact["candidates_kept_histogram"].values()) == result["branch_steps"]

    tight = candidate_continuations(model, data, NUM_PROMPTS, delta=1e-4, chain=mixed)["predicted"]
    points = candidate_continuations(model, data, NUM_PROMPTS, delta=1e-4, chain=mixed)["points"]["predicted"]
    assert points["cos_correct"].tolist() == pytest.approx(expected_cosines, abs=1e-5)
    assert points["cos_other"].tolist() == pytest.approx(expected_cosines, abs=1e-5)
    assert tight["other_child_kept"] == 1.0 and tight["candidates_kept_histogram"] == {2: result["branch_steps"]}
    assert tight["other_child_weight_median"] == pytest.approx(0.5, abs=1e-3)
    assert tight["plane_cosine_median"] == pytest.approx(1.0, abs=1e-3)
    assert tight["margin_correct_minus_other"] == pytest.approx(0.0, abs=1e-5)


def test_candidates_kept_counts_every_candidate_within_delta(tree):
    """The kept count at the first branch steps equals a count over every candidate's contextual latent encoded
    from scratch (no KV cache), for the free-running chain of the untrained reasoner and delta 0.05."""
    data, model = tree
    result = candidate_continuations(model, data, NUM_PROMPTS, delta=0.05)
    branches = tree_branch_steps(data, NUM_PROMPTS)
    chain = model.generate_latents(
        data.eval["prompt_ids"][:NUM_PROMPTS], data.eval["prompt_mask"][:NUM_PROMPTS], data.max_answer_length
    ).float()
    candidates = answer_candidate_ids(data).tolist()
    kept = result["points"]["predicted"]["kept"]
    for index in range(min(4, branches["row"].numel())):
        row, step = int(branches["row"][index]), int(branches["step"][index])
        options = torch.stack([_contextual_latent(model, data, row, step, token) for token in candidates])
        cosine = torch.nn.functional.cosine_similarity(options, chain[row, step][None], dim=-1)
        assert int(kept[index]) == int((cosine >= cosine.max() - 0.05).sum())


def test_contextual_mixed_latents_of_the_oracle(tree):
    """The oracle chain sits exactly on the true token's contextual latent: top-1 cosine 1 and top-1 = answer token
    against the teacher's context, and the own decoded prefix stays on the true path; against isolated tokens it does
    not (the targets are contextual)."""
    data, model = tree
    stats = contextual_mixed_latents(model, data, NUM_PROMPTS, chain=_oracle_chain(model, data), pca_prompts=4)
    assert stats["num_steps"] == int(data.eval["answer_mask"][:NUM_PROMPTS].sum())
    teacher, decoded, isolated = stats["contextual_teacher"], stats["contextual_decoded"], stats["isolated"]
    assert teacher["top1_cosine"] == pytest.approx(1.0, abs=1e-4) and teacher["top1_is_answer_token"] == 1.0
    assert decoded["on_path_fraction"] == 1.0 and decoded["top1_is_answer_token"] == 1.0
    assert isolated["top1_cosine"] < 0.99
    assert teacher["candidates_kept_mean"] >= 1.0 and 0.0 <= teacher["near_tie_fraction"] <= 1.0
    pca = stats["points"]["pca"]
    assert pca["predicted_2d"].shape == (stats["num_steps"], 2)
    assert pca["answer_tokens_2d"].shape[0] == int(data.eval["answer_mask"][:4].sum())


def test_evaluate_superposition_writes_summary_and_figures(tree, tmp_path):
    data, model = tree
    summary = evaluate_superposition(model, data, tmp_path, num_prompts=6)
    for name in (
        "superposition.json",
        "superposition.md",
        "contextual_mixed_latents.png",
        "candidate_continuations.png",
    ):
        assert (tmp_path / name).is_file(), name
    saved = json.loads((tmp_path / "superposition.json").read_text())
    assert saved["candidate_continuations"]["chain_source"] == "free_running"
    assert "points" not in saved["contextual_mixed_latents"]
    table = format_superposition(summary)
    assert "| contextual_teacher |" in table and "| oracle |" in table


def test_bad_input_names_the_argument(tree):
    data, model = tree
    with pytest.raises(ValueError, match="num_prompts must be an integer >= 1"):
        contextual_mixed_latents(model, data, num_prompts=0)
    with pytest.raises(ValueError, match="num_prompts must be an integer >= 1"):
        candidate_continuations(model, data, num_prompts=-3)
    with pytest.raises(ValueError, match="delta must be"):
        candidate_continuations(model, data, NUM_PROMPTS, delta=-0.1)
    with pytest.raises(ValueError, match=r"chain must be a \(num_prompts, steps, hidden\)"):
        candidate_continuations(model, data, NUM_PROMPTS, chain=torch.zeros(3, 2, 1))
    args = JepaReasonerDataArguments(task="cfg", num_train_examples=4, num_eval_examples=4, plot=False)
    cfg = ReasoningData(args)
    with pytest.raises(ValueError, match="data: candidate_continuations needs tree_search data.*'cfg'"):
        candidate_continuations(_reasoner(cfg), cfg, 2)


def test_script_on_a_saved_reasoner_folder(tree, tmp_path, capsys):
    """research/jepa_reasoner/superposition/superposition.py rebuilds the task from the folder's data_args.json and writes the files."""
    import runpy
    from pathlib import Path

    from hf_jepa.recipes._saved import write_data_settings

    data, model = tree
    model.save_pretrained(tmp_path / "reasoner")
    write_data_settings(tmp_path / "reasoner", data.args)
    script = Path(__file__).parents[2] / "research" / "jepa_reasoner" / "superposition" / "superposition.py"
    main = runpy.run_path(str(script))["main"]
    summary = main([str(tmp_path / "reasoner"), str(tmp_path / "out"), "5", "0.1"])
    assert summary["candidate_continuations"]["delta"] == 0.1
    assert summary["contextual_mixed_latents"]["num_prompts"] == 5
    assert (tmp_path / "out" / "candidate_continuations.png").is_file()
    assert "Tree-search branches" in capsys.readouterr().out
