"""The job helper's GPU samples carry each card's power draw, and what the workstation's kit
says of its cards; the personal pool's simulated nvidia-smi draws power as its load says."""

import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "jobs" / "runtime"))
import launch  # noqa: E402


def simulator():
    path = REPO / "deploy" / "personal-pool" / "simulated-gpu"
    loader = importlib.machinery.SourceFileLoader("simulated_gpu", str(path))
    spec = importlib.util.spec_from_loader("simulated_gpu", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def stand_in_nvidia_smi(tmp_path, output: str) -> str:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}\nEOF\n")
    smi.chmod(0o755)
    return str(smi)


def machine_ad(tmp_path, monkeypatch, text: str) -> None:
    ad = tmp_path / ".machine.ad"
    ad.write_text(text)
    monkeypatch.setenv("_CONDOR_MACHINE_AD", str(ad))


def test_each_device_of_the_job_is_sampled_with_its_power_draw(tmp_path):
    smi = stand_in_nvidia_smi(
        tmp_path,
        "0, GPU-aaaa, 80, 5000, 207.30\n1, GPU-bbbb, 0, 0, [N/A]\n2, GPU-cccc, 99, 1, 300",
    )
    sample = launch.gpu_sample(smi, ["0", "GPU-bbbb"], {"idle_w": 35.0, "simulated": True})
    assert sample["devices"] == [
        {"uuid": "GPU-aaaa", "utilization": 0.8, "memory_mb": 5000.0, "power_w": 207.3},
        # A card that cannot measure its draw: its sample carries none.
        {"uuid": "GPU-bbbb", "utilization": 0.0, "memory_mb": 0.0},
    ]
    assert sample["idle_w"] == 35.0 and sample["simulated"] is True


def test_the_kits_idle_draw_and_the_pools_simulated_cards_come_from_the_machine_ad(
    tmp_path, monkeypatch
):
    machine_ad(
        tmp_path, monkeypatch, "NightshiftGpuIdleWatts = 55\nNightshiftGpusSimulated = true\n"
    )
    assert launch.card_facts() == {"idle_w": 55.0, "simulated": True}
    machine_ad(tmp_path, monkeypatch, "NightshiftGpuIdleWatts = undefined\n")
    assert launch.card_facts() == {}


@pytest.mark.parametrize(
    ("model", "utilization", "watts"),
    [("A100-SXM4-40GB", 0.35, 55 + 0.35 * 345), ("Tesla V100-PCIE-16GB", 0.0, 35.0)],
)
def test_a_simulated_card_draws_its_idle_power_plus_its_load_share_of_the_rest(
    tmp_path, monkeypatch, capsys, model, utilization, watts
):
    gpu = simulator()
    machine_ad(tmp_path, monkeypatch, f'Name = "slot1_1@ws-x@host"\nGPUs_DeviceName = "{model}"\n')
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a0223334")
    monkeypatch.setattr(gpu, "read_load", lambda workstation, device: (utilization, 100))
    gpu.nvidia_smi(["--query-gpu=uuid,utilization.gpu,power.draw", "--format=csv"])
    uuid, busy, power = capsys.readouterr().out.strip().split(", ")
    assert (uuid, int(busy), float(power)) == ("GPU-a0223334", round(utilization * 100), watts)


def test_the_sampler_writes_lines_the_portal_reads_for_energy(tmp_path):
    from usage.energy import power_row

    smi = stand_in_nvidia_smi(tmp_path, "0, GPU-aaaa, 50, 10, 120.5")
    line = json.dumps(launch.gpu_sample(smi, ["0"], {"idle_w": 20.0}))
    row = power_row(json.loads(line))
    assert row.watts == {"GPU-aaaa": 120.5} and row.idle_w == 20.0 and not row.simulated
