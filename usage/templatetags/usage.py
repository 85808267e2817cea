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
    used = gpus_used(summary) if summary else None
    busy = None
    if used and summary.gpu_utilization is not None:
        busy = summary.gpu_utilization * summary.gpus_requested / used
    advice = advise(summary, min_measured_s=settings.USAGE_ADVICE_MIN_S) if summary else []
    return {
        "job": job,
        "summary": summary,
        "gpus_used": used,
        # How busy the GPUs it used were, on average (the advice's "used 1, at 70 %").
        "gpu_busy_of_used": busy,
        "advice": advice,
        "clone_url": job_clone_url(job, clone_adjustments(advice)),
        "interval": settings.USAGE_SAMPLE_INTERVAL_S,
    }
