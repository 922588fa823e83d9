#!/usr/bin/env python3
"""A webhook receiver for Gatehouse's function tests. It checks every call's signature with the official Standard
Webhooks library (`standardwebhooks` on PyPI), an implementation independent of Gatehouse's, and answers as the
call asks:

- confirmation and reset calls: by the local part of `username` — `success…`, `pending…`, `fail…` answer that
  status; `slow…` waits --slow seconds first; `held…` waits until the file --release exists, then answers `success`
  (a test decides when a function answers); `garbage…` answers 200 with a body that is not JSON; `error…` 500.
- login calls: by `payload.answer` — `user` answers {"id": payload.externalId, "name": payload.name}; `both`
  {"id": payload.externalId, "error": "suspended"}; `refuse` {"error": "not on the guest list"}; `slow`, `garbage`, `error` as above.
- migrateUser calls: by the local part of `email` — `migrate…` and `racer…` (which answers only once a second
  `racer…` call has arrived, or after 20 s, so that a test's two racing calls are in flight together however busy
  the machine) answer {"status": "migrated", "emailVerified": true, "customData": {"plan": "gold"}} when
  the password is `old-system password` or absent (a reset), else {"status": "wrong_password"}; `keepid…` the same
  with "userId": "0123456789abcdef01234567"; `unverified…` migrated with "emailVerified": false; `slow`, `garbage`,
  `error` as above; anything else {"status": "unknown"}.

A call whose signature does not verify gets 401. Every call is appended to --log as a JSON line:
{"verified": bool, "headers": {webhook-id, webhook-timestamp, webhook-signature}, "body": <parsed body>}.
Prints `READY <port>` once listening on 127.0.0.1; exits when its standard input closes.
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--secret", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--slow", type=float, default=3.0)
    parser.add_argument("--release", help="the file whose creation lets `held…` calls answer")
    args = parser.parse_args()
    webhook = Webhook(args.secret)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_):
            pass

        def answer(self, status, body):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {name: self.headers.get(name, "") for name in ("webhook-id", "webhook-timestamp", "webhook-signature")}
            try:
                webhook.verify(raw, headers)
                verified = True
            except Exception:
                verified = False
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            with lock, open(args.log, "a") as log:
                log.write(json.dumps({"verified": verified, "headers": headers, "body": body}) + "\n")
            if not verified:
                return self.answer(401, {"error": "bad signature"})
            if body.get("type") == "login":
                wish = str(body.get("payload", {}).get("answer", ""))
            elif body.get("type") == "migrateUser":
                wish = str(body.get("email", "")).split("@")[0]
            else:
                wish = str(body.get("username", "")).split("@")[0]
            if wish.startswith("slow"):
                time.sleep(args.slow)
                return self.answer(200, {"status": "success", "id": "late"})
            if wish.startswith("held"):
                deadline = time.monotonic() + 30
                while not os.path.exists(args.release) and time.monotonic() < deadline:
                    time.sleep(0.01)
                return self.answer(200, {"status": "success"})
            if wish.startswith("garbage"):
                return self.answer(200, b"<html>not json</html>")
            if wish.startswith("error"):
                return self.answer(500, {"error": "boom"})
            if body.get("type") == "migrateUser":
                return self.answer(200, migrate(wish, body))
            if body.get("type") == "login":
                payload = body.get("payload", {})
                if wish == "user":
                    return self.answer(200, {"id": payload.get("externalId"), "name": payload.get("name")})
                if wish == "both":
                    return self.answer(200, {"id": payload.get("externalId"), "error": "suspended"})
                return self.answer(200, {"error": "not on the guest list"})
            for status in ("success", "pending", "fail"):
                if wish.startswith(status):
                    return self.answer(200, {"status": status})
            return self.answer(200, {"status": "fail"})

    # The racer calls that have arrived: each waits for the other (see the module's docstring).
    racers = threading.Condition()
    racers.arrived = 0

    def migrate(wish, body):
        if not (wish.startswith("migrate") or wish.startswith("racer") or wish.startswith("keepid") or wish.startswith("unverified")):
            return {"status": "unknown"}
        if wish.startswith("racer"):
            with racers:
                racers.arrived += 1
                racers.notify_all()
                racers.wait_for(lambda: racers.arrived >= 2, timeout=20)
        if "password" in body and body["password"] != "old-system password":
            return {"status": "wrong_password"}
        answer = {"status": "migrated", "emailVerified": not wish.startswith("unverified"), "customData": {"plan": "gold"}}
        if wish.startswith("keepid"):
            answer["userId"] = "0123456789abcdef01234567"
        return answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"READY {server.server_address[1]}", flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
