"""build_submit_description: pure, and no user text can become submit-language syntax."""

import re

import pytest

from condor_bridge import FileMode, InvalidJobRequest, JobRequest, build_submit_description
from condor_bridge.submit import (
    build_cluster_description,
    quote_arguments,
    reused_slot_requirement,
)


def request(**overrides) -> JobRequest:
    fields = {
        "job_id": "6c1e2d9a-0000-4000-8000-000000000001",
        "job_dir": "/srv/jobs/a",
        "script_name": "train.py",
    }
    fields.update(overrides)
    return JobRequest(**fields)


def test_a_plain_request_runs_the_script_with_python_in_its_job_folder():
    description = build_submit_description(request(), mode=FileMode.SHARED)
    assert description["executable"] == "/usr/bin/python3"
    assert description["arguments"] == "\"'train.py'\""
    assert description["initialdir"] == "/srv/jobs/a"
    assert description["should_transfer_files"] == "NO"
    assert description["My.NightshiftJobId"] == '"6c1e2d9a-0000-4000-8000-000000000001"'
    assert "request_gpus" not in description


def test_gpu_memory_and_capability_become_gpu_requirements():
    description = build_submit_description(
        request(gpus=2, gpu_memory_gb=10, gpu_capability=7.5), mode=FileMode.SHARED
    )
    assert description["request_gpus"] == "2"
    assert description["require_gpus"] == "GlobalMemoryMb >= 10240 && Capability >= 7.5"


def test_spool_mode_transfers_the_script_and_brings_the_outputs_folder_back():
    description = build_submit_description(request(), mode=FileMode.SPOOL)
    assert description["should_transfer_files"] == "YES"
    assert description["transfer_input_files"] == "train.py, .nightshift, outputs"
    assert description["transfer_output_files"] == "outputs, .nightshift"


def test_every_job_can_import_the_nightshift_helper_and_knows_its_metrics_file():
    environment = build_submit_description(request(), mode=FileMode.SHARED)["environment"]
    assert "PYTHONPATH='.nightshift'" in environment
    assert "NIGHTSHIFT_METRICS_FILE='.nightshift/metrics.jsonl'" in environment


def test_max_runtime_holds_the_job_with_a_reason_a_student_understands():
    description = build_submit_description(
        request(max_runtime_s=3600, max_starts=None), mode=FileMode.SHARED
    )
    assert description["periodic_hold"] == (
        "(JobStatus == 2 && (time() - JobCurrentStartDate) > 3600)"
    )
    assert description["periodic_hold_reason"] == (
        '"The job ran longer than its maximum runtime of 1 hour."'
    )
    assert description["periodic_hold_subcode"] == "1"


def test_a_long_job_ranks_workstations_by_their_chance_of_staying_free_for_its_runtime():
    description = build_submit_description(request(max_runtime_s=10 * 3600), mode=FileMode.SHARED)
    assert description["rank"] == (
        "ifThenElse(isUndefined(NightshiftStayFree16h), 0, NightshiftStayFree16h)"
    )


def test_a_short_job_ranks_the_workstations_safe_for_it_and_least_wanted_by_long_jobs():
    description = build_submit_description(request(max_runtime_s=1800), mode=FileMode.SHARED)
    assert "NightshiftStayFree2h >= 0.9" in description["rank"]
    assert "1 - NightshiftStayFree16h" in description["rank"]


def test_a_job_that_says_nothing_of_its_runtime_ranks_nothing():
    assert "rank" not in build_submit_description(request(), mode=FileMode.SHARED)


def test_a_deadline_puts_the_job_ahead_of_the_users_later_deadlines_and_of_none():
    shared = FileMode.SHARED
    friday = build_submit_description(request(finish_by_s=1_796_482_800), mode=shared)
    saturday = build_submit_description(request(finish_by_s=1_796_482_800 + 86_400), mode=shared)
    assert int(friday["priority"]) > int(saturday["priority"]) > 0
    assert friday["My.NightshiftFinishBy"] == "1796482800"
    assert "priority" not in build_submit_description(request(), mode=shared)


