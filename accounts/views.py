from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from . import selectors, services
from .forms import TokenCreateForm
from .models import AccessToken


@never_cache
@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    """The account page for API tokens: create one (shown once), see and revoke the rest."""
    form = TokenCreateForm(request.POST or None)
    new_secret = None
    if request.method == "POST" and form.is_valid():
        try:
            created = services.token_create(
                user=request.user,
                name=form.cleaned_data["name"],
                expires_in_days=form.cleaned_data["expires_in_days"],
            )
        except services.TokenError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            new_secret = created.secret
            form = TokenCreateForm()
    return render(
        request,
        "accounts/tokens.html",
        {
            "form": form,
            "new_secret": new_secret,
            "tokens": selectors.token_list_for_user(request.user),
            "portal_url": request.build_absolute_uri("/").rstrip("/"),
        },
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    try:
        token = selectors.token_get_for_user(request.user, token_id)
    except AccessToken.DoesNotExist:
        raise Http404("No such token.") from None
    services.token_revoke(token=token, actor=request.user)
    messages.info(request, f"Revoked “{token.name}”: it no longer works.")
    return redirect("accounts:tokens")
