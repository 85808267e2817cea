"""What Nightshift tells people about, and by which channels unless they say otherwise."""

from __future__ import annotations

from django.db import models


class Channel(models.TextChoices):
    PUSH = "push", "Browser"
    EMAIL = "email", "E-mail"
    WEBHOOK = "webhook", "Webhook"


class Event(models.TextChoices):
    JOB_STARTED = "job.started", "A job starts"
    JOB_ENDED = "job.ended", "A job completes or fails"
    JOB_HELD = "job.held", "A job is held"
    LONG_WAIT = "job.long_wait", "A job will wait long for a workstation"
    SESSION_READY = "session.ready", "A notebook session is running"
    SESSION_ENDING = "session.ending", "A notebook session has 10 minutes left"
    SWEEP_FINISHED = "sweep.finished", "A sweep or study finishes"
    RESERVATION_STARTING = "reservation.starting", "A reservation you made begins"
    WORKSTATION_RESERVED = (
        "workstation.reserved",
        "A reservation will take a workstation you own",
    )
    WORKSTATION_WEEKLY = "workstation.weekly", "What a workstation you own gave last week"


GROUPS = {
    "Jobs": (Event.JOB_STARTED, Event.JOB_ENDED, Event.JOB_HELD, Event.LONG_WAIT),
    "Notebook sessions": (Event.SESSION_READY, Event.SESSION_ENDING),
    "Sweeps": (Event.SWEEP_FINISHED,),
    "Reservations": (Event.RESERVATION_STARTING,),
    "Workstations you own": (Event.WORKSTATION_RESERVED, Event.WORKSTATION_WEEKLY),
}

# Unless a person chooses otherwise: the browser and the webhook (each only once set up) for
# everything; e-mail for nothing, so that a sweep of a hundred runs fills no inbox. A job's
# own "e-mail me when it ends" box still asks for e-mail about that job.
DEFAULT_CHANNELS: dict[str, frozenset[str]] = {
    event: frozenset({Channel.PUSH, Channel.WEBHOOK}) for event in Event.values
}
# The owners' weekly summary is a letter: e-mail, unless they choose otherwise.
DEFAULT_CHANNELS[Event.WORKSTATION_WEEKLY] = frozenset({Channel.EMAIL})
