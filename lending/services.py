"""What owners and admins change: who owns a workstation, its lending terms, asking it back.
Each change is audited; the workstation's kit picks it up at its cron's next run."""

from __future__ import annotations

import hashlib
import secrets
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounting.models import UsageRecord
from accounting.services import usage_records_forgive
from audit.services import audit_record
from jobs.services import job_event_record
from labs.models import Lab

from .models import EVICTION_SEEN_WITHIN, ClaimCode, LendingTerms, Reclaim, WorkstationOwner
from .selectors import may_manage, reclaim_in_effect

# A claim code lasts this long: long enough to walk to a desk with a browser.
CLAIM_CODE_HOURS = 24
# Letters and digits nobody confuses with one another (no 0/O, 1/I/L), in two groups of 4.
CLAIM_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"

# "I need it back in N minutes": N from 1 to this.
RECLAIM_MAX_MINUTES = 240
# After the deadline, the workstation stays its owner's this long unless they lend it again.
RECLAIM_KEEPS_HOURS = 4


class LendingError(Exception):
    """A change that cannot be made, in words for its owner; `field` names the input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class TermsChange:
    """Lending terms as an owner sets them (see LendingTerms)."""

    days: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4, 5, 6])
    from_minute: int = 0
    until_minute: int = 1440
    only_while_away: bool = False
    away_after_minutes: int = 15
    max_gpus: int | None = None
    max_memory_gb: int | None = None
    labs: list[Lab] = field(default_factory=list)
    paused_until: datetime | None = None


def _check_manager(user, workstation: str) -> None:
    if not may_manage(user, workstation):
        raise LendingError("workstation", f"Only the owners of {workstation} and admins may.")


def _check_terms(change: TermsChange) -> None:
    if not change.days or any(not 0 <= day <= 6 for day in change.days):
        raise LendingError("days", "Choose at least one day (0 is Monday, 6 Sunday).")
    if not 0 <= change.from_minute < change.until_minute <= 1440:
        raise LendingError("until_minute", "The end of the hours must come after their start.")
    if not 1 <= change.away_after_minutes <= 24 * 60:
        raise LendingError("away_after_minutes", "Away counts after 1 minute to 24 hours.")
    if change.max_gpus is not None and not 0 <= change.max_gpus <= 64:
        raise LendingError("max_gpus", "Lend from 0 to 64 GPUs (empty: all of them).")
    if change.max_memory_gb is not None and not 1 <= change.max_memory_gb <= 16384:
        raise LendingError("max_memory_gb", "Lend at least 1 GB of memory (empty: all of it).")


def owner_add(*, workstation: str, user, actor) -> WorkstationOwner:
    """An admin makes `user` an owner of `workstation`."""
    if not getattr(actor, "is_staff", False):
        raise LendingError("user", "Only admins name a workstation's owners.")
    owner, created = WorkstationOwner.objects.get_or_create(
        workstation=workstation, user=user, defaults={"added_by": actor}
    )
    if created:
        audit_record(
            action="lending.owner_add",
            actor=actor,
            target=owner,
            detail=f"{user.get_username()} owns {workstation}",
        )
    return owner


@transaction.atomic
def terms_set(*, user, workstation: str, change: TermsChange) -> LendingTerms:
    """The owner's terms for `workstation`, replacing any before."""
    _check_manager(user, workstation)
    _check_terms(change)
    terms, _ = LendingTerms.objects.select_for_update().get_or_create(workstation=workstation)
    terms.days = sorted(set(change.days))
    terms.from_minute = change.from_minute
    terms.until_minute = change.until_minute
    terms.only_while_away = change.only_while_away
    terms.away_after_minutes = change.away_after_minutes
    terms.max_gpus = change.max_gpus
    terms.max_memory_gb = change.max_memory_gb
    terms.paused_until = change.paused_until
    terms.updated_by = user
    terms.save()
    terms.labs.set(change.labs)
    audit_record(
        action="lending.terms_set",
        actor=user,
        target=terms,
        detail=(
            f"{terms.days_text}, {terms.hours_text}"
            + (", only while away" if terms.only_while_away else "")
            + (f", at most {terms.max_gpus} GPUs" if terms.max_gpus is not None else "")
            + (f", {terms.max_memory_gb} GB" if terms.max_memory_gb is not None else "")
            + (f", labs: {', '.join(lab.name for lab in change.labs)}" if change.labs else "")
            + (f", paused until {terms.paused_until:%Y-%m-%d %H:%M}" if terms.paused_until else "")
        ),
    )
    return terms


