"""The probes and the metrics (docs/operations.md). The probes ask for no credentials: they
say whether this process and what it depends on answer, and nothing more."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import generate_latest

from agent_runs.metrics import metrics_access, metrics_networks, metrics_text
from ops.collectors import FLEET_REGISTRY
from ops.selectors import readiness


@require_safe
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers (nothing else is asked)."""
    return JsonResponse({"status": "ok"})


@require_safe
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when every check passes, else 503; each check's outcome either way."""
    checks = readiness()
    ready = all(check.ok for check in checks.values())
    body = {
        "status": "ok" if ready else "unavailable",
        "checks": {name: check.as_json() for name, check in checks.items()},
    }
    response = JsonResponse(body, status=200 if ready else 503)
    # Polled every second: a 503 is the answer asked for, not an error for the log. (The
    # flag is the one django.utils.log.log_response sets once it has logged a response.)
    response._has_been_logged = True  # type: ignore[attr-defined]  # Django's private flag
    return response


@require_safe
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    """This process's metrics and the fleet's, in Prometheus' text format, to those
    ``METRICS_TOKEN`` / ``METRICS_ALLOWED_IPS`` let in."""
    status = metrics_access(
        remote_addr=request.META.get("REMOTE_ADDR", ""),
        authorization=request.headers.get("Authorization"),
        token=settings.METRICS_TOKEN,
        allowed=metrics_networks(settings.METRICS_ALLOWED_IPS),
    )
    if status == 401:
        response = HttpResponse("a valid metrics token is required\n", status=401)
        response["WWW-Authenticate"] = "Bearer"
        return response
    if status != 200:
        return HttpResponse("metrics are not served to this address\n", status=403)
    own, content_type = metrics_text(role="web")
    return HttpResponse(own + generate_latest(FLEET_REGISTRY), content_type=content_type)
