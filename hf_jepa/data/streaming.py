"""Training batches from a streamed `datasets.IterableDataset`, built in DataLoader workers.

`StreamedBatches` yields `(index, batch)` for batch indices `start, start + 1, ...` of one process: its share of the
stream (`datasets.distributed.split_dataset_by_node`) cut into consecutive batches of `batch_size` examples (the last
incomplete batch of each pass is dropped; the stream restarts when it ends). With `num_workers` DataLoader workers,
worker `w` decodes and masks the batches `start + w, start + w + workers, ...` and the DataLoader takes them round
robin, so the sequence of batches is the same for any number of workers, and a run resumed at optimiser step `s`
(`start = s * gradient_accumulation_steps`) continues with exactly the batches an uninterrupted run would have drawn:
the position is a pure function of the step, which the trainer's checkpoints already hold. Skipped batches are read
but never decoded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from datasets.distributed import split_dataset_by_node

# make_batch(raw_batch, index, rank) -> model inputs; raw_batch maps each column to a list of `batch_size` values.
MakeBatch = Callable[[dict, int, int], dict[str, torch.Tensor]]


class StreamedBatches(torch.utils.data.IterableDataset):
    """Process `rank`'s batches `start, start + 1, ...` of `dataset` (see the module docstring)."""

    def __init__(self, dataset, make_batch: MakeBatch, batch_size: int, rank: int, world_size: int, start: int = 0):
        if batch_size < 1 or start < 0 or not 0 <= rank < world_size:
            raise ValueError(
                f"need batch_size >= 1, start >= 0, 0 <= rank < world_size; got {batch_size}, {start}, "
                f"{rank}, {world_size}"
            )
        self.dataset, self.make_batch = dataset, make_batch
        self.batch_size, self.rank, self.world_size, self.start = batch_size, rank, world_size, start

    def raw_batches(self) -> Iterator[tuple[int, dict]]:
        """`(index, undecoded batch)` of this process's share, forever (pass after pass)."""
        share = split_dataset_by_node(self.dataset, rank=self.rank, world_size=self.world_size)
        index, epoch = 0, 0
        while True:
            if hasattr(share, "set_epoch"):
                share.set_epoch(epoch)
            before = index
            for raw in share.iter(batch_size=self.batch_size, drop_last_batch=True):
                yield index, raw
                index += 1
            if index == before:
                raise ValueError(
                    f"the streamed training data holds fewer than per_device_batch_size={self.batch_size} examples "
                    f"for process {self.rank} of {self.world_size}"
                )
            epoch += 1

    def __iter__(self) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        for index, raw in self.raw_batches():
            if index >= self.start and (index - self.start) % workers == worker:
                yield index, self.make_batch(raw, index, self.rank)


def stream_batches(batches: StreamedBatches, num_workers: int = 0) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
    """Iterate `batches` through a `DataLoader` with `num_workers` worker processes (0: in this process), each
    prefetching two batches ahead so the model does not wait for decoding and masking."""
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    if num_workers == 0:
        return iter(batches)
    # Its own generator: starting workers must not draw from torch's global random state, which the trainer restores
    # on resume (the batches do not depend on it; dropout does).
    loader = torch.utils.data.DataLoader(
        batches, batch_size=None, num_workers=num_workers, prefetch_factor=2, generator=torch.Generator().manual_seed(0)
    )
    return iter(loader)


__all__ = ["MakeBatch", "StreamedBatches", "stream_batches"]
