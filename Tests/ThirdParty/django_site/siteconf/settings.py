"""A minimal Django site with two third-party Sign in with Apple integrations pointed at `siwa emulator`:
django-allauth's built-in Apple provider (/accounts/apple/…) and python-social-auth's Apple backend
(/complete/apple-id/). Configured from the environment by Tests/ThirdParty/third_party.py (Tests/run-python-suite third-party)."""
import os

BASE_DIR = os.path.dirname(os.path.abspath(__file__))
SECRET_KEY = os.environ.get("SITE_SECRET_KEY", "third-party-test-only")
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
ROOT_URLCONF = "siteconf.urls"
USE_TZ = True

# Where Apple is: the emulator's origin, e.g. http://127.0.0.1:8081.
APPLE_BASE_URL = os.environ["APPLE_BASE_URL"]
with open(os.environ["APPLE_PRIVATE_KEY_PATH"]) as key_file:
    APPLE_PRIVATE_KEY = key_file.read()

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.apple",
    "social_django",
    "siteconf.apps.EmulatorAppleConfig",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "social_django.middleware.SocialAuthExceptionMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["SITE_DATABASE"]}}
AUTHENTICATION_BACKENDS = [
    "siteconf.backends.EmulatorAppleIdAuth",
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
# Apple's callback is a cross-site form_post: python-social-auth needs the session cookie on it, so
# SameSite=None (and with it Secure; browsers accept Secure cookies on http://localhost). allauth
# does not need this (it parks the POST in its own cookie and redirects), but works with it too.
SESSION_COOKIE_SAMESITE = "None"
SESSION_COOKIE_SECURE = True
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "handlers": {"console": {"class": "logging.StreamHandler"}},
           "root": {"handlers": ["console"], "level": "WARNING"}}

# --- django-allauth: the Apple provider (team id as "key", key id as "secret", the .p8 as certificate_key)
SOCIALACCOUNT_PROVIDERS = {
    "apple": {
        "APPS": [{
            "client_id": os.environ["APPLE_CLIENT_ID"],
            "secret": os.environ["APPLE_KEY_ID"],
            "key": os.environ["APPLE_TEAM_ID"],
            "settings": {"certificate_key": APPLE_PRIVATE_KEY},
        }],
        "SCOPE": ["name", "email"],
    },
}
SOCIALACCOUNT_LOGIN_ON_GET = True      # the test driver follows links like a browser would
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
ACCOUNT_EMAIL_VERIFICATION = "none"
LOGIN_REDIRECT_URL = "/me"
# allauth's Apple URLs have no setting: siteconf.apps points its adapter at APPLE_BASE_URL.

# --- python-social-auth (social-core's AppleIdAuth through social-auth-app-django)
SOCIAL_AUTH_APPLE_ID_CLIENT = os.environ["APPLE_CLIENT_ID"]
SOCIAL_AUTH_APPLE_ID_TEAM = os.environ["APPLE_TEAM_ID"]
SOCIAL_AUTH_APPLE_ID_KEY = os.environ["APPLE_KEY_ID"]
SOCIAL_AUTH_APPLE_ID_SECRET = APPLE_PRIVATE_KEY
SOCIAL_AUTH_APPLE_ID_SCOPE = ["name", "email"]
# social-core reads these two from settings; the keys URL is a class attribute (siteconf.backends).
SOCIAL_AUTH_APPLE_ID_AUTHORIZATION_URL = APPLE_BASE_URL + "/auth/authorize"
SOCIAL_AUTH_APPLE_ID_ACCESS_TOKEN_URL = APPLE_BASE_URL + "/auth/token"
SOCIAL_AUTH_LOGIN_REDIRECT_URL = "/me"
SOCIAL_AUTH_LOGIN_ERROR_URL = "/login-error"
SOCIAL_AUTH_RAISE_EXCEPTIONS = False
SOCIAL_AUTH_REDIRECT_IS_HTTPS = False
SOCIAL_AUTH_JSONFIELD_ENABLED = True
