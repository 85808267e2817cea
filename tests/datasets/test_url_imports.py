"""A dataset fetched from a URL by the portal: checksummed, refused when its checksum does
not match, and never fetched from the portal's own network unless an admin allows it, even
through a redirect or a name that resolves there."""

import hashlib
import http.server
import ipaddress
import threading

import pytest

from datasets import services
from tests.datasets.files import SAMPLE, zip_of

pytestmark = pytest.mark.django_db
ARCHIVE = zip_of(SAMPLE)


class Files(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the handler's name is http.server's
        if self.path.startswith("/moved"):
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/moved?to="))
            self.end_headers()
            return
        if self.path != "/cats.zip":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(ARCHIVE)))
        self.end_headers()
        self.wfile.write(ARCHIVE)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture
def loopback_allowed(settings):
    settings.DATASET_URL_ALLOW = [ipaddress.ip_network("127.0.0.1/32")]


def fetched(user, url, **fields):
    started = services.dataset_import_from_url(user=user, name="cats", url=url, **fields)
    return services.dataset_import_run(started.pk)


def test_a_url_in_an_allowed_network_is_fetched_checksummed_and_unpacked(
    student, server, loopback_allowed
):
    done = fetched(student, f"{server}/cats.zip", sha256=hashlib.sha256(ARCHIVE).hexdigest())
    assert done.state == "done", done.message
    assert (done.version.source, done.version.origin) == ("url", f"{server}/cats.zip")
    assert done.version.file_count == 4 and done.bytes_done == done.version.size_bytes


def test_a_checksum_mismatch_is_refused_and_nothing_is_kept(
    student, server, loopback_allowed, settings
):
    done = fetched(student, f"{server}/cats.zip", sha256="0" * 64)
    assert done.state == "failed" and "Checksum mismatch" in done.message
    assert hashlib.sha256(ARCHIVE).hexdigest() in done.message
    assert not (settings.DATASETS_DIR / "objects").exists() or not any(
        (settings.DATASETS_DIR / "objects").iterdir()
    )
    assert not any((settings.DATASETS_DIR / "incoming").iterdir())


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/cats.zip",
        "https://localhost/cats.zip",
        "http://169.254.169.254/latest",
        "https://10.1.2.3/data.zip",
        "https://[::1]/x.zip",
        "https://192.168.0.1/x.zip",
    ],
)
def test_the_portals_own_networks_are_refused_by_default(student, url):
    done = fetched(student, url)
    assert done.state == "failed"
    assert "private, loopback or link-local" in done.message, done.message


def test_a_redirect_into_a_refused_network_is_refused(student, server, loopback_allowed):
    done = fetched(student, f"{server}/moved?to=http://127.0.0.2:{server.rsplit(':', 1)[1]}/x")
    assert done.state == "failed" and "127.0.0.2" in done.message, done.message
    followed = fetched(student, f"{server}/moved?to=/cats.zip")
    assert followed.state == "done", followed.message


def test_a_missing_file_or_one_over_the_limit_fails_with_the_reason(
    student, server, loopback_allowed, settings
):
    assert "answered 404" in fetched(student, f"{server}/nothing.zip").message
    settings.DATASET_MAX_GB = 100 / 2**30
    assert "over the limit" in fetched(student, f"{server}/cats.zip").message


@pytest.mark.parametrize(
    "url, reason",
    [
        ("ftp://example.org/x", "https://"),
        ("https://user:pw@example.org/x", "credentials"),
        ("https://example.org/a b", "spaces"),
        ("not a url", "https://"),
    ],
)
def test_urls_of_the_wrong_form_are_refused_at_once(student, url, reason):
    with pytest.raises(services.DatasetError) as refused:
        services.dataset_import_from_url(user=student, name="x", url=url)
    assert refused.value.field == "url" and reason in refused.value.message


def test_plain_http_to_a_public_address_is_refused(student, monkeypatch):
    import socket

    monkeypatch.setattr(
        socket, "getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("93.184.215.14", 80))]
    )
    done = fetched(student, "http://example.org/cats.zip")
    assert done.state == "failed" and "use https://" in done.message
