"""Where the data builders' outside data comes from: every Hub dataset id hf-jepa reads, defined once, and whether
the Hub may be reached (`is_offline`)."""

import os

MNIST_HUB_ID = "ylecun/mnist"
C4_HUB_ID = "allenai/c4"
IMDB_HUB_ID = "stanfordnlp/imdb"
SNLI_HUB_ID = "stanfordnlp/snli"
FEVER_HUB_ID = "mteb/fever"
MS_MARCO_HUB_ID = "microsoft/ms_marco"
GSM8K_HUB_ID = "openai/gsm8k"

# Licences of the outside data that ends up inside hf-jepa's generated datasets (their dataset cards say which):
# MNIST as the Hub's ylecun/mnist card declares it, and scikit-learn's 8x8 digits (the embedded fallback), which come
# from the UCI "Optical Recognition of Handwritten Digits" set.
MNIST_LICENSE = "mit"
EMBEDDED_DIGITS_LICENSE = "cc-by-4.0"


def is_offline() -> bool:
    """Whether `HF_HUB_OFFLINE` or `HF_DATASETS_OFFLINE` is set to a true value ("1", "true", "yes", "on")."""
    truthy = {"1", "true", "yes", "on"}
    return any(os.environ.get(var, "").lower() in truthy for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


__all__ = [
    "C4_HUB_ID",
    "EMBEDDED_DIGITS_LICENSE",
    "FEVER_HUB_ID",
    "GSM8K_HUB_ID",
    "IMDB_HUB_ID",
    "MNIST_HUB_ID",
    "MNIST_LICENSE",
    "MS_MARCO_HUB_ID",
    "SNLI_HUB_ID",
    "is_offline",
]
