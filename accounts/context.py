from django.conf import settings


def registration(request) -> dict:
    return {
        "registration_mode": settings.REGISTRATION_MODE,
        "oidc_enabled": settings.OIDC_ENABLED,
        "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
    }