@pytest.mark.parametrize("seconds", [0, -5, 5_000_000_000])
def test_a_deadline_outside_2020_to_2100_is_refused(seconds):
    with pytest.raises(InvalidJobRequest, match="finish_by_s"):
        request(finish_by_s=seconds)


def test_a_job_evicted_too_many_times_is_held_with_its_own_reason():
    description = build_submit_description(
        request(max_runtime_s=3600, max_starts=5), mode=FileMode.SHARED
    )
    assert description["periodic_hold"] == (
        "(JobStatus == 2 && (time() - JobCurrentStartDate) > 3600)"
        " || (JobStatus == 1 && NumJobStarts >= 5)"
    )
    reason = description["periodic_hold_reason"]
    assert reason.startswith("ifThenElse(JobStatus == 2 && (time() - JobCurrentStartDate) > 3600,")
    assert "stopped after starting 5 times" in reason
    assert description["periodic_hold_subcode"] == (
        "ifThenElse(JobStatus == 2 && (time() - JobCurrentStartDate) > 3600, 1, 2)"
    )


def test_every_job_checkpoints_itself_the_htcondor_way():
    shared = build_submit_description(request(vacate_grace_s=120), mode=FileMode.SHARED)
    assert shared["checkpoint_exit_code"] == "85"
    assert shared["job_max_vacate_time"] == "120"
    assert "NIGHTSHIFT_CHECKPOINT_DIR='.nightshift/checkpoint'" in shared["environment"]
    assert "NIGHTSHIFT_CHECKPOINT_EXIT_CODE='85'" in shared["environment"]
    # With file transfer, the helper folder (checkpoint and metrics) is what HTCondor keeps.
    spool = build_submit_description(request(), mode=FileMode.SPOOL)
    assert spool["transfer_checkpoint_files"] == ".nightshift"
    assert spool["when_to_transfer_output"] == "ON_EXIT"


@pytest.mark.parametrize(
    "hostile",
    [
        "$(HOME)",
        "$ENV(PATH)",
        "$RANDOM_INTEGER(1,9)",
        "$RANDOM_CHOICE(a,b)",
        "$$(Memory)",
        "x $(DOLLAR) y",
        "a$$b",
        "$$$(Arch)",
        "$$$$",
        "$$([1+1])",
        "$",
    ],
)
def test_macros_in_arguments_and_environment_never_expand(hostile):
    description = build_submit_description(
        request(arguments=(hostile,), environment=(("V", hostile),)), mode=FileMode.SHARED
    )
    for key in ("arguments", "environment"):
        value = description[key]
        # Every $ is spelled $(DOLLAR) or, in pairs, $$(DOLLARDOLLAR): no other macro starts.
        bare = value.replace("$$(DOLLARDOLLAR)", "").replace("$(DOLLAR)", "")
        assert bare.count("$") == 0
        assert "$(DOLLAR)$" not in value  # the pair condor_submit would turn into $$(DOLLAR)
        # condor_submit, then the match, expand them back to exactly what the user wrote.
        expanded = value.replace("$(DOLLAR)", "$").replace("$$(DOLLARDOLLAR)", "$$")
        assert hostile.replace("'", "''").replace('"', '""') in expanded


@pytest.mark.parametrize(
    "argument, quoted",
    [
        ("it's", "\"'train.py' 'it''s'\""),
        ('say "hi"', '"\'train.py\' \'say ""hi""\'"'),
        ("a b", "\"'train.py' 'a b'\""),
        ("", "\"'train.py' ''\""),
    ],
)
def test_quotes_and_spaces_stay_inside_one_argument(argument, quoted):
    assert quote_arguments(("train.py", argument)) == quoted


