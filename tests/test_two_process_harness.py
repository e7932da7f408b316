"""`run_in_two_processes` forks its ranks: a progress bar in a rank must not depend on the state the parent's
threads left tqdm's lock in at the fork (the suite once hung for good after a rank timed out inside a bar)."""

import threading
import time

from tqdm import tqdm

from hf_jepa.testing.harness import run_in_two_processes


def _bar_worker(output_dir: str) -> None:
    import torch.distributed as dist

    for _ in tqdm(range(3), disable=False, mininterval=0):
        pass
    with open(f"{output_dir}/rank{dist.get_rank()}.done", "w") as done:
        done.write("ok")


def test_a_rank_forked_while_a_parent_thread_holds_tqdms_lock_still_shows_its_bar(tmp_path):
    held, release = threading.Event(), threading.Event()

    def hold_the_lock():  # what tqdm's monitor thread does for a moment every few seconds
        with tqdm.get_lock():
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_lock, daemon=True)
    holder.start()
    held.wait(5)
    releaser = threading.Timer(2.0, release.set)  # the parent's thread lets go after the fork, as the monitor does
    releaser.start()
    start = time.monotonic()
    run_in_two_processes(_bar_worker, str(tmp_path), timeout_s=60)
    holder.join(5)
    assert sorted(p.name for p in tmp_path.glob("*.done")) == ["rank0.done", "rank1.done"]
    assert time.monotonic() - start < 55  # neither rank waited for its timeout
    for _ in tqdm(range(2), disable=False):  # and the parent's own bars still work afterwards
        pass
