"""deploy/production/nginx/nightshift-live.conf, run in a real nginx in front of the live
proxy (and a stand-in job): HTTP and a notebook's WebSocket go through, and nothing but
/live/ is served."""

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
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
from tests.operations.nginx_site import replace_once, running_nginx, self_signed

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "deploy" / "production" / "nginx" / "nightshift-live.conf"

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def live_site(run: Path, ports: list[int]) -> Iterator[str]:
    """nightshift-live.conf in a real nginx, its upstream these proxies' ports."""
    certificate, key = self_signed(run)
    port = free_port()
    site = SITE.read_text()
    servers = "\n    ".join(f"server 127.0.0.1:{upstream};" for upstream in ports)
    for old, new in [
        ("server 127.0.0.1:8001;", servers),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{port} ssl http2;"),
        ("listen [::]:443 ssl http2;", ""),
        ("/etc/ssl/nightshift/live-fullchain.pem", str(certificate)),
        ("/etc/ssl/nightshift/live-privkey.pem", str(key)),
    ]:
        site = replace_once(site, old, new)
    with running_nginx(run, site, port):
        yield f"https://127.0.0.1:{port}"


@pytest.fixture
def nginx_in_front(tmp_path, settings):
    job = StandInJob(tmp_path)
    proxy = ProxyServer(StandInTunnels(job))
    with live_site(tmp_path / "nginx", [proxy.port]) as url:
        # The proxy allows pages of its own origin: nginx's, here.
        settings.LIVE_URL = url
        yield url
    proxy.stop()
    job.stop()


def notebook_job(owner) -> Job:
    return Job.objects.create(
        owner=owner,
        name="nb",
        output_dir="/nonexistent",
        state=JobState.RUNNING,
        cluster_id=3,
        proc_id=0,
        request={"live_services": ["notebook"]},
    )


def websocket_echo(base: str, job: Job, cookie: str) -> str:
    async def talk():
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        url = base.replace("https", "wss") + f"/live/{job.public_id}/notebook/ws"
        async with websockets.connect(
            url, ssl=context, additional_headers={"Cookie": f"nslive={cookie}"}, origin=base
        ) as ws:
            await ws.send("ping")
            return await ws.recv()

    return run_async(talk())


def test_a_notebooks_http_and_websocket_go_through_nginx(nginx_in_front):
    owner = UserFactory(username="ada")
    job = notebook_job(owner)
    client = httpx.Client(base_url=nginx_in_front, verify=False, timeout=10)
    ticket = bound_ticket(client, owner, job, "notebook")
    entered = client.get(
        f"/live/{job.public_id}/notebook/_nightshift/enter", params={"ticket": ticket}
    )
    assert entered.status_code == 302
    answer = client.get(f"/live/{job.public_id}/notebook/api/status")
    assert seen(answer)["path"] == f"/live/{job.public_id}/notebook/api/status"
    assert websocket_echo(nginx_in_front, job, client.cookies.get("nslive")) == (
        f"echo ping from /live/{job.public_id}/notebook/ws"
    )


def test_two_proxies_serve_one_notebook_and_losing_one_costs_a_reconnect(tmp_path, settings):
    """Replicas, round robin: the browser's way in may begin at one proxy and end at the
    other, each opens its own tunnel when a request first needs it, and once one proxy is
    gone the notebook's WebSocket reconnects through the other."""
    job_server = StandInJob(tmp_path)
    tunnels = [StandInTunnels(job_server), StandInTunnels(job_server)]
    proxies = [ProxyServer(each) for each in tunnels]
    try:
        with live_site(tmp_path / "nginx", [proxy.port for proxy in proxies]) as url:
            settings.LIVE_URL = url
            owner = UserFactory(username="ada")
            job = notebook_job(owner)
            client = httpx.Client(base_url=url, verify=False, timeout=10)
            ticket = bound_ticket(client, owner, job, "notebook")
            entered = client.get(
                f"/live/{job.public_id}/notebook/_nightshift/enter", params={"ticket": ticket}
            )
            assert entered.status_code == 302, entered.text
            cookie = client.cookies.get("nslive")
            for _ in range(4):
                answer = client.get(f"/live/{job.public_id}/notebook/api/status")
                assert answer.status_code == 200, answer.text
            assert [[t.key for t in each.connected][:1] for each in tunnels] == [
                [str(job.public_id)]
            ] * 2  # both served it, each through a tunnel of its own
            echo = f"echo ping from /live/{job.public_id}/notebook/ws"
            assert websocket_echo(url, job, cookie) == echo

            proxies[0].server.force_exit = True
            proxies[0].stop()
            for _ in range(4):  # nginx finds the dead proxy refusing, and goes to the other
                answer = client.get(f"/live/{job.public_id}/notebook/api/status")
                assert answer.status_code == 200, answer.text
            assert websocket_echo(url, job, cookie) == echo
    finally:
        for proxy in proxies:
            proxy.stop()
        job_server.stop()


def test_nothing_but_live_sessions_is_served(nginx_in_front):
    assert httpx.get(f"{nginx_in_front}/admin/", verify=False).status_code == 404
    assert httpx.get(f"{nginx_in_front}/", verify=False).status_code == 404
