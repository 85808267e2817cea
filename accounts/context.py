from django.conf import settings


def registration(request) -> dict:
    return {"registration_mode": settings.REGISTRATION_MODE}
