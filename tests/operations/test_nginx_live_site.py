"""deploy/production/nginx/nightshift-live.conf, run in a real nginx in front of the live
proxy (and a stand-in job): HTTP and a notebook's WebSocket go through, and nothing but
/live/ is served."""

import os
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import websockets

from jobs.models import Job, JobState
from tests.factories import UserFactory
from tests.live_sessions.harness import (
    ProxyServer,
    StandInJob,
    StandInTunnels,
    bound_ticket,
    free_port,
    run_async,
    seen,
)

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "deploy" / "production" / "nginx" / "nightshift-live.conf"

pytestmark = pytest.mark.django_db(transaction=True)


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the site file no longer has exactly one {old!r}"
    return text.replace(old, new)


@pytest.fixture
def nginx_in_front(tmp_path, settings):
    job = StandInJob(tmp_path)
    proxy = ProxyServer(StandInTunnels(job))
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
            "/CN=live.test",
            "-keyout",
            run / "key.pem",
            "-out",
            run / "cert.pem",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    port = free_port()
    site = SITE.read_text()
    for old, new in [
        ("server 127.0.0.1:8001;", f"server 127.0.0.1:{proxy.port};"),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{port} ssl http2;"),
        ("listen [::]:443 ssl http2;", ""),
        ("/etc/ssl/nightshift/live-fullchain.pem", str(run / "cert.pem")),
        ("/etc/ssl/nightshift/live-privkey.pem", str(run / "key.pem")),
    ]:
        site = replace_once(site, old, new)
    kinds = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    temp_paths = "\n".join(f"{kind}_temp_path {run}/{kind};" for kind in kinds)
    (run / "nginx.conf").write_text(f"""
{"user root;" if os.geteuid() == 0 else ""}
pid {run}/nginx.pid;
error_log {run}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {run}/access.log;
    {temp_paths}
    {site}
}}
""")
    command = ["nginx", "-p", str(run), "-c", str(run / "nginx.conf")]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen([*command, "-g", "daemon off;"])
    url = f"https://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(url, verify=False, timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    # The proxy allows pages of its own origin: nginx's, here.
    settings.LIVE_URL = url
    yield url
    process.terminate()
    process.wait(timeout=10)
    proxy.stop()
    job.stop()


def test_a_notebooks_http_and_websocket_go_through_nginx(nginx_in_front):
    owner = UserFactory(username="ada")
    job = Job.objects.create(
        owner=owner,
        name="nb",
        output_dir="/nonexistent",
        state=JobState.RUNNING,
        cluster_id=3,
        proc_id=0,
        request={"live_services": ["notebook"]},
    )
    client = httpx.Client(base_url=nginx_in_front, verify=False, timeout=10)
    ticket = bound_ticket(client, owner, job, "notebook")
    entered = client.get(
        f"/live/{job.public_id}/notebook/_nightshift/enter", params={"ticket": ticket}
    )
    assert entered.status_code == 302
    answer = client.get(f"/live/{job.public_id}/notebook/api/status")
    assert seen(answer)["path"] == f"/live/{job.public_id}/notebook/api/status"

    async def talk():
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        url = nginx_in_front.replace("https", "wss") + f"/live/{job.public_id}/notebook/ws"
        cookie = f"nslive={client.cookies.get('nslive')}"
        async with websockets.connect(
            url, ssl=context, additional_headers={"Cookie": cookie}, origin=nginx_in_front
        ) as ws:
            await ws.send("ping")
            return await ws.recv()

    assert run_async(talk()) == f"echo ping from /live/{job.public_id}/notebook/ws"


def test_nothing_but_live_sessions_is_served(nginx_in_front):
    assert httpx.get(f"{nginx_in_front}/admin/", verify=False).status_code == 404
    assert httpx.get(f"{nginx_in_front}/", verify=False).status_code == 404