@transaction.atomic
def reclaim_request(
    *, user, workstation: str, minutes: int, now: datetime | None = None
) -> Reclaim:
    """'I need it back in `minutes`': no new job from now, running jobs checkpoint and leave
    by the deadline, and it is not lent again for RECLAIM_KEEPS_HOURS after it."""
    _check_manager(user, workstation)
    if not 1 <= minutes <= RECLAIM_MAX_MINUTES:
        raise LendingError("minutes", f"Ask for it back in 1 to {RECLAIM_MAX_MINUTES} minutes.")
    now = now or timezone.now()
    # One request at a time per workstation: a second one moves the deadline.
    list(WorkstationOwner.objects.select_for_update().filter(workstation=workstation))
    current = reclaim_in_effect(workstation, now)
    deadline = now + timedelta(minutes=minutes)
    if current is not None:
        current.deadline = min(current.deadline, deadline)
        current.save(update_fields=["deadline"])
        reclaim = current
    else:
        reclaim = Reclaim.objects.create(
            workstation=workstation,
            requested_by=user,
            requested_at=now,
            deadline=deadline,
            until=deadline + timedelta(hours=RECLAIM_KEEPS_HOURS),
        )
    audit_record(
        action="lending.reclaim",
        actor=user,
        target=reclaim,
        detail=f"{workstation} back by {timezone.localtime(reclaim.deadline):%H:%M}",
    )
    return reclaim


def reclaim_end(*, user, workstation: str, now: datetime | None = None) -> Reclaim | None:
    """The owner lends it again before the request would have ended by itself."""
    _check_manager(user, workstation)
    now = now or timezone.now()
    current = reclaim_in_effect(workstation, now)
    if current is None:
        return None
    current.ended_at = now
    current.save(update_fields=["ended_at"])
    audit_record(
        action="lending.reclaim_end", actor=user, target=current, detail=f"{workstation} lent again"
    )
    return current


def _claim_digest(code: str) -> str:
    normalised = "".join(c for c in code.upper() if c.isalnum()).removeprefix("NS")
    return hashlib.sha256(normalised.encode()).hexdigest()


@transaction.atomic
def claim_code_create(*, workstation: str, now: datetime | None = None) -> tuple[str, ClaimCode]:
    """A one-time code for `workstation`, asked for by its kit; older unused ones end."""
    now = now or timezone.now()
    ClaimCode.objects.filter(workstation=workstation, used_at=None, expires_at__gt=now).update(
        expires_at=now
    )
    body = "".join(secrets.choice(CLAIM_ALPHABET) for _ in range(8))
    code = f"NS-{body[:4]}-{body[4:]}"
    made = ClaimCode.objects.create(
        workstation=workstation,
        digest=_claim_digest(code),
        expires_at=now + timedelta(hours=CLAIM_CODE_HOURS),
    )
    audit_record(action="lending.claim_code", target=made, detail=f"a claim code for {workstation}")
    return code, made


@transaction.atomic
def workstation_claim(*, user, code: str, now: datetime | None = None) -> WorkstationOwner:
    """`user` becomes an owner of the workstation whose kit printed `code`."""
    now = now or timezone.now()
    found = (
        ClaimCode.objects.select_for_update()
        .filter(digest=_claim_digest(code), used_at=None, expires_at__gt=now)
        .first()
    )
    if found is None:
        raise LendingError(
            "code",
            "That code is not valid: it may be mistyped, used or expired. Run "
            "nightshift-claim-code on the workstation for a new one.",
        )
    found.used_at, found.used_by = now, user
    found.save(update_fields=["used_at", "used_by"])
    owner, _ = WorkstationOwner.objects.get_or_create(
        workstation=found.workstation, user=user, defaults={"added_by": user}
    )
    audit_record(
        action="lending.claim",
        actor=user,
        target=owner,
        detail=f"{user.get_username()} claimed {found.workstation} with a code from its kit",
    )
    return owner


# Runs evicted this long ago or less are checked for work a reclaim lost.
RELIEF_LOOKBACK = timedelta(days=2)


def reclaim_relief_apply(*, now: datetime | None = None) -> int:
    """Keep the promise owners' requests make to students: work lost when a workstation's
    owner asked for it back (a run's badput) is not charged to the student's quota. Each run
    forgiven is audited and said on its job's timeline; returns how many."""
    now = now or timezone.now()
    since = now - RELIEF_LOOKBACK
    reclaims: dict[str, list[Reclaim]] = defaultdict(list)
    for reclaim in Reclaim.objects.filter(until__gt=since - EVICTION_SEEN_WITHIN):
        reclaims[reclaim.workstation].append(reclaim)
    if not reclaims:
        return 0
    evicted = (
        UsageRecord.objects.filter(
            ended_by=UsageRecord.Ending.EVICTED, ended_at__gte=since, workstation__in=reclaims
        )
        .exclude(forgiven_s=F("badput_s"))
        .select_related("job")
    )
    caused = [
        record
        for record in evicted
        if any(
            reclaim.caused_eviction_at(record.ended_at) for reclaim in reclaims[record.workstation]
        )
    ]
    with transaction.atomic():
        changed = usage_records_forgive(caused)
        for record in changed:
            seconds = record.forgiven_s
            lost = f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"
            said = (
                f"The {lost} of work lost when {record.workstation}'s owner asked for it back "
                f"({seconds * record.gpus / 3600:.2f} GPU-hours) is not charged to your quota."
            )
            job_event_record(record.job, "not charged", said)
            audit_record(
                action="lending.relief",
                target=record.job,
                detail=f"run of {record.started_at:%Y-%m-%d %H:%M} on {record.workstation}: "
                f"{record.forgiven_s:.0f} s forgiven",
            )
    return len(changed)
