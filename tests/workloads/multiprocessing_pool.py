"""A multiprocessing pool and queues under every start method, and a shared Array."""

import multiprocessing
import os


def square(number: int) -> int:
    return number * number


def produce(queue) -> None:
    for number in range(5):
        queue.put(number)
    queue.put(None)


def fill(shared, offset: int) -> None:
    with shared.get_lock():
        for index in range(offset, len(shared), 2):
            shared[index] = float(index)


def main() -> None:
    for method in ("fork", "spawn", "forkserver"):
        context = multiprocessing.get_context(method)
        with context.Pool(2) as pool:
            assert pool.map(square, range(10)) == [n * n for n in range(10)]
        queue = context.Queue()
        producer = context.Process(target=produce, args=(queue,))
        producer.start()
        received = list(iter(queue.get, None))
        producer.join()
        assert received == list(range(5)), received
        shared = context.Array("d", 8)
        workers = [context.Process(target=fill, args=(shared, offset)) for offset in (0, 1)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert list(shared) == [float(n) for n in range(8)], list(shared)
        print(f"{method}: pool, queue and shared array work", flush=True)
    print(f"/dev/shm holds {len(os.listdir('/dev/shm'))} entries at the end")
    print("WORKLOAD OK")


if __name__ == "__main__":
    main()
