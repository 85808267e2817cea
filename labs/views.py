from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from . import selectors, services
from .models import Lab


def _managed_lab(request: HttpRequest, lab_id: int) -> Lab:
    try:
        return selectors.labs_managed_by(request.user).distinct().get(pk=lab_id)
    except Lab.DoesNotExist:
        raise Http404("No such lab of yours.") from None


@login_required
def lab_detail(request: HttpRequest, lab_id: int) -> HttpResponse:
    """For a lab's leads: its members, their use of the quota, and adding or removing them."""
    lab = _managed_lab(request, lab_id)
    if request.method == "POST":
        try:
            membership = services.lab_member_add(lab=lab, who=request.POST.get("who", ""),
                                                 actor=request.user)  # fmt: skip
        except services.MembershipError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Added {membership.user.get_username()} to {lab.name}.")
        return redirect("labs:detail", lab_id=lab.pk)
    return render(request, "labs/detail.html",
                  {"lab": lab, "members": selectors.lab_member_usage(lab)})  # fmt: skip


@login_required
@require_POST
def member_remove(request: HttpRequest, lab_id: int, membership_id: int) -> HttpResponse:
    lab = _managed_lab(request, lab_id)
    membership = lab.memberships.filter(pk=membership_id).select_related("user").first()
    if membership is None:
        raise Http404("No such member.")
    try:
        services.lab_member_remove(membership=membership, actor=request.user)
    except services.MembershipError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, f"Removed {membership.user.get_username()} from {lab.name}.")
    return redirect("labs:detail", lab_id=lab.pk)
