"""A waiting job's predicted start, as JSON for its page; a lab's reservations."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from jobs.web import visible_job_or_404
from labs.selectors import lab_managed_or_404

from . import reservations, selectors
from .forms import ReservationForm


@never_cache
@login_required
@require_GET
def job_start(request: HttpRequest, public_id) -> JsonResponse:
    job = visible_job_or_404(request.user, public_id)
    return JsonResponse(selectors.job_start_payload(job))


@login_required
def reservation_new(request: HttpRequest, lab_id: int) -> HttpResponse:
    """For a lab's leads: hold workstations for a window."""
    lab = lab_managed_or_404(request.user, lab_id)
    workstations = reservations.workstations_to_reserve()
    form = ReservationForm(request.POST or None, workstations=workstations)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        asked = reservations.ReservationRequest(
            lab=lab,
            purpose=data["purpose"],
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
            gpus=data["gpus"],
            workstations=tuple(data["workstations"]),
        )
        try:
            made = reservations.reservation_create(actor=request.user, asked=asked)
        except reservations.ReservationError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            held = ", ".join(made.workstations)
            when = reservations.window_text(made)
            gpus = f"{made.gpus} GPU{'s' if made.gpus != 1 else ''}"
            messages.success(request, f"Reserved {held} ({gpus}) for {lab.name} {when}.")
            return redirect("labs:detail", lab_id=lab.pk)
    return render(request, "forecasts/reservation_new.html", {"lab": lab, "form": form})


@login_required
@require_POST
def reservation_cancel(request: HttpRequest, lab_id: int, public_id) -> HttpResponse:
    lab = lab_managed_or_404(request.user, lab_id)
    reservation = get_object_or_404(lab.reservations, public_id=public_id)
    try:
        reservations.reservation_cancel(actor=request.user, reservation=reservation)
    except reservations.ReservationError as exc:
        messages.error(request, exc.message)
    else:
        held = ", ".join(reservation.workstations)
        messages.success(request, f"Cancelled the reservation of {held}.")
    return redirect("labs:detail", lab_id=lab.pk)
