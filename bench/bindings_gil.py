"""How much of a htcondor2 call another Python thread of the same process gets to run: a
thread counts as fast as it can beside a sleep, beside a `Schedd.query` of a large queue
and beside a `Schedd.submit` of a large cluster. A share near 100 % means the call lets go
of the interpreter lock while it waits; near 0 % means it keeps it, so no other thread of
the process (a second schedd's query, the worker's own work) runs beside it.

Run with `make bench-gil` (`ARGS="--jobs 40000"` for a larger queue; default 20,000). It
submits its held jobs to the personal pool's schedd and removes them at the end. The last
line reads `thread beside a query: P %, beside a submit: Q %`.

With `--two-schedds` it also turns on the pool's second schedd (`pool schedds 2`), gives each
schedd the same number of held jobs, and reads both queues with each ad's text (as the
sync's memo reads them) from two threads, as the sync does, and from two forked processes,
which share no interpreter lock: what asking each schedd from its own process would gain.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from portal_setup import setup_django

setup_django(fake_bridge=False)

import htcondor2  # noqa: E402
from django.conf import settings  # noqa: E402
from raw_condor import raw_schedd, remove_instance_jobs  # noqa: E402
from sync_scale import instance_constraint  # noqa: E402
from sync_schedds import CLUSTER_SIZE, pool_schedds, raw_schedds, submit_held  # noqa: E402

from condor_bridge.states import PROJECTION  # noqa: E402


class Counter(threading.Thread):
    """Counts as fast as the interpreter lets it, until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.count, self.running = 0, True

    def run(self) -> None:
        while self.running:
            self.count += 1

    def rate_beside(self, call) -> tuple[float, float]:
        """(counts per second while `call` runs, seconds `call` took)."""
        before, started = self.count, time.perf_counter()
        call()
        seconds = time.perf_counter() - started
        return (self.count - before) / seconds, seconds


def ad_texts(schedd: htcondor2.Schedd) -> list[str]:
    texts = []
    for ad in schedd.query(constraint=instance_constraint(), projection=PROJECTION):
        del ad["ServerTime"]
        texts.append(str(ad))
    return texts


def ad_texts_forked(schedd: htcondor2.Schedd) -> list[str]:
    """ad_texts in a forked child, its answer back through a pipe."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        try:
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write("\x1e".join(ad_texts(schedd)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read().decode()
    os.waitpid(child, 0)
    return answer.split("\x1e")


def two_schedds(jobs: int) -> tuple[float, float, int]:
    """Best of three reads of both schedds' queues with their ads' texts: (from two
    threads, from two forked processes, ads read)."""
    names = pool_schedds(2)
    schedds = raw_schedds(names)
    directory = settings.JOBS_DIR / "bench-gil"
    directory.mkdir(parents=True, exist_ok=True)
    try:
        for name in names:
            submit_held(schedds[name], [str(uuid.uuid4()) for _ in range(jobs)], directory)
        best = {}
        for read in (ad_texts, ad_texts_forked) * 3:
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=len(names)) as pool:
                found = sum(len(texts) for texts in pool.map(read, schedds.values()))
            elapsed = time.perf_counter() - started
            best[read] = min(best.get(read, elapsed), elapsed)
        return best[ad_texts], best[ad_texts_forked], found
    finally:
        for schedd in schedds.values():
            schedd.act(htcondor2.JobAction.Remove, instance_constraint())
        pool_schedds(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--two-schedds", action="store_true")
    arguments = parser.parse_args()
    jobs = arguments.jobs
    schedd = raw_schedd()
    directory = settings.JOBS_DIR / "bench-gil"
    directory.mkdir(parents=True, exist_ok=True)
    submitting = min(jobs, CLUSTER_SIZE) // 2

    def submit(count: int) -> None:
        submit_held(schedd, [str(uuid.uuid4()) for _ in range(count)], directory)

    counter = Counter()
    try:
        submit(jobs)
        counter.start()
        time.sleep(0.2)
        idle, _ = counter.rate_beside(lambda: time.sleep(1.0))
        found: list = []
        queried, query_s = counter.rate_beside(
            lambda: found.extend(
                schedd.query(constraint=instance_constraint(), projection=PROJECTION)
            )
        )
        submitted, submit_s = counter.rate_beside(lambda: submit(submitting))
    finally:
        counter.running = False
        remove_instance_jobs()
    if arguments.two_schedds:
        threads, processes, both = two_schedds(jobs)
        print(f"\nBoth schedds' {both:,} ads with their text, best of 3")
        print(f"  from two threads (as the sync)    {threads:.2f} s")
        print(f"  from two forked processes         {processes:.2f} s")
    print(f"\nA counting thread beside htcondor2 calls ({time.strftime('%Y-%m-%d %H:%M')})")
    print(f"  beside a sleep                                 {idle:>14,.0f} counts/s")
    print(
        f"  beside Schedd.query of {len(found):,} ads ({query_s:.2f} s)   "
        f"{queried:>14,.0f} counts/s"
    )
    print(
        f"  beside Schedd.submit of {submitting:,} jobs ({submit_s:.2f} s)"
        f"  {submitted:>14,.0f} counts/s"
    )
    print(
        f"thread beside a query: {100 * queried / idle:.0f} %, "
        f"beside a submit: {100 * submitted / idle:.0f} %"
    )


if __name__ == "__main__":
    main()
