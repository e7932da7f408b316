"""Do a JEPA-Reasoner's predicted latents keep several candidate continuations ("superposition", issue 15 point 5)?

`hf_jepa.metrics.reasoning.mixed_latents` compares the free-running chain with each vocabulary token's target latent
*in isolation* (the token alone at position 0). The reasoner is trained on something else: the target encoder's
latent of the next answer token *in its context* `[prompt, SEP, answer so far]`. This module measures the chain
against those contextual targets:

- `contextual_mixed_latents`: at every chain step, the cosines to the contextual latent of every candidate token
  (top-1, top-2, their margin, how many candidates sit within `delta` of the top-1), with the context's prefix taken
  from the teacher (the true answer so far: exactly the targets of the training loss) and from the model's own
  greedy nearest-latent decoding (self-consistent, no true answer involved), next to the isolated-vocabulary version
  on the same steps and candidates; plus a PCA of the predictions against the contextual candidates.
- `candidate_continuations` (tree search): at every step whose current node has two children, the cosine of the
  prediction to the correct child's contextual latent and to the other child's, whether the other child is kept
  (within `delta` of the top-1), and the other child's weight when the prediction is written in the plane of the two
  children; the same for the oracle chain (the target latents themselves), to calibrate.
- `evaluate_superposition`: both, as a JSON-able summary, a Markdown table and two figures.
"""

import json
import math
from collections import Counter
from pathlib import Path

import torch

from ..data.reasoning import ReasoningData, TreeSearchTask
from .reasoning import answer_candidate_ids, contextual_candidate_similarities
from .reasoning_plots import plot_candidate_continuations, plot_contextual_mixed_latents

# A candidate is "kept" by a prediction when its cosine is within KEEP_DELTA of the prediction's top-1 cosine.
KEEP_DELTA = 0.05
# Prompts of the eval split measured by default, and how many of them give their candidate latents to the PCA.
DEFAULT_NUM_PROMPTS = 200
PCA_PROMPTS = 16
MAX_PCA_CANDIDATE_POINTS = 4000
# Tree search states every edge and the target in the prompt, all read before the first prediction.
TREE_SEARCH_AMBIGUITY = (
    "never ambiguous: the prompt states every edge and the target, and the reasoner reads the whole prompt before "
    "its first prediction, so the correct child is always determined; what is measured instead is how much of the "
    "wrong child's latent a prediction keeps, split by hops_to_target (edges from the correct child down to the "
    "target: how much search the choice needs)"
)
MIXED_FIGURE = "contextual_mixed_latents.png"
CONTINUATIONS_FIGURE = "candidate_continuations.png"
SUMMARY_FILE = "superposition.json"


def _check_num_prompts(num_prompts, data: ReasoningData) -> int:
    if isinstance(num_prompts, bool) or not isinstance(num_prompts, int) or num_prompts < 1:
        raise ValueError(f"num_prompts must be an integer >= 1, got {num_prompts!r}")
    return min(num_prompts, len(data.eval_examples))


def _check_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0.0 <= delta <= 2.0:
        raise ValueError(f"delta must be a cosine margin between 0 and 2, got {delta!r}")
    return float(delta)


def _check_chain(chain: torch.Tensor, rows: int, steps: int, hidden: int) -> torch.Tensor:
    if not isinstance(chain, torch.Tensor) or tuple(chain.shape) != (rows, steps, hidden):
        raise ValueError(
            f"chain must be a (num_prompts, steps, hidden) = ({rows}, {steps}, {hidden}) tensor, got "
            f"{tuple(getattr(chain, 'shape', ())) or type(chain).__name__}"
        )
    return chain.detach().float().cpu()


