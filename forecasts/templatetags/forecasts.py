from django import template

from forecasts.selectors import forecasts_now, job_start_payload

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
