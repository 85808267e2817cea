"""The live proxy, for real, in front of a stand-in job: who gets in, and that nothing in a
request reaches anything but the job's own service."""

import asyncio
import json

import httpx
import pytest
import websockets

from jobs.models import Job, JobState
from live_sessions.services import live_share_set, live_token_create, live_token_revoke
from tests.factories import UserFactory
from tests.live_sessions.harness import JOB_PORT, bound_ticket, raw_request, run_async, seen

pytestmark = pytest.mark.django_db(transaction=True)


def running_job(owner, *, lab=None, services=("serve", "tensorboard"), state=JobState.RUNNING):
    return Job.objects.create(
        owner=owner,
        lab=lab,
        name="finetune",
        output_dir="/nonexistent",
        state=state,
        cluster_id=41,
        proc_id=0,
        request={"live_services": list(services), "python": "/usr/bin/python3"},
    )


def signed_in(proxy, user, job, service="serve") -> httpx.Client:
    """A browser that followed the job page's link: the ticket, then the proxy's cookie."""
    client = httpx.Client(base_url=proxy.url, timeout=10)
    ticket = bound_ticket(client, user, job, service)
    entered = client.get(
        f"/live/{job.public_id}/{service}/_nightshift/enter", params={"ticket": ticket}
    )
    assert entered.status_code == 302, entered.text
    return client


def test_the_owner_reaches_the_served_endpoint_which_sees_its_own_paths(
    proxy, tunnels, lab_with_people
):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    client = signed_in(proxy, owner, job)
    answer = client.get(f"/live/{job.public_id}/serve/v1/models?limit=2")
    assert answer.status_code == 200
    assert seen(answer)["path"] == "/v1/models?limit=2"
    assert seen(answer)["headers"]["x-forwarded-prefix"] == f"/live/{job.public_id}/serve"
    assert [t.key for t in tunnels.connected] == [str(job.public_id)]
    assert (tunnels.connected[0].cluster_id, tunnels.connected[0].proc_id) == (41, 0)


