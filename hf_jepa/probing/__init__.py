"""`hf-jepa probe`: linear, kNN and attentive probes on the frozen features of an hf-jepa folder or a transformers
encoder, beside the same config freshly initialised (`runner.run_probes`); encoders in `encoders`, labelled data in
`data`, the tensor-level probes in `hf_jepa.metrics.probes`, the card's model-index in `hf_jepa.cards.probes`.
Importing this package imports no torch."""

__all__ = ["data", "encoders", "runner"]
