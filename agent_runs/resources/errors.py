"""The service's own REST resources answer errors in the project's default shape,
``{"detail": "<message>"}`` (AG-UI's too), rendered by DRF's exception handler
(config/exceptions.py, ``api_exception_handler``): every domain error carries its status
(agent_runs/errors.py). Here, the errors only these resources raise."""

from agent_runs.errors import DomainError


class PageQueryInvalid(DomainError):
    """A ``limit`` or ``cursor`` this API cannot read (400, ``{"detail": "<message>"}``)."""

    code = "invalid_page_query"
    status = 400
