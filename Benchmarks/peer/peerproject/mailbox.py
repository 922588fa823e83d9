"""A dev mailbox like Gatehouse's `/_dev/mailbox`, so the sign-up-with-a-code scenario reads its code the same
way from both servers: an email backend that keeps the newest message to each address in PEER_MAILBOX_DIR (one
file per address, shared by all gunicorn workers), and `GET /_dev/mailbox?to=ADDRESS` answering
`[{"to", "subject", "text"}]` (newest first; here only the newest)."""

import json
import os
import re

from django.conf import settings
from django.core.mail.backends.base import BaseEmailBackend
from django.http import HttpResponse


def _path(address: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9@._+-]", "_", address.lower())
    return os.path.join(settings.PEER_MAILBOX_DIR, safe + ".json")


class MailboxBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        os.makedirs(settings.PEER_MAILBOX_DIR, exist_ok=True)
        for message in email_messages:
            record = {"subject": message.subject, "text": message.body}
            for address in message.to:
                tmp = _path(address) + f".{os.getpid()}.tmp"
                with open(tmp, "w") as f:
                    json.dump(dict(record, to=address), f)
                os.replace(tmp, _path(address))
        return len(email_messages)


def mailbox_view(request):
    address = request.GET.get("to", "")
    try:
        with open(_path(address)) as f:
            body = "[" + f.read() + "]"
    except FileNotFoundError:
        body = "[]"
    return HttpResponse(body, content_type="application/json")
