"""On the personal pool: a job's served endpoint, reached through the portal's live proxy and
HTCondor's own tunnel (condor_ssh_to_job), by its owner's browser and by a program with a
token; nobody else; and the tunnel closes when the job stops running."""

import re
import subprocess

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobs.actions import job_cancel
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.helpers import wait_for
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

SERVES = """
import http.server, json, os, socketserver
import nightshift

class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"job": os.environ["NIGHTSHIFT_JOB_ID"], "path": self.path,
                           "host": self.headers.get("Host"),
                           "cookie": self.headers.get("Cookie")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

class OnSocket(socketserver.UnixStreamServer):
    def get_request(self):
        connection, _ = super().get_request()
        return connection, ("job", 0)

# The job's own socket, which no other job on the workstation can connect to.
print("serving on", nightshift.serve_socket(), flush=True)
OnSocket(nightshift.serve_socket(), Answer).serve_forever()
"""


@pytest.fixture
def people(client, live_proxy):
    users = get_user_model().objects
    ada = users.create_user("ada", password="a-long-test-password")
    eve = users.create_user("eve", password="a-long-test-password")
    client.force_login(ada)
    return client, ada, eve


def serving_job(web) -> Job:
    response = web.post(
        reverse("jobs:new"),
        {
            "name": "serves",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "",
            "live_services": ["serve"],
            "script": script_upload(SERVES, "serve.py"),
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.latest("created_at")
    wait_for_state(job, {JobState.RUNNING, JobState.FAILED, JobState.HELD})
    assert job.state == JobState.RUNNING, job.events.all()
    return job


def token_for(web, job) -> str:
    web.post(reverse("live:token_new", args=[job.public_id]), {"name": "eval script"})
    page = web.get(reverse("live:page", args=[job.public_id])).content.decode()
    return re.search(r'data-role="new-token">(nsl_[A-Za-z0-9_-]+)<', page).group(1)


def answered(call):
    """The first answer that is not 503 (the job may not listen yet)."""
    found = []

    def attempt():
        response = call()
        found.append(response)
        return response.status_code != 503

    wait_for(attempt, timeout=60, what="the job's endpoint to answer through the proxy")
    return found[-1]


def tunnels_to(job, proxy) -> list[str]:
    """The ssh processes (condor_ssh_to_job becomes one) forwarding a socket of the proxy's to
    the job's own socket: the proxy log names it."""
    inside = re.findall(
        rf"tunnel to job {job.public_id} open: {{'serve': '([^']+)'}}", proxy.log(tail=None)
    )
    listing = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    return [
        line
        for line in listing.splitlines()
        if line.startswith("ssh ")
        and "ExitOnForwardFailure=yes" in line
        and any(f":{path} " in f"{line} " for path in inside)
    ]


def test_a_program_calls_a_served_endpoint_with_a_token_through_htcondors_tunnel(
    people, live_proxy
):
    web, _, _ = people
    job = serving_job(web)
    bearer = {"Authorization": f"Bearer {token_for(web, job)}"}
    url = f"{live_proxy.url}/live/{job.public_id}/serve/v1/models?limit=1"
    answer = answered(lambda: httpx.get(url, headers=bearer, timeout=60))
    assert answer.status_code == 200, answer.text
    assert answer.json()["job"] == str(job.public_id)
    assert answer.json()["path"] == "/v1/models?limit=1"
    assert answer.json()["host"] == "127.0.0.1"  # on its socket, the loopback with no port
    assert tunnels_to(job, live_proxy), "the proxy reaches the job through condor_ssh_to_job's ssh"
    # The job is cancelled: its endpoint closes, and so does the tunnel.
    web.post(reverse("jobs:cancel", args=[job.public_id]))
    wait_for_state(job, {JobState.REMOVED})
    wait_for(
        lambda: "not running" in httpx.get(url, headers=bearer).text,
        timeout=30,
        what="the proxy to say the job is not running",
    )
    assert httpx.get(url, headers=bearer).status_code == 503
    wait_for(lambda: not tunnels_to(job, live_proxy), timeout=30, what="the tunnel to close")


def test_the_owners_browser_gets_in_from_the_job_page_and_another_user_gets_404(people, live_proxy):
    web, _, eve = people
    job = serving_job(web)
    opened = web.get(reverse("live:open", args=[job.public_id, "serve"]))
    assert opened.status_code == 302
    assert opened["Location"].startswith(f"{live_proxy.url}/live/{job.public_id}/serve/")
    browser = httpx.Client(follow_redirects=True, timeout=60)
    browser.cookies.set("sessionid", web.cookies["sessionid"].value)  # same host: sent along
    answer = answered(lambda: browser.get(opened["Location"]))
    assert answer.status_code == 200, answer.text
    assert answer.json()["job"] == str(job.public_id)
    # The portal's own session cookie never reaches the job.
    assert "sessionid" not in (answer.json()["cookie"] or "")
    # Eve, signed in to the portal, reaches neither the page nor the endpoint.
    web.force_login(eve)
    assert web.get(reverse("live:page", args=[job.public_id])).status_code == 404
    assert web.get(reverse("live:open", args=[job.public_id, "serve"])).status_code == 404
    stranger = httpx.Client(timeout=30)
    stranger.cookies.set("sessionid", web.cookies["sessionid"].value)
    assert stranger.get(f"{live_proxy.url}/live/{job.public_id}/serve/").status_code == 404
    job_cancel(job=job, user=job.owner)