@pytest.mark.parametrize(
    "hostile", ["a\nqueue 1000", 'x\r\n+Owner = "root"', "nul\x00byte", "tab\there"]
)
def test_line_breaks_and_control_characters_are_refused(hostile):
    with pytest.raises(InvalidJobRequest) as error:
        request(arguments=(hostile,))
    assert error.value.field == "arguments"
    with pytest.raises(InvalidJobRequest):
        request(environment=(("V", hostile),))


def test_an_attribute_line_smuggled_into_an_argument_stays_an_argument():
    description = build_submit_description(
        request(arguments=('+Owner = "root"', "requirements = true")), mode=FileMode.SHARED
    )
    assert "Owner" not in {key.removeprefix("My.").removeprefix("+") for key in description}
    assert description["requirements"] == reused_slot_requirement(0)
    assert description["arguments"].startswith('"') and description["arguments"].endswith('"')


@pytest.mark.parametrize("name", ["1BAD", "A-B", "A B", "A=B", "$(X)", ""])
def test_environment_names_must_be_identifiers(name):
    with pytest.raises(InvalidJobRequest, match="environment"):
        request(environment=((name, "v"),))


def test_unicode_and_right_to_left_text_pass_through_literally():
    description = build_submit_description(
        request(arguments=("\u202eevil\u202c", "日本語")), mode=FileMode.SHARED
    )
    assert "\u202eevil\u202c" in description["arguments"]


def test_very_long_arguments_are_refused_with_a_clear_error():
    with pytest.raises(InvalidJobRequest, match="at most 4096 characters"):
        request(arguments=("x" * 5000,))


@pytest.mark.parametrize(
    "field, value",
    [
        ("gpus", -1),
        ("gpus", 9),
        ("gpus", 1.5),
        ("gpus", True),
        ("cpus", 0),
        ("memory_mb", 10),
        ("memory_mb", 10**9),
        ("max_runtime_s", 5),
        ("max_runtime_s", 10**9),
        ("gpu_memory_gb", -4),
        ("gpu_memory_gb", float("nan")),
        ("gpu_capability", 99),
    ],
)
def test_absurd_resource_values_raise_a_clear_error_naming_the_field(field, value):
    overrides = {field: value}
    if field.startswith("gpu_"):
        overrides["gpus"] = 1
    with pytest.raises(InvalidJobRequest) as error:
        request(**overrides)
    assert error.value.field == field


def test_gpu_memory_without_any_gpu_is_refused():
    with pytest.raises(InvalidJobRequest, match="at least 1 GPU"):
        request(gpus=0, gpu_memory_gb=8)


@pytest.mark.parametrize("name", ["../evil.py", "/etc/x.py", "a b.py", "x.sh", "$(X).py", ".py"])
def test_script_names_are_plain_python_file_names(name):
    with pytest.raises(InvalidJobRequest, match="script_name"):
        request(script_name=name)


@pytest.mark.parametrize("job_dir", ["relative/dir", "/srv/$(HOME)", '/srv/"x"'])
def test_job_folders_must_be_plain_absolute_paths(job_dir):
    with pytest.raises(InvalidJobRequest, match="job_dir"):
        request(job_dir=job_dir)


@pytest.mark.parametrize("user", ["a.b", "x y", "root\n", 'a"b'])
def test_accounting_names_cannot_carry_syntax(user):
    with pytest.raises(InvalidJobRequest, match="accounting_user"):
        request(accounting_user=user)


def test_a_container_environment_uses_the_container_universe():
    description = build_submit_description(
        request(container_image="docker://pytorch/pytorch:2.4.0", python="/opt/conda/bin/python"),
        mode=FileMode.SHARED,
    )
    assert description["universe"] == "container"
    assert description["container_image"] == "docker://pytorch/pytorch:2.4.0"
    assert description["executable"] == "/opt/conda/bin/python"


