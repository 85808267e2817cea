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
