"""make gpu-check: what Nightshift reads of a real NVIDIA GPU, checked on one.

Nothing in the test suite has a GPU: the personal pool simulates them. This script, on a
machine that has one, checks the parts that only a real GPU exercises, each as a step that
passes, fails, or is skipped with the reason:

1. the GPUs, as nvidia-smi lists them;
2. the owner probe (deploy/execute-node/owner-gpu-probe) against a real CUDA process that is
   not a job: the owner counts as back while it runs, and away once it ends;
3. the job helper's sampler (jobs/runtime/launch.py) against the same process: the
   utilisation and memory the portal would show, and the power draw above the card's idle
   draw that the portal counts as the job's energy (the idle draw it prints is the figure
   for the kit's NIGHTSHIFT_GPU_IDLE_WATTS);
4. with the personal pool started with real GPU discovery (NIGHTSHIFT_POOL_GPUS=real): the
   GPU attributes the portal reads from the collector, against nvidia-smi;
5. a short PyTorch CUDA training job submitted through the portal's bridge to that pool, and
   the figures HTCondor's own GPU monitor reports for it (what the usage pages show).

It prints a short report, writes it to var/gpu-check/report.md, and exits 1 if a step failed.
Without a GPU it says so and exits 0. Run with --no-pool for steps 1 to 3 alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "var" / "gpu-check" / "report.md"
# A CUDA program that is not an HTCondor job: it holds GPU memory and keeps the GPU busy.
BURNER = textwrap.dedent("""
    import sys, time
    import torch
    x = torch.randn(4096, 4096, device="cuda")
    print("ready", flush=True)
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        x = (x @ x).tanh()
        torch.cuda.synchronize()
""")
# The training job: a small network fitted on the GPU for about 40 s, with its loss logged.
TRAINING_JOB = textwrap.dedent("""
    import time
    import torch
    assert torch.cuda.is_available(), "no CUDA device in the job"
    device = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 10)).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(8192, 1024, device=device)
    targets = torch.randint(0, 10, (8192,), device=device)
    end, step = time.time() + 40, 0
    while time.time() < end:
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimiser.step()
        step += 1
    torch.cuda.synchronize()
    print(f"steps {step} loss {loss.item():.4f} on {torch.cuda.get_device_name(0)}")
