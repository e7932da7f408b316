"""Talker rows of issue 15's "where the accuracy is lost", on one frozen reasoner: every Talker variant reads the
same reasoner's chains, so the rows differ only by the Talker and how it was trained.

Three modes (`talkers` can run in several processes at once, each with its own rows):

1. `reasoner REASONER_DIR BUDGET NODES ['{"reasoner": {...}}']`: trains the reasoner stage of the curves protocol
   (`hf_jepa.reproductions.jepa_reasoner_curves`: same data, seed 0, batch 64, bf16 autocast, time-based schedules)
   for BUDGET minutes on NODES-node trees and saves it with `save_pretrained` (safetensors).
2. `talkers REASONER_DIR OUTPUT.json BUDGET ROW [ROW ...]`: measures the reasoner alone (its free-running chain
   decoded by the nearest target latent, as `decompose_accuracy`), then trains one Talker per ROW for BUDGET minutes on the frozen
   reasoner's chains (the paper's sequential order) and measures on the 300 eval examples:

   - `pair`: the Talker reading the free-running chain (the system's accuracy);
   - `oracle`: the Talker reading the target encoder's latents of the true answer over the whole chain (after
     [EOS] these are the targets of padding tokens), as `decompose_accuracy` fed it before `with_free_running_tail`;
   - `oracle_masked`: the same chain with `latent_mask` = the answer mask (the Talker does not see past [EOS]);
   - `oracle_spliced`: the target latents up to [EOS], the free-running chain after it (what a perfect reasoner's
     chain would look like to this Talker, which trained on free-running chains that go on after [EOS]; the
     oracle chain `decompose_accuracy` feeds now);
   - `teacher_forced`: the Talker reading the reasoner's teacher-forced predictions.

   ROW is `mono` or `dual` (the `cpu_fast` Talkers) followed by `:`-separated options: `source=free_running |
   teacher_forced | target`, `noise=0.25` (relative std, as `talker_chain_noise_std`), `layers=6` (decoder blocks).
   Example: `dual:source=target`, `dual:noise=0.25`, `mono:layers=6`.
3. `pair OUTPUT.json BUDGET NODES mono|dual`: the curves protocol's interleaved reasoner + Talker (30% of BUDGET
   minutes to the Talker, which trains on the reasoner of each moment), then the same readings.

usage: OMP_NUM_THREADS=1 python research/jepa_reasoner/curves/ablations/talker_rows/talker_rows.py reasoner REASONER_DIR BUDGET NODES ['{...}']
       OMP_NUM_THREADS=1 python research/jepa_reasoner/curves/ablations/talker_rows/talker_rows.py talkers REASONER_DIR OUTPUT.json BUDGET ROW [ROW ...]
       OMP_NUM_THREADS=1 python research/jepa_reasoner/curves/ablations/talker_rows/talker_rows.py pair OUTPUT.json BUDGET NODES mono|dual"""

import json
import sys
import time
from pathlib import Path

import torch

from hf_jepa.data.reasoning import ReasoningData
from hf_jepa.metrics.reasoning import (
    answer_candidate_ids,
    nearest_latent_decode,
    reasoner_chains,
    talker_answers,
    with_free_running_tail,
)
from hf_jepa.modeling.jepa_reasoner import DualTalkerModel, JepaReasonerModel, MonoTalkerModel
from hf_jepa.recipes.jepa_reasoner import TALKER_CHAIN_SOURCES, JepaReasonerDataArguments
from hf_jepa.reproductions.jepa_reasoner import cpu_configs
from hf_jepa.reproductions.jepa_reasoner_curves import (
    CURVE_DEFAULTS,
    _build_stages,
    _configs,
    _stage,
    _train_until,
    talker_batches,
)

BATCH_SIZE = 64


def tree_data(nodes: int) -> tuple[JepaReasonerDataArguments, ReasoningData]:
    data_args = JepaReasonerDataArguments(
        task="tree_search", num_nodes=nodes, task_seed=0, num_train_examples=20000, num_eval_examples=300, plot=False
    )
    return data_args, ReasoningData(data_args)


