"""How much of a htcondor2 call another Python thread of the same process gets to run: a
thread counts as fast as it can beside a sleep, beside a `Schedd.query` of a large queue
and beside a `Schedd.submit` of a large cluster. A share near 100 % means the call lets go
of the interpreter lock while it waits; near 0 % means it keeps it, so no other thread of
the process (a second schedd's query, the worker's own work) runs beside it.

Run with `make bench-gil` (`ARGS="--jobs 40000"` for a larger queue; default 20,000). It
submits its held jobs to the personal pool's schedd and removes them at the end. The last
line reads `thread beside a query: P %, beside a submit: Q %`.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid

from portal_setup import setup_django

setup_django(fake_bridge=False)

import htcondor2  # noqa: E402
from django.conf import settings  # noqa: E402
from raw_condor import raw_schedd, remove_instance_jobs  # noqa: E402
from sync_scale import held_description, instance_constraint  # noqa: E402

from condor_bridge.states import PROJECTION  # noqa: E402

# The schedd takes at most 20,000 jobs in one cluster (MAX_JOBS_PER_SUBMISSION).
CLUSTER_SIZE = 20_000


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    jobs = parser.parse_args().jobs
    schedd = raw_schedd()
    directory = settings.JOBS_DIR / "bench-gil"
    directory.mkdir(parents=True, exist_ok=True)
    description = held_description(directory)

    def submit(count: int) -> None:
        for start in range(0, count, CLUSTER_SIZE):
            items = [{"jid": str(uuid.uuid4())} for _ in range(min(CLUSTER_SIZE, count - start))]
            schedd.submit(htcondor2.Submit(description), itemdata=iter(items))

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
            )  # fmt: skip
        )
        submitted, submit_s = counter.rate_beside(lambda: submit(min(jobs, CLUSTER_SIZE) // 2))
    finally:
        counter.running = False
        remove_instance_jobs()
    print(f"\nA counting thread beside htcondor2 calls ({time.strftime('%Y-%m-%d %H:%M')})")
    print(f"  beside a sleep                                 {idle:>14,.0f} counts/s")
    print(f"  beside Schedd.query of {len(found):,} ads ({query_s:.2f} s)   "
          f"{queried:>14,.0f} counts/s")  # fmt: skip
    print(f"  beside Schedd.submit of {min(jobs, CLUSTER_SIZE) // 2:,} jobs ({submit_s:.2f} s)"
          f"  {submitted:>14,.0f} counts/s")  # fmt: skip
    print(
        f"thread beside a query: {100 * queried / idle:.0f} %, "
        f"beside a submit: {100 * submitted / idle:.0f} %"
    )


if __name__ == "__main__":
    main()
