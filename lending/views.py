"""/workstations/: an owner's workstations; /workstations/<name>/: what it does now, its
learnt availability, what it gave, its lending terms, and "I need it back"."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from forecasts.selectors import forecast_now
from jobs.models import Workstation
from jobs.selectors import pool_overview
from plumbing.spreadsheets import stream_csv
from usage.selectors import energy_text

from . import selectors, services
from .forms import ClaimForm, ReclaimForm, TermsForm


def _managed_or_404(request: HttpRequest, name: str) -> str:
    if not selectors.may_manage(request.user, name):
        raise Http404("No such workstation of yours.")
    return name


@login_required
def workstation_list(request: HttpRequest) -> HttpResponse:
    owned = selectors.workstations_owned_by(request.user)
    others = []
    if request.user.is_staff:
        others = [n for n in Workstation.objects.values_list("name", flat=True) if n not in owned]
    return render(request, "lending/workstations.html", {"owned": owned, "others": others})


def _page(request: HttpRequest, name: str, terms_form=None, reclaim_form=None, status=200):
    now = timezone.now()
    overview = pool_overview()
    view = next((v for v in overview.workstations if v.machine.name == name), None)
    given = selectors.given_by(name, now=now)
    terms_given = selectors.given_by_term(name, now=now)
    terms = selectors.terms_of(name)
    context = {
        "name": name,
        "view": view,
        "pool_error": overview.error,
        "running": selectors.running_on(name),
        "forecast": forecast_now(name, now),
        "given": given,
        "given_energy": energy_text(given.kwh, given.co2e_kg),
        "given_terms": [
            {
                "label": t.label,
                "tally": t.tally,
                "energy": energy_text(t.kwh, t.tally.measured_co2e_kg),
            }
            for t in terms_given
        ],
        "given_terms_chart": {
            "labels": [t.label for t in terms_given],
            "gpu_hours": [round(t.tally.gpu_hours, 2) for t in terms_given],
            "kwh": [t.kwh for t in terms_given],
        },
        "given_chart": {
            "labels": [week.week for week in given.weeks],
            "gpu_hours": [week.gpu_hours for week in given.weeks],
            "kwh": [week.kwh for week in given.weeks],
        },
        "terms": terms,
        "reclaim": selectors.reclaim_in_effect(name, now),
        "owners": selectors.owners_of(name),
        "terms_form": terms_form or TermsForm.for_terms(terms),
        "reclaim_form": reclaim_form or ReclaimForm(),
        "now": now,
    }
    if context["reclaim"] is not None:
        context["seconds_left"] = context["reclaim"].seconds_left(now)
        context["time_left"] = context["reclaim"].time_left_text(now)
    return render(request, "lending/workstation.html", context, status=status)


@login_required
def workstation_page(request: HttpRequest, name: str) -> HttpResponse:
    return _page(request, _managed_or_404(request, name))


@login_required
@require_POST
def terms_update(request: HttpRequest, name: str) -> HttpResponse:
    name = _managed_or_404(request, name)
    form = TermsForm.for_terms(selectors.terms_of(name), request.POST)
    if form.is_valid():
        data = form.cleaned_data
        from_minute, until_minute = form.minutes()
        change = services.TermsChange(
            days=data["days"],
            from_minute=from_minute,
            until_minute=until_minute,
            only_while_away=data["only_while_away"],
            away_after_minutes=data["away_after_minutes"],
            max_gpus=data["max_gpus"],
            max_memory_gb=data["max_memory_gb"],
            labs=list(data["labs"]),
            paused_until=data["paused_until"],
        )
        try:
            services.terms_set(user=request.user, workstation=name, change=change)
        except services.LendingError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"{name}'s terms are saved; it follows them within a minute.")
            return redirect("lending:workstation", name=name)
    return _page(request, name, terms_form=form, status=400)


@login_required
@require_POST
def reclaim(request: HttpRequest, name: str) -> HttpResponse:
    name = _managed_or_404(request, name)
    form = ReclaimForm(request.POST)
    if not form.is_valid():
        return _page(request, name, reclaim_form=form, status=400)
    made = services.reclaim_request(
        user=request.user, workstation=name, minutes=form.cleaned_data["minutes"]
    )
    when = timezone.localtime(made.deadline)
    messages.success(
        request, f"{name} takes no new job now, and is yours by {when:%H:%M} at the latest."
    )
    return redirect("lending:workstation", name=name)


@login_required
@require_POST
def lend_again(request: HttpRequest, name: str) -> HttpResponse:
    name = _managed_or_404(request, name)
    if services.reclaim_end(user=request.user, workstation=name) is not None:
        messages.success(request, f"{name} is lent again on its terms.")
    return redirect("lending:workstation", name=name)


@login_required
def given_csv(request: HttpRequest, name: str) -> StreamingHttpResponse:
    name = _managed_or_404(request, name)
    if request.GET.get("by") == "term":
        rows = [("term_starts", "term_ends", "gpu_hours", "students", "jobs", "labs")]
        rows[0] += ("gpu_kwh_above_idle",)
        rows += [
            (
                t.starts.isoformat(),
                (t.ends - timedelta(days=1)).isoformat(),
                round(t.tally.gpu_hours, 2),
                len(t.tally.students),
                len(t.tally.jobs),
                len(t.tally.labs),
                t.kwh,
            )
            for t in selectors.given_by_term(name)
        ]
        return stream_csv(rows, f"{name}-given-per-term.csv")
    given = selectors.given_by(name)
    rows = [("week", "gpu_hours", "jobs", "labs", "gpu_kwh_above_idle")]
    rows += [(w.week, w.gpu_hours, w.jobs, w.labs, w.kwh) for w in given.weeks]
    return stream_csv(rows, f"{name}-given.csv")


@login_required
def claim(request: HttpRequest) -> HttpResponse:
    """An owner claims their workstation with the one-time code its kit printed."""
    form = ClaimForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            owner = services.workstation_claim(user=request.user, code=form.cleaned_data["code"])
        except services.LendingError as exc:
            form.add_error("code", exc.message)
        else:
            messages.success(request, f"{owner.workstation} is yours in Nightshift now.")
            return redirect("lending:workstation", name=owner.workstation)
    status = 400 if request.method == "POST" else 200
    return render(request, "lending/claim.html", {"form": form}, status=status)