""")


@dataclass
class Step:
    name: str
    outcome: str = "skipped"  # passed | failed | skipped
    lines: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.lines.append(text)
        print(f"    {text}", flush=True)


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nvidia_gpus() -> list[dict]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [
                smi,
                "--query-gpu=index,uuid,name,memory.total,compute_cap",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 5:
            index, gpu_uuid, name, memory, capability = parts
            gpus.append(
                {
                    "index": index,
                    "uuid": gpu_uuid,
                    "name": name,
                    "memory_mb": float(memory),
                    "capability": float(capability),
                }
            )
    return gpus


def torch_python() -> str | None:
    """A Python that imports torch with CUDA: NIGHTSHIFT_GPU_CHECK_PYTHON, or python3."""
    for candidate in (os.environ.get("NIGHTSHIFT_GPU_CHECK_PYTHON"), "python3", sys.executable):
        if not candidate:
            continue
        try:
            probe = subprocess.run(
                [candidate, "-c", "import torch; assert torch.cuda.is_available()"],
                capture_output=True,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return candidate
    return None


def owner_probe(probe_path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, str(probe_path), "--override", "/nonexistent"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    values = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" = ")
        values[key.strip()] = value.strip().strip('"')
    return values


def steps_without_pool(report: list[Step], gpus: list[dict]) -> None:
    listing = Step("nvidia-smi lists the GPUs", "passed")
    report.append(listing)
    for gpu in gpus:
        listing.note(
            f"GPU {gpu['index']}: {gpu['name']}, {gpu['memory_mb']:.0f} MB, "
            f"capability {gpu['capability']}, {gpu['uuid']}"
        )
    probe, sampler, power = (
        Step("owner probe sees a CUDA process that is not a job"),
        Step("the job helper samples that process's GPU"),
        Step("the job helper reads the GPU's power draw above its idle draw"),
    )
    report += [probe, sampler, power]
    python = torch_python()
    if python is None:
        for step in (probe, sampler, power):
            step.note("no Python here imports torch with CUDA (set NIGHTSHIFT_GPU_CHECK_PYTHON)")
        return
    prober = REPO / "deploy" / "execute-node" / "owner-gpu-probe"
    before = owner_probe(prober)
    # The launcher imports the other runtime modules by their bare names, as it does from a
    # job's helper folder.
    sys.path.insert(0, str(REPO / "jobs" / "runtime"))
    launch = load("nightshift_launch_check", REPO / "jobs" / "runtime" / "launch.py")
    smi = launch.find_nvidia_smi()
    idle = [launch.gpu_sample(smi, [gpus[0]["uuid"]]) for _ in range(3) if not time.sleep(1)]
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "burn.py"
        script.write_text(BURNER)
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpus[0]["index"])
        burner = subprocess.Popen(
            [python, str(script), "30"], stdout=subprocess.PIPE, text=True, env=env
        )
        try:
            burner.stdout.readline()  # "ready": the process holds the GPU
            time.sleep(3)
            during = owner_probe(prober)
            samples = [
                launch.gpu_sample(smi, [gpus[0]["uuid"]]) for _ in range(5) if not time.sleep(1)
            ]
        finally:
            burner.terminate()
            burner.wait(timeout=30)
    time.sleep(2)
    after = owner_probe(prober)
    probe.note(f"before: {before}; during: {during}; after: {after}")
    probe.outcome = (
        "passed"
        if during.get("OwnerGpuActive") == "True"
        and during.get("OwnerGpuSource") == "nvidia-smi"
        and after.get("OwnerGpuActive") == "False"
        else "failed"
    )
    devices = [device for sample in samples if sample for device in sample["devices"]]
    if not devices:
        sampler.outcome = "failed"
        sampler.note("nvidia-smi gave no sample of the busy GPU")
        return
    busiest = max(device["utilization"] for device in devices)
    memory = max(device["memory_mb"] for device in devices)
    sampler.note(
        f"{len(devices)} samples: utilisation up to {busiest:.0%}, memory up to {memory:.0f} MB"
    )
    sampler.outcome = "passed" if busiest > 0.05 and memory > 60 else "failed"
    check_power(power, idle, samples)


def check_power(step: Step, idle: list, busy: list) -> None:
    """The card's draw at rest and under the burner, and the energy the portal would count
    for those 5 s above the idle draw measured here (usage.energy, as the portal runs it)."""
    sys.path.insert(0, str(REPO))
    from usage.energy import energy_of_run, power_row

    def draws(samples: list) -> list[float]:
        devices = [device for sample in samples if sample for device in sample["devices"]]
        return [device["power_w"] for device in devices if "power_w" in device]

    at_rest, working = draws(idle), draws(busy)
    if not at_rest or not working:
        step.outcome = "skipped"
        step.note("nvidia-smi reports no power.draw for this GPU ([N/A]): energy is not measured")
        return
    idle_w = min(at_rest)
    rows = [power_row(sample | {"idle_w": idle_w}) for sample in busy if sample]
    energy = energy_of_run([row for row in rows if row], lambda moment: None)
    step.note(
        f"idle {idle_w:.1f} W (set NIGHTSHIFT_GPU_IDLE_WATTS = {idle_w:.0f} in this "
        f"workstation's kit); busy up to {max(working):.1f} W; "
        f"{energy.kwh * 3.6e6 if energy else 0:.0f} J above idle in {len(busy)} s"
    )
    step.outcome = "passed" if energy and max(working) > idle_w + 5 else "failed"


def steps_with_pool(report: list[Step], gpus: list[dict]) -> None:
    attributes = Step("the collector's GPU attributes match nvidia-smi")
    training = Step("a PyTorch CUDA job's GPU figures from HTCondor's monitor")
    report += [attributes, training]
    started = subprocess.run(
        ["deploy/personal-pool/pool", "start"],
        cwd=REPO,
        text=True,
        env=dict(os.environ, NIGHTSHIFT_POOL_GPUS="real"),
        capture_output=True,
        timeout=900,
        check=False,
    )
    if started.returncode != 0:
        for step in (attributes, training):
            step.note(
                "the personal pool did not start with real GPUs: "
                + (started.stderr.strip().splitlines() or ["?"])[-1]
            )
        return
    try:
        from condor_bridge import JobRequest
        from condor_bridge.schedd import HTCondorBridge
        from condor_bridge.submit import STDOUT
    except ImportError as exc:
        for step in (attributes, training):
            step.note(f"the portal's bindings are missing ({exc}): run make venv")
        return
    token_dir = os.environ.get("CONDOR_TOKEN_DIR", str(REPO / "var" / "condor-tokens"))
    bridge = HTCondorBridge(token_dir=token_dir, instance=f"gpu-check-{uuid.uuid4().hex[:8]}")
    real = None
    for _ in range(60):
        real = next((m for m in bridge.pool_machines() if m.name == "ws-real" and m.gpu), None)
        if real:
            break
        time.sleep(2)
    if real is None:
        attributes.outcome = training.outcome = "failed"
        attributes.note(
            "ws-real never advertised a GPU: see var/lib/nightshift/pool-root"
            "/var/log/condor/StartLog.ws-real"
        )
        return
    first = gpus[0]
    attributes.note(
        f"ws-real: {real.total_gpus} x {real.gpu.name}, {real.gpu.memory_mb} MB, "
        f"capability {real.gpu.capability}"
    )
    memory_close = abs(real.gpu.memory_mb - first["memory_mb"]) <= 0.05 * first["memory_mb"]
    attributes.outcome = (
        "passed"
        if real.total_gpus == len(gpus)
        and first["name"] in real.gpu.name
        and memory_close
        and abs(real.gpu.capability - first["capability"]) < 0.01
        else "failed"
    )
    python = os.environ.get("NIGHTSHIFT_GPU_CHECK_JOB_PYTHON", "/usr/bin/python3")
    has_torch = (
        subprocess.run(
            [
                "chroot",
                os.environ.get("NIGHTSHIFT_POOL_ROOT", "/var/lib/nightshift/pool-root"),
                python,
                "-c",
                "import torch",
            ],
            capture_output=True,
            check=False,
            timeout=120,
        ).returncode
        == 0
    )
    if not has_torch:
        training.note(
            f"the pool's root has no PyTorch for {python}: install it there, or "
            "name one with NIGHTSHIFT_GPU_CHECK_JOB_PYTHON"
        )
        return
    jobs_dir = Path(os.environ.get("NIGHTSHIFT_JOBS_DIR", REPO / "var" / "jobs"))
    job_id = str(uuid.uuid4())
    folder = jobs_dir / job_id
    folder.mkdir(parents=True)
    (folder / "outputs").mkdir()
    (folder / "train.py").write_text(TRAINING_JOB)
    uid = int(os.environ.get("NIGHTSHIFT_JOB_DIR_UID", "2000"))
    for path in (folder, folder / "outputs", folder / "train.py"):
        os.chown(path, uid, -1)
    request = JobRequest(
        job_id=job_id,
        job_dir=str(folder),
        script_name="train.py",
        gpus=1,
        memory_mb=8192,
        python=python,
        max_starts=1,
    )
    bridge.submit(request)
    final = None
    deadline = time.time() + 300
    while time.time() < deadline and final is None:
        time.sleep(5)
        final = next(iter(bridge.finished_usage([job_id])), None)
    if final is None:
        training.outcome = "failed"
        training.note("the job did not finish within 5 minutes")
        return
    stdout = folder / STDOUT
    out = stdout.read_text(errors="replace") if stdout.exists() else ""
    training.note(f"job on {final.workstation}: {out.strip()[-200:]}")
    training.note(
        f"HTCondor: GPUs' worth of work {final.gpus_used}, GPU memory peak "
        f"{final.gpu_memory_peak_mb} MB, memory peak {final.memory_peak_mb} MB"
    )
    measured = bool(final.gpus_used and final.gpus_used > 0.05 and final.gpu_memory_peak_mb)
    training.outcome = "passed" if final.state.value == "completed" and measured else "failed"


def write_report(report: list[Step], gpus: list[dict]) -> None:
    lines = [
        "# make gpu-check",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M %Z')} on {os.uname().nodename}: {len(gpus)} GPU(s).",
        "",
    ]
    for step in report:
        lines.append(f"- **{step.outcome}**: {step.name}")
        lines += [f"  - {line}" for line in step.lines]
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-pool", action="store_true", help="steps 1 to 3 only")
    args = parser.parse_args()
    gpus = nvidia_gpus()
    if not gpus:
        print(
            "gpu-check: skipped: no NVIDIA GPU here (nvidia-smi is missing or lists none). "
            "Run it on a workstation with one."
        )
        return 0
    sys.path.insert(0, str(REPO))
    report: list[Step] = []
    steps_without_pool(report, gpus)
    if args.no_pool:
        report.append(Step("the pool's steps", lines=["--no-pool"]))
    elif os.geteuid() != 0:
        report.append(Step("the pool's steps", lines=["the personal pool needs root"]))
    else:
        steps_with_pool(report, gpus)
    print("\ngpu-check report")
    for step in report:
        print(f"  {step.outcome:8} {step.name}")
    write_report(report, gpus)
    print(f"written to {REPORT.relative_to(REPO)}")
    return 1 if any(step.outcome == "failed" for step in report) else 0


if __name__ == "__main__":
    sys.exit(main())
