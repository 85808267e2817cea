"""Who owns each workstation, on what terms they lend it, and when they asked for it back.

The kit enforces the terms through HTCondor: its startd cron reads them
(GET /api/v1/pool/terms/<workstation>/) at every run and publishes them in the machine ad,
where START and PREEMPT honour them (deploy/execute-node/nightshift-execute.conf)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

EVERY_DAY = [0, 1, 2, 3, 4, 5, 6]  # Monday is 0, as datetime.weekday() counts
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def every_day() -> list[int]:
    return list(EVERY_DAY)


class WorkstationOwner(models.Model):
    """A person whose workstation it is: they set its terms and may ask for it back."""

    workstation = models.CharField(max_length=200)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="owned_workstations"
    )
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workstation", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["workstation", "user"], name="one_ownership_each"),
        ]

    def __str__(self) -> str:
        return f"{self.user} owns {self.workstation}"


class LendingTerms(models.Model):
    """When and how much of a workstation its owners lend, and to whom. A workstation with
    none is lent whenever its kit's availability policy allows."""

    workstation = models.CharField(max_length=200, unique=True)
    days = ArrayField(
        models.PositiveSmallIntegerField(),
        default=every_day,
        help_text="The days it may be lent, 0 (Monday) to 6 (Sunday), in the campus's time zone.",
    )
    from_minute = models.PositiveSmallIntegerField(
        default=0, help_text="From this minute of the day (0 is midnight)."
    )
    until_minute = models.PositiveSmallIntegerField(
        default=1440, help_text="Until this minute of the day (1440 is the next midnight)."
    )
    only_while_away = models.BooleanField(
        default=False, help_text="Lent only while nobody has used its keyboard or mouse."
    )
    away_after_minutes = models.PositiveSmallIntegerField(
        default=15, help_text="How long without keyboard or mouse counts as away."
    )
    max_gpus = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="At most this many of its GPUs at once; empty: all."
    )
    max_memory_gb = models.PositiveIntegerField(
        null=True, blank=True, help_text="At most this much of its memory at once; empty: all."
    )
    labs = models.ManyToManyField(
        "labs.Lab", blank=True, related_name="+", help_text="Only these labs; none: every lab."
    )
    paused_until = models.DateTimeField(
        null=True, blank=True, help_text="Not lent at all until then."
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name_plural = "lending terms"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(
                    from_minute__lt=models.F("until_minute"), until_minute__lte=1440
                ),
                name="lending_window_in_a_day",
            ),
        ]

    def __str__(self) -> str:
        return f"terms of {self.workstation}"

    def paused_at(self, moment: datetime) -> bool:
        return self.paused_until is not None and moment < self.paused_until

    @property
    def every_hour(self) -> bool:
        return self.from_minute == 0 and self.until_minute == 1440

    @property
    def days_text(self) -> str:
        if sorted(self.days) == EVERY_DAY:
            return "every day"
        if sorted(self.days) == EVERY_DAY[:5]:
            return "weekdays"
        if sorted(self.days) == EVERY_DAY[5:]:
            return "weekends"
        return ", ".join(DAY_NAMES[day] for day in sorted(self.days)) or "no day"

    @property
    def hours_text(self) -> str:
        if self.every_hour:
            return "all day"
        return f"{_clock(self.from_minute)} to {_clock(self.until_minute)}"


def _clock(minute: int) -> str:
    return f"{minute // 60 % 24:02d}:{minute % 60:02d}"


# How long after an eviction the pool may report it.
EVICTION_SEEN_WITHIN = timedelta(minutes=2)


class Reclaim(models.Model):
    """An owner asked for their workstation back: no new job from now, running ones told to
    checkpoint and leave by `deadline`, and nothing lent again until `until`."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    workstation = models.CharField(max_length=200)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField()
    deadline = models.DateTimeField(help_text="When the workstation is its owner's.")
    until = models.DateTimeField(help_text="When it is lent again by itself.")
    ended_at = models.DateTimeField(
        null=True, blank=True, help_text="When its owner lent it again before `until`."
    )

    class Meta:
        ordering = ["-requested_at", "-pk"]
        indexes = [models.Index(fields=["workstation", "until"], name="reclaim_by_workstation")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(deadline__gte=models.F("requested_at"))
                & models.Q(until__gt=models.F("deadline")),
                name="reclaim_times_in_order",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workstation} asked back by {self.deadline:%Y-%m-%d %H:%M}"

    def in_effect_at(self, moment: datetime) -> bool:
        return self.ended_at is None and self.requested_at <= moment < self.until

    def seconds_left(self, moment: datetime) -> int:
        """Until the workstation is its owner's (0 once it is)."""
        return max(0, round((self.deadline - moment).total_seconds()))

    def time_left_text(self, moment: datetime) -> str:
        """The countdown as the page's script writes it, so that it does not change form
        when the script takes over ("2 min 5 s", "40 s")."""
        left = self.seconds_left(moment)
        return f"{left // 60} min {left % 60} s" if left >= 60 else f"{left} s"

    def caused_eviction_at(self, moment: datetime) -> bool:
        """Whether a job that left its workstation at `moment` left because of this request.
        The pool reports an eviction a little after it happened; one the owner ended ("lend
        it again") before the eviction did not cause it."""
        slack = EVICTION_SEEN_WITHIN
        return (
            self.requested_at <= moment
            and self.until > moment - slack
            and (self.ended_at is None or self.ended_at > moment - slack)
        )


class ClaimCode(models.Model):
    """A one-time code the workstation's kit asked for (nightshift-claim-code on it): whoever
    signs in and enters it before it expires becomes an owner of that workstation. Only its
    SHA-256 is kept; a new code for the workstation replaces any not yet used."""

    workstation = models.CharField(max_length=200)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"claim code for {self.workstation}"
