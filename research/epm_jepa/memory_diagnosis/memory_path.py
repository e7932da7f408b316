"""`memory_path_diagnostics` (measurement (d) of research/epm_jepa/memory_diagnosis/README.md, `experience_change`) on trained model
folders: query + support of g = 0.1, other support of g = 0.6 (evaluation episodes).

usage: python research/epm_jepa/memory_diagnosis/memory_path.py MODEL_DIR [MODEL_DIR ...]   (MNIST from $HF_JEPA_MNIST, default
../shared/data/mnist)"""

import json
import os
import sys

from hf_jepa.data import MnistSplits
from hf_jepa.metrics.epm_memory import memory_path_diagnostics
from hf_jepa.modeling.epm_jepa import EpmJepaModel
from hf_jepa.recipes.epm_jepa import EpmJepaDataArguments, build_episodic_eval

# The real MNIST folder the numbers were measured on (the repository's ../shared/data/mnist by default).
if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
    sys.exit(__doc__)
MNIST = os.environ.get("HF_JEPA_MNIST", "../shared/data/mnist")
splits = MnistSplits(MNIST)
eps = build_episodic_eval(splits, EpmJepaDataArguments(data=MNIST, eval_sequences=64, episode_support=8), 64)
for folder in sys.argv[1:]:
    model = EpmJepaModel.from_pretrained(folder).eval()
    d = memory_path_diagnostics(model, eps[0.1]["query"], eps[0.1]["support"], eps[0.6]["support"])
    print(folder, json.dumps({k: float(f"{v:.4g}") for k, v in d.items()}))
