from django.conf import settings
from social_core.backends.apple import AppleIdAuth


class EmulatorAppleIdAuth(AppleIdAuth):
    """social-core's Apple backend with the keys URL of the emulator (a class attribute there; the
    authorize and token URLs come from SOCIAL_AUTH_APPLE_ID_AUTHORIZATION_URL / _ACCESS_TOKEN_URL)."""

    name = "apple-id"
    JWK_URL = settings.APPLE_BASE_URL + "/auth/keys"
