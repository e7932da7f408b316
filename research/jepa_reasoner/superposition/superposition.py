"""Superposition measurements of a saved JEPA-Reasoner folder (research/jepa_reasoner/superposition/README.md).

usage: python research/jepa_reasoner/superposition/superposition.py REASONER_DIR [OUTPUT_DIR [NUM_PROMPTS [DELTA]]]

REASONER_DIR is the output folder of `hf-jepa train jepa-reasoner` (or `<reproduction>/tree_search/reasoner`): the
task and its eval split are rebuilt from its data_args.json, as `hf-jepa eval` does. Writes superposition.json,
superposition.md, contextual_mixed_latents.png and (tree search) candidate_continuations.png to OUTPUT_DIR
(default: REASONER_DIR/superposition) and prints the Markdown tables."""

import dataclasses
import sys
from pathlib import Path

from hf_jepa.data.reasoning import ReasoningData
from hf_jepa.metrics.reasoning_superposition import (
    DEFAULT_NUM_PROMPTS,
    KEEP_DELTA,
    evaluate_superposition,
    format_superposition,
)
from hf_jepa.modeling.jepa_reasoner import JepaReasonerModel
from hf_jepa.recipes._saved import read_data_settings
from hf_jepa.recipes.jepa_reasoner import JepaReasonerDataArguments


def main(argv: list[str]) -> dict:
    if not 1 <= len(argv) <= 4:
        raise SystemExit(__doc__)
    folder = Path(argv[0])
    output_dir = Path(argv[1]) if len(argv) > 1 else folder / "superposition"
    num_prompts = int(argv[2]) if len(argv) > 2 else DEFAULT_NUM_PROMPTS
    delta = float(argv[3]) if len(argv) > 3 else KEEP_DELTA
    fields = {field.name for field in dataclasses.fields(JepaReasonerDataArguments)}
    settings = {k: v for k, v in read_data_settings(folder).items() if k in fields and k != "reasoner"}
    data = ReasoningData(JepaReasonerDataArguments(**{**settings, "plot": False}))
    model = JepaReasonerModel.from_pretrained(str(folder)).eval()
    summary = evaluate_superposition(model, data, output_dir, num_prompts=num_prompts, delta=delta)
    print(format_superposition(summary))
    print(f"\nwritten to {output_dir}")
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
