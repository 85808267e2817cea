import factory
from django.contrib.auth import get_user_model


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.django.Password("a-long-test-password")


class LabFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "labs.Lab"
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"Lab {n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "labs.Membership"
        skip_postgeneration_save = True

    lab = factory.SubFactory(LabFactory)
    user = factory.SubFactory(UserFactory)

    @factory.post_generation
    def leads_group(membership, create, extracted, **kwargs):
        """As the admin does: a lead joins the "Lab leads" group."""
        if create:
            from labs.services import lab_leads_group_sync

            lab_leads_group_sync(membership.user)


def job_that_ran(owner, *, lab=None, gpus=1, start, end=None, state=None, name="earlier"):
    """A job with one run from `start` to `end` (None: still running), recorded as the usage
    sync records it: the job row and its usage record."""
    from accounting.models import UsageRecord
    from jobs.models import Job, JobState

    if state is None:
        state = JobState.COMPLETED if end is not None else JobState.RUNNING
    job = Job.objects.create(
        owner=owner,
        lab=lab,
        name=name,
        gpus=gpus,
        output_dir="/nonexistent",
        request={"gpus": gpus},
        state=state,
        started_at=start,
        finished_at=end,
    )
    wall = (end - start).total_seconds() if end is not None else 0.0
    UsageRecord.objects.create(
        job=job,
        user=owner,
        lab=lab,
        started_at=start,
        ended_at=end,
        gpus=gpus,
        wall_s=wall,
        committed_s=wall,
        ended_by="completed" if end is not None else "",
        first_run=True,
    )
    return job
