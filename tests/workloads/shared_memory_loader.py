"""Batches made by worker processes in shared memory, as PyTorch's DataLoader makes them."""

import multiprocessing
import sys
from multiprocessing import shared_memory

BATCH = 4096
BATCHES = 12
WORKERS = 3
# Whoever unlinks a block owns its clean-up, as in PyTorch; Python's resource tracker would
# otherwise warn about blocks that another process has already unlinked.
UNTRACKED = {"track": False} if sys.version_info >= (3, 13) else {}


def worker(worker_id: int, indices, ready) -> None:
    for batch in iter(indices.get, None):
        block = shared_memory.SharedMemory(create=True, size=BATCH * 8, **UNTRACKED)
        values = block.buf.cast("d")
        for position in range(BATCH):
            values[position] = batch * BATCH + position
        values.release()
        ready.put((batch, block.name))
        block.close()  # the consumer unlinks it, as the loader's main process does
    ready.put((None, worker_id))


def main() -> None:
    indices, ready = multiprocessing.Queue(), multiprocessing.Queue()
    workers = [
        multiprocessing.Process(target=worker, args=(n, indices, ready), daemon=True)
        for n in range(WORKERS)
    ]
    for process in workers:
        process.start()
    for batch in range(BATCHES):
        indices.put(batch)
    for _ in workers:
        indices.put(None)
    seen, finished = set(), 0
    while finished < WORKERS:
        batch, name = ready.get(timeout=60)
        if batch is None:
            finished += 1
            continue
        block = shared_memory.SharedMemory(name=name, **UNTRACKED)
        values = block.buf.cast("d")
        expected = sum(range(batch * BATCH, (batch + 1) * BATCH))
        assert sum(values) == expected, (batch, sum(values), expected)
        values.release()
        block.close()
        block.unlink()
        seen.add(batch)
    for process in workers:
        process.join()
    assert seen == set(range(BATCHES)), seen
    print(f"{BATCHES} batches from {WORKERS} workers through shared memory")
    print("WORKLOAD OK")


if __name__ == "__main__":
    main()
