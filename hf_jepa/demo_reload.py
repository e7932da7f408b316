"""`python -m hf_jepa.demo_reload DIR [DATA]`: reload a saved BRo-JEPA directory with the Auto classes and use it.

The second half of `make demo`: proves the directory written by `hf-jepa train` is a standard transformers checkpoint
(AutoModel + pipeline) and that the reloaded model scores what was measured before saving.
"""

import json
import sys
from pathlib import Path

import torch
from transformers import AutoModel, pipeline

import hf_jepa  # noqa: F401  (registers the Auto classes and the pipeline task)
from hf_jepa.data import images_to_tensor, load_mnist


def main(argv=None) -> int:
    argv = list(argv if argv is not None else sys.argv[1:])
    directory = Path(argv[0] if argv else "outputs/demo")
    data = argv[1] if len(argv) > 1 else "embedded"
    model = AutoModel.from_pretrained(directory)
    saved = json.loads((directory / "eval_results.json").read_text())
    print(f"Reloaded {type(model).__name__} from {directory} with AutoModel.from_pretrained")
    print(f"  target encoder frozen: {not any(p.requires_grad for p in model.target_encoder.parameters())}")
    print(f"  zero-shot accuracy measured before saving: {100 * saved['zero_shot_accuracy']:.2f}%")

    test = load_mnist(data)["test"]
    images, labels = images_to_tensor(test.select(range(8)))
    classify = pipeline("modular-arithmetic", model=str(directory))
    operation = 3
    results = classify([image.numpy() for image in images], operation=operation)
    print(f"  pipeline('modular-arithmetic'), op +{operation} on 8 test digits:")
    for label, result in zip(labels.tolist(), results):
        expected = (label + operation) % model.config.modulus
        mark = "ok" if result["digit"] == expected else "WRONG"
        print(
            f"    {label} + {operation} -> {result['digit']} (score {result['score']:.3f}, expected {expected}) {mark}"
        )
    return 0


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    sys.exit(main())
