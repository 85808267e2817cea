"""What other apps' pages and API build on: the job form (a sweep's form is a job form with
parameters), the job serializers, a job looked up for its viewer, and the API's answers to
a refused submission."""

from .api.serializers import JobRequestSerializer as JobRequestSerializer
from .api.serializers import JobSerializer as JobSerializer
from .api.serializers import JobSubmitSerializer as JobSubmitSerializer
from .api.views import job_response as job_response
from .api.views import source_job_of as source_job_of
from .api.views import submission_refused as submission_refused
from .api.views import submitted_name as submitted_name
from .forms import JobSubmitForm as JobSubmitForm
from .lookups import visible_job_or_404 as visible_job_or_404
from .views import FORM_FIELD_FOR as FORM_FIELD_FOR
from .views import JobForm as JobForm
from .views import job_form_register as job_form_register
from .views import show_refusal as show_refusal
from .views import submit_job as submit_job
