#!/usr/bin/env python3
"""A real SMTP server for Gatehouse's SMTP tests, built on aiosmtpd.

Every accepted message is written to --dir as two files, NNNN.eml (the DATA as received, dot-stuffing undone) and
NNNN.json (envelope, session facts, and the message as Python's `email` package parses it: an independent decoder to
check Gatehouse's MIME against). Both are written before the server answers 250 to DATA, and renamed into place, so a
client that saw 250 finds them complete.

Once listening, it prints `READY <port>` on stdout (bind --port 0 to get a free port). It exits on SIGTERM/SIGINT, and
when its standard input reaches end of file (the test that started it is gone).

Options:
  --dir DIR                    where to write received messages (required)
  --host HOST, --port PORT     where to listen (127.0.0.1, 0)
  --cert PEM --key PEM         the server certificate, for --starttls or --implicit-tls
  --starttls                   offer STARTTLS
  --implicit-tls               TLS from the first byte (smtps)
  --auth USER:PASS             require AUTH with these credentials (also allowed without TLS when TLS is off)
  --auth-mechanisms LIST       offer only these (comma separated, of PLAIN and LOGIN)
  --fail CODE                  answer the next --fail-count transactions with CODE (e.g. 451 or 550)
  --fail-count N               how many transactions fail (default 1)
  --fail-at mail|rcpt|data     the command that fails (default data: after the message was sent)
  --no-ehlo                    refuse EHLO with 502 (clients must fall back to HELO)
  --silent                     accept connections and never say anything (for timeouts)
  --stay                       keep running when standard input closes (to run it by hand in the background)
"""

import argparse
import asyncio
import email
import email.policy
import json
import os
import signal
import ssl
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

FAIL_TEXT = {
    4: "4.3.0 Temporary failure, try again later (test server)",
    5: "5.1.1 Mailbox unavailable (test server)",
}


class Recorder:
    def __init__(self, options):
        self.options = options
        self.failures_left = options.fail_count if options.fail else 0
        self.count = 0

    def _fail(self, stage):
        if self.failures_left > 0 and self.options.fail_at == stage:
            self.failures_left -= 1
            code = self.options.fail
            return f"{code} {FAIL_TEXT[code // 100]}"
        return None

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        failure = self._fail("mail")
        if failure:
            return failure
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        failure = self._fail("rcpt")
        if failure:
            return failure
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        failure = self._fail("data")
        if failure:
            return failure
        self.count += 1
        raw = envelope.original_content
        ssl_object = server.transport.get_extra_info("ssl_object") if server.transport else None
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        parts = []
        for part in parsed.walk():
            if part.is_multipart():
                continue
            parts.append(
                {
                    "contentType": part.get_content_type(),
                    "charset": part.get_content_charset(),
                    "transferEncoding": part.get("Content-Transfer-Encoding"),
                    "content": part.get_content(),
                }
            )
        record = {
            "mailFrom": envelope.mail_from,
            "mailOptions": envelope.mail_options,
            "rcptTos": envelope.rcpt_tos,
            "heloName": session.host_name,
            "extendedSMTP": session.extended_smtp,
            "tls": ssl_object is not None,
            "tlsVersion": ssl_object.version() if ssl_object else None,
            "authMechanism": getattr(session, "gatehouse_auth_mechanism", None),
            "authLogin": getattr(session, "gatehouse_auth_login", None),
            # Decoded by Python's email package (RFC 2047 words and transfer encodings undone).
            "headers": {name: str(value) for name, value in parsed.items()},
            "contentType": parsed.get_content_type(),
            "parts": parts,
            "rawLines": [line.decode("latin-1") for line in raw.split(b"\r\n")],
            "bareLineFeeds": raw.replace(b"\r\n", b"").count(b"\n"),
            "longestLine": max((len(line) for line in raw.split(b"\r\n")), default=0),
        }
        base = os.path.join(self.options.dir, f"{self.count:04d}")
        for suffix, content in ((".eml", raw), (".json", json.dumps(record, indent=2).encode())):
            with open(base + suffix + ".tmp", "wb") as file:
                file.write(content)
            os.replace(base + suffix + ".tmp", base + suffix)
        return "250 2.0.0 OK: queued"


class Authenticator:
    def __init__(self, user, password):
        self.user = user.encode()
        self.password = password.encode()

    def __call__(self, server, session, envelope, mechanism, auth_data):
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        if auth_data.login == self.user and auth_data.password == self.password:
            session.gatehouse_auth_mechanism = mechanism
            session.gatehouse_auth_login = auth_data.login.decode()
            return AuthResult(success=True)
        return AuthResult(success=False, handled=False)


class GatehouseTestSMTP(SMTP):
    refuse_ehlo = False

    async def smtp_EHLO(self, hostname):
        if self.refuse_ehlo:
            await self.push("502 5.5.1 EHLO not supported here (test server)")
            return
        await super().smtp_EHLO(hostname)


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--starttls", action="store_true")
    parser.add_argument("--implicit-tls", action="store_true")
    parser.add_argument("--auth")
    parser.add_argument("--auth-mechanisms")
    parser.add_argument("--fail", type=int, choices=[421, 450, 451, 452, 550, 552, 553, 554])
    parser.add_argument("--fail-count", type=int, default=1)
    parser.add_argument("--fail-at", choices=["mail", "rcpt", "data"], default="data")
    parser.add_argument("--no-ehlo", action="store_true")
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--stay", action="store_true")
    options = parser.parse_args()
    if (options.starttls or options.implicit_tls) and not (options.cert and options.key):
        parser.error("--starttls and --implicit-tls need --cert and --key")
    return options


async def main():
    options = parse_arguments()
    # A child inherits its parent thread's signal mask: a Swift test's worker thread blocks SIGTERM and SIGINT.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    os.makedirs(options.dir, exist_ok=True)
    loop = asyncio.get_running_loop()

    if options.silent:
        async def silent(reader, writer):
            await reader.read()  # say nothing until the client goes away
            writer.close()

        server = await asyncio.start_server(silent, options.host, options.port)
    else:
        tls_context = None
        if options.cert:
            tls_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls_context.load_cert_chain(options.cert, options.key)
        recorder = Recorder(options)
        settings = {
            "hostname": "smtp.gatehouse.test",
            "ident": "Gatehouse test SMTP",
            "enable_SMTPUTF8": True,
        }
        if options.starttls:
            settings["tls_context"] = tls_context
        if options.auth:
            user, _, password = options.auth.partition(":")
            settings["authenticator"] = Authenticator(user, password)
            settings["auth_required"] = True
            # Over plain text only when the server offers no TLS at all (a starttls "never" setup).
            settings["auth_require_tls"] = bool(options.starttls)
            if options.auth_mechanisms:
                offered = {name.strip().upper() for name in options.auth_mechanisms.split(",")}
                settings["auth_exclude_mechanism"] = [name for name in ("PLAIN", "LOGIN") if name not in offered]

        def factory():
            smtp = GatehouseTestSMTP(recorder, loop=loop, **settings)
            smtp.refuse_ehlo = options.no_ehlo
            return smtp

        implicit = tls_context if options.implicit_tls else None
        server = await loop.create_server(factory, host=options.host, port=options.port, ssl=implicit)

    port = server.sockets[0].getsockname()[1]
    print(f"READY {port}", flush=True)

    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    # End with the parent: its end of our stdin closes when it exits, however it exits.
    if not options.stay:
        loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not os.read(sys.stdin.fileno(), 4096) else None)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
