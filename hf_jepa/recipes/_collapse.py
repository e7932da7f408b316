"""`CollapseDiagnosedRecipe`: the shared part of the T-JEPA and I-JEPA recipes, collapse diagnostics over training.

At every log step the model (in eval mode) is measured on a fixed training batch and a fixed validation batch
(`hf_jepa.metrics.collapse`); the records feed the watchdog, the failure signature, `diagnostics.jsonl` and the plot.
"""

import json
from pathlib import Path
from typing import Any

import torch

from ..metrics.collapse import CollapseDiagnostics, DiagnosticsHistory
from ..trainers import Recipe

SIGNATURE_KEYS = ("mi_saturation_step", "divergence_step", "rank_collapse_step", "order_matches_paper", "mi_max")


def _on(batch: dict[str, torch.Tensor], device) -> dict[str, torch.Tensor]:
    return {key: value.to(device) for key, value in batch.items()}


class CollapseDiagnosedRecipe(Recipe):
    """A recipe whose `on_log` records collapse diagnostics. Subclasses call `__init__(seed)`, then
    `set_fixed_batches(train, val)`, and implement `batch_diagnostics(model, batch, split)` and `embedding_dim(model)`."""

    def __init__(self, seed: int):
        self.seed = seed
        self.diagnostics = CollapseDiagnostics(max_pairs=20_000, seed=seed)
        self.history = DiagnosticsHistory()
        self.records: list[dict] = []
        self.fixed_train: dict[str, torch.Tensor] = {}
        self.fixed_val: dict[str, torch.Tensor] = {}

    def set_fixed_batches(self, train: dict[str, torch.Tensor], val: dict[str, torch.Tensor]) -> None:
        self.fixed_train, self.fixed_val = train, val

    def batch_diagnostics(self, model, batch: dict[str, torch.Tensor], split: str) -> dict[str, float]:
        """Diagnostics (and `loss`) of the model on the fixed batch of `split` ("train" or "val"), already on the
        model's device, under no_grad in eval mode."""
        raise NotImplementedError(f"{type(self).__name__} must implement batch_diagnostics()")

    def embedding_dim(self, model) -> int:
        return model.config.hidden_size

    @torch.no_grad()
    def on_log(self, model, step: int, record: dict) -> dict[str, float]:
        was_training = model.training
        model.eval()
        try:
            values = {}
            for split, batch in (("train", self.fixed_train), ("val", self.fixed_val)):
                metrics = self.batch_diagnostics(model, _on(batch, model.device), split)
                prefixed = {f"{split}/{k}": v for k, v in metrics.items()}
                self.diagnostics.watchdog.check(prefixed, step=step, dim=self.embedding_dim(model))
                values.update(prefixed)
        finally:
            model.train(was_training)
        values["train/loss_running"] = record.get("loss", float("nan"))
        full = {"step": step, "loss": record.get("loss"), **values}
        self.history.add_record(full)
        self.records.append(full)
        return values

    @torch.no_grad()
    def final_diagnostics(self, model) -> dict[str, float]:
        """The diagnostics on the fixed validation batch at the end (`loss` reported as `val_loss`), and the failure
        signature's event steps when training logged at least twice."""
        was_training = model.training
        model.eval()
        try:
            final = self.batch_diagnostics(model, _on(self.fixed_val, model.device), "val")
        finally:
            model.train(was_training)
        metrics: dict[str, Any] = {("val_loss" if k == "loss" else k): v for k, v in final.items()}
        signature = self.history.failure_signature() if len(self.records) >= 2 else {}
        metrics.update({key: signature[key] for key in SIGNATURE_KEYS if key in signature})
        return metrics

    def write_records(self, output_dir: str) -> None:
        with open(Path(output_dir) / "diagnostics.jsonl", "w") as handle:
            for record in self.records:
                handle.write(json.dumps(record, default=float) + "\n")
