"""Create a demo student and an admin when none exist, printing their logins once."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the demo student and admin accounts if they do not exist yet."

    def handle(self, *args, **options):
        User = get_user_model()
        created = []
        if not User.objects.filter(is_superuser=True).exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser("admin", "admin@example.org", password)
            created.append(("admin", password))
        if not User.objects.filter(username="student").exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_user("student", "student@example.org", password)
            created.append(("student", password))
        if not created:
            self.stdout.write("Demo accounts exist already; their passwords were shown once.")
        for username, password in created:
            self.stdout.write(self.style.SUCCESS(f"  login: {username:8}  password: {password}"))
