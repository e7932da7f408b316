"""Data builders: turn a source (Hub id, local files, embedded fallback, generator) into batches of tensors."""

from .mnist import MNIST_HUB_ID, embedded_digits, images_to_tensor, load_mnist, mnist_source_description
from .modular_arithmetic import (
    TRAIN_OPERATIONS,
    ModularArithmeticTask,
    normalize_images,
    random_shift,
    unseen_operations,
)


__all__ = [
    "MNIST_HUB_ID",
    "TRAIN_OPERATIONS",
    "ModularArithmeticTask",
    "embedded_digits",
    "images_to_tensor",
    "load_mnist",
    "mnist_source_description",
    "normalize_images",
    "random_shift",
    "unseen_operations",
]
