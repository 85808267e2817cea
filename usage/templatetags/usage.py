from django import template
from django.conf import settings

from usage.advice import advise, clone_adjustments, gpus_used
from usage.selectors import job_clone_url, job_summary

register = template.Library()


@register.inclusion_tag("usage/_job_usage.html")
def job_usage(job) -> dict:
    """The job page's section on what the job uses: charts drawn from its samples, and once
    it has ended, its summary and the advice it earns, with a clone button that applies it."""
    summary = job_summary(job)
    advice = advise(summary, min_measured_s=settings.USAGE_ADVICE_MIN_S) if summary else []
    return {
        "job": job,
        "summary": summary,
        "gpus_used": gpus_used(summary) if summary else None,
        "advice": advice,
        "clone_url": job_clone_url(job, clone_adjustments(advice)),
        "interval": settings.USAGE_SAMPLE_INTERVAL_S,
    }
