"""Create the demo accounts when none exist, printing their logins once: a student, a lab
lead and an admin, and a demo lab (led by the lead, with the student in it) with a small
quota to see it at work."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from labs.models import Lab, Membership
from labs.services import lab_leads_group_sync


class Command(BaseCommand):
    help = "Create the demo student, lab lead and admin accounts if they do not exist yet."

    def handle(self, *args, **options):
        User = get_user_model()
        created = []
        if not User.objects.filter(is_superuser=True).exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser("admin", "admin@example.org", password)
            created.append(("admin", password))
        for username in ("student", "lead"):
            if not User.objects.filter(username=username).exists():
                password = secrets.token_urlsafe(12)
                User.objects.create_user(username, f"{username}@example.org", password)
                created.append((username, password))
        student = User.objects.filter(username="student").first()
        lead = User.objects.filter(username="lead").first()
        if student is not None and lead is not None and not Lab.objects.exists():
            lab = Lab.objects.create(
                name="Demo lab", gpu_hours=20, max_concurrent_gpus=2, max_runtime_hours=4
            )
            Membership.objects.create(lab=lab, user=student)
            Membership.objects.create(lab=lab, user=lead, role=Membership.Role.LEAD)
            lab_leads_group_sync(lead)
            self.stdout.write("  lab: Demo lab (student is a member, lead leads it)")
        if not created:
            self.stdout.write("Demo accounts exist already; their passwords were shown once.")
        for username, password in created:
            self.stdout.write(self.style.SUCCESS(f"  login: {username:8}  password: {password}"))
