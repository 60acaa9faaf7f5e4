"""tests/e2e/dns_resolver.py: a provider's own resolver for the job
network tests (test_job_network_dns, test_job_network_pasta), on
127.0.0.1:53 only: A records for the names given as NAME=IPV4 arguments,
no data for their other types, NXDOMAIN for every other name. Prints
"serving" once it listens, then "query NAME QTYPE" per question.
"""
import socket
import struct
import sys

records = dict(arg.lower().split("=", 1) for arg in sys.argv[1:])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
print("serving", flush=True)
while True:
    q, peer = s.recvfrom(512)
    if len(q) < 12:
        continue
    qid = struct.unpack(">H", q[:2])[0]
    i, labels = 12, []
    while i < len(q) and q[i] != 0:
        labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace"))
        i += 1 + q[i]
    qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
    question = q[12:i + 5]
    name = ".".join(labels).lower()
    print("query", name, qtype, flush=True)
    known = name in records
    answers = b""
    if known and qtype == 1:
        answers = (b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) +
                   socket.inet_aton(records[name]))
    head = struct.pack(">HHHHHH", qid, 0x8180 | (0 if known else 3), 1,
                       1 if answers else 0, 0, 0)
    s.sendto(head + question + answers, peer)
