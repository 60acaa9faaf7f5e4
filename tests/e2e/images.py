#!/usr/bin/env python3
# tests/e2e/images.py: test images and a test registry for the image tests
# (image_lib.sh drives it). Standard library only, plus the openssl command
# for the registry's token signatures.
#
#   layer OUT [--marker TEXT] [--whiteout PATH] [--evil KIND] [--plain]
#         [--random-mib N] [--setuid]
#       a layer (tar+gzip unless --plain): a busybox root filesystem from
#       Debian's busybox-static (/bin/busybox and links), a marker file
#       /gpupool-marker, optionally a whiteout, or an evil entry (KIND:
#       dotdot, absolute, symlink-escape, device, bomb); --setuid adds
#       /bin/busybox-suid, a set-user-ID-root copy of busybox
#   oci OUT --name NAME LAYER... [--arch A] [--cmd CMD] [--evil KIND]
#       an OCI image layout archive; KIND: dotdot-entry, absolute-entry,
#       symlink-entry, device-entry, lying-size, lying-digest, many-layers
#   docker OUT --name NAME LAYER...      `docker save` output (plain layers)
#   digest FILE                          sha256:<hex> of a file
#   token-server PORT CERT KEY SIGNER_CERT SIGNER_KEY USER PASSWORD
#       the registry's token service (HTTPS, Basic auth, RS256 JWTs)
#   push REGISTRY CA REPO TAG OCI_ARCHIVE TOKEN_URL USER PASSWORD [--index]
#       pushes an image with the distribution API (--index: as a
#       linux/arm64 + linux/amd64 index); prints the pushed digest
#   fake-registry PORT MODE ARCHIVE      a lying registry over plain HTTP;
#       MODE: endless-blob, short-blob, wrong-blob, manifest-digest, big-manifest
import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import socketserver
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.parse
import urllib.request

BUSYBOX = "/bin/busybox"
APPLETS = ["sh", "echo", "cat", "ls", "true", "false", "sleep", "id", "env",
           "test", "stat", "mkdir", "touch", "pwd", "head",
           # test_interactive_container: exec, a terminal, a listener
           "hostname", "tty", "nc", "grep"]


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def add(tf, name, data=b"", mode=0o644, kind=tarfile.REGTYPE, link=""):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = mode
    ti.mtime = 1700000000
    ti.linkname = link
    if kind == tarfile.REGTYPE:
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    else:
        tf.addfile(ti)


def opt(args, name, default=None):
    if name in args:
        i = args.index(name)
        v = args[i + 1]
        del args[i:i + 2]
        return v
    return default


def flag(args, name):
    if name in args:
        args.remove(name)
        return True
    return False


class Zeros(io.RawIOBase):
    def __init__(self, n):
        self.left = n

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def bomb_layer(out):
    # 256 MiB of zeros, streamed: a few hundred KiB compressed.
    with tarfile.open(out, "w:gz", compresslevel=6) as tf:
        ti = tarfile.TarInfo("zeros")
        ti.size = 256 << 20
        ti.mtime = 1700000000
        tf.addfile(ti, io.BufferedReader(Zeros(ti.size), 1 << 20))
    with open(out + ".diffid", "w") as f:
        f.write("sha256:" + "0" * 64)


