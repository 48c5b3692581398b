"""The console's pages: the conversation page and its sign-in.

The page itself talks to the service's public HTTP API only (the threads list, history, runs,
the event stream, attachments, cancel), with the session cookie and the CSRF token, like any
other client; nothing here reads a thread.
"""

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.views import LoginView, LogoutView, redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import ensure_csrf_cookie

from console.services import demo_user_get_or_create

_LOOPBACK = frozenset({"127.0.0.1", "::1"})
# Set in the session when the demo login happened, so the page can say so.
_DEMO_SESSION_KEY = "console_demo_login"


def demo_login_allowed(request: HttpRequest) -> bool:
    """Development only (``DEBUG``), and only for a request from this machine that no proxy
    forwarded: a proxy in front would make every visitor look local."""
    return (
        settings.DEBUG
        and request.META.get("REMOTE_ADDR") in _LOOPBACK
        and "HTTP_X_FORWARDED_FOR" not in request.META
    )


@ensure_csrf_cookie
def console_page(request: HttpRequest) -> HttpResponse:
    """``/console/``: the page, for a signed-in user; an anonymous visitor goes to the
    sign-in page, or in development on a local address is signed in as the demo user."""
    if not request.user.is_authenticated:
        if not demo_login_allowed(request):
            return redirect_to_login(request.get_full_path(), reverse("console:login"))
        login(request, demo_user_get_or_create(), backend=settings.AUTHENTICATION_BACKENDS[0])
        request.session[_DEMO_SESSION_KEY] = True
    demo = bool(request.session.get(_DEMO_SESSION_KEY)) and (
        request.user.get_username() == settings.CONSOLE_DEMO_USERNAME
    )
    return render(request, "console/index.html", {"demo_login": demo})


class ConsoleLoginView(LoginView):
    template_name = "console/login.html"
    redirect_authenticated_user = True
    next_page = "console:index"


class ConsoleLogoutView(LogoutView):
    next_page = "console:login"
