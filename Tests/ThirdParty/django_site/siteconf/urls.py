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
]
