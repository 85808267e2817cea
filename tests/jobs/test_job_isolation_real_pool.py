"""One student's running job against another's, on the personal pool: each job has its own
PID namespace, its own /tmp and its own /dev/shm (deploy/personal-pool/pool turns them on
where the kernel allows it), so a hostile job sees no other job's processes, reads no other
job's environment (where a notebook's token would be) and finds none of its temporary or
shared-memory files.

Jobs whose files HTCondor moves (spool mode) each run as an account of their own (the
kit's starter shim, nightshift-starter), so a hostile job finds another's sandbox and can
neither list nor read it, and it finds another's live services on Unix sockets it cannot
connect to, with nothing of theirs on a port of the loopback that all jobs share. What does
not hold yet is in docs/security.md: jobs that write the portal's shared folder run as its
one account, and a served job that binds a port (nightshift.serve_port()) instead of its
socket is reachable from another job."""

import json
import uuid

import pytest
from django.conf import settings

from condor_bridge import FileMode, JobRequest, JobState
from condor_bridge.schedd import HTCondorBridge
from tests.helpers import POOL_ROOT, copy_job_helpers, make_job_dir, wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

SECRET = f"victim-secret-{uuid.uuid4().hex}"
VICTIM = """
import time
open("/tmp/victim-was-here", "w").write("mine")
open("/dev/shm/victim-was-here", "w").write("mine")
print("started", flush=True)
time.sleep(240)
"""
HOSTILE = """
import json, os
found, visible = [], 0
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    visible += 1
    try:
        with open(f"/proc/{name}/environ", "rb") as environ:
            if SECRET.encode() in environ.read():
                found.append(name)
    except OSError:
        pass
print(json.dumps({"processes": visible, "secret_in": found,
                  "victim_tmp": os.path.exists("/tmp/victim-was-here"),
                  "victim_shm": os.path.exists("/dev/shm/victim-was-here")}))
"""


ISOLATION = POOL_ROOT / "etc/condor/config.d/51-nightshift-isolation.conf"


def isolation_on() -> bool:
    return "USE_PID_NAMESPACES = True" in ISOLATION.read_text()


def private_tmp() -> bool:
    """Each job has its own /tmp, unless the jobs' folders are under /tmp (a checkout
    there), where the pool leaves /tmp shared so as not to hide them."""
    for line in ISOLATION.read_text().splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "MOUNT_UNDER_SCRATCH":
            return "/tmp" in [part.strip(' "') for part in value.split(",")]
    return False


def bridge_in(mode: FileMode):
    """A bridge of its own instance, whose jobs go when the test ends."""
    real = HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=mode,
        instance=f"isolation-{mode.value}-{uuid.uuid4().hex[:12]}",
    )
    yield real
    for job in real.active_jobs():
        real.act("remove", job.cluster_id, job.proc_id, reason="isolation test cleanup")


@pytest.fixture
def bridge():
    yield from bridge_in(FileMode.SHARED)


def submit(bridge, script: str, student: str, **fields) -> tuple[JobRequest, object]:
    job_id, directory = make_job_dir(settings.JOBS_DIR, script, uid=settings.JOB_DIR_UID)
    request = JobRequest(
        job_id=job_id,
        job_dir=str(directory),
        script_name="train.py",
        memory_mb=128,
        accounting_user=student,
        **fields,
    )
    bridge.submit(request)
    return request, directory


def test_a_hostile_job_sees_no_other_jobs_processes_environment_tmp_or_shared_memory(bridge):
    if not isolation_on():
        pytest.skip("this machine refuses PID and mount namespaces in the pool's root")
    victim, victim_dir = submit(bridge, VICTIM, "victim", environment=(("TOKEN", SECRET),))
    wait_for(
        lambda: (
            (victim_dir / "stdout.txt").exists()
            and "started" in (victim_dir / "stdout.txt").read_text()
        ),
        timeout=120,
        what="the victim's job to start",
    )
    hostile, hostile_dir = submit(bridge, f"SECRET = {SECRET!r}\n{HOSTILE}", "mallory")
    done = wait_for(
        lambda: (job := bridge.find(hostile.job_id)) and job.state is JobState.COMPLETED and job,
        timeout=120,
        what="the hostile job to end",
    )
    assert done.exit_code == 0, (hostile_dir / "stderr.txt").read_text()
    seen = json.loads((hostile_dir / "stdout.txt").read_text())
    assert bridge.find(victim.job_id).state is JobState.RUNNING  # they ran side by side
    assert seen["secret_in"] == []
    if private_tmp():
        assert seen["victim_tmp"] is False
    assert seen["victim_shm"] is False  # each job's /dev/shm is a tmpfs of its own
    # Its own few processes (HTCondor's init of the namespace, python), nobody else's.
    assert seen["processes"] <= 5, seen


SPOOLED_VICTIM = """
import os, time
open("secret.txt", "w").write(SECRET)
os.makedirs("outputs", exist_ok=True)
open("outputs/model.txt", "w").write(SECRET)
print("started", os.getuid(), flush=True)
time.sleep(150)
"""
SNOOP = """
import glob, json, os
seen = {"uid": os.getuid(), "sandboxes": 0, "listed": 0, "read": []}
for folder in glob.glob("/var/lib/condor/execute-*/dir_*"):
    if os.path.realpath(folder) == os.path.realpath(os.getcwd()):
        continue
    seen["sandboxes"] += 1
    try:
        names = os.listdir(folder)
        seen["listed"] += 1
    except OSError:
        names = ["secret.txt", "outputs/model.txt"]  # guessed
    for name in names:
        try:
            with open(os.path.join(folder, name), "rb") as stream:
                if SECRET.encode() in stream.read():
                    seen["read"].append(name)
        except OSError:
            pass
print(json.dumps(seen))
"""