@pytest.mark.parametrize("image", ["a b", 'x"y', "$(HOME)", "img\nqueue 5", ""])
def test_container_images_cannot_carry_syntax(image):
    with pytest.raises(InvalidJobRequest, match="container_image"):
        request(container_image=image)


def test_a_job_lease_bounds_how_long_a_lost_running_job_waits_to_reconnect():
    assert "job_lease_duration" not in build_submit_description(request(), mode=FileMode.SHARED)
    leased = build_submit_description(request(job_lease_s=600), mode=FileMode.SHARED)
    assert leased["job_lease_duration"] == "600"
    with pytest.raises(InvalidJobRequest, match="job_lease_s"):
        request(job_lease_s=5)


# -- one cluster for many runs (sweeps) --------------------------------------------------


ITEM_MACRO = re.compile(r"\$\((nsv\d+)\)")


def _run(job_id: str, lr: str, **fields) -> JobRequest:
    return JobRequest(
        job_id=job_id,
        job_dir=f"/jobs/{job_id}",
        script_name="train.py",
        arguments=("--lr", lr),
        **fields,
    )


def test_a_cluster_varies_only_what_differs_between_runs():
    runs = [_run("run-0", "0.1"), _run("run-1", "0.01"), _run("run-2", "$(HOME)")]
    template, items = build_cluster_description(runs, mode=FileMode.SHARED, sweep_id="sweep-1")
    varying = {key for key, value in template.items() if "$(nsv" in value}
    assert varying == {"My.NightshiftJobId", "initialdir", "log", "arguments", "environment"}
    assert template["request_memory"] == "2048"
    assert template["My.NightshiftSweepId"] == '"sweep-1"'
    for run, item in zip(runs, items, strict=True):
        single = build_submit_description(run, mode=FileMode.SHARED)
        # Each run's values are exactly those of the same job submitted alone: quoted and
        # with its macros escaped; its log is the one in its folder, named in full.
        expanded = {
            key: ITEM_MACRO.sub(lambda name, item=item: item[name.group(1)], value)
            for key, value in template.items()
            if key != "My.NightshiftSweepId"
        }
        assert expanded == single | {"log": f"{run.job_dir}/condor.log"}
    assert "$(DOLLAR)(HOME)" in items[2][template["arguments"][2:-1]]


def test_a_clusters_folders_are_named_under_the_folder_they_share():
    runs = [_run("run-0", "0.1"), _run("run-1", "0.01")]
    template, items = build_cluster_description(
        runs, mode=FileMode.SHARED, sweep_id="s", materialize_at_most=2
    )
    # A late cluster's schedd reads an initialdir not starting with "/" as relative to the
    # submitter's folder, and a log path the items do not change as the first run's.
    macro = template["initialdir"].removeprefix("/jobs/")
    assert macro.startswith("$(nsv")
    assert template["log"] == f"/jobs/{macro}/condor.log"
    assert [item[macro[2:-1]] for item in items] == ["run-0", "run-1"]


def test_a_cluster_made_from_the_runs_own_descriptions_is_the_same_cluster():
    runs = [_run("run-0", "0.1"), _run("run-1", "$(HOME)")]
    own = [build_submit_description(run, mode=FileMode.SPOOL, instance="i") for run in runs]

    given = build_cluster_description(
        runs, mode=FileMode.SPOOL, sweep_id="s", instance="i", descriptions=own
    )

    assert given == build_cluster_description(runs, mode=FileMode.SPOOL, sweep_id="s", instance="i")
    with pytest.raises(ValueError, match="one description for each run"):
        build_cluster_description(runs, mode=FileMode.SPOOL, sweep_id="s", descriptions=own[:1])


