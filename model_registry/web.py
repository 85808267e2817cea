"""What other apps' pages and API build on: the catalogue's filters and a model version
looked up for its viewer."""

from .api.views import catalogue_params as catalogue_params
from .api.views import version_or_404 as version_or_404
from .views import catalogue_filters as catalogue_filters
