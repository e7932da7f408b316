"""JEPA-Reasoner in the browser: a prompt in, the Talker's answer out (marked right or wrong when the prompt is one of
the task's), the reasoner's latent chain on a PCA of the vocabulary latents, and a noise slider that reruns the chain
with Gaussian noise and shows how far each step moved from the clean chain (error containment)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import gradio as gr
import numpy as np
import torch

from ..data.reasoning import EOS_TOKEN, REASONING_SPECIAL_TOKENS, CfgTask, ReasoningData, ReasoningExample
from ..metrics.figures import pyplot
from ..metrics.reasoning import DecoupledSystem, cosine_by_position, vocabulary_latents
from ..modeling.jepa_reasoner import (
    DualTalkerConfig,
    JepaReasonerWithTalkerConfig,
    MonoTalkerConfig,
    residual_noise,
)
from ..modeling.jepa_reasoner.modeling_jepa_reasoner_blocks import check_noise_std
from .layout import ServedModel, UserInputError, family_page, figure_png, guarded

__all__ = [
    "build",
    "chain_cosines",
    "expected_answer",
    "generate",
    "load_task_data",
    "nearest_tokens",
    "pair_folder",
    "pca_plot",
]

FAMILY = "jepa-reasoner"
PAIR_MODEL_TYPE = JepaReasonerWithTalkerConfig.model_type
TALKER_MODEL_TYPES = (MonoTalkerConfig.model_type, DualTalkerConfig.model_type)
# A pair folder, or the Talker folder `hf-jepa train jepa-mono-talker / jepa-dual-talker` writes (the pair in its pair/).
MODEL_TYPES = (PAIR_MODEL_TYPE, *TALKER_MODEL_TYPES)
# No model given: a tiny reasoner, then a Mono-Talker on its frozen chains, on the synthetic CFG task (the quick
# commands of docs/families/jepa-reasoner.md, longer): ~30 s on 2 cores, ~70% of its completions valid under the
# grammar (the Talker's steps matter most: 400 reasoner + 200 Talker steps gave 26% in the same time).
_TASK = {"task": "cfg", "num_train_examples": 2000, "num_eval_examples": 100, "plot": False}
QUICK_TRAINING = [
    ("jepa-reasoner", {"preset": "tiny", "max_steps": 200, **_TASK}),
    ("jepa-mono-talker", {"preset": "tiny", "reasoner": "{jepa-reasoner}", "max_steps": 600, **_TASK}),
]
TITLE = "JEPA-Reasoner: reasoning in latent space, then talking"
INTRO = (
    "Type a prompt (whitespace-separated tokens of the task's vocabulary) or pick one of the task's held-out examples. "
    "The reasoner turns it into a chain of unit latents without ever choosing a token; a separate Talker then reads "
    "the whole chain and writes the answer. The plot shows the chain on the two main axes of the vocabulary's latents. "
    "Move the noise slider to add Gaussian noise while the chain is generated (std relative to the RMS of the "
    "perturbed vectors): the table says how far each step moved from the clean chain, and whether the answer changed."
)
NOISE_KINDS = {
    "the fed-back latent (each step's prediction)": "latent",
    "every block's residual stream (reasoner and Talker)": "residual",
}
MAX_NOISE = 1.0
MAX_PROMPT_CHARS = 2000  # longer text is refused before tokenising (no task here has prompts near this)
EXAMPLES_SHOWN = 12
LABELLED_WORDS = 60  # label every vocabulary point up to this many words; past it, only those nearest the chain


# ------------------------------------------------------------------------------------------------------------ model


def pair_folder(folder: str | Path) -> Path:
    """The reasoner + Talker pair folder to serve: `folder` itself when it holds a pair, its `pair/` sub-folder when
    it holds a Talker (as `hf-jepa train jepa-mono-talker` writes it), else a `UserInputError` saying what it holds."""
    folder = Path(folder)
    model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    if model_type == PAIR_MODEL_TYPE:
        return folder
    if model_type in TALKER_MODEL_TYPES:
        if (folder / "pair" / "config.json").is_file():
            return folder / "pair"
        raise UserInputError(
            f"{folder} holds a Talker without the pair/ sub-folder (the reasoner + Talker) that hf-jepa train writes "
            "beside it: serve that pair folder instead"
        )
    raise UserInputError(f"{folder} holds a {model_type!r} model, not a reasoner + Talker pair ({PAIR_MODEL_TYPE!r})")


def load_task_data(pair_dir: str | Path, tokenizer=None) -> ReasoningData | None:
    """The task the pair was trained on, rebuilt from the data settings saved beside it (`data_args.json`): its eval
    split holds the held-out examples, its `max_answer_length` the chain length the pair was trained and evaluated
    with. None for a folder saved without them (or for another vocabulary than `tokenizer`'s)."""
    import dataclasses

    from ..recipes._saved import read_data_settings
    from ..recipes.jepa_reasoner import JepaReasonerDataArguments

    saved = read_data_settings(pair_dir)
    if not saved:
        return None
    fields = {field.name for field in dataclasses.fields(JepaReasonerDataArguments)}
    # The reasoner it was trained from is a training-time folder (maybe gone); the pair holds that reasoner.
    settings = {k: v for k, v in saved.items() if k in fields and k not in ("reasoner", "plot")}
    data = ReasoningData(JepaReasonerDataArguments(**settings, plot=False))
    if tokenizer is not None and data.tokenizer.get_vocab() != tokenizer.get_vocab():
        return None
    return data


def _check_prompt(prompt) -> str:
    if prompt is None or not str(prompt).strip():
        raise UserInputError(
            "empty prompt: type whitespace-separated tokens of the task's vocabulary, or pick an example"
        )
    prompt = " ".join(str(prompt).split())
    if len(prompt) > MAX_PROMPT_CHARS:
        raise UserInputError(f"the prompt has {len(prompt)} characters; this app takes at most {MAX_PROMPT_CHARS}")
    return prompt


def _check_noise(noise, kind: str) -> float:
    if kind not in NOISE_KINDS.values():
        raise UserInputError(f"the noise goes on one of {sorted(NOISE_KINDS.values())}, got {kind!r}")
    noise = check_noise_std(noise, "noise")
    if noise > MAX_NOISE:
        raise UserInputError(f"the noise must lie in [0, {MAX_NOISE:g}], got {noise!r}")
    return noise


def generate(
    reason, prompt: str, num_reasoning_steps: int | None = None, noise: float = 0.0, kind: str = "latent", seed: int = 0
) -> dict:
    """The `latent-reasoning` pipeline `reason` on `prompt` (greedy), with Gaussian noise of relative std `noise` on
    the fed-back latent (`kind="latent"`: std `noise` times the RMS of a unit latent, `DecoupledSystem.noise_scale`,
    as the robustness curves perturb it) or on every block's residual stream (`kind="residual"`: `residual_noise`,
    std relative to each vector's RMS), drawn from `seed`. Returns `{"prompt", "answer", "chain"}`, the chain a
    `(steps, hidden)` float32 tensor."""
    prompt = _check_prompt(prompt)
    noise = _check_noise(noise, kind)
    call = dict(num_reasoning_steps=num_reasoning_steps, return_latents=True, return_tensors=True, seed=int(seed))
    if kind == "latent" or noise == 0:
        absolute = noise * DecoupledSystem(reason.model, data=None).noise_scale()
        result = reason(prompt, latent_noise_std=absolute, **call)
    else:
        generator = torch.Generator(device=reason.model.device).manual_seed(int(seed))
        with residual_noise(reason.model, noise, generator):
            result = reason(prompt, **call)
    return {"prompt": prompt, "answer": result["generated_text"], "chain": result["latents"].float().cpu()}


def chain_cosines(noisy_chain: torch.Tensor, clean_chain: torch.Tensor) -> list[float]:
    """The cosine of each step of `noisy_chain` to the same step of `clean_chain` (both `(steps, hidden)`):
    `cosine_by_position` over the one chain."""
    mask = torch.ones(1, clean_chain.shape[0], dtype=torch.long)
    return cosine_by_position(noisy_chain[None], clean_chain[None], mask)


def nearest_tokens(chain: torch.Tensor, vocabulary: torch.Tensor, tokenizer) -> list[str]:
    """Each step's nearest vocabulary latent (`vocabulary_latents`, the tokens in isolation) by cosine, as a token."""
    unit = torch.nn.functional.normalize(chain.float(), dim=-1)
    similarity = unit @ torch.nn.functional.normalize(vocabulary.float(), dim=-1).T
    return tokenizer.convert_ids_to_tokens(similarity.argmax(-1).tolist())


def expected_answer(data: ReasoningData | None, prompt: str) -> tuple[ReasoningExample, str] | None:
    """`(the task's example, "held-out" | "training")` when `prompt` is one of the task's eval or training prompts."""
    if data is None:
        return None
    prompt = " ".join(prompt.split())
    for split, examples in (("held-out", data.eval_examples), ("training", data.train_examples)):
        for example in examples:
            if example.prompt == prompt:
                return example, split
    return None


def pca_plot(chain: torch.Tensor, vocabulary: torch.Tensor, tokens: list[str], noisy_chain=None, title="") -> bytes:
    """PNG bytes: `chain` (and `noisy_chain`) projected on the first two principal axes of the word latents (the
    vocabulary without its special tokens, as `mixed_latents` fits them), with the words and [EOS] labelled;
    `vocabulary` is `vocabulary_latents(reasoner)`, `tokens` the token of each of its rows."""
    plt = pyplot()
    specials = len(REASONING_SPECIAL_TOKENS)
    words = vocabulary[specials:].float()
    mean = words.mean(0, keepdim=True)
    _, _, basis = torch.linalg.svd(words - mean, full_matrices=False)
    project = lambda x: ((x.float() - mean) @ basis[:2].T).numpy()  # noqa: E731
    shown = list(range(specials, vocabulary.shape[0])) + [tokens.index(EOS_TOKEN)]
    points = project(vocabulary[shown])
    path = project(chain)
    figure, axis = plt.subplots(figsize=(7.5, 5.6))
    axis.scatter(points[:, 0], points[:, 1], marker="x", color="0.45", s=28, label="vocabulary latents")
    labelled = range(len(shown))
    if len(shown) > LABELLED_WORDS:  # only the words the chain passes nearest to
        distances = ((points[:, None] - path[None]) ** 2).sum(-1).min(1)
        labelled = np.argsort(distances)[:LABELLED_WORDS]
    for index in labelled:
        axis.annotate(
            tokens[shown[index]], points[index], fontsize=8, color="0.3", xytext=(3, 3), textcoords="offset points"
        )
    axis.plot(path[:, 0], path[:, 1], "-", color="tab:blue", lw=1, alpha=0.6)
    steps = np.arange(1, len(path) + 1)
    dots = axis.scatter(path[:, 0], path[:, 1], c=steps, cmap="viridis", s=36, zorder=3, label="clean chain")
    for step in {1, len(path)}:
        axis.annotate(
            f"step {step}", path[step - 1], fontsize=7, color="tab:blue", xytext=(-10, -11), textcoords="offset points"
        )
    if noisy_chain is not None:
        noisy = project(noisy_chain)
        axis.plot(noisy[:, 0], noisy[:, 1], "--o", color="tab:red", ms=3, lw=0.8, alpha=0.8, label="noisy chain")
    figure.colorbar(dots, ax=axis, label="chain step", fraction=0.04, pad=0.02)
    axis.set_xlabel("PC 1 of the word latents")
    axis.set_ylabel("PC 2")
    if title:
        axis.set_title(title, fontsize=9, loc="right")
    axis.legend(fontsize=8, loc="best")
    figure.tight_layout()
    return figure_png(figure, dpi=110)


# ------------------------------------------------------------------------------------------------------------ page


def _verdict(data: ReasoningData | None, prompt: str, answer: str, steps: int) -> str:
    found = expected_answer(data, prompt)
    lines = [f"The reasoner's chain has **{steps}** latents; the Talker read all of them."]
    if found is None:
        note = "not one of the task's prompts" if data is not None else "the folder saved no task settings"
        lines.append(f"No reference answer: {note}.")
        return "\n\n".join(lines)
    example, split = found
    correct = bool(data.task.score(example, answer))
    judged = "valid under the grammar" if isinstance(data.task, CfgTask) else "right"
    failed = "not valid under the grammar" if isinstance(data.task, CfgTask) else "wrong"
    lines.append(f"The task's answer ({split} example): `{example.answer}`")
    lines.append(f"**{'Right' if correct else 'Wrong'}**: the Talker's answer is {judged if correct else failed}.")
    if isinstance(data.task, CfgTask):
        lines.append("(Any completion the grammar accepts counts, not only the task's.)")
    return "\n\n".join(lines)


def _cosine_table(clean: list[str], noisy: list[str], cosines: list[float], noise: float, kind: str) -> str:
    finite = [c for c in cosines if not math.isnan(c)]
    rows = "\n".join(
        f"| {step} | `{a}` | `{b}` | {c:.3f} |" for step, (a, b, c) in enumerate(zip(clean, noisy, cosines), start=1)
    )
    where = "fed-back latent" if kind == "latent" else "residual stream of every block"
    return (
        f"Noise std **{noise:g}** (relative) on the {where}: mean cosine to the clean chain **{np.mean(finite):.3f}**, "
        f"lowest **{min(finite):.3f}**.\n\n"
        "| step | nearest token latent (token alone), clean | the same, noisy | cosine to the clean latent |\n"
        "|---:|---|---|---:|\n"
        f"{rows}\n"
    )


def build(served: ServedModel) -> gr.Blocks:
    """The JEPA-Reasoner app serving `served`'s folder (a pair, or a Talker folder with its pair/)."""
    page = family_page(TITLE, INTRO, served)

    def reasoner_pipeline():
        from transformers import pipeline

        return served.cached("pipeline", lambda folder: pipeline("latent-reasoning", model=str(pair_folder(folder))))

    # The pipeline first, outside `cached`'s build (which holds the lock that `cached` itself takes).
    def task_data():
        reason = reasoner_pipeline()
        return served.cached("data", lambda folder: load_task_data(pair_folder(folder), reason.tokenizer))

    def vocabulary():
        reason = reasoner_pipeline()
        return served.cached("vocabulary", lambda folder: vocabulary_latents(reason.model.reasoner))

    @guarded(outputs=3, message_index=2)
    def prepare():
        reason, data = reasoner_pipeline(), task_data()
        tokens = [t for t in reason.tokenizer.convert_ids_to_tokens(range(len(reason.tokenizer)))]
        words = [t for t in tokens if t not in REASONING_SPECIAL_TOKENS]
        shown = " ".join(f"`{w}`" for w in words[:80]) + (f" ... ({len(words)} in all)" if len(words) > 80 else "")
        if data is None:
            info = f"Vocabulary: {shown}. The folder saved no task settings, so there are no examples to pick."
            return gr.Dropdown(choices=[], value=None), info, ""
        prompts = [example.prompt for example in data.eval_examples[:EXAMPLES_SHOWN]]
        info = (
            f"Task: {data.source}; the pair reasons in chains of {data.max_answer_length} latents.\n\n"
            f"Vocabulary: {shown}"
        )
        return gr.Dropdown(choices=prompts, value=None), info, ""

    @guarded(outputs=6)
    def run(prompt, noise, kind_label, seed):
        if seed is None or float(seed) != int(seed) or int(seed) < 0:
            raise UserInputError(f"the noise seed must be a whole number >= 0, got {seed!r}")
        reason, data = reasoner_pipeline(), task_data()
        steps = data.max_answer_length if data is not None else None
        kind = NOISE_KINDS.get(kind_label, kind_label)
        noise = _check_noise(noise, kind)
        clean = generate(reason, prompt, steps)
        latents = vocabulary()
        tokens = reason.tokenizer.convert_ids_to_tokens(range(latents.shape[0]))
        verdict = _verdict(data, clean["prompt"], clean["answer"], clean["chain"].shape[0])
        noisy_answer, table, noisy_chain = "", "Move the noise slider above 0 to rerun the chain with noise.", None
        if noise > 0:
            noisy = generate(reason, prompt, steps, noise=noise, kind=kind, seed=int(seed))
            noisy_answer, noisy_chain = noisy["answer"], noisy["chain"]
            table = _cosine_table(
                nearest_tokens(clean["chain"], latents, reason.tokenizer),
                nearest_tokens(noisy_chain, latents, reason.tokenizer),
                chain_cosines(noisy_chain, clean["chain"]),
                noise,
                kind,
            )
        from PIL import Image

        title = f"{clean['chain'].shape[0]} steps" + (f"; noise std {noise:g} on the {kind}" if noise > 0 else "")
        plot = pca_plot(clean["chain"], latents, tokens, noisy_chain, title=title)
        return "", clean["answer"], verdict, noisy_answer, table, Image.open(io.BytesIO(plot))

    with page:
        with gr.Row():
            with gr.Column():
                prompt = gr.Textbox(label="Prompt", lines=2, elem_id="reasoner-prompt", max_length=MAX_PROMPT_CHARS)
                example = gr.Dropdown(
                    label="or pick one of the task's held-out examples", choices=[], elem_id="reasoner-example"
                )
                info = gr.Markdown(elem_id="reasoner-info")
                run_button = gr.Button("Reason", variant="primary", elem_id="reasoner-run")
                noise = gr.Slider(
                    0,
                    MAX_NOISE,
                    value=0.0,
                    step=0.05,
                    label="noise std (relative to the RMS)",
                    elem_id="reasoner-noise",
                )
                kind = gr.Radio(
                    list(NOISE_KINDS), value=next(iter(NOISE_KINDS)), label="noise on", elem_id="reasoner-noise-kind"
                )
                seed = gr.Number(value=0, precision=0, label="noise seed", elem_id="reasoner-seed")
            with gr.Column():
                message = gr.Markdown(elem_id="reasoner-message")
                answer = gr.Textbox(label="the Talker's answer", interactive=False, elem_id="reasoner-answer")
                verdict = gr.Markdown(elem_id="reasoner-verdict")
                noisy_answer = gr.Textbox(
                    label="the Talker's answer with noise", interactive=False, elem_id="reasoner-noisy-answer"
                )
        pca = gr.Image(
            label="the latent chain on the vocabulary latents' PCA",
            elem_id="reasoner-pca",
            interactive=False,
            format="png",
        )
        cosines = gr.Markdown(elem_id="reasoner-cosines")
        inputs, outputs = [prompt, noise, kind, seed], [message, answer, verdict, noisy_answer, cosines, pca]
        page.load(prepare, outputs=[example, info, message])
        # One run at a time, whatever started it: residual noise hooks the shared model for the length of a run.
        queue = dict(concurrency_limit=1, concurrency_id="reasoner-run")
        run_button.click(run, inputs, outputs, **queue)
        prompt.submit(run, inputs, outputs, **queue)
        example.input(lambda chosen: chosen or "", example, prompt).then(run, inputs, outputs, **queue)
        noise.change(run, inputs, outputs, **queue)  # dragged or typed; only the last of a drag's values waits
        kind.input(run, inputs, outputs, **queue)
    return page
