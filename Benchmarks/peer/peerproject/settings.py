"""The benchmark peer: django-allauth's headless API for an app client, with its JWT token strategy.

Environment (Benchmarks/peer/serve.sh and Benchmarks/run.py set these):
  PEER_DATABASE_URL       sqlite:////abs/path/peer.sqlite or postgres://user:pass@127.0.0.1:PORT/db (required)
  PEER_JWT_PRIVATE_KEY_FILE  PEM RSA private key for RS256 (setup.sh makes one; allauth signs only HS*/RS*)
  PEER_MAILBOX_DIR        where the dev mailbox keeps the newest email to each address
  PEER_EMAIL_VERIFICATION none (registration, login, refresh, profile: accounts are usable at once, like
                          Gatehouse's `confirmation: auto`) or code (sign-up proves the address with an
                          emailed code, like Gatehouse's native sign-up)
"""

import os
from pathlib import Path

import dj_database_url

# allauth 65.21.1 imports cryptography lazily, and its lazy proxy misses the `serialization` submodule on the
# first RS256 signature ("module 'cryptography.hazmat.primitives' has no attribute 'serialization'"): import
# the submodules it uses here, once, at start.
import cryptography.hazmat.primitives.asymmetric.rsa  # noqa: F401
import cryptography.hazmat.primitives.serialization  # noqa: F401

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("PEER_SECRET_KEY", "benchmark-only-not-a-secret-" + "x" * 32)
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "allauth",
    "allauth.account",
    "allauth.headless",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "allauth.account.middleware.AccountMiddleware",
]

ROOT_URLCONF = "peerproject.urls"
WSGI_APPLICATION = "peerproject.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]

_database_url = os.environ["PEER_DATABASE_URL"]
DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=600)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The same pragmas as Gatehouse's SQLite store (WAL, synchronous=NORMAL, 5 s busy timeout); writers take
    # the lock at BEGIN so that concurrent gunicorn workers wait instead of failing on an upgrade.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 5,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Argon2id first, with Gatehouse's parameters.
PASSWORD_HASHERS = ["peerproject.hashers.GatehouseArgon2PasswordHasher"]
# Gatehouse's default password rule: at least 8 characters.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}}
]
AUTHENTICATION_BACKENDS = ["allauth.account.auth_backends.AuthenticationBackend"]

# Sessions live in the database, as Gatehouse's do.
SESSION_ENGINE = "django.contrib.sessions.backends.db"

# allauth: email + password accounts, served only through the headless API, to app clients.
HEADLESS_ONLY = True
HEADLESS_CLIENTS = ("app",)
HEADLESS_TOKEN_STRATEGY = "allauth.headless.tokens.strategies.jwt.JWTTokenStrategy"
HEADLESS_JWT_ALGORITHM = "RS256"
_key_file = os.environ.get("PEER_JWT_PRIVATE_KEY_FILE")
HEADLESS_JWT_PRIVATE_KEY = Path(_key_file).read_text() if _key_file else ""
HEADLESS_JWT_ACCESS_TOKEN_EXPIRES_IN = 1800  # Gatehouse's accessTokenTTL
HEADLESS_JWT_REFRESH_TOKEN_EXPIRES_IN = 5184000  # Gatehouse's refreshTokenTTL
# Gatehouse's Client API refresh (POST /auth/session) answers a new access token and keeps the refresh token.
HEADLESS_JWT_ROTATE_REFRESH_TOKEN = False
HEADLESS_FRONTEND_URLS = {
    "account_confirm_email": "http://127.0.0.1/confirm/{key}",
    "account_reset_password_from_key": "http://127.0.0.1/reset/{key}",
    "account_signup": "http://127.0.0.1/signup",
}

ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*"]
ACCOUNT_RATE_LIMITS = False  # Gatehouse's benchmark configuration has its rate limits off too
if os.environ.get("PEER_EMAIL_VERIFICATION", "none") == "code":
    ACCOUNT_EMAIL_VERIFICATION = "mandatory"
    ACCOUNT_EMAIL_VERIFICATION_BY_CODE_ENABLED = True
    ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
else:
    ACCOUNT_EMAIL_VERIFICATION = "none"

EMAIL_BACKEND = "peerproject.mailbox.MailboxBackend"
PEER_MAILBOX_DIR = os.environ.get("PEER_MAILBOX_DIR", str(BASE_DIR / ".mailbox"))
DEFAULT_FROM_EMAIL = "Peer <no-reply@localhost>"

USE_TZ = True
LANGUAGE_CODE = "en-us"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