def test_a_cluster_whose_folders_are_not_ready_asks_htcondor_to_wait_for_them():
    runs = [_run("run-0", "0.1"), _run("run-1", "0.01")]
    ready, _ = build_cluster_description(runs, mode=FileMode.SHARED, sweep_id="s")
    waiting, items = build_cluster_description(
        runs, mode=FileMode.SHARED, sweep_id="s", folders_ready=False
    )
    assert waiting["My.NightshiftFolderReady"] == "false"
    assert waiting["requirements"] == (
        f"({ready['requirements']}) && (MY.NightshiftFolderReady =?= true)"
    )
    unchanged = {key: value for key, value in waiting.items() if "FolderReady" not in key + value}
    assert unchanged == {key: value for key, value in ready.items() if key != "requirements"}
    # Spooled runs take their files with them when they are submitted.
    with pytest.raises(ValueError, match="folders must be ready"):
        build_cluster_description(runs, mode=FileMode.SPOOL, sweep_id="s", folders_ready=False)


def test_a_cluster_made_late_asks_the_schedd_to_keep_at_most_so_many_jobs_at_once():
    runs = [_run("run-0", "0.1"), _run("run-1", "0.01")]
    plain, _ = build_cluster_description(runs, mode=FileMode.SHARED, sweep_id="s")
    late, items = build_cluster_description(
        runs, mode=FileMode.SHARED, sweep_id="s", folders_ready=False, materialize_at_most=2
    )
    assert late["max_materialize"] == "2"
    assert "max_materialize" not in plain
    assert len(items) == 2
    # Spooled runs send their files as each job is made by the submit itself.
    with pytest.raises(ValueError, match="made late only"):
        build_cluster_description(runs, mode=FileMode.SPOOL, sweep_id="s", materialize_at_most=2)
    with pytest.raises(ValueError, match="at least one"):
        build_cluster_description(runs, mode=FileMode.SHARED, sweep_id="s", materialize_at_most=0)


def test_runs_that_differ_in_anything_but_their_text_cannot_share_a_cluster():
    with pytest.raises(ValueError, match="same submit commands"):
        build_cluster_description(
            [_run("a", "1"), _run("b", "2", gpus=1)], mode=FileMode.SHARED, sweep_id="s"
        )
    with pytest.raises(ValueError, match="different job ids"):
        build_cluster_description(
            [_run("a", "1"), _run("a", "2")], mode=FileMode.SHARED, sweep_id="s"
        )
    with pytest.raises(ValueError, match="sweep id"):
        build_cluster_description([_run("a", "1")], mode=FileMode.SHARED, sweep_id='x" || true')


def test_a_seed_reaches_the_job_as_nightshift_seed():
    request = JobRequest(job_id="j", job_dir="/jobs/j", script_name="train.py", seed=1234)
    environment = build_submit_description(request, mode=FileMode.SHARED)["environment"]
    assert "NIGHTSHIFT_SEED='1234'" in environment
    unseeded = JobRequest(job_id="j", job_dir="/jobs/j", script_name="train.py")
    assert (
        "NIGHTSHIFT_SEED"
        not in build_submit_description(unseeded, mode=FileMode.SHARED)["environment"]
    )
    for bad in (-1, 2**31, True, "1"):
        with pytest.raises(InvalidJobRequest, match="seed"):
            JobRequest(job_id="j", job_dir="/jobs/j", script_name="train.py", seed=bad)


SHA = "ab" * 32


def test_in_spool_mode_htcondor_brings_each_dataset_through_the_plugin_the_job_carries():
    urls = (f"nightshift://portal.campus.example/{SHA}", f"nightshift://10.0.0.5:8000/{'c' * 64}")
    spool = build_submit_description(request(dataset_urls=urls), mode=FileMode.SPOOL)
    inputs = [item.strip() for item in spool["transfer_input_files"].split(",")]
    assert inputs == ["train.py", ".nightshift", "outputs", *urls]
    assert spool["transfer_plugins"] == "nightshift=.nightshift/nightshift_dataset_plugin.py"
    # Without a transfer (a shared file system) the launcher fetches them instead.
    shared = build_submit_description(request(dataset_urls=urls), mode=FileMode.SHARED)
    assert "transfer_plugins" not in shared and "transfer_input_files" not in shared
    assert "transfer_plugins" not in build_submit_description(request(), mode=FileMode.SPOOL)


