"""Combine curve runs of disjoint systems into one result (`combine_curve_runs`): e.g. the 7-node curves run as two
one-thread processes side by side, one per core (research/jepa_reasoner/curves/README.md).

usage: python research/jepa_reasoner/curves/combine.py OUTPUT_DIR RUN_DIR RUN_DIR [RUN_DIR ...]"""

import json
import sys
from pathlib import Path

from hf_jepa.reproductions.jepa_reasoner_curves import combine_curve_runs

if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__.split("\n\n")[-1])
    runs = [json.loads((Path(folder) / "results.json").read_text()) for folder in sys.argv[2:]]
    print(combine_curve_runs(runs, Path(sys.argv[1])).table)
