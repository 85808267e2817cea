"""The README's default, tested as it is served: `deploy/dev/run` (what `make run` runs)
starts its own PostgreSQL cluster, the worker, beat and gunicorn, beside the personal pool.
A demo student's job goes through the form to Completed with its outputs, and then a crawl
as the demo student, the demo lead and the admin follows every link each can reach and
fails on any 5xx, any browser console error and any serious accessibility violation."""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from labs.models import accounting_group_for
from tests.helpers import free_port, pool_command, wait_for
from tests.kits.accessibility import AccessibilityWatch, from_the_page

pytestmark = [pytest.mark.condor, pytest.mark.browser, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
# Its own Redis database: this stack's worker must not take the test suite's tasks.
STACK_REDIS_URL = "redis://127.0.0.1:6379/13"
TRAINING = """
import time
import nightshift
for epoch in range(3):
    nightshift.log(step=epoch, loss=1.0 / (epoch + 1))
    print(f"epoch {epoch}", flush=True)
    time.sleep(1)
open("outputs/model.json", "w").write('{"weights": [1, 2, 3]}')
"""
# Links a crawl must not follow: signing out ends the crawl's session.
NOT_FOLLOWED = re.compile(r"/logout/?$")
# A page of each kind twice (two jobs, two users), and one of its filtered or sorted variants.
VISITS_PER_KIND_OF_PAGE = {False: 2, True: 1}
MOST_PAGES_PER_ROLE = 400


@dataclass
class Stack:
    url: str
    logins: dict[str, str]
    log: Path
    live_url: str


@pytest.fixture(scope="module")
def make_run(pool_is_up):
    """deploy/dev/run in the foreground, as `make run` starts it, with its var/ in a fresh
    folder: a new PostgreSQL cluster, migrated, with the demo accounts."""
    # Not under pytest's own folder, which only root may enter: as root, the cluster runs as
    # the postgres account, as it does for a developer's var/.
    var = Path(tempfile.mkdtemp(prefix="nightshift-make-run-"))
    var.chmod(0o755)
    bind = f"127.0.0.1:{free_port()}"
    live_port = free_port()
    redis.Redis.from_url(STACK_REDIS_URL).flushdb()
    environment = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)} | {
        "NIGHTSHIFT_VAR_DIR": str(var),
        "NIGHTSHIFT_RUN_BIND": bind,
        "NIGHTSHIFT_RUN_LIVE_PORT": str(live_port),
        "REDIS_URL": STACK_REDIS_URL,
        "NIGHTSHIFT_INSTANCE": f"make-run-{time.time_ns()}",
        # The pool's view of job folders and its token, as the Makefile exports them.
        "NIGHTSHIFT_JOBS_DIR": str(settings.JOBS_DIR),
        "CONDOR_TOKEN_DIR": str(settings.CONDOR_TOKEN_DIR),
        "NIGHTSHIFT_JOB_DIR_UID": str(settings.JOB_DIR_UID or 2000),
    }
    log = var / "make-run.out"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", AS_FROM_A_TERMINAL, str(REPO / "deploy/dev/run")],
            cwd=REPO,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def started() -> bool:
        assert process.poll() is None, f"deploy/dev/run exited:\n{log.read_text()}"
        return "Nightshift is running" in log.read_text()

    try:
        wait_for(started, timeout=300, interval=1, what="deploy/dev/run to start")
        logins = dict(re.findall(r"login: (\w+)\s+password: (\S+)", log.read_text()))
        assert set(logins) == {"student", "lead", "admin"}, log.read_text()
        yield Stack(
            url=f"http://{bind}", logins=logins, log=log, live_url=f"http://127.0.0.1:{live_port}"
        )
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            process.wait(timeout=90)
        # Or pytest-timeout's own failure, raised in this wait: a stack left running would
        # hold its reservations and share the machine with the rest of the tests.
        except BaseException:
            os.killpg(process.pid, signal.SIGKILL)
            stop_what_it_started(var, environment)
            raise
    assert "stopping Nightshift" in log.read_text()
    assert not (var / "postgres/data/postmaster.pid").exists(), "its database was left running"
    # The pool ran before: it goes on, and no startd keeps the stack's reservations.
    assert set(reserved_for().values()) == {"undefined"}, reserved_for()
    shutil.rmtree(var, ignore_errors=True)


