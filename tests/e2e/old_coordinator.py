#!/usr/bin/env python3
"""An HTTP proxy that plays an older coordinator for version-skew tests:
it forwards every request to the real coordinator, except those whose
path is listed with --missing, which it answers 404 as a coordinator
without that route would, and those to PATH whose JSON body has FIELD
(--refuse-field PATH:FIELD), which it answers 400 as a coordinator that
does not know the field would. Prints one line per request to stdout
("METHOD PATH STATUS"). Usage: old_coordinator.py --listen PORT
--upstream HOST:PORT [--missing PATH]... [--refuse-field PATH:FIELD]..."""
import argparse
import http.client
import json
import http.server
import sys
import threading

NOTE_LOCK = threading.Lock()

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer",
       "upgrade", "proxy-authorization", "proxy-authenticate"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--missing", action="append", default=[])
    ap.add_argument("--refuse-field", action="append", default=[])
    args = ap.parse_args()
    host, port = args.upstream.rsplit(":", 1)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def note(self, status):
            # one whole line at a time: the handlers run in threads
            with NOTE_LOCK:
                sys.stdout.write(
                    f"{self.command} {self.path.split('?')[0]} {status}\n")
                sys.stdout.flush()

        def relay(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n > 0 else None
            if self.path.split("?")[0] in args.missing:
                msg = b'{"error":"no such route"}'
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(msg)))
                self.end_headers()
                self.wfile.write(msg)
                self.note(404)
                return
            for rf in args.refuse_field:
                path, field = rf.rsplit(":", 1)
                try:
                    doc = json.loads(body or b"{}")
                except ValueError:
                    doc = {}
                if self.path.split("?")[0] == path and \
                        isinstance(doc, dict) and field in doc:
                    msg = b'{"error":"unknown field"}'
                    self.send_response(400)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    self.note(400)
                    return
            up = http.client.HTTPConnection(host, int(port), timeout=120)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in HOP}
            try:
                up.request(self.command, self.path, body=body,
                           headers=headers)
                r = up.getresponse()
                data = r.read()
            except OSError:
                self.send_error(502)
                self.note(502)
                return
            finally:
                up.close()
            self.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() not in HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.note(r.status)

        do_GET = do_POST = do_PUT = do_DELETE = relay

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", args.listen),
                                          Handler)
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
