"""What `hf-jepa probe` writes on a model card: one `model-index` result per probe of the learned encoder and one per
probe of the untrained one (a separate, named result: "... of the untrained encoder"), and the results table in a
marked section of the card's text. Rerunning replaces the entries of the same dataset and leaves every other entry
(the family's own training results, probes on other data) as it was."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ..data.sources import MNIST_HUB_ID
from .common import LIBRARY_NAME, _data_is_mnist, hub_dataset_ids

__all__ = ["PROBE_CONFIG_PREFIX", "probe_dataset", "probe_eval_results", "write_probe_card"]

PROBE_CONFIG_PREFIX = "hf-jepa-probe-"  # the `config` of every metric this writes: how a rerun finds its own entries
SECTION_START = "<!-- hf-jepa probe: start (rewritten by each run of hf-jepa probe) -->"
SECTION_END = "<!-- hf-jepa probe: end -->"
_METRIC_NAMES = {"linear": "Linear-probe accuracy", "knn": "kNN accuracy", "attentive": "Attentive-probe accuracy"}
_TASKS = {"image": "image-classification", "text": "text-classification"}


def probe_dataset(results: Mapping[str, Any]) -> dict[str, str]:
    """The `dataset_*` fields of the probes' model-index entries: MNIST by its Hub id, another Hub dataset by its id,
    else hf-jepa's own type ("hf-jepa-pydoc-topics" for the embedded topics, "hf-jepa-images" / "hf-jepa-text") with
    the data source as the name; the split is "test"."""
    data = results["data"]
    source, kind = str(data["source"]), data["kind"]
    hub_ids = hub_dataset_ids(source)
    if kind == "image" and _data_is_mnist({"data_source": source}, {}):
        return dict(dataset_type=MNIST_HUB_ID, dataset_name="MNIST", dataset_split="test")
    if hub_ids:
        return dict(dataset_type=hub_ids[0], dataset_name=hub_ids[0], dataset_split="test")
    fallback = "hf-jepa-pydoc-topics" if "CPython documentation" in source else f"hf-jepa-{kind}s"
    return dict(
        dataset_type="hf-jepa-images" if kind == "image" else fallback, dataset_name=source, dataset_split="test"
    )


def probe_eval_results(results: Mapping[str, Any]) -> list[EvalResult]:
    """One `EvalResult` (metric `accuracy`) per probe and row of `results` (the `probe_results.json` mapping); the
    untrained row's results are named "... of the untrained encoder (same config, seed S)" and have their own
    `config` (`hf-jepa-probe-<probe>-untrained`)."""
    task = dict(task_type=_TASKS[results["data"]["kind"]], task_name="Probes on frozen features (hf-jepa probe)")
    dataset = probe_dataset(results)
    k = results["settings"]["knn_k"]
    entries = []
    for row in results["rows"]:
        untrained = row["name"] == "untrained"
        for probe, value in row["accuracy"].items():
            name = _METRIC_NAMES[probe] + (f" (k={k})" if probe == "knn" else "")
            if untrained:
                name += f" of the untrained encoder (same config, seed {row['seed']})"
            entries.append(
                EvalResult(
                    **task,
                    **dataset,
                    metric_type="accuracy",
                    metric_value=float(value),
                    metric_name=name,
                    metric_config=f"{PROBE_CONFIG_PREFIX}{probe}" + ("-untrained" if untrained else ""),
                )
            )
    return entries


def _is_own(result: EvalResult, dataset: Mapping[str, str]) -> bool:
    """Whether `result` is a probe entry this module wrote earlier for the same dataset (a rerun replaces it)."""
    return str(result.metric_config or "").startswith(PROBE_CONFIG_PREFIX) and (
        result.dataset_type == dataset["dataset_type"] and result.dataset_name == dataset["dataset_name"]
    )


def _with_section(text: str, table: str) -> str:
    """`text` with the marked probe section set to `table` (appended under a heading when there is none yet)."""
    section = f"{SECTION_START}\n\n{table.strip()}\n\n{SECTION_END}"
    if SECTION_START in text and SECTION_END in text:
        before, rest = text.split(SECTION_START, 1)
        return before + section + rest.split(SECTION_END, 1)[1]
    return text.rstrip() + "\n\n## Probes on frozen features (hf-jepa probe)\n\n" + section + "\n"


def write_probe_card(folder: str | Path, results: Mapping[str, Any], table: str, model_name: str) -> Path:
    """Add the probe results to `folder/README.md` (a new minimal card when there is none): the model-index entries of
    `probe_eval_results` (replacing earlier ones on the same dataset; `model_name` names the model-index when the card
    has no name yet) and `table` in the card's probe section. Returns the card's path; the card parses back with
    `huggingface_hub.ModelCard.load`."""
    path = Path(folder) / "README.md"
    if path.is_file():
        card = ModelCard.load(path)
    else:
        card = ModelCard.from_template(ModelCardData(tags=[LIBRARY_NAME]), template_str="---\n{{ card_data }}\n---\n")
        card.text = f"\n# {model_name}\n\nProbed with `hf-jepa probe` on its frozen features.\n"
    dataset = probe_dataset(results)
    kept = [result for result in card.data.eval_results or [] if not _is_own(result, dataset)]
    card.data.eval_results = kept + probe_eval_results(results)
    card.data.model_name = card.data.model_name or model_name
    card.text = _with_section(card.text, table)
    card.save(path)
    return path
