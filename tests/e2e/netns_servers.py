"""tests/e2e/netns_servers.py: the servers that the job network tests'
jobs try to reach: the world's (netns_lib.sh's world namespace) and the
provider host's own. Each argument is one server:

  WORD@ADDR[@PORT]  answers WORD and a newline to every connection
                    (port 8080)
  source@ADDR[@PORT]  sends 10 MiB to every connection (port 8081)
  sink@ADDR[@PORT]  counts what a connection sends, up to 10 MiB or its
                    end, then answers the count (port 8082)

ADDR: an IPv4 or IPv6 address ("::" takes IPv4 too), or abstract:NAME
for an abstract Unix socket. Prints "serving" once every one listens,
then runs until killed.
"""
import socket
import sys
import threading

TEN_MIB = 10 << 20
PORTS = {"source": 8081, "sink": 8082}


def listener(addr, port):
    if addr.startswith("abstract:"):
        s = socket.socket(socket.AF_UNIX)
        s.bind("\0" + addr[len("abstract:"):])
    else:
        s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if addr == "::":
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind((addr, port))
    s.listen(64)
    return s


def serve(s, word):
    while True:
        c, _ = s.accept()
        c.sendall(word + b"\n")
        c.close()


def source(s):
    while True:
        c, _ = s.accept()
        c.sendall(b"x" * TEN_MIB)
        c.close()


# Answers after 10 MiB without waiting for the job's half-close
# (shutdown(SHUT_WR)), which the pasta of Debian 12 (2023-03-09)
# mishandles: what the server sends after it comes again and again, and
# its FIN never does.
def sink(s):
    while True:
        c, _ = s.accept()
        n = 0
        while n < TEN_MIB:
            d = c.recv(1 << 16)
            if not d:
                break
            n += len(d)
        c.sendall(b"%d\n" % n)
        c.close()


servers = []
for arg in sys.argv[1:]:
    kind, addr, *port = arg.split("@")
    s = listener(addr, int(port[0]) if port else PORTS.get(kind, 8080))
    if kind in ("source", "sink"):
        servers.append((source if kind == "source" else sink, (s,)))
    else:
        servers.append((serve, (s, kind.encode())))
for target, args in servers:
    threading.Thread(target=target, args=args, daemon=True).start()
print("serving", flush=True)
threading.Event().wait()
