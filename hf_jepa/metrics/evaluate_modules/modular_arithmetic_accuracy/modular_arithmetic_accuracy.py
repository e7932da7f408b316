"""`evaluate` module: accuracy on modular arithmetic y = (x + k) mod modulus, split into seen ops and zero-shot ops.

Load offline by path: `evaluate.load(hf_jepa.metrics.evaluate_module_path("modular_arithmetic_accuracy"))`.
"""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """
Accuracy of predicted target digits for modular arithmetic y = (x + k) mod modulus. Inputs: `predictions` (predicted
y), `references` (the source digits x) and `operations` (k). Returns overall accuracy, accuracy on the seen ops
(default -1 and +1), the strict zero-shot mean over every other op, and the accuracy of each op.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[int]`): predicted target digits.
    references (`list[int]`): source digits x.
    operations (`list[int]`): the op k of each sample.
    modulus (`int`, defaults to 10).
    seen_operations (`list[int]`, defaults to [-1, 1]).
Returns:
    accuracy, seen_accuracy, zero_shot_accuracy (means over ops, each op weighted equally), accuracy_per_operation.
"""

_CITATION = """
@article{brojepa,
  title = {BRo-JEPA: Learning Modular Arithmetic in Latent Space},
}
"""


class ModularArithmeticAccuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Value("int64"),
                    "references": datasets.Value("int64"),
                    "operations": datasets.Value("int64"),
                }
            ),
        )

    def _compute(self, predictions, references, operations, modulus=10, seen_operations=(-1, 1)):
        predictions = np.asarray(predictions)
        references = np.asarray(references)
        operations = np.asarray(operations)
        correct = predictions == np.mod(references + operations, modulus)
        per_operation = {int(k): float(correct[operations == k].mean()) for k in np.unique(operations)}
        seen = [v for k, v in per_operation.items() if k in seen_operations]
        unseen = [v for k, v in per_operation.items() if k not in seen_operations and k != 0]
        return {
            "accuracy": float(correct.mean()),
            "seen_accuracy": float(np.mean(seen)) if seen else float("nan"),
            "zero_shot_accuracy": float(np.mean(unseen)) if unseen else float("nan"),
            "accuracy_per_operation": per_operation,
        }
