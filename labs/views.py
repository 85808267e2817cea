from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from . import selectors, services


@login_required
@require_POST
def member_remove(request: HttpRequest, lab_id: int, membership_id: int) -> HttpResponse:
    lab = selectors.lab_managed_or_404(request.user, lab_id)
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
