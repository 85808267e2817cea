"""A finished job's TensorBoard: the live proxy runs TensorBoard (installed beside the
portal) on the event files the job kept, for its owner alone, and never on a folder that
leads elsewhere."""

import time

import httpx
import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from jobs.models import Job, JobState
from tests.factories import UserFactory
from tests.live_sessions.harness import bound_ticket

pytestmark = pytest.mark.django_db(transaction=True)


def finished_job(owner, folder, *, scalars: int = 3) -> Job:
    logdir = folder / "outputs" / "tensorboard"
    logdir.mkdir(parents=True)
    writer = EventFileWriter(str(logdir))
    for step in range(scalars):
        value = Summary.Value(tag="train/loss", simple_value=1.0 / (step + 1))
        writer.add_event(Event(wall_time=time.time(), step=step, summary=Summary(value=[value])))
    writer.close()
    return Job.objects.create(
        owner=owner,
        name="done",
        output_dir=str(folder),
        state=JobState.COMPLETED,
        request={"live_services": ["tensorboard"]},
    )


def entered(proxy, user, job) -> httpx.Client:
    client = httpx.Client(base_url=proxy.url, timeout=120)
    ticket = bound_ticket(client, user, job, "tensorboard")
    client.get(f"/live/{job.public_id}/tensorboard/_nightshift/enter", params={"ticket": ticket})
    return client


def test_a_finished_jobs_event_files_open_in_tensorboard(proxy, tunnels, tmp_path):
    owner = UserFactory(username="ada")
    job = finished_job(owner, tmp_path / "job")
    client = entered(proxy, owner, job)
    tags = client.get(f"/live/{job.public_id}/tensorboard/data/plugin/scalars/tags")
    assert tags.status_code == 200, tags.text
    assert "train/loss" in tags.json()["."]
    points = client.get(
        f"/live/{job.public_id}/tensorboard/data/plugin/scalars/scalars",
        params={"run": ".", "tag": "train/loss"},
    ).json()
    assert [step for _, step, _ in points] == [0, 1, 2]
    assert tunnels.connected == []  # no tunnel: the job is gone; the files are here
    stranger = entered(proxy, UserFactory(username="eve"), job)
    assert stranger.get(f"/live/{job.public_id}/tensorboard/").status_code == 404


def test_a_folder_that_links_elsewhere_is_not_opened(proxy, tmp_path):
    owner = UserFactory(username="ada")
    victim = finished_job(UserFactory(username="eve"), tmp_path / "victim")
    (tmp_path / "job" / "outputs").mkdir(parents=True)
    (tmp_path / "job" / "outputs" / "tensorboard").symlink_to(
        tmp_path / "victim" / "outputs" / "tensorboard"
    )
    job = Job.objects.create(
        owner=owner,
        name="sneaky",
        output_dir=str(tmp_path / "job"),
        state=JobState.COMPLETED,
        request={"live_services": ["tensorboard"]},
    )
    answer = entered(proxy, owner, job).get(f"/live/{job.public_id}/tensorboard/")
    assert answer.status_code == 503
    assert "without TensorBoard event files of its own" in answer.text
    assert victim.pk != job.pk


def test_without_tensorboard_beside_the_portal_the_page_says_what_to_do(proxy, tmp_path):
    owner = UserFactory(username="ada")
    job = finished_job(owner, tmp_path / "job")
    proxy.app.boards.program = None
    answer = entered(proxy, owner, job).get(f"/live/{job.public_id}/tensorboard/")
    assert answer.status_code == 503
    assert "shows them once tensorboard is installed beside it" in answer.text


def test_a_tensorboard_older_than_2_21_is_never_started_on_a_jobs_files(proxy, tmp_path):
    owner = UserFactory(username="ada")
    job = finished_job(owner, tmp_path / "job")
    old = tmp_path / "tensorboard"
    started = tmp_path / "started"
    old.write_text(
        f'#!/bin/sh\nif [ "$1" = --version_tb ]; then echo 2.16.2; exit; fi\ntouch {started}\n'
    )
    old.chmod(0o755)
    proxy.app.boards.program = str(old)
    answer = entered(proxy, owner, job).get(f"/live/{job.public_id}/tensorboard/")
    assert answer.status_code == 503
    assert "The TensorBoard beside the portal is 2.16" in answer.text
    assert "needs 2.21 or newer" in answer.text
    assert not started.exists()
