"""The short id `nightshift list` prints works in every command that takes a job, and a
start that several jobs share is refused with the jobs it matches."""

import uuid

from jobs import specs, submission
from jobs.models import Job
from tests.conftest import script_upload


def a_job_with_id(user, full_id: str, name: str) -> Job:
    job = submission.job_submit(user=user, spec=specs.JobSpec(name=name), script=script_upload())
    Job.objects.filter(pk=job.pk).update(public_id=uuid.UUID(full_id))
    return Job.objects.get(pk=job.pk)


def test_status_logs_and_usage_take_the_short_id(nightshift, logged_in, fake_bridge):
    a_job_with_id(logged_in, "8e1fd57c-1111-4111-8111-111111111111", "train.py")
    for command in (("status", "8e1fd57c"), ("logs", "8e1fd57c"), ("usage", "8e1fd57c")):
        run = nightshift(*command)
        assert run.status == 0, (command, run.stderr)
    assert "train.py" in nightshift("status", "8e1fd57c").stdout


def test_an_ambiguous_start_names_the_jobs_it_matches(nightshift, logged_in, fake_bridge):
    a_job_with_id(logged_in, "8e1fd57c-1111-4111-8111-111111111111", "train.py")
    a_job_with_id(logged_in, "8e1f0a2b-2222-4222-8222-222222222222", "eval.py")
    run = nightshift("status", "8e1f")
    assert run.status != 0
    assert "8e1f is the start of 2 jobs' ids" in run.stderr
    assert "8e1fd57c (train.py)" in run.stderr and "8e1f0a2b (eval.py)" in run.stderr
    cancel = nightshift("cancel", "8e1f")
    assert cancel.status != 0 and "8e1fd57c (train.py)" in cancel.stderr


def test_a_start_of_no_job_and_a_word_that_is_no_id_say_so(nightshift, logged_in, fake_bridge):
    missing = nightshift("status", "abcd1234")
    assert missing.status != 0 and "you have no job whose id starts with abcd1234" in missing.stderr
    word = nightshift("status", "latest")
    assert word.status != 0 and "'latest' is not a job id" in word.stderr