def test_the_entry_cookie_is_http_only_and_scoped_to_the_jobs_path(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    client = httpx.Client(base_url=proxy.url)
    ticket = bound_ticket(client, owner, job, "serve")
    entered = client.get(
        f"/live/{job.public_id}/serve/_nightshift/enter", params={"ticket": ticket}
    )
    cookie = entered.headers.get_list("set-cookie")[0]
    assert f"Path=/live/{job.public_id}/" in cookie and "HttpOnly" in cookie
    assert entered.headers["location"] == f"/live/{job.public_id}/serve/"


def test_tensorboard_sees_the_prefix_it_was_started_with(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    client = signed_in(proxy, owner, job, "tensorboard")
    answer = client.get(f"/live/{job.public_id}/tensorboard/data/runs")
    assert seen(answer)["path"] == f"/live/{job.public_id}/tensorboard/data/runs"


def test_a_redirect_from_the_served_endpoint_stays_under_its_prefix(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    answer = signed_in(proxy, owner, job).get(f"/live/{job.public_id}/serve/moved")
    assert answer.status_code == 302
    assert answer.headers["location"] == f"/live/{job.public_id}/serve/landing"


def test_every_session_url_is_404_for_another_user(proxy, tunnels, lab_with_people):
    _, owner, lead, stranger = lab_with_people
    job = running_job(owner)
    for user in (stranger, lead):
        client = httpx.Client(base_url=proxy.url)
        ticket = bound_ticket(client, user, job, "serve")
        entered = client.get(
            f"/live/{job.public_id}/serve/_nightshift/enter", params={"ticket": ticket}
        )
        assert entered.status_code == 404
        assert client.get(f"/live/{job.public_id}/serve/").status_code == 404
    assert tunnels.connected == []


def test_a_cookie_made_for_one_job_opens_no_other(proxy, tunnels, lab_with_people):
    _, owner, _, stranger = lab_with_people
    mine, theirs = running_job(owner), running_job(stranger)
    client = signed_in(proxy, owner, mine)
    # The browser would not send it there (its path is the job's); a hand-made request does.
    cookie = client.cookies.get("nslive")
    answer = httpx.get(f"{proxy.url}/live/{theirs.public_id}/serve/", cookies={"nslive": cookie})
    assert answer.status_code == 404
    assert all(t.key == str(mine.public_id) for t in tunnels.connected)


def test_a_ticket_is_bound_to_its_job_and_service_and_cannot_be_forged(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job, other = running_job(owner), running_job(owner)
    client = httpx.Client(base_url=proxy.url)
    ticket = bound_ticket(client, owner, job, "tensorboard")
    bound = {"nsbind": client.cookies.get("nsbind")}  # sent by hand, to any path
    for url, value in (
        (f"/live/{job.public_id}/serve/", ticket),
        (f"/live/{other.public_id}/tensorboard/", ticket),
        (f"/live/{job.public_id}/tensorboard/", ticket[:-2] + "xx"),
    ):
        answer = httpx.get(
            f"{proxy.url}{url}_nightshift/enter", params={"ticket": value}, cookies=bound
        )
        assert answer.status_code == 404, url
    url = f"{proxy.url}/live/{job.public_id}/tensorboard/_nightshift/enter"
    assert httpx.get(url, params={"ticket": ticket}, cookies=bound).status_code == 302


def test_a_ticket_opens_nothing_in_another_browser(proxy, lab_with_people):
    """A ticket read off a URL (a history, a log, a page's script) is bound to the
    browser the proxy gave a secret to before the portal made it."""
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    asked, thief = httpx.Client(base_url=proxy.url), httpx.Client(base_url=proxy.url)
    ticket = bound_ticket(asked, owner, job, "serve")
    bound_ticket(thief, owner, job, "serve")  # a secret of its own, not the ticket's
    enter = f"/live/{job.public_id}/serve/_nightshift/enter"
    assert thief.get(enter, params={"ticket": ticket}).status_code == 404
    assert httpx.get(proxy.url + enter, params={"ticket": ticket}).status_code == 404
    # The refusals spent nothing: the browser it was made for still gets in.
    assert asked.get(enter, params={"ticket": ticket}).status_code == 302


def test_no_cookie_and_no_token_is_404(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    assert httpx.get(f"{proxy.url}/live/{job.public_id}/serve/").status_code == 404
    assert (
        httpx.get(f"{proxy.url}/live/{job.public_id}/serve/", cookies={"nslive": "x"}).status_code
        == 404
    )


def test_a_program_calls_the_endpoint_with_a_live_token(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    token, secret = live_token_create(user=owner, job=job, name="eval script")
    answer = httpx.post(
        f"{proxy.url}/live/{job.public_id}/serve/v1/completions",
        headers={"Authorization": f"Bearer {secret}"},
        json={"prompt": "hi"},
    )
    assert answer.status_code == 200
    assert json.loads(seen(answer)["body"]) == {"prompt": "hi"}
    # The portal's token never reaches the job.
    assert "authorization" not in seen(answer)["headers"]
    live_token_revoke(user=owner, token=token)
    later = httpx.get(
        f"{proxy.url}/live/{job.public_id}/serve/", headers={"Authorization": f"Bearer {secret}"}
    )
    assert later.status_code in (200, 404)  # remembered for at most a few seconds
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_a_token_opens_only_its_own_jobs_endpoint(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job, other = running_job(owner), running_job(owner)
    _, secret = live_token_create(user=owner, job=job, name="eval")
    bearer = {"Authorization": f"Bearer {secret}"}
    assert (
        httpx.get(f"{proxy.url}/live/{other.public_id}/serve/", headers=bearer).status_code == 404
    )
    assert (
        httpx.get(f"{proxy.url}/live/{job.public_id}/tensorboard/", headers=bearer).status_code
        == 404
    )
    assert (
        httpx.get(
            f"{proxy.url}/live/{job.public_id}/serve/",
            headers={"Authorization": "Bearer nsl_guessed"},
        ).status_code
        == 404
    )


def test_a_revoked_token_is_refused(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    token, secret = live_token_create(user=owner, job=job, name="eval")
    live_token_revoke(user=owner, token=token)
    answer = httpx.get(
        f"{proxy.url}/live/{job.public_id}/serve/", headers={"Authorization": f"Bearer {secret}"}
    )
    assert answer.status_code == 404


def test_sharing_lets_the_labs_lead_and_admins_in_and_nobody_else(proxy, lab_with_people):
    lab, owner, lead, stranger = lab_with_people
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    job = running_job(owner, lab=lab)
    live_share_set(user=owner, job=job, shared=True)
    for user in (lead, admin):
        assert signed_in(proxy, user, job).get(f"/live/{job.public_id}/serve/").status_code == 200
    client = httpx.Client(base_url=proxy.url)
    ticket = bound_ticket(client, stranger, job, "serve")
    answer = client.get(f"/live/{job.public_id}/serve/_nightshift/enter", params={"ticket": ticket})
    assert answer.status_code == 404


def test_a_job_that_does_not_run_is_closed_with_its_state(proxy, tunnels, lab_with_people):
    _, owner, _, _ = lab_with_people
    done = running_job(owner, state=JobState.COMPLETED)
    answer = signed_in(proxy, owner, done).get(f"/live/{done.public_id}/serve/")
    assert answer.status_code == 503
    assert "The job is completed, not running" in answer.text
    assert tunnels.connected == []


def test_a_service_the_job_did_not_ask_for_is_404(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner, services=("tensorboard",))
    client = httpx.Client(base_url=proxy.url)
    ticket = bound_ticket(client, owner, job, "serve")
    answer = client.get(f"/live/{job.public_id}/serve/_nightshift/enter", params={"ticket": ticket})
    assert answer.status_code == 404


def test_a_tunnel_that_cannot_open_says_why_and_retries(proxy, tunnels, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    tunnels.failing = "The job is not listening on its port (yet)"
    answer = signed_in(proxy, owner, job).get(f"/live/{job.public_id}/serve/")
    assert answer.status_code == 503
    assert "not listening on its port" in answer.text
    assert 'http-equiv="refresh"' in answer.text


@pytest.mark.parametrize(
    "path",
    [
        "/live/{id}/serve/%2e%2e/%2e%2e/{other}/serve/",
        "/live/{id}/serve/../../{other}/serve/",
        "/live/{id}/serve/a/..%2f..%2f{other}",
        "/live/{id}/serve/a%5c..%5cb",
        "/live/{id}/serve/a%00b",
        "/live/{ID}/serve/",
        "/live/%7B{id}%7D/serve/",
        "/live/{id}%2fserve/",
        "/live/{id}/%73erve/",
        "/live/{id}/serve@127.0.0.1:22/",
        "/live/{id}:22/serve/",
        "//127.0.0.1:22/live/{id}/serve/",
        "/live/127.0.0.1:22/serve/",
        "/live/{id}/ssh/",
    ],
)
def test_crafted_paths_reach_nothing(proxy, tunnels, lab_with_people, path):
    _, owner, _, stranger = lab_with_people
    job, other = running_job(owner), running_job(stranger)
    client = signed_in(proxy, owner, job)
    tunnels.connected.clear()
    url = path.format(id=job.public_id, ID=str(job.public_id).upper(), other=other.public_id)
    status, _ = raw_request(
        proxy.port,
        f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Cookie: nslive={client.cookies.get('nslive')}\r\n"
        "Connection: close\r\n\r\n".encode(),
    )
    assert status == 404
    assert tunnels.connected == []


def test_an_absolute_url_in_the_request_line_still_reaches_only_the_job(
    proxy, tunnels, lab_with_people
):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    client = signed_in(proxy, owner, job)
    tunnels.connected.clear()
    status, body = raw_request(
        proxy.port,
        f"GET http://evil.example:22/live/{job.public_id}/serve/x HTTP/1.1\r\n"
        "Host: evil.example\r\n"
        f"Cookie: nslive={client.cookies.get('nslive')}\r\nConnection: close\r\n\r\n".encode(),
    )
    assert status in (200, 400, 404)
    if status == 200:  # then it is the job's own endpoint, and Host is the job's
        assert seen(body)["headers"]["host"] == f"127.0.0.1:{JOB_PORT}"
    assert {t.key for t in tunnels.connected} <= {str(job.public_id)}


def test_headers_cannot_change_the_upstream_or_carry_the_portals_credentials(
    proxy, lab_with_people
):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    client = signed_in(proxy, owner, job)
    answer = client.get(
        f"/live/{job.public_id}/serve/",
        headers={
            "Host": "evil.example:22",
            "X-Forwarded-Host": "evil.example",
            "X-Forwarded-For": "10.0.0.1",
            "Forwarded": "host=evil.example",
            "X-Real-IP": "10.0.0.1",
            "X-Nightshift-User": "root",
            "Authorization": "Basic cm9vdDpyb290",
            "Cookie": f"nslive={client.cookies.get('nslive')}; sessionid=portal-session; "
            "csrftoken=portal-csrf; app=kept",
        },
    )
    headers = seen(answer)["headers"]
    assert headers["host"] == f"127.0.0.1:{JOB_PORT}"
    for gone in (
        "x-forwarded-host",
        "x-forwarded-for",
        "forwarded",
        "x-real-ip",
        "x-nightshift-user",
        "authorization",
    ):
        assert gone not in headers
    assert headers["cookie"] == "app=kept"


def test_a_service_on_a_unix_socket_in_the_job_sees_the_loopback_as_its_host(
    proxy, tunnels, lab_with_people, settings
):
    _, owner, _, _ = lab_with_people
    settings.LIVE_URL = proxy.url
    job = running_job(owner)
    tunnels.endpoint = "/scratch/dir_1/.nightshift-live/notebook.sock"
    client = signed_in(proxy, owner, job)
    answer = client.get(
        f"/live/{job.public_id}/serve/",
        headers={"Host": "evil.example:22", "Origin": proxy.url},
    )
    headers = seen(answer)["headers"]
    assert headers["host"] == "127.0.0.1"
    assert headers["origin"] == "http://127.0.0.1"


def test_websockets_go_through_for_the_owner_and_are_refused_to_others(proxy, lab_with_people):
    _, owner, _, stranger = lab_with_people
    job = running_job(owner)
    cookie = signed_in(proxy, owner, job, "tensorboard").cookies.get("nslive")
    url = f"ws://127.0.0.1:{proxy.port}/live/{job.public_id}/tensorboard/ws"

    async def talk(cookie_value):
        async with websockets.connect(
            url, additional_headers={"Cookie": f"nslive={cookie_value}"}, subprotocols=["echo"]
        ) as ws:
            await ws.send("ping")
            return ws.subprotocol, await ws.recv()

    assert run_async(talk(cookie)) == (
        "echo",
        f"echo ping from /live/{job.public_id}/tensorboard/ws",
    )
    theirs = signed_in(proxy, stranger, running_job(stranger), "tensorboard").cookies.get("nslive")
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        run_async(talk(theirs))
    assert refused.value.response.status_code == 404


def test_tunnels_of_jobs_that_stopped_running_are_closed(proxy, tunnels, lab_with_people):
    _, owner, _, _ = lab_with_people
    job, still = running_job(owner), running_job(owner)
    for each in (job, still):
        signed_in(proxy, owner, each).get(f"/live/{each.public_id}/serve/")
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    closed = run_async(proxy.app.reap())
    assert closed == [str(job.public_id)]
    assert list(tunnels.tunnels) == [str(still.public_id)]


def test_a_notebook_gets_its_token_from_the_proxy_and_the_browser_never_sees_it(
    proxy, lab_with_people
):
    _, owner, _, _ = lab_with_people
    job = running_job(owner, services=("notebook",))
    Job.objects.filter(pk=job.pk).update(live_secret="s3cret-token")
    client = signed_in(proxy, owner, job, "notebook")
    answer = client.get(f"/live/{job.public_id}/notebook/api/status")
    assert seen(answer)["headers"]["authorization"] == "token s3cret-token"
    assert "s3cret-token" not in answer.headers.get("set-cookie", "")
    # Only a notebook's requests carry one.
    other = running_job(owner)
    Job.objects.filter(pk=other.pk).update(live_secret="not-for-serve")
    served = signed_in(proxy, owner, other, "serve").get(f"/live/{other.public_id}/serve/")
    assert "authorization" not in seen(served)["headers"]


def test_a_page_of_another_origin_cannot_drive_a_session(proxy, lab_with_people, settings):
    _, owner, _, _ = lab_with_people
    settings.LIVE_URL = proxy.url
    job = running_job(owner, services=("notebook",))
    client = signed_in(proxy, owner, job, "notebook")
    url = f"/live/{job.public_id}/notebook/api/contents"
    assert client.post(url, headers={"Origin": "https://evil.example"}).status_code == 403
    same = client.post(url, headers={"Origin": proxy.url}, json={"type": "notebook"})
    assert same.status_code == 200
    assert seen(same)["headers"]["origin"] == f"http://127.0.0.1:{JOB_PORT}"
    cookie = client.cookies.get("nslive")

    async def talk(origin):
        async with websockets.connect(
            f"ws://127.0.0.1:{proxy.port}/live/{job.public_id}/notebook/api/kernels/k/channels",
            additional_headers={"Cookie": f"nslive={cookie}"},
            origin=origin,
        ) as ws:
            await ws.send("x")
            return await ws.recv()

    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        run_async(talk("https://evil.example"))
    assert refused.value.response.status_code == 403
    assert run_async(talk(proxy.url)).startswith("echo x")


def test_the_portals_session_page_may_frame_a_service_and_no_other_site_may(
    proxy, lab_with_people, settings
):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    answer = signed_in(proxy, owner, job, "tensorboard").get(f"/live/{job.public_id}/tensorboard/")
    assert answer.headers["content-security-policy"] == (
        f"frame-ancestors 'self' {settings.PORTAL_URL.rstrip('/')}"
    )
    assert "x-frame-options" not in answer.headers


def test_a_served_endpoint_cannot_set_cookies_or_act_on_the_whole_origin(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    answer = signed_in(proxy, owner, job).get(f"/live/{job.public_id}/serve/hostile")
    assert answer.status_code == 200
    for dropped in (
        "set-cookie",
        "service-worker-allowed",
        "clear-site-data",
        "strict-transport-security",
        "access-control-allow-credentials",
        "x-frame-options",
        "alt-svc",
        "refresh",
    ):
        assert dropped not in answer.headers, dropped
    assert answer.headers["x-kept"] == "yes"
    assert answer.headers["access-control-allow-origin"] == "https://evil.example"
    # On the origin every job shares, its pages get an opaque origin of their own.
    policy = answer.headers.get_list("content-security-policy")
    assert len(policy) == 1
    assert policy[0].startswith("sandbox allow-scripts allow-forms")
    assert "allow-same-origin" not in policy[0]
    assert policy[0].endswith("frame-ancestors 'self' " + origin_of_portal())


def origin_of_portal() -> str:
    from django.conf import settings

    return settings.PORTAL_URL.rstrip("/")


def test_a_ticket_lets_one_browser_in_once(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    client = httpx.Client(base_url=proxy.url)
    ticket = bound_ticket(client, owner, job, "serve")
    enter = f"/live/{job.public_id}/serve/_nightshift/enter"
    assert client.get(enter, params={"ticket": ticket}).status_code == 302
    again = client.get(enter, params={"ticket": ticket})
    assert again.status_code == 404
    assert "nslive" not in again.cookies


def test_with_a_host_per_job_another_jobs_host_or_origin_gets_nothing(
    proxy, lab_with_people, settings
):
    _, owner, _, _ = lab_with_people
    settings.LIVE_URL = f"http://{{job}}.localhost:{proxy.port}"
    job, other = running_job(owner), running_job(owner)
    own_host = f"{job.public_id}.localhost:{proxy.port}"
    other_host = f"{other.public_id}.localhost:{proxy.port}"
    client = httpx.Client(base_url=proxy.url, timeout=10, headers={"Host": own_host})
    ticket = bound_ticket(client, owner, job, "serve")
    page = f"/live/{job.public_id}/serve/"
    assert client.get(page + "_nightshift/enter", params={"ticket": ticket}).status_code == 302
    answer = client.get(page)
    assert answer.status_code == 200
    # Its own origin needs no sandbox: a served app's scripts may call its own paths.
    assert not answer.headers["content-security-policy"].startswith("sandbox")
    assert client.get(page, headers={"Host": other_host}).status_code == 404
    assert client.get(page, headers={"Host": f"127.0.0.1:{proxy.port}"}).status_code == 404
    own_origin = f"http://{own_host}"
    assert client.post(page, headers={"Origin": own_origin}).status_code == 200
    assert client.post(page, headers={"Origin": f"http://{other_host}"}).status_code == 403


def test_unsharing_or_revoking_closes_websockets_already_open(proxy, lab_with_people):
    lab, owner, lead, _ = lab_with_people
    proxy.app.recheck_every_s = 0.2
    job = running_job(owner, lab=lab)
    live_share_set(user=owner, job=job, shared=True)
    cookie = signed_in(proxy, lead, job).cookies.get("nslive")
    _, secret = live_token_create(user=owner, job=job, name="client")
    url = f"ws://127.0.0.1:{proxy.port}/live/{job.public_id}/serve/ws"

    async def held_open(headers, take_away):
        async with websockets.connect(url, additional_headers=headers) as ws:
            await ws.send("before")
            assert (await ws.recv()).startswith("echo before")
            await asyncio.to_thread(take_away)
            try:
                async with asyncio.timeout(10):
                    while True:
                        await ws.recv()
            except websockets.exceptions.ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None

    def unshare():
        live_share_set(user=owner, job=job, shared=False)

    def revoke():
        live_token_revoke(user=owner, token=job.live_tokens.get())

    assert run_async(held_open({"Cookie": f"nslive={cookie}"}, unshare)) == 4403
    assert run_async(held_open({"Authorization": f"Bearer {secret}"}, revoke)) == 4403


def test_a_cookie_tossed_onto_the_jobs_path_does_not_hide_the_real_one(proxy, lab_with_people):
    _, owner, _, _ = lab_with_people
    job = running_job(owner)
    real = signed_in(proxy, owner, job).cookies.get("nslive")
    for cookie in (f"nslive=tossed; nslive={real}", f"nslive={real}; nslive=tossed"):
        answer = httpx.get(f"{proxy.url}/live/{job.public_id}/serve/", headers={"Cookie": cookie})
        assert answer.status_code == 200, cookie