@pytest.mark.parametrize(
    "url",
    [
        f"https://portal.example/{SHA}",
        f"nightshift://portal.example/{SHA}, /etc/passwd",
        f"nightshift://portal.example/{SHA}\nrequirements = true",
        f"nightshift://$(HOSTNAME)/{SHA}",
        f"nightshift://portal.example/{SHA.upper()}",
        f"nightshift://portal.example/../{SHA}",
        f"nightshift://user@portal.example/{SHA}",
        "nightshift://portal.example/abc",
        f"nightshift://portal example/{SHA}",
    ],
)
def test_a_dataset_url_is_only_ever_a_portal_and_a_sha256(url):
    with pytest.raises(InvalidJobRequest) as caught:
        request(dataset_urls=(url,))
    assert caught.value.field == "dataset_urls"


def test_a_job_brings_at_most_eight_dataset_urls():
    urls = tuple(f"nightshift://portal.example/{index:064x}" for index in range(9))
    with pytest.raises(InvalidJobRequest, match="at most 8"):
        request(dataset_urls=urls)


def test_live_services_run_through_the_launcher_which_is_told_where_they_are_served():
    description = build_submit_description(
        request(live_services=("tensorboard", "serve")), mode=FileMode.SHARED
    )
    assert description["arguments"].startswith("\"'.nightshift/launch.py' 'train.py'")
    assert "NIGHTSHIFT_LIVE='tensorboard,serve'" in description["environment"]
    assert (
        "NIGHTSHIFT_LIVE_PATH='/live/6c1e2d9a-0000-4000-8000-000000000001/'"
        in (description["environment"])
    )
    assert description["My.NightshiftLive"] == '"tensorboard,serve"'
    # Nothing HTCondor needs to open: no port, no chirp.
    assert "want_io_proxy" not in description


def test_a_notebook_session_never_moves_to_another_workstation():
    description = build_submit_description(
        request(live_services=("notebook",), session_limit_s=3600, session_idle_s=900),
        mode=FileMode.SHARED,
    )
    assert description["requirements"] == (
        f"{reused_slot_requirement(0)} && (MY.NumJobStarts =?= 0 || MY.NumJobStarts =?= undefined)"
    )
    assert "NIGHTSHIFT_SESSION_LIMIT_S='3600'" in description["environment"]
    assert "NIGHTSHIFT_SESSION_IDLE_S='900'" in description["environment"]


@pytest.mark.parametrize(
    "services",
    [
        ("ssh",),
        ("serve", "serve"),
        ("serve,tensorboard",),
        ("notebook", "serve"),
        ("tensorboard'; rm -rf /",),
        ("",),
    ],
)
def test_only_known_live_services_are_accepted(services):
    with pytest.raises(InvalidJobRequest) as refused:
        request(live_services=services)
    assert refused.value.field == "live_services"


def test_a_session_is_removed_by_htcondor_a_grace_after_its_limit():
    notebook = request(live_services=("notebook",), session_limit_s=7200)
    description = build_submit_description(notebook, mode=FileMode.SHARED)
    assert description["periodic_remove"] == (
        "JobStatus == 2 && (time() - JobCurrentStartDate) > 7500"
    )
    assert description["My.NightshiftSessionLimit"] == "7200"
    # With a quota's limit too, the earlier of the two removes it.
    both = request(session_limit_s=7200, remove_after_s=3600)
    assert build_submit_description(both, mode=FileMode.SHARED)["periodic_remove"].endswith(
        "> 3600"
    )
    assert "periodic_remove" not in build_submit_description(request(), mode=FileMode.SHARED)
