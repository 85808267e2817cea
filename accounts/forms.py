from django import forms

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
