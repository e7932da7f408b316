"""Like-for-like CFG robustness over several seeds (issue 15, point 4).

Three curve kinds per system, valid-under-the-grammar rate against the perturbation's size:

- "replacement": a fraction of the prompt tokens replaced by other terminals (`cfg_robustness`); every system reads
  the same corrupted prompts and is scored against the clean prefix.
- "noise": Gaussian noise on the one vector each system exposes as its latent (`cfg_robustness`, unchanged): the
  reasoner's fed-back latent, COCONUT's continuous thoughts, the coupled transformer's final hidden state before its
  LM head. This is the comparison the paper's "latent Gaussian noise" claim makes; the perturbed vectors differ in
  kind (the reasoner's is its whole fed-back state, the coupled model's only decides its next token).
- "residual_noise": Gaussian noise on the residual stream at every position of every transformer block of every
  system during generation (`modeling_jepa_reasoner_blocks.residual_noise`), std relative to each vector's own RMS: the
  reasoner's token encoder, reasoning blocks and Talker; COCONUT's blocks (hence its thoughts and every position it
  attends back to); the coupled transformer's blocks. The same perturbation of every fed-back state for every system.

`robustness_over_seeds` runs the three for each seed (the caller's `build_systems(seed)` may train new models per
seed) and `aggregate_seeds` gives the mean and sample standard deviation per point.
"""

import statistics
from collections.abc import Callable, Mapping, Sequence

import torch

from ..data.reasoning import ReasoningData
from ..modeling.jepa_reasoner.modeling_jepa_reasoner_blocks import check_noise_std, residual_noise
from .reasoning import cfg_robustness

ROBUSTNESS_KINDS = ("replacement", "noise", "residual_noise")


def check_levels(values, name: str, upper: float | None = None) -> tuple[float, ...]:
    """`values` as a non-empty tuple of finite floats >= 0 (and <= `upper`), else `ValueError` naming `name`."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty list of numbers >= 0, got {values!r}")
    levels = tuple(check_noise_std(value, name) for value in values)
    if upper is not None and any(level > upper for level in levels):
        raise ValueError(f"{name} must lie in [0, {upper:g}], got {list(values)!r}")
    return levels


def check_seeds(seeds) -> tuple[int, ...]:
    """`seeds` as a non-empty tuple of distinct integers >= 0, else `ValueError` naming `seeds`."""
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or len(seeds) == 0:
        raise ValueError(f"seeds must be a non-empty list of integers >= 0, e.g. [0, 1, 2], got {seeds!r}")
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct integers >= 0, got {list(seeds)!r}")
    return tuple(seeds)


def residual_noise_robustness(
    systems: Mapping, data: ReasoningData, noise_stds=(0.0, 0.1, 0.25, 0.5), seed: int = 0
) -> dict[str, dict[float, float]]:
    """Accuracy of each system's greedy completions of `data`'s eval prompts with residual noise of relative std
    sigma on every block (`residual_noise`), for each sigma of `noise_stds`. The noise comes from a generator
    seeded with `seed` on the system's device, the same for every sigma (common random numbers: the curves differ
    by the noise's size only). Returns `{system name: {sigma: accuracy}}`."""
    noise_stds = check_levels(noise_stds, "residual_noise_stds")
    prompt_ids, prompt_mask = data.eval["prompt_ids"], data.eval["prompt_mask"]
    results: dict[str, dict[float, float]] = {name: {} for name in systems}
    for sigma in noise_stds:
        for name, system in systems.items():
            generator = torch.Generator(device=system.model.device).manual_seed(seed)
            with residual_noise(system.model, sigma, generator):
                answers = system.complete(prompt_ids, prompt_mask)
            results[name][sigma] = data.accuracy(data.eval_examples, answers)
    return results