# A shell started by a program that ignores SIGINT (a CI runner started in the background
# does) inherits that, and may not trap it again: Ctrl-C would do nothing. So deploy/dev/run
# starts with SIGINT as a terminal gives it.
AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def stop_what_it_started(var: Path, environment: dict) -> None:
    """The stack's processes (each in a session of its own) and its database, after
    deploy/dev/run failed to stop them: the rest of the tests must not share the machine
    with them."""
    marker = f"NIGHTSHIFT_VAR_DIR={var}".encode()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue
    subprocess.run(
        [str(REPO / "deploy/dev/database"), "stop"], env=environment, timeout=60, check=False
    )


def sign_in(page, stack: Stack, username: str) -> None:
    page.goto(f"{stack.url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(stack.logins[username])
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="My jobs").wait_for()


DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
NEXT_FRAME = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
# How far the page is wider than the window, and the widest elements sticking out (none
# inside a box that scrolls on its own, such as a table on a phone).
WIDER_THAN_THE_WINDOW = """() => {
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth <= width) return "";
  const scrolls = (el) => {
    for (let up = el.parentElement; up; up = up.parentElement) {
      const style = getComputedStyle(up);
      if (["auto", "scroll", "hidden"].includes(style.overflowX) && up !== document.body
          && up !== document.documentElement) return true;
    }
    return false;
  };
  const out = [...document.querySelectorAll("body *")]
    .filter((el) => el.getBoundingClientRect().right > width + 1 && !scrolls(el))
    .slice(0, 4)
    .map((el) => `${el.tagName.toLowerCase()}${el.className ? "." + el.className : ""}`
                 + ` (${Math.round(el.getBoundingClientRect().right)} px)`);
  return `page ${document.documentElement.scrollWidth} px wide; ${out.join(", ")}`;
}"""


class WatchedContext:
    """A browser context that records console errors, script errors and axe-core's
    findings on every page it shows (or, for a crawl, on those it is asked to check)."""

    def __init__(self, browser, *, every_page: bool = True) -> None:
        self.context = browser.new_context(accept_downloads=True, viewport=DESKTOP)
        self.accessibility = AccessibilityWatch(self.context, on_load=every_page)
        self.errors: list[str] = []
        self.too_wide: list[str] = []
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.page.on(
            "console",
            lambda message: (
                self.errors.append(
                    f"{self.page.url}: {message.text} ({message.location.get('url')})"
                )
                if message.type == "error" and from_the_page(message)
                else None
            ),
        )
        self.page.on("pageerror", lambda error: self.errors.append(f"{self.page.url}: {error}"))

    def check_widths(self, url: str) -> None:
        """The page fits a desktop's window and a phone's screen without scrolling sideways
        (a table may scroll inside its own box), and axe-core finds nothing at either size.
        Django's admin site is for administrators at their desks: desktop only."""
        sizes = [DESKTOP] if urlsplit(url).path.startswith("/admin/") else [DESKTOP, PHONE]
        for size in sizes:
            self.page.set_viewport_size(size)
            # The page's own resize handlers (a table that now scrolls takes focus) first.
            self.page.evaluate(NEXT_FRAME)
            overflow = self.page.evaluate(WIDER_THAN_THE_WINDOW)
            if overflow:
                self.too_wide.append(f"{url} at {size['width']} px: {overflow}")
            if size is PHONE:
                self.accessibility.check_now(self.page)
        self.page.set_viewport_size(DESKTOP)

    def close(self) -> None:
        if self.page.url.startswith("http"):
            self.accessibility.check_now(self.page)
        self.context.close()


def test_a_student_submits_a_script_through_the_form_and_it_completes_with_its_outputs(
    make_run, browser, tmp_path
):
    watched = WatchedContext(browser)
    page = watched.page
    sign_in(page, make_run, "student")
    script = tmp_path / "train.py"
    script.write_text(TRAINING)
    page.get_by_role("link", name="New job").click()
    # No name typed: the job is named after its file.
    page.get_by_label("Training script or project").set_input_files(str(script))
    page.get_by_role("button", name="Submit job").click()

    page.get_by_role("heading", name="train.py").wait_for()
    page.locator("[data-role=state]", has_text="Completed").wait_for(timeout=240_000)
    assert "epoch 2" in page.locator("[data-role=stdout]").inner_text()
    link = page.get_by_role("link", name="outputs/model.json")
    link.wait_for(timeout=60_000)
    with page.expect_download() as download:
        link.click()
    assert download.value.path().read_text() == '{"weights": [1, 2, 3]}'
    watched.close()
    assert watched.errors == [], "\n".join(watched.errors)
    assert watched.accessibility.violations == [], "\n".join(watched.accessibility.violations)
    assert watched.too_wide == [], "\n".join(watched.too_wide)


