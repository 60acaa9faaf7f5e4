"""tests/e2e/netns_world.py: the servers of netns_lib.sh's "world"
namespace, as the job network tests' jobs reach them. Each argument is
one server, on an IPv4 or IPv6 address of the world's:

  WORD@ADDR    port 8080: answers WORD and a newline to every connection
  source@ADDR  port 8081: sends 10 MiB to every connection
  sink@ADDR    port 8082: counts what a connection sends, up to 10 MiB or
               its end, then answers the count

Runs until killed (netns_lib.sh's netns_delete).
"""
import socket
import sys
import threading

TEN_MIB = 10 << 20


def listener(addr, port):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)
    return s


def serve(addr, word):
    s = listener(addr, 8080)
    while True:
        c, _ = s.accept()
        c.sendall(word + b"\n")
        c.close()


def source(addr):
    s = listener(addr, 8081)
    while True:
        c, _ = s.accept()
        c.sendall(b"x" * TEN_MIB)
        c.close()


# Answers after 10 MiB without waiting for the job's half-close
# (shutdown(SHUT_WR)), which the pasta of Debian 12 (2023-03-09)
# mishandles: what the server sends after it comes again and again, and
# its FIN never does.
def sink(addr):
    s = listener(addr, 8082)
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


for arg in sys.argv[1:]:
    kind, addr = arg.split("@", 1)
    if kind == "source":
        target, args = source, (addr,)
    elif kind == "sink":
        target, args = sink, (addr,)
    else:
        target, args = serve, (addr, kind.encode())
    threading.Thread(target=target, args=args, daemon=True).start()
threading.Event().wait()
