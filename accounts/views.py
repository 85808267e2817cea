from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounting.services import quota_standings
from plumbing.panels import panels_for

from . import registration as registrations
from . import selectors, services
from .forms import RegistrationForm, TokenCreateForm
from .models import AccessToken, Registration


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


@never_cache
@login_required
def account(request: HttpRequest) -> HttpResponse:
    """The user's labs, their limits, and how much of each is used, as bars."""
    standings = [
        account_quota_view(standing, request.user) for standing in quota_standings(request.user)
    ]
    context = {
        "standings": standings,
        "pending": not registrations.user_may_submit(request.user),
        "approvals": registrations.registrations_to_approve(request.user).count(),
        "panels": panels_for("account", user=request.user),
    }
    return render(request, "accounts/account.html", context)


def account_quota_view(standing, user) -> dict:
    limits = standing.limits
    scope = limits.scope

    def bar(label: str, used: float, limit, field: str, unit: str = "") -> dict:
        def text(value) -> str:
            shown = f"{value:.1f}".rstrip("0").rstrip(".") if isinstance(value, float) else value
            return f"{shown}{unit}"

        percent = min(100, round(100 * used / limit)) if limit else (100 if limit == 0 else 0)
        return {
            "label": label,
            "used": used,
            "limit": limit,
            "percent": percent,
            "used_text": text(used),
            "limit_text": text(limit) if limit is not None else "",
            "personal": standing.lab is not None and scope.get(field) == "user",
        }

    period = f"{limits.period_days} day{'s' if limits.period_days != 1 else ''}"
    used_hours = standing.gpu_hours_used + standing.gpu_hours_reserved
    rules = []
    if limits.max_gpus_per_job is not None:
        most = limits.max_gpus_per_job
        rules.append(f"At most {most} GPU{pluralize(most)} per job.")
    if limits.max_runtime_hours is not None:
        rules.append(f"Jobs are removed after {limits.max_runtime_hours:g} h of running.")
    membership = standing.lab.memberships.filter(user=user).first() if standing.lab else None
    return {
        "lab": standing.lab,
        "role": membership.get_role_display() if membership else "",
        "manages": bool(membership and membership.is_lead) or user.is_staff,
        "bars": [
            bar(
                f"GPU-hours, last {period}",
                round(used_hours, 2),
                limits.gpu_hours,
                "gpu_hours",
                " h",
            ),
            bar(
                "GPUs in use or asked for",
                standing.gpus_in_use,
                limits.max_concurrent_gpus,
                "max_concurrent_gpus",
            ),
            bar("Jobs waiting", standing.jobs_waiting, limits.max_queued_jobs, "max_queued_jobs"),
        ],
        "rules": rules,
    }


def register(request: HttpRequest) -> HttpResponse:
    if registrations.registration_mode() == "closed":
        return render(request, "registration/register_closed.html", status=404)
    form = RegistrationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        registration = registrations.account_register(
            username=data["username"],
            email=data["email"],
            password=data["password1"],
            lab=data["lab"],
            note=data["note"],
        )
        login(request, registration.user, backend="django.contrib.auth.backends.ModelBackend")
        if registration.is_approved:
            messages.success(request, "Welcome to Nightshift: submit your first job.")
        else:
            messages.info(
                request,
                "Your account is made. You can submit jobs once a lab lead "
                "or an administrator approves it; you will get an email.",
            )
        return redirect("accounts:account")
    return render(
        request, "registration/register.html", {"form": form}, status=400 if form.errors else 200
    )


@never_cache
@login_required
def approvals(request: HttpRequest) -> HttpResponse:
    """Accounts waiting for approval that this admin or lab lead may approve."""
    if request.method == "POST":
        try:
            registration = registrations.registrations_to_approve(request.user).get(
                pk=request.POST.get("registration")
            )
        except (Registration.DoesNotExist, ValueError):
            raise Http404("No such request.") from None
        registrations.registration_approve(registration=registration, actor=request.user)
        messages.success(request, f"Approved {registration.user.get_username()}.")
        return redirect("accounts:approvals")
    waiting = registrations.registrations_to_approve(request.user)
    return render(request, "accounts/approvals.html", {"waiting": waiting})