# The admin's history and delete pages are Django's own views, the same for every model:
# one model's stand for all (visiting each model's took CI's busy machine minutes).
ADMIN_OWN_PAGES = re.compile(r"^/admin/\w+/\w+/<id>/(history|delete)/$")
# Every model's admin pages are visited (its list, add and change pages run that model's
# admin code), but their markup is the admin's own templates, the same for each model: the
# accessibility and width checks, which take longer than the page, run on the first page of
# each admin view (index, app, list, add, change...).
ADMIN_MODEL = re.compile(r"^/admin/\w+/\w+/")
# Query parameters that show a page the crawl has or will have seen: where an admin form
# returns to, and the admin's pop-up window for a related object.
SAME_PAGE_PARAMETERS = ("_changelist_filters", "_to_field", "_popup")


def _kind_of_page(url: str) -> tuple[str, bool]:
    """Pages that differ only in an id are one kind of page, and so are a page's filtered,
    sorted or searched variants: an admin list offers dozens of them, and visiting each
    would spend the crawl's page budget before it reached every kind of page."""
    parts = urlsplit(url)
    path = re.sub(r"/[0-9a-f-]{8,}|/\d+", "/<id>", parts.path)
    if own := ADMIN_OWN_PAGES.match(path):
        path = f"/admin/<app>/<model>/<id>/{own[1]}/"
    return path, bool(parts.query)


def _checked_as(kind: tuple[str, bool]) -> tuple[str, bool]:
    """Which pages share the accessibility and width checks of a kind of page."""
    path, query = kind
    return ADMIN_MODEL.sub("/admin/<app>/<model>/", path), query


def _without_same_page_parameters(parts) -> str:
    query = "&".join(
        pair
        for pair in parts.query.split("&")
        if pair and pair.split("=", 1)[0] not in SAME_PAGE_PARAMETERS
    )
    return urlunsplit((*parts[:3], query, ""))


def _worth_a_visit(url: str, statuses: dict, seen_kinds: collections.Counter) -> bool:
    kind = _kind_of_page(url)
    return url not in statuses and seen_kinds[kind] < VISITS_PER_KIND_OF_PAGE[kind[1]]


def crawl(watched: WatchedContext, *starts: str) -> dict[str, int]:
    """Every same-site link reachable from `starts`: its status, by URL. One crawl from all
    of them: the admin's portal pages link to the admin site, and a second crawl from there
    visited each of its pages again (a minute and more of CI's time)."""
    origin = urlsplit(starts[0])[:2]
    page = watched.page
    seen_kinds: collections.Counter = collections.Counter()
    checked: set[tuple[str, bool]] = set()
    queue, statuses = collections.deque(starts), {}
    while queue and len(statuses) < MOST_PAGES_PER_ROLE:
        url = queue.popleft()
        if not _worth_a_visit(url, statuses, seen_kinds):
            continue
        kind = _kind_of_page(url)
        seen_kinds[kind] += 1
        try:
            response = page.goto(url, wait_until="load")
            statuses[url] = response.status if response else 0
        except Exception as exc:  # noqa: BLE001 - an output or a CSV starts a download
            if "Download is starting" not in str(exc):
                raise
            statuses[url] = watched.context.request.get(url).status
            continue
        if "html" not in (response.headers.get("content-type") or ""):
            continue
        if (checks := _checked_as(kind)) not in checked:
            checked.add(checks)
            watched.accessibility.check_now(page)
            watched.check_widths(url)
        # The links a person can see and follow (a hidden section's are not offered).
        hrefs = page.eval_on_selector_all(
            "a[href]:not([download])",
            "links => links.filter((link) => link.checkVisibility()).map((link) => link.href)",
        )
        for href in hrefs:
            parts = urlsplit(href)
            if parts[:2] != origin or NOT_FOLLOWED.search(parts.path):
                continue
            if parts.path.startswith("/static/"):
                continue
            queue.append(_without_same_page_parameters(parts))
    unvisited = [url for url in queue if _worth_a_visit(url, statuses, seen_kinds)]
    assert not unvisited, f"the crawl stopped at {MOST_PAGES_PER_ROLE} pages before {unvisited[:5]}"
    return statuses