def cmd_layer(args):
    out = args.pop(0)
    marker = opt(args, "--marker", "gpupool test image")
    whiteout = opt(args, "--whiteout")
    evil = opt(args, "--evil")
    plain = flag(args, "--plain")
    random_mib = int(opt(args, "--random-mib", "0"))
    setuid = flag(args, "--setuid")
    if evil == "bomb":
        return bomb_layer(out)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        add(tf, "bin/", kind=tarfile.DIRTYPE, mode=0o755)
        with open(BUSYBOX, "rb") as f:
            add(tf, "bin/busybox", f.read(), 0o755)
            if setuid:
                f.seek(0)
                add(tf, "bin/busybox-suid", f.read(), 0o4755)
        for a in APPLETS:
            add(tf, "bin/" + a, kind=tarfile.SYMTYPE, link="busybox")
        add(tf, "etc/", kind=tarfile.DIRTYPE, mode=0o755)
        add(tf, "etc/passwd", b"root:x:0:0::/:/bin/sh\nuser:x:1000:1000::/:/bin/sh\n")
        add(tf, "gpupool-marker", (marker + "\n").encode())
        if random_mib > 0:
            add(tf, "random.bin", os.urandom(random_mib << 20))
        if whiteout:
            d, b = os.path.split(whiteout)
            add(tf, os.path.join(d, ".wh." + b))
        if evil == "dotdot":
            add(tf, "../../escaped", b"x")
        elif evil == "absolute":
            add(tf, "/etc/escaped", b"x")
        elif evil == "symlink-escape":
            add(tf, "esc", kind=tarfile.SYMTYPE, link="../../../../etc")
        elif evil == "device":
            add(tf, "dev-null", kind=tarfile.CHRTYPE, mode=0o666)
    raw = buf.getvalue()
    data = raw if plain else gzip.compress(raw, 6, mtime=0)
    with open(out, "wb") as f:
        f.write(data)
    # The uncompressed digest (the config's diff_id) goes next to it.
    with open(out + ".diffid", "w") as f:
        f.write(sha(raw))


def config_for(layers, arch, cmd):
    diff = [open(l + ".diffid").read().strip() for l in layers]
    return json.dumps({
        "architecture": arch, "os": "linux",
        "config": {"Env": ["PATH=/bin", "GREETING=hello-from-image"],
                   "Entrypoint": ["/bin/sh", "-c"], "Cmd": [cmd],
                   "WorkingDir": "/", "User": "1000:1000"},
        "rootfs": {"type": "layers", "diff_ids": diff}}, sort_keys=True).encode()


def layer_mt(data):
    return ("application/vnd.oci.image.layer.v1.tar+gzip"
            if data[:2] == b"\x1f\x8b" else "application/vnd.oci.image.layer.v1.tar")


def manifest_for(cfg, layer_datas):
    return json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": sha(cfg), "size": len(cfg)},
        "layers": [{"mediaType": layer_mt(d), "digest": sha(d), "size": len(d)}
                   for d in layer_datas]}, sort_keys=True).encode()


