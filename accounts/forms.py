from django import forms
from django.contrib.auth.forms import PasswordChangeForm, SetPasswordForm, UserCreationForm

from labs.models import Lab

from .selectors import token_list_active
from .services import password_changed

EXPIRY_CHOICES = [("30", "30 days"), ("90", "90 days"), ("365", "1 year"), ("", "Never")]


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        label="Token name",
        max_length=100,
        help_text="Where you will use it, e.g. “laptop CLI” or “lab notebook”.",
    )
    expires_in_days = forms.TypedChoiceField(
        label="Expires after",
        choices=EXPIRY_CHOICES,
        coerce=int,
        empty_value=None,
        initial="90",
        required=False,
    )


class RegistrationForm(UserCreationForm):
    email = forms.EmailField(help_text="For job notifications and password resets.")
    lab = forms.ModelChoiceField(
        queryset=Lab.objects.all(),
        required=False,
        empty_label="No lab / not sure",
        help_text="Its leads can approve you, and your jobs count against its quota.",
    )
    note = forms.CharField(
        required=False,
        max_length=300,
        label="What will you run?",
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")


class RevokeTokensOnPasswordChange(forms.Form):
    """A new password signs out every other session (Django checks each session against
    the password); this offers to end the account's API tokens too, which otherwise live
    on: whoever had the old password may have made some."""

    revoke_tokens = forms.BooleanField(
        required=False,
        initial=True,
        label="Also revoke my API tokens",
        help_text="Programs and the CLI that use them must be given a new one.",
    )

    def __init__(self, user, *args, **kwargs):
        super().__init__(user, *args, **kwargs)
        active = token_list_active(user).count()
        self.fields[
            "revoke_tokens"
        ].label = f"Also revoke my {active} API token{'s' * (active != 1)}"
        if not active:
            del self.fields["revoke_tokens"]

    def save(self, commit: bool = True):
        user = super().save(commit=commit)
        revoke = bool(self.cleaned_data.get("revoke_tokens"))
        password_changed(user=user, revoke_tokens=revoke)
        return user


class NewPasswordForm(RevokeTokensOnPasswordChange, SetPasswordForm):
    """The password reset's last step."""


class ChangePasswordForm(RevokeTokensOnPasswordChange, PasswordChangeForm):
    """A signed-in user's change, with their current password."""
