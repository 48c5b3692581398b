"""The views of the service's own REST resources, one module a resource: ``threads``
(threads, runs and interrupts), ``keys`` (the caller's API keys), ``automations`` (the
caller's automation jobs)."""
