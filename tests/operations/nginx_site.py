"""deploy/production/nginx/nightshift.conf, run in a real nginx on free local ports, in front
of one portal process or several (the site's upstream, round robin)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "deploy" / "production" / "nginx" / "nightshift.conf"
HEADERS = ROOT / "deploy" / "production" / "nginx" / "nightshift-headers.conf"


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the site file no longer has exactly one {old!r}"
    return text.replace(old, new)


class Nginx:
    def __init__(self, https_port: int, http_port: int, run: Path) -> None:
        self.https = f"https://127.0.0.1:{https_port}"
        self.http = f"http://127.0.0.1:{http_port}"
        self.run = run

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

    def error_log(self) -> str:
        return (self.run / "error.log").read_text(errors="replace")


def self_signed(run: Path) -> tuple[Path, Path]:
    """A certificate and its key for the test's nginx, in `run`."""
    run.mkdir(parents=True, exist_ok=True)
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
    return run / "cert.pem", run / "key.pem"


@contextmanager
def running_nginx(run: Path, site: str, port: int) -> Iterator[None]:
    """nginx with `site` in its http block, its files in `run`, until it takes connections
    on `port`; its access log names the upstream that answered each request."""
    temp_paths = "\n".join(
        f"{kind}_temp_path {run}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (run / "site.conf").write_text(site)
    (run / "nginx.conf").write_text(f"""
{"user root;" if os.geteuid() == 0 else ""}
pid {run}/nginx.pid;
error_log {run}/error.log info;
events {{ worker_connections 64; }}
http {{
    include /etc/nginx/mime.types;
    log_format upstream '$request_method $uri $status $upstream_addr';
    access_log {run}/access.log upstream;
    {temp_paths}
    include {run}/site.conf;
}}
""")
    command = ["nginx", "-p", str(run), "-c", str(run / "nginx.conf")]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen([*command, "-g", "daemon off;"])
    try:
        for _ in range(100):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def nginx_site(
    run: Path, upstreams: list[str], *, static_dir: Path, jobs_dir: Path, datasets_dir: Path
) -> Iterator[Nginx]:
    """The production site in nginx, its upstream `upstreams` ("127.0.0.1:PORT"), its files
    from these folders."""
    certificate, key = self_signed(run)
    https_port, http_port = free_port(), free_port()
    servers = "\n    ".join(f"server {upstream};" for upstream in upstreams)
    site = SITE.read_text()
    for old, new in [
        ("server 127.0.0.1:8000;", servers),
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        ("listen [::]:80;", ""),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;"),
        ("listen [::]:443 ssl http2;", ""),
        ("/etc/ssl/nightshift/fullchain.pem", str(certificate)),
        ("/etc/ssl/nightshift/privkey.pem", str(key)),
        ("/var/lib/nightshift/staticfiles/", f"{static_dir}/"),
        ("/srv/nightshift/jobs/", f"{jobs_dir.resolve()}/"),
        ("/srv/nightshift/datasets/", f"{datasets_dir.resolve()}/"),
    ]:
        site = replace_once(site, old, new)
    site = site.replace("/etc/nginx/snippets/nightshift-headers.conf", str(HEADERS))
    with running_nginx(run, site, https_port):
        yield Nginx(https_port, http_port, run)
