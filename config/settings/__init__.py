"""Settings, read from the environment (every variable is listed in docs/configuration.md,
which a test keeps complete), one module per concern. They are read in this order, each part
importing from an earlier one what it depends on, so a bad value fails at start-up as before."""

# The order below is the order they are read in, not the alphabet's.
# isort: skip_file
from config.settings.base import *  # noqa: F403 (the settings are the parts' names)
from config.settings.stores import *  # noqa: F403 (as above)
from config.settings.workers import *  # noqa: F403 (as above)
from config.settings.operations import *  # noqa: F403 (as above)
from config.settings.agents import *  # noqa: F403 (as above)
from config.settings.billing import *  # noqa: F403 (as above)
from config.settings.attachments import *  # noqa: F403 (as above)
from config.settings.web import *  # noqa: F403 (as above)
