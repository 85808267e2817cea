"""deploy/production/nginx/nightshift.conf, run in a real nginx in front of the portal:
downloads are checked by the portal first and then sent by nginx (X-Accel-Redirect), never
through Python; TLS with HTTP/2, security headers, static files and large uploads."""

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from django.urls import reverse

from jobs import specs, submission
from tests.conftest import client_with_token, script_upload

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "deploy" / "production" / "nginx" / "nightshift.conf"
HEADERS = ROOT / "deploy" / "production" / "nginx" / "nightshift-headers.conf"
PREFIX = "/_nightshift_outputs/"

pytestmark = pytest.mark.django_db(transaction=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the site file no longer has exactly one {old!r}"
    return text.replace(old, new)


class Nginx:
    def __init__(self, https_port: int, http_port: int) -> None:
        self.https = f"https://127.0.0.1:{https_port}"
        self.http = f"http://127.0.0.1:{http_port}"

    def curl(self, path: str, *options: str, base: str | None = None) -> tuple[dict, bytes]:
        """Headers (lower-case names, last value) and body of one request."""
        done = subprocess.run(
            [
                "curl",
                "-sk",
                "--http2",
                "-D",
                "-",
                "--max-time",
                "60",
                *options,
                (base or self.https) + path,
            ],
            capture_output=True,
            timeout=90,
            check=True,
        )
        head, _, body = done.stdout.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").splitlines()
        headers = {"status": lines[0]}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return headers, body


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
    run = tmp_path / "nginx"
    run.mkdir()
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=nightshift.test",
            "-keyout",
            run / "key.pem",
            "-out",
            run / "cert.pem",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    https_port, http_port = free_port(), free_port()
    upstream = live_server.url.removeprefix("http://")
    site = SITE.read_text()
    for old, new in [
        ("server 127.0.0.1:8000;", f"server {upstream};"),
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        ("listen [::]:80;", ""),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;"),
        ("listen [::]:443 ssl http2;", ""),
        ("/etc/ssl/nightshift/fullchain.pem", str(run / "cert.pem")),
        ("/etc/ssl/nightshift/privkey.pem", str(run / "key.pem")),
        ("/var/lib/nightshift/staticfiles/", f"{static_dir}/"),
        ("/srv/nightshift/jobs/", f"{jobs_dir.resolve()}/"),
    ]:
        site = replace_once(site, old, new)
    site = site.replace("/etc/nginx/snippets/nightshift-headers.conf", str(HEADERS))
    (run / "site.conf").write_text(site)
    temp_paths = "\n".join(
        f"{kind}_temp_path {run}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (run / "nginx.conf").write_text(f"""
{"user root;" if os.geteuid() == 0 else ""}
pid {run}/nginx.pid;
error_log {run}/error.log info;
events {{ worker_connections 64; }}
http {{
    include /etc/nginx/mime.types;
    access_log {run}/access.log;
    {temp_paths}
    include {run}/site.conf;
}}
""")
    command = ["nginx", "-p", str(run), "-c", str(run / "nginx.conf")]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen([*command, "-g", "daemon off;"])
    front = Nginx(https_port, http_port)
    for _ in range(50):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", https_port)) == 0:
                break
        time.sleep(0.1)
    yield front
    process.terminate()
    process.wait(timeout=10)


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
