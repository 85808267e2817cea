"""nightshift notify: the recent notifications, the choices, and changing one."""

from notifications import services
from notifications.events import Event


def test_a_student_reads_and_changes_how_they_are_told(nightshift, logged_in):
    choices = nightshift("notify", "choices")
    assert choices.status == 0, choices.stderr
    assert "job.ended" in choices.stdout and "A job completes or fails" in choices.stdout
    changed = nightshift("notify", "set", "job.ended", "email,push")
    assert changed.status == 0, changed.stderr
    assert "A job completes or fails: email, push." in changed.stdout
    off = nightshift("notify", "set", "job.started", "none")
    assert "A job starts: not told." in off.stdout


def test_an_unknown_channel_is_refused_with_the_reason(nightshift, logged_in):
    refused = nightshift("notify", "set", "job.ended", "pigeon")
    assert refused.status != 0
    assert "pigeon" in refused.stderr


def test_the_recent_notifications_list_each_channel(
    nightshift, logged_in, notify_settings, fake_bridge
):
    assert "Nothing yet" in nightshift("notify").stdout
    logged_in.email = "ada@example.edu"
    logged_in.save(update_fields=["email"])
    services.notify(
        [
            services.Occasion(
                user=logged_in,
                event=Event.JOB_ENDED,
                key="k",
                title="“mnist” completed",
                also=frozenset({"email"}),
            )
        ]
    )
    listed = nightshift("notify")
    assert listed.status == 0, listed.stderr
    assert "“mnist” completed" in listed.stdout and "email sent" in listed.stdout
