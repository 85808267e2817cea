"""How `--wait` and `--follow` turn a job's end into the command's exit status."""

import pytest

from nightshift_cli.common import EXIT_ERROR, EXIT_HELD, EXIT_REMOVED, exit_status

JOB = {
    "id": "0123abcd-0000-4000-8000-000000000000",
    "status_detail": "",
    "exit_code": None,
    "exit_signal": None,
    "hold": None,
}


@pytest.mark.parametrize(
    ("fields", "status", "said"),
    [
        ({"state": "completed", "exit_code": 0}, 0, ""),
        ({"state": "failed", "exit_code": 7}, 7, "exited with code 7"),
        ({"state": "failed", "exit_code": 300}, EXIT_ERROR, "exited with code 300"),
        ({"state": "failed", "exit_signal": 9}, 128 + 9, "killed by signal 9"),
        ({"state": "removed", "status_detail": "By ada"}, EXIT_REMOVED, "By ada"),
        (
            {
                "state": "held",
                "hold": {"title": "It ran past its time limit", "advice": "Raise the limit."},
            },
            EXIT_HELD,
            "It ran past its time limit",
        ),
    ],
)
def test_the_exit_status_follows_the_job(capsys, fields, status, said):
    assert exit_status(JOB | fields) == status
    assert said in capsys.readouterr().err
