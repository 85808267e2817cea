import os

from celery import Celery
from celery.signals import before_task_publish, task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("nightshift")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _connect_log_context() -> None:
    from portal.logcontext import add_ids_to_task, drop_ids_after_task, take_ids_from_task

    before_task_publish.connect(add_ids_to_task, weak=False)
    task_prerun.connect(take_ids_from_task, weak=False)
    task_postrun.connect(drop_ids_after_task, weak=False)


_connect_log_context()
