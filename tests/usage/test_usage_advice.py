"""The advice a finished job earns follows from what it used against what it asked for."""

from types import SimpleNamespace

from usage.advice import advise, clone_adjustments, gpus_used


def measured(**figures):
    values = dict(
        measured_s=3600,
        cpus_requested=1,
        memory_requested_mb=2048,
        gpus_requested=0,
        cpus_used=None,
        memory_peak_mb=None,
        gpu_utilization=None,
        gpus_active=None,
        gpu_idle_share=None,
    )
    return SimpleNamespace(**values | figures)


def test_four_gpus_asked_for_and_one_used_says_so_with_its_average():
    job = measured(gpus_requested=4, gpu_utilization=0.35 / 4)
    [advice] = advise(job)
    assert advice.text == "You asked for 4 GPUs and used 1, at 35 % on average."
    assert advice.adjust == {"gpus": 1}


def test_per_device_samples_count_the_gpus_that_worked():
    job = measured(gpus_requested=2, gpu_utilization=0.45, gpus_active=1)
    assert gpus_used(job) == 1
    assert advise(job)[0].text == "You asked for 2 GPUs and used 1, at 90 % on average."


def test_a_gpu_that_never_worked_is_questioned():
    [advice] = advise(measured(gpus_requested=1, gpu_utilization=0.0))
    assert "none did any work" in advice.text and advice.adjust == {"gpus": 0}


def test_a_gpu_idle_much_of_the_time_points_at_data_loading():
    job = measured(gpus_requested=1, gpu_utilization=0.6, gpu_idle_share=0.4)
    [advice] = advise(job)
    assert advice.text.startswith("The GPU was idle 40 % of the time: is data loading")
    assert advice.adjust == {}


def test_a_busy_gpu_earns_no_advice():
    assert advise(measured(gpus_requested=1, gpu_utilization=0.9, gpu_idle_share=0.05)) == []


def test_memory_far_above_the_peak_suggests_a_request_that_fits():
    [advice] = advise(measured(memory_requested_mb=32768, memory_peak_mb=3174))
    assert advice.text == ("You asked for 32 GB of memory; the peak was 3.1 GB. 4.5 GB would do.")
    assert advice.adjust == {"memory_gb": 4.5}


def test_memory_close_to_the_peak_earns_no_advice():
    assert advise(measured(memory_requested_mb=4096, memory_peak_mb=2500)) == []
    # Half used, but a smaller request would free less than 1 GB: not worth saying.
    assert advise(measured(memory_requested_mb=2048, memory_peak_mb=700)) == []


def test_idle_cpus_are_said_and_a_smaller_count_suggested():
    [advice] = advise(measured(cpus_requested=8, cpus_used=1.2))
    assert advice.text == "You asked for 8 CPUs and kept 1.2 busy on average."
    assert advice.adjust == {"cpus": 2}


def test_a_job_measured_for_less_than_a_minute_earns_no_advice():
    assert advise(measured(measured_s=30, gpus_requested=4, gpu_utilization=0.01)) == []


def test_one_clone_applies_every_change_the_advice_suggests():
    job = measured(
        gpus_requested=2, gpu_utilization=0.2, memory_requested_mb=8192, memory_peak_mb=1000
    )
    assert clone_adjustments(advise(job)) == {"gpus": 1, "memory_gb": 1.5}


def test_unmeasured_gpus_say_nothing_about_gpus():
    assert gpus_used(measured(gpus_requested=2)) is None
    assert advise(measured(gpus_requested=2)) == []
