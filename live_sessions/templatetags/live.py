from django import template

from live_sessions.selectors import live_may_open

register = template.Library()


@register.inclusion_tag("live_sessions/_links.html", takes_context=True)
def live_links(context, job) -> dict:
    """The job page's links to its live services, for those who may open them."""
    user = context["request"].user
    return {"job": job, "show": bool(job.live_services) and live_may_open(user, job)}
