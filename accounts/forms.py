from django import forms
from django.contrib.auth.forms import UserCreationForm

from labs.models import Lab

EXPIRY_CHOICES = [("30", "30 days"), ("90", "90 days"), ("365", "1 year"), ("", "Never")]


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        label="Token name", max_length=100,
        help_text="Where you will use it, e.g. “laptop CLI” or “lab notebook”.",
    )  # fmt: skip
    expires_in_days = forms.TypedChoiceField(
        label="Expires after", choices=EXPIRY_CHOICES, coerce=int, empty_value=None,
        initial="90", required=False,
    )  # fmt: skip


class RegistrationForm(UserCreationForm):
    email = forms.EmailField(help_text="For job notifications and password resets.")
    lab = forms.ModelChoiceField(
        queryset=Lab.objects.all(), required=False, empty_label="No lab / not sure",
        help_text="Its leads can approve you, and your jobs count against its quota.",
    )  # fmt: skip
    note = forms.CharField(
        required=False, max_length=300, label="What will you run?",
        widget=forms.Textarea(attrs={"rows": 2}),
    )  # fmt: skip

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")