def cfg_robustness_curves(
    systems: Mapping,
    data: ReasoningData,
    replacement_rates=(0.0, 0.1, 0.2, 0.3),
    noise_stds=(0.0, 0.25, 0.5, 1.0),
    residual_noise_stds=(0.0, 0.1, 0.25, 0.5),
    seed: int = 0,
) -> dict[str, dict[str, dict[float, float]]]:
    """The three curve kinds of `ROBUSTNESS_KINDS` for every system, one seed: `{name: {kind: {level: accuracy}}}`.
    "replacement" and "noise" are `cfg_robustness`'s (the existing curves, unchanged); "residual_noise" is
    `residual_noise_robustness`'s."""
    replacement_rates = check_levels(replacement_rates, "replacement_rates", upper=1.0)
    noise_stds = check_levels(noise_stds, "noise_stds")
    residual_noise_stds = check_levels(residual_noise_stds, "residual_noise_stds")
    results = cfg_robustness(systems, data, replacement_rates, noise_stds, seed=seed)
    residual = residual_noise_robustness(systems, data, residual_noise_stds, seed=seed)
    for name in systems:
        results[name]["residual_noise"] = residual[name]
    return results


def aggregate_seeds(per_seed: Sequence[Mapping]) -> dict[str, dict[str, dict[float, dict]]]:
    """Mean and sample standard deviation (0 for a single seed) across seeds of each point of `per_seed` (one
    `{name: {kind: {level: accuracy}}}` per seed, levels as numbers or as the strings JSON turns them into).
    Returns `{name: {kind: {level: {"mean", "std", "values"}}}}`; every seed must hold the same systems, kinds and
    levels (`ValueError` otherwise)."""
    if isinstance(per_seed, Mapping) or not isinstance(per_seed, Sequence) or len(per_seed) == 0:
        raise ValueError(f"per_seed must be a non-empty list of robustness results (one per seed), got {per_seed!r}")
    normalised = [
        {
            name: {kind: {float(x): float(v) for x, v in curve.items()} for kind, curve in curves.items()}
            for name, curves in result.items()
        }
        for result in per_seed
    ]
    shape = {name: {kind: sorted(curve) for kind, curve in curves.items()} for name, curves in normalised[0].items()}
    aggregate: dict[str, dict[str, dict[float, dict]]] = {}
    for index, result in enumerate(normalised):
        found = {name: {kind: sorted(curve) for kind, curve in curves.items()} for name, curves in result.items()}
        if found != shape:
            raise ValueError(
                f"per_seed[{index}] has systems/kinds/levels {found}, per_seed[0] has {shape}: every seed must "
                "measure the same points"
            )
    for name, kinds in shape.items():
        aggregate[name] = {}
        for kind, levels in kinds.items():
            aggregate[name][kind] = {}
            for level in levels:
                values = [result[name][kind][level] for result in normalised]
                aggregate[name][kind][level] = {
                    "mean": statistics.fmean(values),
                    "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                    "values": values,
                }
    return aggregate


def robustness_over_seeds(
    build_systems: Callable[[int], tuple[Mapping, ReasoningData]],
    seeds=(0, 1, 2),
    replacement_rates=(0.0, 0.1, 0.2, 0.3),
    noise_stds=(0.0, 0.25, 0.5, 1.0),
    residual_noise_stds=(0.0, 0.1, 0.25, 0.5),
) -> dict:
    """`cfg_robustness_curves` for each seed of `seeds`: `build_systems(seed)` returns `(systems, data)` (train new
    models per seed there, or return the same ones to vary only the draws), and the seed also draws the token
    corruption and the noise. Returns `{"seeds": [...], "per_seed": {seed: results}, "aggregate":
    aggregate_seeds(...)}`. Inputs are checked before anything is built."""
    seeds = check_seeds(seeds)
    levels = dict(
        replacement_rates=check_levels(replacement_rates, "replacement_rates", upper=1.0),
        noise_stds=check_levels(noise_stds, "noise_stds"),
        residual_noise_stds=check_levels(residual_noise_stds, "residual_noise_stds"),
    )
    per_seed = {}
    for seed in seeds:
        systems, data = build_systems(seed)
        for system in systems.values():
            system.model.eval()
        per_seed[seed] = cfg_robustness_curves(systems, data, seed=seed, **levels)
    return {"seeds": list(seeds), "per_seed": per_seed, "aggregate": aggregate_seeds(list(per_seed.values()))}
