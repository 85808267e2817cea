"""What decides, besides the request itself, whether a user may submit now.

Three apps above jobs know: operations (is the portal drained for maintenance?), accounts
(is the account approved?) and accounting (does the job fit the quotas?). jobs imports none
of them. Each hands its check in from its AppConfig.ready(), and every submission path (a
job, a sweep, a study's next trial) asks through the functions below. A check nobody handed
in admits everything, so that jobs can be read and tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any


class QuotaExceeded(Exception):
    """A submission that would break a quota limit. `field` names the input to change
    (gpus, max_runtime_s) or is None; the message names the limit and the usage."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# (user, lab, gpus, max_runtime_s, runs) -> the runtime limit the quota sets, or None;
# raises QuotaExceeded.
QuotaCheck = Callable[..., int | None]


@dataclass(frozen=True)
class _Checks:
    paused: Callable[[], str | None] = lambda: None
    approved: Callable[[Any], bool] = lambda user: True
    quota: QuotaCheck = lambda **request: None
    lock_quota: Callable[[Any, Any], None] = lambda user, lab: None


_checks = _Checks()


def admission_register(
    *,
    paused: Callable[[], str | None] | None = None,
    approved: Callable[[Any], bool] | None = None,
    quota: QuotaCheck | None = None,
    lock_quota: Callable[[Any, Any], None] | None = None,
) -> None:
    """Hand in the checks an app owns. `paused()` returns the drain's message (maybe empty)
    while submissions are paused, else None; `approved(user)` says whether the account may
    submit; `quota(user=, lab=, gpus=, max_runtime_s=, runs=)` raises QuotaExceeded or
    returns the runtime limit it imposes; `lock_quota(user, lab)` serialises quota checks
    of one lab (or user) until the transaction ends."""
    global _checks
    given = {"paused": paused, "approved": approved, "quota": quota, "lock_quota": lock_quota}
    _checks = replace(_checks, **{name: check for name, check in given.items() if check})


def submissions_paused() -> str | None:
    return _checks.paused()


def account_approved(user) -> bool:
    return _checks.approved(user)


def quota_check(*, user, lab, gpus: int, max_runtime_s: int | None, runs: int = 1) -> int | None:
    return _checks.quota(user=user, lab=lab, gpus=gpus, max_runtime_s=max_runtime_s, runs=runs)


def quota_lock(user, lab) -> None:
    _checks.lock_quota(user, lab)
