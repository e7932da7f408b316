"""The JEPA-Reasoner alone on 7-node tree search (issue 15's "where the accuracy is lost", reasoner side): trains only
the reasoner stage of the curves protocol (`hf_jepa.reproductions.jepa_reasoner_curves`, same data, seed, batch,
bf16 autocast and time-based schedules) for BUDGET minutes of training and, every EVERY minutes, measures on the 300
eval examples:

- `tf_token_acc` / `tf_row_acc` / `tf_acc_by_pos`: the teacher-forced predictions decoded by the nearest candidate
  target latent in the true context (per answer token / whole path / per chain position): can the reasoner tell the
  next token at all?
- `fr_row_acc`, `fr_first_token_acc`: the free-running chain decoded the same way (greedy contexts): the
  "reasoner alone" of the decomposition, and its first token (the root, which needs the most inference);
- `target_spacing_mean`: cosine between the true next token's target latent and the nearest *other* candidate's, in
  the true context: how close the latents a prediction must tell apart are (1.0 = indistinguishable);
- `tf_margin_mean`: cosine of the teacher-forced prediction to the true candidate minus to the best other one;
- `tf_cos` / `fr_cos`: mean cosine to the targets; `targets_mean_pairwise_cos`: mean cosine between target latents
  of different answer positions (a collapse indicator).

usage: OMP_NUM_THREADS=1 python research/jepa_reasoner/curves/ablations/reasoner_only/reasoner_only.py OUTPUT.json BUDGET EVERY ['{"reasoner": {...}}'
['{"learning_rate": 2e-3, "scheduled_sampling_prob": 0.25, "seed": 1}']] (the first JSON: config overrides, as the
curves protocol's `config_overrides`; the second: the reasoner stage's peak learning rate, default 1e-3, the curves
protocol's final scheduled-sampling probability, default 0, and the seed of the model's initialisation and batch
order, default 0; the data stay those of seed 0)."""

import json
import sys
import time
from pathlib import Path

import torch

from hf_jepa.data.reasoning import ReasoningData
from hf_jepa.metrics.reasoning import answer_candidate_ids, contextual_candidate_similarities, reasoner_chains
from hf_jepa.recipes.jepa_reasoner import JepaReasonerDataArguments
from hf_jepa.reproductions.jepa_reasoner import cpu_configs
from hf_jepa.reproductions.jepa_reasoner_curves import CURVE_DEFAULTS, _build_stages, _configs, _train_until


def candidate_scores(reasoner, ev, chain, candidates, steps):
    """Cosine of each step of `chain` to every candidate's target latent in the true context, the true candidate's
    column, and the best other candidate's cosine."""
    answers = ev["answer_ids"][:, :steps]
    scores = contextual_candidate_similarities(
        reasoner, ev["prompt_ids"], ev["prompt_mask"], chain, candidates, answers, ev["answer_mask"][:, :steps]
    )
    column = torch.zeros(int(candidates.max()) + 1, dtype=torch.long)  # token id -> its candidate column
    column[candidates] = torch.arange(candidates.numel())
    true_column = column[answers.clamp(max=column.numel() - 1)]  # padding (not scored) maps to some column
    similarity = scores["similarity"]
    true_similarity = similarity.gather(2, true_column[..., None])[..., 0]
    best_other = similarity.scatter(2, true_column[..., None], -2.0).max(-1).values
    return scores["decoded"], true_similarity, best_other


def evaluate(reasoner, data, stage) -> dict:
    reasoner.eval()
    ev, steps, candidates = data.eval, data.max_answer_length, answer_candidate_ids(data)
    mask = ev["answer_mask"][:, :steps].bool()
    answers = ev["answer_ids"][:, :steps]
    chains = reasoner_chains(reasoner, ev, steps)
    decoded, true_similarity, best_other = candidate_scores(reasoner, ev, chains["teacher_forced"], candidates, steps)
    _, _, spacing = candidate_scores(reasoner, ev, chains["targets"], candidates, steps)
    free = contextual_candidate_similarities(
        reasoner, ev["prompt_ids"], ev["prompt_mask"], chains["free_running"], candidates
    )
    cosine = {
        name: torch.nn.functional.cosine_similarity(chains[name], chains["targets"], -1)[mask].mean()
        for name in ("teacher_forced", "free_running")
    }
    targets = torch.nn.functional.normalize(chains["targets"][mask][:2000], dim=-1)
    return {
        "minutes": stage.spent_s / 60,
        "steps": stage.step,
        "tf_token_acc": float(((decoded == answers) & mask).sum() / mask.sum()),
        "tf_row_acc": float(((decoded == answers) | ~mask).all(1).float().mean()),
        "tf_acc_by_pos": (((decoded == answers) & mask).sum(0) / mask.sum(0)).tolist(),  # NaN: no row that long
        "tf_margin_mean": float((true_similarity - best_other)[mask].mean()),
        "target_spacing_mean": float(spacing[mask].mean()),
        "fr_row_acc": data.accuracy(data.eval_examples, data.decode(free["decoded"])),
        "fr_first_token_acc": float((free["decoded"][:, 0] == answers[:, 0]).float().mean()),
        "fr_cos": float(cosine["free_running"]),
        "tf_cos": float(cosine["teacher_forced"]),
        "targets_mean_pairwise_cos": float((targets @ targets.T).mean()),
    }


def main(output: Path, budget_minutes: float, every_minutes: float, overrides: dict, training: dict) -> None:
    unknown = set(training) - {"learning_rate", "scheduled_sampling_prob", "seed"}
    if unknown:
        sys.exit(f"training options: unknown {sorted(unknown)} (expected learning_rate, scheduled_sampling_prob, seed)")
    data_args = JepaReasonerDataArguments(
        task="tree_search", num_nodes=7, task_seed=0, num_train_examples=20000, num_eval_examples=300, plot=False
    )
    data = ReasoningData(data_args)
    configs = _configs(cpu_configs, data, False, overrides)
    # The reasoner stage of a dual run whose reasoner share (1 - talker_share = 0.7) is the budget.
    options = {**CURVE_DEFAULTS, "budget_minutes": budget_minutes / 0.7, "mixed_precision": True, "batch_size": 64}
    options["scheduled_sampling_prob"] = training.get("scheduled_sampling_prob", 0.0)
    if "learning_rate" in training:
        options["learning_rate"] = training["learning_rate"]  # the stages' peak rate (the trainer's learning_rate)
    stages = _build_stages("dual", configs, data_args, data, training.get("seed", 0), options)
    stage = stages[0]
    result = {"overrides": overrides, "training": training, "torch_threads": torch.get_num_threads()}
    result["checkpoints"] = []
    started = time.perf_counter()
    for k in range(1, int(budget_minutes / every_minutes + 1e-9) + 1):
        _train_until([stage], 60 * every_minutes * k, "sequential")
        result["checkpoints"].append(evaluate(stage.model, data, stage))
        print(json.dumps(result["checkpoints"][-1]), flush=True)
        result["wall_seconds"] = time.perf_counter() - started
        output.write_text(json.dumps(result, indent=1))
    for each in stages:
        each.close()


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__.split("\n\n")[-1])
    json_arguments = [json.loads(argument) for argument in sys.argv[4:6]]
    json_arguments += [{}] * (2 - len(json_arguments))
    main(Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), *json_arguments)
