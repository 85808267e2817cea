from django.http import HttpRequest

from .drain import drain_state


def drain_banner(request: HttpRequest) -> dict:
    return {"drain": drain_state()}