def _eval_rows(model, data: ReasoningData, num_prompts, chain) -> tuple[dict[str, torch.Tensor], torch.Tensor, str]:
    """The first `num_prompts` eval rows (CPU) and the chain to measure: `chain` if given, else the free-running one."""
    rows = _check_num_prompts(num_prompts, data)
    steps = data.max_answer_length
    split = {key: data.eval[key][:rows, :steps] for key in ("answer_ids", "answer_mask")}
    split.update({key: data.eval[key][:rows] for key in ("prompt_ids", "prompt_mask")})
    if chain is not None:
        return split, _check_chain(chain, rows, steps, model.config.hidden_size), "given"
    device = model.device
    chain = model.generate_latents(split["prompt_ids"].to(device), split["prompt_mask"].to(device), num_steps=steps)
    return split, chain.float().cpu(), "free_running"


def _candidate_positions(candidates: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """`positions[token_id]` = the token's index in `candidates` (-1 for a token that is not a candidate)."""
    positions = torch.full((vocab_size,), -1, dtype=torch.long)
    positions[candidates] = torch.arange(candidates.numel())
    return positions


def _nearest_two(similarity: torch.Tensor, mask: torch.Tensor, true_index: torch.Tensor, delta: float):
    """Summary and per-step points of `similarity` `(batch, steps, candidates)` over the steps `mask` keeps."""
    top = similarity.topk(2, dim=-1)
    top1, top2 = top.values[..., 0][mask], top.values[..., 1][mask]
    margin = top1 - top2
    kept = (similarity >= top.values[..., :1] - delta).sum(-1)[mask]
    summary = {
        "top1_cosine": float(top1.mean()),
        "top2_cosine": float(top2.mean()),
        "margin_mean": float(margin.mean()),
        "margin_median": float(margin.median()),
        "near_tie_fraction": float((margin < delta).float().mean()),
        "candidates_kept_mean": float(kept.float().mean()),
        "top1_is_answer_token": float((top.indices[..., 0] == true_index)[mask].float().mean()),
    }
    return summary, {"top1": top1, "margin": margin, "kept": kept}


def _pca_basis(points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean = points.mean(0, keepdim=True)
    _, _, basis = torch.linalg.svd(points - mean, full_matrices=False)
    return mean, basis[:2].T


@torch.no_grad()
def contextual_mixed_latents(
    model,
    data: ReasoningData,
    num_prompts: int = DEFAULT_NUM_PROMPTS,
    chain: torch.Tensor | None = None,
    delta: float = KEEP_DELTA,
    pca_prompts: int = PCA_PROMPTS,
    batch_size: int = 32,
) -> dict:
    """How "mixed" the reasoner's chain is against the latents it is trained to predict.

    For the first `num_prompts` eval prompts and every chain step that predicts an answer token or the [EOS]
    (`answer_mask`), the cosine of the step to every answer candidate (`answer_candidate_ids`: the words and [EOS])
    under three references:

    - `isolated`: each candidate's target latent alone at position 0 (what `mixed_latents` uses);
    - `contextual_teacher`: each candidate's target latent after `[prompt, SEP, true answer so far]`; the true token's
      is exactly the training target of that step, so this is the reference the loss defines;
    - `contextual_decoded`: the same after the model's own greedy nearest-latent decoding so far (what the chain
      itself says the prefix is; equals the teacher's while the decoding is on the true path,
      `on_path_fraction` of the steps).

    Each gives `top1_cosine`, `top2_cosine`, `margin_mean` / `margin_median` (top-1 minus top-2), `near_tie_fraction`
    (margin < `delta`), `candidates_kept_mean` (candidates with cosine >= top-1 - `delta`) and `top1_is_answer_token`
    (the nearest candidate is the true token). `chain` `(num_prompts, steps, hidden)` replaces the free-running chain
    (e.g. the oracle targets, or hand-built latents). `points` holds the per-step values and the 2-D PCA, fitted on
    the teacher-context candidate latents of the first `pca_prompts` prompts, of the predictions, those candidates and
    the true tokens' latents (for `plot_contextual_mixed_latents`)."""
    delta = _check_delta(delta)
    split, chain, source = _eval_rows(model, data, num_prompts, chain)
    mask = split["answer_mask"].bool()
    candidates = answer_candidate_ids(data)
    true_index = _candidate_positions(candidates, data.vocab_size)[split["answer_ids"]]
    ids = candidates.to(model.device)[:, None]
    isolated = model.encode(ids, torch.ones_like(ids), use_target_encoder=True)[:, 0].float().cpu()
    unit = torch.nn.functional.normalize(chain, dim=-1)
    prompts = (split["prompt_ids"], split["prompt_mask"])
    teacher = contextual_candidate_similarities(
        model,
        *prompts,
        chain,
        candidates,
        prefix_ids=split["answer_ids"],
        prefix_mask=split["answer_mask"],
        batch_size=batch_size,
        keep_latents=pca_prompts,
    )
    decoded = contextual_candidate_similarities(model, *prompts, chain, candidates, batch_size=batch_size)
    similarities = {
        "isolated": unit @ torch.nn.functional.normalize(isolated, dim=-1).T,
        "contextual_teacher": teacher["similarity"],
        "contextual_decoded": decoded["similarity"],
    }
    result: dict = {
        "num_prompts": chain.shape[0],
        "num_steps": int(mask.sum()),
        "num_candidates": candidates.numel(),
        "delta": delta,
        "chain_source": source,
    }
    points: dict = {}
    for name, similarity in similarities.items():
        result[name], points[name] = _nearest_two(similarity, mask, true_index, delta)
    agree = (decoded["decoded"] == split["answer_ids"]).long()
    on_path = torch.cat([torch.ones_like(agree[:, :1]), agree[:, :-1].cumprod(1)], 1).bool()  # true prefix so far
    result["contextual_decoded"]["on_path_fraction"] = float(on_path[mask].float().mean())
    if "candidate_latents" in teacher:
        latents = teacher["candidate_latents"]
        kept_mask = mask[: latents.shape[0]]
        options = latents[kept_mask]  # (kept steps, candidates, hidden)
        truth = options[torch.arange(options.shape[0]), true_index[: latents.shape[0]][kept_mask]]
        flat = options.reshape(-1, options.shape[-1])
        mean, basis = _pca_basis(flat)
        stride = max(1, flat.shape[0] // MAX_PCA_CANDIDATE_POINTS)
        points["pca"] = {
            "predicted_2d": (unit[mask] - mean) @ basis,
            "candidates_2d": (flat[::stride] - mean) @ basis,
            "answer_tokens_2d": (truth - mean) @ basis,
        }
    result["points"] = points
    return result


def tree_branch_steps(data: ReasoningData, num_rows: int) -> dict[str, torch.Tensor]:
    """The chain steps of the first `num_rows` eval examples whose current node has two children: `row`, `step`
    (the answer position of the child, >= 1), `correct` / `other` (token ids of the child on the path and of its
    sibling) and `hops_to_target` (edges from the correct child down to the target; 0: the child is the target)."""
    task = data.task
    vocab = data.tokenizer.get_vocab()
    records = []
    for row, example in enumerate(data.eval_examples[:num_rows]):
        parent_of, _, _ = task.parse_prompt(example.prompt)
        children: dict[str, list[str]] = {}
        for child, parent in parent_of.items():
            children.setdefault(parent, []).append(child)
        path = example.answer.split()
        for step in range(1, len(path)):
            kids = children.get(path[step - 1], [])
            if len(kids) == 2:
                other = kids[0] if kids[1] == path[step] else kids[1]
                records.append((row, step, vocab[path[step]], vocab[other], len(path) - 1 - step))
    columns = list(zip(*records)) if records else [()] * 5
    names = ("row", "step", "correct", "other", "hops_to_target")
    return {name: torch.tensor(column, dtype=torch.long) for name, column in zip(names, columns)}


@torch.no_grad()
def _target_latents(model, split: dict[str, torch.Tensor], branches: dict, batch_size: int) -> dict[str, torch.Tensor]:
    """The target latents of the correct and the other child at every branch step, from whole-sequence passes of the
    target encoder over `[prompt, SEP, answer]` with the child's token put at that step (causal: the positions before
    it do not change), and the oracle chain (the true answers' target latents, `(rows, steps, hidden)`)."""
    device = model.device
    rows = split["prompt_ids"].shape[0]
    sep = torch.full((rows, 1), model.config.sep_token_id, dtype=torch.long)
    ids = torch.cat([split["prompt_ids"], sep, split["answer_ids"]], 1)
    mask = torch.cat([split["prompt_mask"], torch.ones_like(sep), split["answer_mask"]], 1)
    start = split["prompt_ids"].shape[1] + 1

    def encode(sequences, sequence_mask):
        parts = [
            model.encode(
                sequences[i : i + batch_size].to(device), sequence_mask[i : i + batch_size].to(device), True
            ).float()
            for i in range(0, sequences.shape[0], batch_size)
        ]
        return torch.cat(parts).cpu()

    oracle = encode(ids, mask)[:, start:]
    swapped = ids[branches["row"]].clone()
    positions = start + branches["step"]
    swapped[torch.arange(swapped.shape[0]), positions] = branches["other"]
    other = encode(swapped, mask[branches["row"]])[torch.arange(swapped.shape[0]), positions] if len(swapped) else None
    return {"oracle": oracle, "correct": oracle[branches["row"], branches["step"]], "other": other}


def _continuation_stats(similarity, predicted, correct, other, branches, positions, delta) -> tuple[dict, dict]:
    """Per-branch-step statistics of one chain: see `candidate_continuations`."""
    correct_index, other_index = positions[branches["correct"]], positions[branches["other"]]
    at = similarity[branches["row"], branches["step"]]  # (branch steps, candidates)
    ranked = at.argsort(-1, descending=True)
    top1 = at.max(-1).values
    kept = (at >= top1[:, None] - delta).sum(-1)
    unit = torch.nn.functional.normalize(predicted, dim=-1)
    cos_correct, cos_other = (unit * correct).sum(-1), (unit * other).sum(-1)
    # The prediction written in the plane of the two (unit) children latents c, o: least squares a c + b o, from the
    # Gram system [[1, g], [g, 1]] [a, b] = [cos_c, cos_o]; the other child's weight is b / (a + b).
    gram = (correct * other).sum(-1)
    determinant = 1 - gram**2
    a = (cos_correct - gram * cos_other) / determinant
    b = (cos_other - gram * cos_correct) / determinant
    weight = torch.where(determinant > 1e-6, b / (a + b), torch.full_like(b, float("nan")))
    # How much of the prediction the plane explains: the cosine to its projection, sqrt(a cos_c + b cos_o).
    in_plane = (a * cos_correct + b * cos_other).clamp(min=0).sqrt()
    other_kept = cos_other >= top1 - delta

    def summary(select: torch.Tensor) -> dict:
        def mean(values):
            return float(values[select].float().mean()) if bool(select.any()) else float("nan")

        return {
            "count": int(select.sum()),
            "cosine_correct_child": mean(cos_correct),
            "cosine_other_child": mean(cos_other),
            "margin_correct_minus_other": mean(cos_correct - cos_other),
            "top1_is_correct_child": mean(ranked[:, 0] == correct_index),
            "other_child_is_runner_up": mean(ranked[:, 1] == other_index),
            "other_child_kept": mean(other_kept),
            "candidates_kept_mean": mean(kept),
            "other_child_weight_median": float(weight[select].nanmedian()) if bool(select.any()) else float("nan"),
            "plane_cosine_median": float(in_plane[select].nanmedian()) if bool(select.any()) else float("nan"),
        }

    everything = torch.ones_like(kept, dtype=torch.bool)
    stats = summary(everything)
    stats["candidates_kept_histogram"] = {int(k): n for k, n in sorted(Counter(kept.tolist()).items())}
    hops = branches["hops_to_target"]
    stats["by_hops_to_target"] = {int(h): summary(hops == h) for h in hops.unique().tolist()}
    points = {"cos_correct": cos_correct, "cos_other": cos_other, "kept": kept, "other_weight": weight, "hops": hops}
    points["in_plane"] = in_plane
    return stats, points


@torch.no_grad()
def candidate_continuations(
    model,
    data: ReasoningData,
    num_prompts: int = DEFAULT_NUM_PROMPTS,
    delta: float = KEEP_DELTA,
    chain: torch.Tensor | None = None,
    batch_size: int = 32,
) -> dict:
    """Does a prediction at a tree-search branch keep both children? For the first `num_prompts` eval examples, at
    every answer step whose current node (the previous path token) has two children (`tree_branch_steps`), with the
    context of the true path so far (the children are defined by the true current node):

    - `cosine_correct_child` / `cosine_other_child`: the prediction's cosine to the correct child's contextual target
      latent and to the other child's (the same token put in the same context), and their difference;
    - `top1_is_correct_child`, `other_child_is_runner_up`: ranks among every answer candidate's contextual latent;
    - `other_child_kept`: the other child within `delta` of the top-1 cosine; `candidates_kept_mean` and
      `candidates_kept_histogram`: how many candidates are (cosine >= top-1 - `delta`);
    - `other_child_weight_median`: the prediction written as `a c + b o` in the plane of the two children's unit
      latents (least squares), `b / (a + b)`: 0 for a prediction on the correct child, 0.5 for their normalised mean;
      it only means a mixture when the plane holds most of the prediction: `plane_cosine_median`, the cosine of the
      prediction to its projection on the plane (1: in the plane);
    - all of it again by `hops_to_target`. The path is never ambiguous here (`ambiguity`).

    `predicted` is the free-running chain (or `chain`), `oracle` the target latents of the true answer: an exact
    prediction, whose other-child cosine is just how alike the two children's targets are (`children_cosine`)."""
    task = getattr(data, "task", None)
    if not isinstance(task, TreeSearchTask):
        raise ValueError(
            f"data: candidate_continuations needs tree_search data (a node's two children exist only there), got "
            f"task {getattr(task, 'name', type(task).__name__)!r}"
        )
    delta = _check_delta(delta)
    split, chain, source = _eval_rows(model, data, num_prompts, chain)
    branches = tree_branch_steps(data, chain.shape[0])
    result: dict = {
        "num_prompts": chain.shape[0],
        "delta": delta,
        "branch_steps": int(branches["row"].numel()),
        "chain_source": source,
        "ambiguity": TREE_SEARCH_AMBIGUITY,
    }
    if not result["branch_steps"]:
        raise ValueError(f"num_prompts: the first {chain.shape[0]} eval trees have no two-child node on their paths")
    latents = _target_latents(model, split, branches, batch_size)
    result["children_cosine"] = float((latents["correct"] * latents["other"]).sum(-1).mean())
    candidates = answer_candidate_ids(data)
    positions = _candidate_positions(candidates, data.vocab_size)
    points = {}
    for name, measured in (("predicted", chain), ("oracle", latents["oracle"])):
        similarity = contextual_candidate_similarities(
            model,
            split["prompt_ids"],
            split["prompt_mask"],
            measured,
            candidates,
            prefix_ids=split["answer_ids"],
            prefix_mask=split["answer_mask"],
            batch_size=batch_size,
        )["similarity"]
        predicted = measured[branches["row"], branches["step"]]
        result[name], points[name] = _continuation_stats(
            similarity, predicted, latents["correct"], latents["other"], branches, positions, delta
        )
    result["points"] = points
    return result


def without_points(stats: dict) -> dict:
    """`stats` minus its per-step tensors (`points`): what goes into results.json."""
    return {key: value for key, value in stats.items() if key != "points"}


def _cell(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) and math.isfinite(value) else "n/a"


def format_superposition(summary: dict) -> str:
    """Markdown tables of an `evaluate_superposition` summary."""
    mixed = summary["contextual_mixed_latents"]
    lines = [
        f"Mixed latents against contextual targets ({mixed['num_prompts']} prompts, {mixed['num_steps']} steps, "
        f"{mixed['num_candidates']} candidates, delta {mixed['delta']:g}, chain: {mixed['chain_source']})",
        "",
        "| reference | top-1 cos | top-2 cos | margin (mean / median) | near ties | kept | top-1 = answer token |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ("isolated", "contextual_teacher", "contextual_decoded"):
        s = mixed[name]
        lines.append(
            f"| {name} | {_cell(s['top1_cosine'])} | {_cell(s['top2_cosine'])} | {_cell(s['margin_mean'])} / "
            f"{_cell(s['margin_median'])} | {_cell(s['near_tie_fraction'])} | {_cell(s['candidates_kept_mean'])} | "
            f"{_cell(s['top1_is_answer_token'])} |"
        )
    lines.append(
        f"\ndecoded prefix on the true path at {_cell(mixed['contextual_decoded']['on_path_fraction'])} of steps"
    )
    branches = summary.get("candidate_continuations")
    if branches:
        lines += [
            "",
            f"Tree-search branches ({branches['branch_steps']} steps with two children, delta {branches['delta']:g}, "
            f"cosine between the two children's targets {_cell(branches['children_cosine'])}; the path is never "
            "ambiguous from the prompt)",
            "",
            "| chain | cos correct | cos other | top-1 correct | other runner-up | other kept | kept | other weight "
            "(median) | in plane (median) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name in ("predicted", "oracle"):
            s = branches[name]
            lines.append(
                f"| {name} | {_cell(s['cosine_correct_child'])} | {_cell(s['cosine_other_child'])} | "
                f"{_cell(s['top1_is_correct_child'])} | {_cell(s['other_child_is_runner_up'])} | "
                f"{_cell(s['other_child_kept'])} | {_cell(s['candidates_kept_mean'])} | "
                f"{_cell(s['other_child_weight_median'])} | {_cell(s['plane_cosine_median'])} |"
            )
    return "\n".join(lines)


def evaluate_superposition(
    model,
    data: ReasoningData,
    output_dir: str | Path | None = None,
    num_prompts: int = DEFAULT_NUM_PROMPTS,
    delta: float = KEEP_DELTA,
) -> dict:
    """`contextual_mixed_latents` and, on tree search (when the measured paths pass a two-child node),
    `candidate_continuations` of `model` (put in eval mode) on `data`'s eval split; returns their JSON-able summary. With `output_dir`: also writes `superposition.json`,
    `superposition.md`, `contextual_mixed_latents.png` and (tree search) `candidate_continuations.png` there."""
    was_training = model.training
    model.eval()
    try:
        mixed = contextual_mixed_latents(model, data, num_prompts, delta=delta)
        rows = _check_num_prompts(num_prompts, data)
        tree = isinstance(data.task, TreeSearchTask) and tree_branch_steps(data, rows)["row"].numel() > 0
        continuations = candidate_continuations(model, data, num_prompts, delta) if tree else None
    finally:
        model.train(was_training)
    summary = {"contextual_mixed_latents": without_points(mixed)}
    if continuations is not None:
        summary["candidate_continuations"] = without_points(continuations)
    if output_dir is not None:
        output_dir = Path(output_dir)
        task = data.args.task
        plot_contextual_mixed_latents(mixed, task, output_dir / MIXED_FIGURE)
        if continuations is not None:
            plot_candidate_continuations(continuations, task, output_dir / CONTINUATIONS_FIGURE)
        (output_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        (output_dir / "superposition.md").write_text(format_superposition(summary) + "\n", encoding="utf-8")
    return summary
