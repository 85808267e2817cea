"""nightshift data: push a folder, list and show it, pull it back checked, and delete it."""

import pytest

from tests.datasets.files import SAMPLE, write_tree


@pytest.fixture(autouse=True)
def imports_run_here(fake_bridge):
    """The import task runs in place (the fake bridge's fixture makes Celery eager)."""


def test_a_folder_is_pushed_shown_pulled_back_identical_and_deleted(
    nightshift, logged_in, tmp_path
):
    write_tree(tmp_path / "pets", SAMPLE)
    pushed = nightshift("data", "push", "pets", "--name", "pets", "--description", "Cats")
    assert pushed.status == 0, pushed.stderr
    assert "pets@1: Version 1: 4 files, sha256" in pushed.stdout
    listed = nightshift("data", "list")
    assert "pets@1" in listed.stdout and "Cats" in listed.stdout
    shown = nightshift("data", "show", "pets@1")
    assert "images/cat.png" in shown.stdout and "x | y" in shown.stdout
    pulled = nightshift("data", "pull", "pets", "-o", "copy")
    assert pulled.status == 0, pulled.stderr
    assert "4 files in copy/ (sha256 checked)" in pulled.stdout
    for name, body in SAMPLE.items():
        expected = body.encode() if isinstance(body, str) else body
        assert (tmp_path / "copy" / name).read_bytes() == expected
    removed = nightshift("data", "rm", "pets", "--yes")
    assert removed.status == 0 and "Deleted pets." in removed.stdout
    assert "pets" not in nightshift("data", "list").stdout


def test_a_refused_push_says_why_and_exits_nonzero(nightshift, logged_in, tmp_path):
    (tmp_path / "evil.zip").write_bytes(b"PK\x03\x04 broken")
    done = nightshift("data", "push", "evil.zip", "--name", "evil")
    assert done.status == 1 and "The import failed: This is not a readable .zip" in done.stderr
    bad_name = nightshift("data", "push", "evil.zip", "--name", "../up")
    assert bad_name.status != 0 and "name" in bad_name.stderr.lower()


def test_pulling_into_a_folder_that_is_not_empty_is_refused(nightshift, logged_in, tmp_path):
    write_tree(tmp_path / "pets", SAMPLE)
    nightshift("data", "push", "pets", "--name", "pets")
    done = nightshift("data", "pull", "pets")  # ./pets holds the originals
    assert done.status == 1 and "exists and is not empty" in done.stderr


def test_a_push_stopped_halfway_continues_where_it_stopped_when_run_again(
    logged_in, cli_env, tmp_path
):
    import subprocess
    import time

    from datasets.models import Dataset, DatasetUpload
    from tests.nightshift_cli.conftest import NIGHTSHIFT

    size = 48 * 2**20
    (tmp_path / "frames").mkdir()
    (tmp_path / "frames" / "frames.bin").write_bytes(bytes(range(256)) * (size // 256))
    command = [NIGHTSHIFT, "data", "push", "frames", "--name", "frames"]
    first = subprocess.Popen(
        command,
        env=cli_env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until some chunks have arrived, then it is killed
        upload = DatasetUpload.objects.first()
        if upload is not None and upload.upload_offset >= 16 * 2**20:
            break
        time.sleep(0.02)
    first.kill()
    first.communicate()
    stopped_at = DatasetUpload.objects.get().upload_offset
    assert 0 < stopped_at < DatasetUpload.objects.get().upload_length
    again = subprocess.run(
        command, env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr
    assert "Resuming the upload at" in again.stderr
    assert "frames@1: Version 1: 1 files" in again.stdout
    assert DatasetUpload.objects.count() == 1  # the same upload, continued
    assert Dataset.objects.get(name="frames").versions.get().size_bytes == size