@pytest.fixture
def spool_bridge():
    yield from bridge_in(FileMode.SPOOL)


def spooled(bridge, folder, script: str, student: str, **fields):
    (folder / "outputs").mkdir(parents=True)
    copy_job_helpers(folder)
    (folder / "train.py").write_text(f"SECRET = {SECRET!r}\n{script}")
    request = JobRequest(
        job_id=str(uuid.uuid4()),
        job_dir=str(folder),
        script_name="train.py",
        memory_mb=128,
        accounting_user=student,
        **fields,
    )
    return request, bridge.submit(request)


def hostile_beside_victim(
    bridge, folder, victim_script: str, hostile_script: str, *, timeout: float, **victim_fields
) -> dict:
    """A victim's spooled job running, then a hostile one of another student's beside it:
    what the hostile one printed (one JSON line). The victim goes once it is known."""
    victim, victim_submitted = spooled(
        bridge, folder / "victim", victim_script, "ada", **victim_fields
    )
    try:
        wait_for(
            lambda: (job := bridge.find(victim.job_id)) and job.state is JobState.RUNNING,
            timeout=120,
            what="the victim's job to run",
        )
        hostile, submitted = spooled(bridge, folder / "hostile", hostile_script, "mallory")
        done = wait_for(
            lambda: (
                (job := bridge.find(hostile.job_id)) and job.state is JobState.COMPLETED and job
            ),
            timeout=timeout,
            what="the hostile job to end",
        )
        assert done.exit_code == 0
        assert bridge.find(victim.job_id).state is JobState.RUNNING  # side by side
        bridge.retrieve(submitted.cluster_id, submitted.proc_id)
        return json.loads((folder / "hostile" / "stdout.txt").read_text())
    finally:
        bridge.act("remove", victim_submitted.cluster_id, victim_submitted.proc_id, reason="done")


def test_jobs_whose_files_travel_run_as_accounts_of_their_own_and_cannot_read_each_other(
    spool_bridge, tmp_path
):
    seen = hostile_beside_victim(spool_bridge, tmp_path, SPOOLED_VICTIM, SNOOP, timeout=120)
    # It found the victim's sandbox, and could neither list it nor read what it guessed.
    assert seen["sandboxes"] >= 1, seen
    assert (seen["listed"], seen["read"]) == (0, []), seen
    # An account of the pool's nsjob-<workstation>-<slot> kind, not the portal's.
    assert seen["uid"] != settings.JOB_DIR_UID


SERVING_VICTIM = """
import http.server, os, socketserver
import nightshift

class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(SECRET.encode())

class OnSocket(socketserver.UnixStreamServer):
    def get_request(self):
        connection, _ = super().get_request()
        return connection, ("job", 0)

server = OnSocket(nightshift.serve_socket(), Answer)
print("serving", flush=True)
server.serve_forever()
"""
# /proc/net/unix lists the sockets of the whole machine: make test's other personal pool,
# in a root of its own, may be serving too, at paths that do not exist in this one. Only
# sockets in a sandbox of this workstation's root are the victim's to knock on.
KNOCK = """
import json, os, socket, time
seen = {"sockets": [], "refused": [], "answered": [], "ports": 0, "secret_on_a_port": [],
        "in_another_root": []}
deadline = time.monotonic() + 90
while not seen["sockets"] and time.monotonic() < deadline:
    for row in open("/proc/net/unix").read().splitlines()[1:]:
        fields = row.split()
        if len(fields) > 7 and fields[7].endswith("/.nightshift-live/serve.sock"):
            sandbox = fields[7].rsplit("/.nightshift-live/", 1)[0]
            found = seen["sockets"] if os.path.isdir(sandbox) else seen["in_another_root"]
            if fields[7] not in found:
                found.append(fields[7])
    time.sleep(0.5)
for path in seen["sockets"]:
    connection = socket.socket(socket.AF_UNIX)
    try:
        connection.connect(path)
        connection.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        seen["answered"].append(path)
    except OSError as exc:
        seen["refused"].append(type(exc).__name__)
    finally:
        connection.close()
listening = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for row in open(table).read().splitlines()[1:]:
        fields = row.split()
        if fields[3] == "0A":
            listening.add(int(fields[1].rsplit(":", 1)[1], 16))
for port in sorted(listening):
    seen["ports"] += 1
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
            connection.sendall(b"GET / HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n")
            connection.settimeout(1)
            if SECRET.encode() in connection.recv(65536):
                seen["secret_on_a_port"].append(port)
    except OSError:
        pass
print(json.dumps(seen))
"""


def test_a_hostile_job_finds_another_jobs_served_socket_and_cannot_connect_to_it(
    spool_bridge, tmp_path
):
    seen = hostile_beside_victim(
        spool_bridge, tmp_path, SERVING_VICTIM, KNOCK, timeout=180, live_services=("serve",)
    )
    # The victim's socket is there to see, and it lets nobody else in.
    assert any(path.endswith("/.nightshift-live/serve.sock") for path in seen["sockets"]), seen
    assert seen["answered"] == [] and set(seen["refused"]) == {"PermissionError"}, seen
    # Every port of the shared loopback was tried: none gave away what the victim serves.
    assert seen["ports"] >= 1 and seen["secret_on_a_port"] == [], seen