def cmd_oci(args):
    out = args.pop(0)
    name = opt(args, "--name")
    arch = opt(args, "--arch", "amd64")
    cmd = opt(args, "--cmd", "echo $GREETING; cat /gpupool-marker")
    evil = opt(args, "--evil")
    layers = args
    datas = [open(l, "rb").read() for l in layers]
    if evil == "many-layers":
        datas = datas * 130
        layers = layers * 130
    cfg = config_for(layers, arch, cmd)
    man = manifest_for(cfg, datas)
    if evil == "lying-size":
        m = json.loads(man)
        m["layers"][0]["size"] += 1
        man = json.dumps(m, sort_keys=True).encode()
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    index = json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": sha(man), "size": len(man),
        "annotations": {"io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": tag}}]}).encode()
    blobs = {sha(cfg): cfg, sha(man): man}
    for d in datas:
        blobs[sha(d)] = d
    with tarfile.open(out, "w") as tf:
        add(tf, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add(tf, "index.json", index)
        add(tf, "blobs/", kind=tarfile.DIRTYPE, mode=0o755)
        add(tf, "blobs/sha256/", kind=tarfile.DIRTYPE, mode=0o755)
        for d, b in blobs.items():
            if evil == "lying-digest" and b is datas[0]:
                b = bytearray(b)
                b[len(b) // 2] ^= 0xff
                b = bytes(b)
            add(tf, "blobs/sha256/" + d[7:], b)
        if evil == "dotdot-entry":
            add(tf, "blobs/../../evil", b"x")
        elif evil == "absolute-entry":
            add(tf, "/tmp/evil", b"x")
        elif evil == "symlink-entry":
            add(tf, "blobs/sha256/link", kind=tarfile.SYMTYPE,
                link="../../../../etc/passwd")
        elif evil == "device-entry":
            add(tf, "blobs/dev", kind=tarfile.CHRTYPE)
    print(sha(man))


def cmd_docker(args):
    out = args.pop(0)
    name = opt(args, "--name")
    layers = args
    datas = []
    for l in layers:
        d = open(l, "rb").read()
        if d[:2] == b"\x1f\x8b":
            d = gzip.decompress(d)
        datas.append(d)
    cfg = config_for(layers, "amd64", "echo $GREETING; cat /gpupool-marker")
    cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
    entries = []
    with tarfile.open(out, "w") as tf:
        for i, d in enumerate(datas):
            lid = hashlib.sha256(d + bytes([i])).hexdigest()
            add(tf, lid + "/", kind=tarfile.DIRTYPE, mode=0o755)
            add(tf, lid + "/VERSION", b"1.0")
            add(tf, lid + "/layer.tar", d)
            entries.append(lid + "/layer.tar")
        add(tf, cfg_name, cfg)
        add(tf, "manifest.json", json.dumps([{
            "Config": cfg_name, "RepoTags": [name], "Layers": entries}]).encode())
        add(tf, "repositories", b"{}")


def cmd_digest(args):
    print(sha(open(args[0], "rb").read()))


# ---- the registry's token service ----

def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def make_token(signer_cert, signer_key, service, scopes, user):
    der = subprocess.run(["openssl", "x509", "-in", signer_cert, "-outform", "DER"],
                         check=True, capture_output=True).stdout
    header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(der).decode()]}
    now = int(time.time())
    access = []
    for s in scopes:
        parts = s.split(":")
        if len(parts) >= 3 and parts[0] == "repository":
            access.append({"type": "repository", "name": ":".join(parts[1:-1]),
                           "actions": parts[-1].split(",")})
    claims = {"iss": "gpupool-test-issuer", "sub": user, "aud": service,
              "exp": now + 600, "nbf": now - 10, "iat": now,
              "jti": b64url(os.urandom(12)), "access": access}
    signing = (b64url(json.dumps(header).encode()) + "." +
               b64url(json.dumps(claims).encode())).encode()
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", signer_key],
                         input=signing, check=True, capture_output=True).stdout
    return signing.decode() + "." + b64url(sig)


