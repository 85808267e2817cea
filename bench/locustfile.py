"""Students watching their jobs: the traffic of bench/web_load.py.

Each simulated student signs in with a session made for it, then, with no pause between
requests, lists their jobs, opens one, and polls its status and log tail as the job page
does every few seconds. NIGHTSHIFT_LOAD_DATA names the JSON file of sessions and jobs.
"""

from __future__ import annotations

import json
import os
import random

from locust import HttpUser, constant, task

with open(os.environ["NIGHTSHIFT_LOAD_DATA"]) as data_file:
    STUDENTS = json.load(data_file)


class Student(HttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        me = random.choice(STUDENTS)
        self.client.cookies.set("sessionid", me["session"])
        self.jobs = me["jobs"]

    @task(3)
    def job_list(self) -> None:
        self.client.get("/jobs/", name="/jobs/")

    @task(2)
    def job_detail(self) -> None:
        job = random.choice(self.jobs)
        self.client.get(f"/jobs/{job['id']}/", name="/jobs/<id>/")

    @task(5)
    def log_tail(self) -> None:
        job = random.choice(self.jobs)
        # As the open page polls: from where the log ended at the last poll.
        offset = max(job["log_size"] - 400, 0)
        self.client.get(
            f"/jobs/{job['id']}/status.json",
            params={"stdout_offset": offset, "stderr_offset": 0, "install_offset": 0},
            name="/jobs/<id>/status.json",
        )
