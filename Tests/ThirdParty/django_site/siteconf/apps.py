from django.apps import AppConfig
from django.conf import settings


class EmulatorAppleConfig(AppConfig):
    """Points django-allauth's Apple provider at the emulator. allauth keeps Apple's three URLs as
    class attributes of AppleOAuth2Adapter (no setting), so a site sets them once at start-up."""

    name = "siteconf"
    label = "siteconf"

    def ready(self):
        from allauth.socialaccount.providers.apple.views import AppleOAuth2Adapter

        AppleOAuth2Adapter.authorize_url = settings.APPLE_BASE_URL + "/auth/authorize"
        AppleOAuth2Adapter.access_token_url = settings.APPLE_BASE_URL + "/auth/token"
        AppleOAuth2Adapter.public_key_url = settings.APPLE_BASE_URL + "/auth/keys"
