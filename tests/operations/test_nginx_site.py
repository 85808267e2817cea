"""deploy/production/nginx/nightshift.conf, run in a real nginx in front of the portal:
downloads are checked by the portal first and then sent by nginx (X-Accel-Redirect), never
through Python; TLS with HTTP/2, security headers, static files and large uploads."""

import os
from pathlib import Path

import pytest
from django.urls import reverse

from jobs import specs, submission
from tests.conftest import client_with_token, script_upload
from tests.operations.nginx_site import nginx_site

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "/_nightshift_outputs/"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def handed_to_nginx(settings):
    settings.ACCEL_REDIRECT_PREFIX = PREFIX


@pytest.fixture
def nginx(live_server, fake_bridge, handed_to_nginx, settings, tmp_path):
    jobs_dir = settings.JOBS_DIR
    jobs_dir.mkdir(parents=True, exist_ok=True)
    static_dir = tmp_path / "static"
    static_dir.mkdir()
    (static_dir / "probe.css").write_text("body { color: black; }\n")
    with nginx_site(
        tmp_path / "nginx",
        [live_server.url.removeprefix("http://")],
        static_dir=static_dir,
        jobs_dir=jobs_dir,
        datasets_dir=settings.DATASETS_DIR,
    ) as front:
        yield front


@pytest.fixture
def finished_job(student, fake_bridge):
    job = submission.job_submit(
        user=student, spec=specs.JobSpec(name="ckpt"), script=script_upload()
    )
    outputs = job.directory / "outputs"
    (outputs / "model weights é.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    (outputs / "secret-link.bin").symlink_to(job.directory / "train.py")
    return job


def bearer(student) -> list[str]:
    client = client_with_token(student)
    return ["-H", f"Authorization: {client._credentials['HTTP_AUTHORIZATION']}"]


def output_url(job, name: str) -> str:
    return reverse("api:job-output", args=[job.public_id, f"outputs/{name}"])


def test_the_portal_answers_a_download_with_a_header_and_no_bytes(
    api, handed_to_nginx, finished_job
):
    response = api.get(output_url(finished_job, "model weights é.bin"))
    assert response.status_code == 200
    assert response["X-Accel-Redirect"] == (
        f"{PREFIX}{finished_job.public_id}/outputs/model%20weights%20%C3%A9.bin"
    )
    assert response.content == b""
    assert response["Content-Disposition"].startswith("attachment;")


def test_nginx_sends_the_file_the_portal_allowed(nginx, student, finished_job):
    expected = (finished_job.directory / "outputs" / "model weights é.bin").read_bytes()
    headers, body = nginx.curl(output_url(finished_job, "model weights é.bin"), *bearer(student))
    assert headers["status"].startswith("HTTP/2 200")
    assert body == expected
    assert "x-accel-redirect" not in headers
    assert headers["content-type"] == "application/octet-stream"
    assert headers["content-disposition"].startswith("attachment;")
    assert headers["strict-transport-security"] == "max-age=31536000; includeSubDomains"
    assert headers["x-content-type-options"] == "nosniff"


def test_permission_is_checked_before_anything_is_sent(nginx, other_student, finished_job):
    headers, body = nginx.curl(
        output_url(finished_job, "model weights é.bin"), *bearer(other_student)
    )
    assert headers["status"].startswith("HTTP/2 404")
    assert len(body) < 1000
    headers, _ = nginx.curl(output_url(finished_job, "model weights é.bin"))
    assert headers["status"].startswith("HTTP/2 401")


def test_the_internal_location_cannot_be_asked_for_directly(nginx, finished_job):
    direct = f"{PREFIX}{finished_job.public_id}/outputs/model%20weights%20%C3%A9.bin"
    headers, _ = nginx.curl(direct)
    assert headers["status"].startswith("HTTP/2 404")


def test_a_file_swapped_for_a_link_after_the_check_is_not_sent(
    nginx, student, finished_job, settings
):
    """The portal refuses links it sees; nginx refuses one that appears after the check."""
    headers, _ = nginx.curl(output_url(finished_job, "secret-link.bin"), *bearer(student))
    assert headers["status"].startswith("HTTP/2 404")
    from jobs import selectors

    checked = selectors.job_output_path
    target = finished_job.directory / "outputs" / "model weights é.bin"

    def check_then_swap(job, relative):
        found = checked(job, relative)
        target.unlink()
        target.symlink_to(job.directory / "train.py")
        return found

    selectors.job_output_path = check_then_swap
    try:
        headers, body = nginx.curl(
            output_url(finished_job, "model weights é.bin"), *bearer(student)
        )
    finally:
        selectors.job_output_path = checked
    assert headers["status"].startswith("HTTP/2 403")
    assert b"hello" not in body


def test_plain_http_is_sent_to_https_and_static_files_come_from_nginx(nginx):
    headers, _ = nginx.curl("/jobs/", base=nginx.http)
    assert headers["status"].startswith("HTTP/1.1 301")
    assert headers["location"].startswith("https://")
    headers, body = nginx.curl("/static/probe.css")
    assert (headers["status"][:10], body) == ("HTTP/2 200", b"body { color: black; }\n")
    assert headers["x-frame-options"] == "DENY"


def test_an_upload_beyond_nginx_default_limit_reaches_the_portal(nginx, student, tmp_path):
    """nginx refuses bodies over 1 MB unless told; the site allows the portal's limit."""
    script = tmp_path / "train.py"
    script.write_text("# padding\n" * 300_000 + "print('big')\n")
    headers, body = nginx.curl(
        reverse("api:job-list"),
        *bearer(student),
        "-F",
        "name=big",
        "-F",
        "gpus=0",
        "-F",
        f"script=@{script}",
    )
    assert headers["status"].startswith("HTTP/2 "), headers
    assert "413" not in headers["status"], body[:300]
    # The portal itself answers: its script limit is smaller than nginx's upload limit.
    assert b'"error"' in body or b'"id"' in body


@pytest.mark.parametrize(
    "name",
    [
        'odd ?#%2e%2e;"quoted".bin',
        "%2F..%2Fsecret.bin",
        "rtl \u202egnp.exe",
        "spaces  and\ttab.bin",
    ],
)
def test_hostile_output_names_reach_nginx_as_that_very_file(nginx, student, finished_job, name):
    """The listed URL and the header both quote the name: nginx sends that file alone."""
    body = f"the file called {name!r}".encode()
    (finished_job.directory / "outputs" / name).write_bytes(body)
    url = reverse("api:job-outputs", args=[finished_job.public_id])
    listed = client_with_token(student).get(url).json()
    [entry] = [item for item in listed if item["path"] == f"outputs/{name}"]
    headers, sent = nginx.curl(entry["url"].replace("http://testserver", ""), *bearer(student))
    assert headers["status"].startswith("HTTP/2 200"), (name, headers)
    assert sent == body