def cmd_token_server(args):
    port, cert, key, scert, skey, user, password = args[:7]
    want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):
            sys.stderr.write("token-server: " + fmt % a + "\n")

        def do_GET(self):
            u = urllib.parse.urlparse(self.path)
            q = urllib.parse.parse_qs(u.query)
            if self.headers.get("Authorization") != want:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="token"')
                self.end_headers()
                return
            tok = make_token(scert, skey, q.get("service", [""])[0],
                             q.get("scope", []), user)
            body = json.dumps({"token": tok, "expires_in": 600}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
    srv = S(("127.0.0.1", int(port)), H)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("token server listening", flush=True)
    srv.serve_forever()


# ---- pushing with the distribution API ----

class Pusher:
    def __init__(self, registry, ca, repo, token_url, user, password):
        self.base = registry.rstrip("/")
        self.repo = repo
        self.ctx = ssl.create_default_context(cafile=ca)
        auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        q = urllib.parse.urlencode({"service": "gpupool-test-registry",
                                    "scope": f"repository:{repo}:pull,push"})
        req = urllib.request.Request(token_url + "?" + q, headers={"Authorization": auth})
        self.token = json.load(urllib.request.urlopen(req, context=self.ctx))["token"]

    def call(self, method, url, data=None, headers=None):
        h = {"Authorization": "Bearer " + self.token}
        h.update(headers or {})
        if not url.startswith("http"):
            url = self.base + url
        req = urllib.request.Request(url, data=data, method=method, headers=h)
        return urllib.request.urlopen(req, context=self.ctx)

    def blob(self, data):
        d = sha(data)
        try:
            self.call("HEAD", f"/v2/{self.repo}/blobs/{d}")
            return d
        except urllib.error.HTTPError:
            pass
        r = self.call("POST", f"/v2/{self.repo}/blobs/uploads/", b"")
        loc = r.headers["Location"]
        if not loc.startswith("http"):
            loc = self.base + loc
        loc += ("&" if "?" in loc else "?") + "digest=" + urllib.parse.quote(d)
        self.call("PUT", loc, data, {"Content-Type": "application/octet-stream"})
        return d

    def manifest(self, ref, data, mt):
        self.call("PUT", f"/v2/{self.repo}/manifests/{ref}", data, {"Content-Type": mt})
        return sha(data)


def read_oci(path):
    with tarfile.open(path) as tf:
        files = {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}
    index = json.loads(files["index.json"])
    man = files["blobs/sha256/" + index["manifests"][0]["digest"][7:]]
    m = json.loads(man)
    cfg = files["blobs/sha256/" + m["config"]["digest"][7:]]
    layers = [files["blobs/sha256/" + l["digest"][7:]] for l in m["layers"]]
    return man, cfg, layers


def cmd_push(args):
    with_index = flag(args, "--index")
    registry, ca, repo, tag, archive, token_url, user, password = args[:8]
    p = Pusher(registry, ca, repo, token_url, user, password)
    man, cfg, layers = read_oci(archive)
    for l in layers:
        p.blob(l)
    p.blob(cfg)
    mt = "application/vnd.oci.image.manifest.v1+json"
    if not with_index:
        print(p.manifest(tag, man, mt))
        return
    d_amd = p.manifest(sha(man), man, mt)
    c2 = json.loads(cfg)
    c2["architecture"] = "arm64"
    cfg2 = json.dumps(c2, sort_keys=True).encode()
    p.blob(cfg2)
    m2 = json.loads(man)
    m2["config"] = dict(m2["config"], digest=sha(cfg2), size=len(cfg2))
    man2 = json.dumps(m2, sort_keys=True).encode()
    p.manifest(sha(man2), man2, mt)
    idx = json.dumps({"schemaVersion": 2,
                      "mediaType": "application/vnd.oci.image.index.v1+json",
                      "manifests": [
                          {"mediaType": mt, "digest": sha(man2), "size": len(man2),
                           "platform": {"os": "linux", "architecture": "arm64"}},
                          {"mediaType": mt, "digest": d_amd, "size": len(man),
                           "platform": {"os": "linux", "architecture": "amd64"}}]}).encode()
    p.manifest(tag, idx, "application/vnd.oci.image.index.v1+json")
    print(d_amd)


# ---- a lying registry ----

def cmd_fake_registry(args):
    port, mode, archive = args[:3]
    man, cfg, layers = read_oci(archive)
    blobs = {sha(cfg): cfg}
    for l in layers:
        blobs[sha(l)] = l
    if mode == "manifest-digest":
        served_man = man + b" "
    elif mode == "big-manifest":
        served_man = b"{" + b" " * (5 << 20) + b"}"
    else:
        served_man = man

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            sys.stderr.write("fake-registry: " + fmt % a + "\n")

        def do_GET(self):
            path = self.path
            if "/manifests/" in path:
                body = served_man
                self.send_response(200)
                self.send_header("Content-Type",
                                 "application/vnd.oci.image.manifest.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            d = path.rsplit("/", 1)[-1]
            body = blobs.get(d)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            big = len(body) > 4096
            if mode == "endless-blob" and big:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()  # no length: until the client stops
                try:
                    while True:
                        self.wfile.write(b"\0" * 65536)
                except OSError:
                    return
            if mode == "short-blob" and big:
                body = body[:-10]
            if mode == "wrong-blob" and big:
                body = bytes(len(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
    srv = S(("127.0.0.1", int(port)), H)
    print("fake registry listening", flush=True)
    srv.serve_forever()


def main():
    args = sys.argv[1:]
    cmd = args.pop(0)
    {"layer": cmd_layer, "oci": cmd_oci, "docker": cmd_docker,
     "digest": cmd_digest, "token-server": cmd_token_server,
     "push": cmd_push, "fake-registry": cmd_fake_registry}[cmd](args)


if __name__ == "__main__":
    main()
