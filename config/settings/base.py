"""Django itself: paths, debug, the secret key, hosts and cookies, apps, middleware,
templates, passwords, language and static files."""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_list, env_str, warn_once_per_start

BASE_DIR = Path(__file__).resolve().parent.parent.parent
# Where the quick start keeps its SQLite file and the embedded Redis socket.
LOCAL_DIR = Path(env_str("LOCAL_DATA_DIR") or BASE_DIR / ".local")

DEBUG = env_bool("DJANGO_DEBUG", False)

_secret_key = env_str("DJANGO_SECRET_KEY")
if not _secret_key:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY must be set (or DJANGO_DEBUG=true for local development)"
        )
    warn_once_per_start(
        "WARNING: DJANGO_SECRET_KEY is not set; using an insecure development key.",
        marker="DJANGO_INSECURE_KEY_WARNED",
    )
    _secret_key = "insecure-development-key-never-use-in-production"
SECRET_KEY = _secret_key

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
if env_bool("DJANGO_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG

# Not "daphne": its app installs Twisted's reactor in every process that loads the apps, the
# workers included (some 40 MiB each); daphne is started as a program (docs/deployment.md).
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc as static files: the docs work offline
    "agent_runs",  # before django_rq: its rqworker command is the one that runs
    "django_rq",
    "history",
    "attachments",
    "billing",
    "console",
    "ops",
]

MIDDLEWARE = [
    # First, so that it times and counts every request, whatever answers it.
    "ops.middleware.HttpMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "admin:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = LOCAL_DIR / "static"
