"""`python -m hf_jepa.demo_reload DIR [DATA]`: reload a saved BRo-JEPA folder the way the docs tell users to, and use it.

The second half of `make demo`: proves the folder written by `hf-jepa train` is a standard transformers checkpoint
(`AutoModel` + `pipeline("modular-arithmetic", model=DIR)`, no `trust_remote_code` where hf_jepa is installed), that
the reloaded model scores what was measured before saving, and prints the snippet that loads it.
"""

import json
import sys
from pathlib import Path

import torch
from transformers import AutoModel, pipeline

import hf_jepa  # noqa: F401  (registers the Auto classes and the pipeline task)
from hf_jepa.data import images_to_tensor, load_mnist, normalize_images
from hf_jepa.metrics import evaluate_modular_arithmetic

OPERATION = 3
SAMPLES = 8


def main(argv=None) -> int:
    argv = list(argv if argv is not None else sys.argv[1:])
    directory = Path(argv[0] if argv else "outputs/demo")
    data = argv[1] if len(argv) > 1 else "embedded"
    for name in ("config.json", "eval_results.json"):
        if not (directory / name).is_file():
            print(
                f"demo_reload: error: {directory} has no {name}: not a folder `hf-jepa train` wrote (run `make demo`)"
            )
            return 2
    model = AutoModel.from_pretrained(directory).eval()
    saved = json.loads((directory / "eval_results.json").read_text())["zero_shot_accuracy"]
    test = load_mnist(data)["test"]
    images, labels = images_to_tensor(test)
    pixels = normalize_images(images, model.config.pixel_mean, model.config.pixel_std)
    reloaded = evaluate_modular_arithmetic(model, pixels, labels)["zero_shot_accuracy"]
    print(f"Reloaded {type(model).__name__} from {directory.resolve()} with AutoModel.from_pretrained")
    print(f"  zero-shot accuracy on {len(labels)} {data} test digits (operations never trained on):")
    print(f"    measured before saving {100 * saved:.2f}%, after reloading {100 * reloaded:.2f}%")
    if abs(reloaded - saved) > 1e-6:
        print("demo_reload: error: the reloaded model does not score what was measured before saving")
        return 1

    classify = pipeline("modular-arithmetic", model=str(directory))
    results = classify([image.numpy() for image in images[:SAMPLES]], operation=OPERATION)
    right = 0
    print(f'  pipeline("modular-arithmetic") on {SAMPLES} test digits, operation +{OPERATION}:')
    for label, result in zip(labels[:SAMPLES].tolist(), results):
        expected = (label + OPERATION) % model.config.modulus
        right += result["digit"] == expected
        mark = "ok" if result["digit"] == expected else "WRONG"
        print(f"    {label} + {OPERATION} -> {result['digit']} (score {result['score']:.3f}) {mark}")
    print(f"  {right}/{SAMPLES} right")
    print("\nLoad it in your own code:")
    print("    import hf_jepa")
    print("    from transformers import pipeline")
    print(f'    classify = pipeline("modular-arithmetic", model="{directory.resolve()}")')
    print("    classify(image, operation=3)  # a PIL image or (28, 28) array of a digit -> its digit + 3 (mod 10)")
    return 0


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    sys.exit(main())
