from django.http import HttpResponse
from django.urls import include, path

from peerproject.mailbox import mailbox_view


def readyz(request):
    return HttpResponse('{"status":"ok"}', content_type="application/json")


urlpatterns = [
    path("_allauth/", include("allauth.headless.urls")),
    path("_dev/mailbox", mailbox_view),
    path("readyz", readyz),
]
