"""Several access points: which schedds the portal uses, which one each job goes to, and
which of them are not answering.

A job's schedd is chosen once, when the job is made, and kept in `Job.schedd`: every
submission attempt (and so the exactly-once lookup), every action and every sync of it
goes to that schedd. "" is the default schedd of a portal with one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count

from condor_bridge import BridgeError

from .bridge import get_bridge
from .models import FINAL_STATES, Job

logger = logging.getLogger("nightshift.jobs")
T = TypeVar("T")

DISCOVERED_KEY = "jobs:schedds-discovered"
DISCOVERY_TTL_S = 60
UNANSWERING_KEY = "jobs:schedds-unanswering"


def schedd_names() -> list[str]:
    """The schedds new jobs may go to, in the order the settings give them; [""] for a
    portal with one (the default schedd)."""
    if settings.CONDOR_SCHEDDS:
        return list(settings.CONDOR_SCHEDDS)
    if settings.CONDOR_DISCOVER_SCHEDDS:
        return _discovered() or [""]
    return [""]


def _discovered() -> list[str]:
    names = cache.get(DISCOVERED_KEY)
    if names is None:
        try:
            names = get_bridge().schedulers()
        except BridgeError:
            return []  # not remembered: asked again at the next job
        cache.set(DISCOVERED_KEY, names, timeout=DISCOVERY_TTL_S)
    return list(names)


def schedd_choose(*, lab=None) -> str:
    """Where a new job (or a new sweep, whose runs stay together as one cluster) goes.

    Per lab: the schedd its lab names, if the portal uses it. Otherwise the least loaded:
    the one with the fewest of the portal's unfinished jobs (the portal's own count, which
    a burst of submissions moves at once, where the collector's figures lag by a minute).
    """
    names = schedd_names()
    if len(names) == 1:
        return names[0]
    if settings.SCHEDD_POLICY == "per-lab" and lab is not None and lab.schedd in names:
        return lab.schedd
    load = dict(
        Job.objects.filter(schedd__in=names)
        .exclude(state__in=FINAL_STATES)
        .values_list("schedd")
        .annotate(n=Count("pk"))
    )
    return min(names, key=lambda name: (load.get(name, 0), names.index(name)))


def schedds_in_use() -> list[str]:
    """The schedds that hold the portal's unfinished submitted jobs."""
    return sorted(
        Job.objects.filter(cluster_id__isnull=False)
        .exclude(state__in=FINAL_STATES)
        .values_list("schedd", flat=True)
        .distinct()
    )


def schedds_ask(
    names: Iterable[str], call: Callable[[str], T]
) -> tuple[dict[str, T], dict[str, BridgeError]]:
    """`call(name)` for each schedd, in parallel where there are several: what each answered,
    and the error of each that did not (logged). One schedd's failure stops no other."""
    names = list(dict.fromkeys(names))
    answers: dict[str, T] = {}
    failures: dict[str, BridgeError] = {}

    def ask(name: str) -> None:
        try:
            answers[name] = call(name)
        except BridgeError as exc:
            failures[name] = exc
            logger.warning("%s is not answering: %s", schedd_label(name), exc)

    if len(names) <= 1:
        for name in names:
            ask(name)
    else:
        with ThreadPoolExecutor(max_workers=min(len(names), 16)) as pool:
            list(pool.map(ask, names))
    return answers, failures


def raise_unless_one_answered(failures: dict[str, BridgeError], answers: dict) -> None:
    """Raise the first schedd's error when none answered: a periodic task then fails (and
    retries, and its alerts fire) only when no access point is there, not when one is."""
    if failures and not answers:
        raise next(iter(failures.values()))


def schedd_label(name: str) -> str:
    """How the pages name a schedd: "scheduler ap1", or "the scheduler" for a portal's only
    one that the settings do not name."""
    name = name or settings.CONDOR_SCHEDD_NAME or ""
    return f"scheduler {name}" if name else "the scheduler"


# -- which schedds are not answering -------------------------------------------------------
def schedds_answered(answered: Iterable[str], failed: dict[str, str]) -> None:
    """What the last sync found: the schedds that answered, and the error of each that did
    not (kept with the time it first failed)."""
    before: dict[str, dict] = cache.get(UNANSWERING_KEY) or {}
    now = time.time()
    after = {
        name: {"error": error[:300], "since": before.get(name, {}).get("since", now)}
        for name, error in failed.items()
    }
    for name in set(before) - set(after) - set(answered):
        after[name] = before[name]  # not asked this time (no jobs there): as it was
    cache.set(UNANSWERING_KEY, after, timeout=None)


def schedds_unanswering() -> dict[str, dict]:
    """{schedd: {"error": text, "since": epoch seconds}} for each that failed the last sync
    that asked it."""
    return cache.get(UNANSWERING_KEY) or {}


def schedd_problem(job: Job) -> str:
    """What a job's page says when its schedd did not answer the last sync; "" otherwise."""
    if job.is_final:
        return ""
    failing = schedds_unanswering().get(job.schedd)
    if failing is None:
        return ""
    minutes = max(int((time.time() - failing["since"]) / 60), 0)
    label = schedd_label(job.schedd)
    since = "just now" if minutes < 1 else f"for {minutes} min"
    return (
        f"{label[0].upper()}{label[1:]} is not answering ({since}): this job's status "
        "may be out of date, and cancel, hold and release work again once it answers. Jobs on "
        "other schedulers carry on."
    )
