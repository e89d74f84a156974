"""A real SMTP server for the email tests (aiosmtpd): STARTTLS required
before AUTH, AUTH PLAIN/LOGIN required before mail, each accepted message
written to OUT_DIR as N.eml with N.json (envelope and whether the session
was TLS and authenticated).

Recipients choose refusals: `bounce@…` gets 550 5.1.1 (permanent),
`busy@…` gets 451 4.3.0 the first time and is accepted after (transient).

Usage: smtp_server.py PORT CERT KEY USER PASSWORD OUT_DIR
Prints READY when it listens.
"""
import asyncio
import json
import os
import ssl
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

port, cert, key, user, password, out_dir = sys.argv[1:7]
os.makedirs(out_dir, exist_ok=True)
tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
tls.load_cert_chain(cert, key)
seen_busy = set()


def authenticate(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and auth_data.login.decode() == user and auth_data.password.decode() == password
    return AuthResult(success=ok, handled=False)


class Handler:
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@")[0].lower()
        if local == "bounce":
            return "550 5.1.1 <%s>: Recipient address rejected: User unknown" % address
        if local == "busy" and address not in seen_busy:
            seen_busy.add(address)
            return "451 4.3.0 Mailbox temporarily unavailable, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        n = len([f for f in os.listdir(out_dir) if f.endswith(".eml")]) + 1
        with open(os.path.join(out_dir, "%d.eml" % n), "wb") as f:
            f.write(envelope.original_content or envelope.content)
        meta = {"mail_from": envelope.mail_from, "rcpt_tos": envelope.rcpt_tos,
                "tls": session.ssl is not None, "authenticated": bool(session.authenticated),
                "peer": session.peer[0]}
        with open(os.path.join(out_dir, "%d.json" % n), "w") as f:
            json.dump(meta, f)
        return "250 2.0.0 Ok: queued as PARLEY%04d" % n


controller = Controller(Handler(), hostname="127.0.0.1", port=int(port), tls_context=tls, require_starttls=True,
                        auth_required=True, auth_require_tls=True, authenticator=authenticate,
                        server_hostname="localhost", decode_data=False)
controller.start()
print("READY", flush=True)
try:
    asyncio.get_event_loop().run_forever()
except KeyboardInterrupt:
    pass
finally:
    controller.stop()
