from datetime import timedelta

from django import template

register = template.Library()


@register.filter
def duration_short(value: timedelta | None) -> str:
    """2 h 05 min, 4 min 10 s, 12 s."""
    if value is None:
        return ""
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {seconds:02d} s"
    return f"{seconds} s"


@register.filter
def percent(value: float | None) -> str:
    """0.35 -> 35 %."""
    if value is None:
        return ""
    return f"{value * 100:.0f} %"


@register.filter
def thousands(value: int | None) -> str:
    """10000 -> 10,000."""
    if value is None:
        return ""
    return f"{value:,}"
