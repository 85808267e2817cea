"""What other apps' pages and API build on: the catalogue's list, filters and version
fields, and a model version looked up for its viewer."""

from .api.serializers import PublishedVersionSerializer as PublishedVersionSerializer
from .api.serializers import card_field as card_field
from .api.views import CatalogueListView as CatalogueListView
from .api.views import catalogue_parameters as catalogue_parameters
from .api.views import version_or_404 as version_or_404
from .views import catalogue_filters as catalogue_filters
