import json

from django.http import HttpResponse, JsonResponse
from django.urls import include, path


def me(request):
    """What the site knows about the signed-in person, for the test driver."""
    user = request.user
    if not user.is_authenticated:
        return JsonResponse({"signed_in": False})
    from allauth.socialaccount.models import SocialAccount
    from social_django.models import UserSocialAuth

    allauth = [{"uid": a.uid, "extra_data": a.extra_data} for a in SocialAccount.objects.filter(user=user)]
    social = [{"uid": a.uid, "extra_data": a.extra_data} for a in UserSocialAuth.objects.filter(user=user)]
    return JsonResponse({
        "signed_in": True, "id": user.id, "username": user.username, "first_name": user.first_name,
        "last_name": user.last_name, "email": user.email, "allauth": allauth, "social": social,
    })


def users(request):
    from django.contrib.auth import get_user_model

    return JsonResponse({"users": [
        {"id": u.id, "first_name": u.first_name, "last_name": u.last_name, "email": u.email}
        for u in get_user_model().objects.order_by("id")
    ]})


def social_sign_in(request):
    """social-auth-app-django starts a sign-in only on a CSRF-protected POST to /login/apple-id/."""
    from django.middleware.csrf import get_token
    from django.utils.html import escape

    return HttpResponse(
        '<body data-page="signin"><form method="post" action="/login/apple-id/">'
        f'<input type="hidden" name="csrfmiddlewaretoken" value="{escape(get_token(request))}">'
        '<button type="submit">Sign in with Apple</button></form></body>')


def login_error(request):
    return HttpResponse("<body data-page=\"login-error\">social-auth: login failed</body>", status=200)


def sign_out(request):
    from django.contrib.auth import logout

    logout(request)
    return JsonResponse({"signed_in": False})


urlpatterns = [
    path("accounts/", include("allauth.urls")),
    path("", include("social_django.urls", namespace="social")),
    path("me", me),
    path("users", users),
    path("signout", sign_out),
    path("login-error", login_error),
    path("signin/social", social_sign_in),
]
