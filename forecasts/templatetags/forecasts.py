from django import template
from django.utils import timezone

from forecasts.reservations import held_text, reservations_by_workstation
from forecasts.selectors import forecasts_now, job_start_payload
from forecasts.timeline import reservations_timeline as timeline_of

register = template.Library()


@register.simple_tag
def pool_forecasts() -> dict:
    """Every workstation's forecast as it stands now, by name (one query for the page)."""
    return forecasts_now()


@register.inclusion_tag("forecasts/_workstation.html")
def workstation_forecast(forecasts: dict, name: str) -> dict:
    return {"forecast": forecasts.get(name)}


@register.inclusion_tag("forecasts/_start_prediction.html")
def start_prediction(job) -> dict:
    """A waiting job's predicted start, refreshed on its page while it waits."""
    return {"job": job, **job_start_payload(job)}


@register.simple_tag
def pool_reservations() -> dict:
    """Each workstation's reservation on now, or else its next one, by name (one query)."""
    return reservations_by_workstation()


@register.inclusion_tag("forecasts/_workstation_reservation.html")
def workstation_reservation(found: dict, name: str) -> dict:
    reservation = found.get(name)
    if reservation is None:
        return {"reservation": None}
    return {
        "reservation": reservation,
        "on": reservation.state_at(timezone.now()) == "on",
        "text": held_text(reservation),
    }


@register.inclusion_tag("forecasts/_reservations_timeline.html")
def reservations_timeline(lab=None) -> dict:
    """The next two weeks of reservations, a row per workstation (`lab`'s own marked)."""
    return {"timeline": timeline_of(lab=lab), "lab": lab}