def train_reasoner(folder: Path, budget_minutes: float, nodes: int, overrides: dict) -> None:
    data_args, data = tree_data(nodes)
    configs = _configs(cpu_configs, data, False, overrides)
    # The reasoner stage of a pair whose reasoner share (1 - talker_share = 0.7) is the budget.
    options = {**CURVE_DEFAULTS, "budget_minutes": budget_minutes / 0.7, "mixed_precision": True, "batch_size": 64}
    stages = _build_stages("dual", configs, data_args, data, 0, options)
    stage = stages[0]
    started = time.perf_counter()
    _train_until([stage], 60 * budget_minutes, "sequential")
    stage.model.save_pretrained(folder)
    summary = {"nodes": nodes, "steps": stage.step, "train_minutes": stage.spent_s / 60, "overrides": overrides}
    summary["wall_seconds"] = time.perf_counter() - started
    for each in stages:
        each.close()
    (folder / "training.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary), flush=True)


def parse_row(row: str) -> dict:
    kind, *options = row.split(":")
    if kind not in ("mono", "dual"):
        sys.exit(f"ROW {row!r}: starts with mono or dual")
    parsed = {"kind": kind, "source": "free_running", "noise": 0.0, "layers": None}
    for option in options:
        key, _, value = option.partition("=")
        if key == "source" and value in TALKER_CHAIN_SOURCES:
            parsed["source"] = value
        elif key == "noise":
            parsed["noise"] = float(value)
        elif key == "layers":
            parsed["layers"] = int(value)
        else:
            sys.exit(f"ROW {row!r}: unknown option {option!r} (source=..., noise=..., layers=...)")
    return parsed


def talker_readings(talker, data: ReasoningData, chains: dict, mask: torch.Tensor) -> dict:
    ev, examples = data.eval, data.eval_examples
    prompt = (ev["prompt_ids"], ev["prompt_mask"])
    spliced = with_free_running_tail(chains["targets"], chains["free_running"], mask)
    readings = {
        "pair": talker_answers(talker, data, chains["free_running"], *prompt),
        "oracle": talker_answers(talker, data, chains["targets"], *prompt),
        "oracle_spliced": talker_answers(talker, data, spliced, *prompt),
        "teacher_forced": talker_answers(talker, data, chains["teacher_forced"], *prompt),
    }
    context = (
        {}
        if isinstance(talker, MonoTalkerModel)
        else {"prompt_ids": ev["prompt_ids"], "prompt_mask": ev["prompt_mask"]}
    )
    bos = torch.full((mask.shape[0], 1), data.tokenizer.bos_token_id, dtype=torch.long)
    with torch.no_grad():
        masked = talker.generate(
            input_ids=bos,
            latents=chains["targets"].to(talker.dtype),
            latent_mask=mask.long(),
            max_new_tokens=data.max_answer_length,
            do_sample=False,
            **context,
        )
    readings["oracle_masked"] = data.decode(masked[:, 1:])
    return {name: data.accuracy(examples, answers) for name, answers in readings.items()}


def train_talkers(folder: Path, output: Path, budget_minutes: float, rows: list[str]) -> None:
    reasoner = JepaReasonerModel.from_pretrained(folder).eval()
    _, data = tree_data(json.loads((folder / "training.json").read_text())["nodes"])
    ev, steps = data.eval, data.max_answer_length
    chains = reasoner_chains(reasoner, ev, steps)
    mask = ev["answer_mask"][:, :steps].bool()
    tokens = nearest_latent_decode(
        reasoner, ev["prompt_ids"], ev["prompt_mask"], chains["free_running"], answer_candidate_ids(data)
    )
    result = {
        "reasoner": str(folder),
        "reasoner_alone": data.accuracy(data.eval_examples, data.decode(tokens)),
        "talker_minutes": budget_minutes,
        "rows": {},
    }
    print("reasoner alone", result["reasoner_alone"], flush=True)
    output.write_text(json.dumps(result, indent=1))
    for row in rows:
        spec = parse_row(row)
        config = cpu_configs(data)[spec["kind"]]  # fresh per row: a row's layers must not carry over to the next
        config.vocab_size = data.vocab_size
        if spec["layers"] is not None:
            config.num_hidden_layers = spec["layers"]
        torch.manual_seed(0)
        talker = (MonoTalkerModel if spec["kind"] == "mono" else DualTalkerModel)(config)
        options = {
            "batch_size": BATCH_SIZE,
            "mixed_precision": True,
            "talker_chain_source": spec["source"],
            "talker_chain_noise_std": spec["noise"],
        }
        talker_batch = talker_batches(spec["kind"], reasoner, data, 0, options)
        stage = _stage("talker", talker, talker_batch, 60 * budget_minutes, 0, options)
        started = time.perf_counter()
        _train_until([stage], 60 * budget_minutes, "sequential")
        stage.close()
        talker.eval()
        measured = talker_readings(talker, data, chains, mask)
        measured.update(
            steps=stage.step,
            parameters=sum(p.numel() for p in talker.parameters()),
            wall_seconds=time.perf_counter() - started,
            **spec,
        )
        result["rows"][row] = measured
        print(row, json.dumps(measured), flush=True)
        output.write_text(json.dumps(result, indent=1))


def interleaved_pair(output: Path, budget_minutes: float, nodes: int, system: str) -> None:
    data_args, data = tree_data(nodes)
    configs = _configs(cpu_configs, data, False, {})
    options = {**CURVE_DEFAULTS, "budget_minutes": budget_minutes, "mixed_precision": True, "batch_size": BATCH_SIZE}
    stages = _build_stages(system, configs, data_args, data, 0, options)
    started = time.perf_counter()
    _train_until(stages, 60 * budget_minutes, "interleaved")
    for stage in stages:
        stage.close()
    reasoner, talker = (stage.model.eval() for stage in stages)
    steps = data.max_answer_length
    chains = reasoner_chains(reasoner, data.eval, steps)
    result = talker_readings(talker, data, chains, data.eval["answer_mask"][:, :steps].bool())
    result.update(
        nodes=nodes,
        system=system,
        budget_minutes=budget_minutes,
        steps={stage.name: stage.step for stage in stages},
        wall_seconds=time.perf_counter() - started,
    )
    print(json.dumps(result), flush=True)
    output.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    usage = __doc__.split("\n\n")[-1]
    if len(sys.argv) >= 5 and sys.argv[1] == "reasoner":
        overrides = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
        train_reasoner(Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), overrides)
    elif len(sys.argv) >= 5 and sys.argv[1] == "talkers":  # no ROW: the reasoner alone only
        train_talkers(Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4]), sys.argv[5:])
    elif len(sys.argv) == 6 and sys.argv[1] == "pair" and sys.argv[5] in ("mono", "dual"):
        interleaved_pair(Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(usage)