def reserved_for() -> dict[str, str]:
    """Each workstation's NightshiftReservedFor, as its startd publishes it."""
    out = pool_command("condor_status", "-af", "Name", "NightshiftReservedFor").stdout
    return {line.split()[0].split("@")[1]: line.split()[1] for line in out.splitlines()}


def test_a_reservation_the_lead_makes_is_published_by_the_reserved_workstations_startd(
    make_run, browser
):
    watched = WatchedContext(browser)
    page = watched.page
    sign_in(page, make_run, "lead")
    page.get_by_role("link", name="Pool").click()  # the portal has seen the workstations
    page.get_by_role("link", name="My account").click()
    page.get_by_role("link", name="Members and their use of the quota").click()
    page.get_by_role("link", name="Reserve workstations…").click()
    page.get_by_label("Purpose").fill("Demo day")
    now = timezone.localtime()
    page.get_by_label("From").fill(now.strftime("%Y-%m-%dT%H:%M"))
    page.get_by_label("Until").fill((now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"))
    page.get_by_label("ws-fermi (1 GPU)").check()
    page.get_by_role("button", name="Reserve").click()
    page.get_by_text("Reserved ws-fermi (1 GPU) for Demo lab from").wait_for()
    watched.close()
    assert watched.errors == [], "\n".join(watched.errors)
    # deploy/dev/run points every workstation's cron job at the portal (every 30 s here).
    wait_for(
        lambda: reserved_for().get("ws-fermi") == accounting_group_for("Demo lab"),
        timeout=120,
        what="ws-fermi's startd to publish the reservation",
    )
    assert reserved_for()["ws-volta"] == "undefined"


def test_the_live_session_proxy_runs_beside_the_portal(make_run):
    """Its own process (uvicorn), which the portal's links point at: it answers, and lets
    no one in without the portal's ticket."""
    import httpx

    answer = httpx.get(f"{make_run.live_url}/live/00000000-0000-4000-8000-000000000000/serve/")
    assert answer.status_code == 404
    assert "open it from the job&#x27;s page in the portal" in answer.text


def test_the_console_has_the_notebook_environment_and_no_expected_not_yet_answers(make_run):
    """What make run prints is for a person: the site's notebook environment is made, and the
    kits' "no forecast yet" answers (every workstation asks every 30 s from the start) stay
    out of the console, while a real 404 still shows."""
    import httpx

    assert "notebooks: Notebook@1" in make_run.log.read_text()
    token = (make_run.log.parent / "kit-portal.token").read_text().strip()
    not_yet = httpx.get(
        f"{make_run.url}/api/v1/pool/placement/ws-volta/",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert not_yet.status_code == 404, not_yet.text
    assert httpx.get(f"{make_run.url}/no-such-page/").status_code == 404
    wait_for(
        lambda: "Not Found: /no-such-page/" in make_run.log.read_text(),
        timeout=30,
        what="the real 404 on the console",
    )
    assert "Not Found: /api/v1/pool/placement" not in make_run.log.read_text()


@pytest.mark.parametrize("role", ["student", "lead", "admin"])
def test_every_page_a_role_can_reach_answers_without_an_error(make_run, browser, role):
    # axe-core on the first page of each kind, at both sizes (crawl's check_widths).
    watched = WatchedContext(browser, every_page=False)
    sign_in(watched.page, make_run, role)
    starts = [f"{make_run.url}/jobs/"] + ([f"{make_run.url}/admin/"] if role == "admin" else [])
    statuses = crawl(watched, *starts)
    watched.close()
    failures = {url: status for url, status in statuses.items() if status >= 500}
    assert failures == {}
    assert len(statuses) > 10, statuses
    assert watched.errors == [], "\n".join(watched.errors)
    assert watched.accessibility.violations == [], "\n".join(watched.accessibility.violations)
    assert watched.too_wide == [], "\n".join(watched.too_wide)
