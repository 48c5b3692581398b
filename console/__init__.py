"""The web console (``/console/``): a page for people, on the public HTTP API."""
