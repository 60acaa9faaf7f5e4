#!/usr/bin/env bash
# scripts/make-deb.sh BUILD OUTDIR: builds the Debian packages from a built
# tree (`make deb` calls it): gpupool (the binary and gpupool-init, man
# pages, bash and zsh
# completion, the Grafana dashboard, the gpupool system user),
# gpupool-coordinator and gpupool-agent (their systemd units, settings in
# /etc/default, the sample policy, the gpupool-job user). It uses
# dpkg-deb, Debian's own tool under debhelper, straight from a staged tree:
# the project builds with its Makefile, so a debian/rules around it would
# only add a second build; dpkg-shlibdeps still computes the library
# dependencies as debhelper would. Files are owned by root in the packages
# (--root-owner-group: no fakeroot needed).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: make-deb.sh BUILD OUTDIR}
OUT=${2:?usage: make-deb.sh BUILD OUTDIR}
BIN="$BUILD/gpupool"
[ -x "$BIN" ] || { echo "make-deb: no $BIN (run make first)" >&2; exit 1; }
for t in dpkg-deb dpkg-shlibdeps gzip; do
	command -v "$t" >/dev/null || { echo "make-deb: $t is missing (dpkg-dev)" >&2; exit 1; }
done
VERSION=$("$BIN" version | awk '{print $2}')
ARCH=$(dpkg --print-architecture)
STAGE="$BUILD/deb-stage"
rm -rf "$STAGE"
mkdir -p "$OUT" "$STAGE"

# The libraries the binary needs, as Debian package dependencies.
shl="$STAGE/shlibs"
mkdir -p "$shl/debian" "$shl/usr/bin"
printf 'Source: gpupool\n\nPackage: gpupool\nArchitecture: any\n' >"$shl/debian/control"
cp "$BIN" "$shl/usr/bin/gpupool"
# The executable loads the rest of the program, libgpupool.so, from
# /usr/lib/gpupool (src/lite/load.c): its libraries count too.
LIB="$BUILD/libgpupool.so"
[ -f "$LIB" ] || { echo "make-deb: no $LIB (run make first)" >&2; exit 1; }
mkdir -p "$shl/usr/lib/gpupool"
cp "$LIB" "$shl/usr/lib/gpupool/libgpupool.so"
SHLIBS=$(cd "$shl" && dpkg-shlibdeps -O usr/bin/gpupool \
    usr/lib/gpupool/libgpupool.so 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
[ -n "$SHLIBS" ] || { echo "make-deb: dpkg-shlibdeps found nothing" >&2; exit 1; }

# stage PACKAGE: an empty tree with its DEBIAN/ from packaging/debian.
stage() {
	local p=$1 d="$STAGE/$1" f
	mkdir -p "$d/DEBIAN" "$d/usr/share/doc/$p"
	sed -e "s/@VERSION@/$VERSION/g" -e "s/@ARCH@/$ARCH/g" \
	    -e "s/@SHLIBS@/$SHLIBS/g" "packaging/debian/$p.control" \
	    >"$d/DEBIAN/control"
	for f in postinst prerm postrm conffiles; do
		[ -f "packaging/debian/$p.$f" ] || continue
		install -m $([ "$f" = conffiles ] && echo 0644 || echo 0755) \
		    "packaging/debian/$p.$f" "$d/DEBIAN/$f"
	done
	cat >"$d/usr/share/doc/$p/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: gpupool
Comment: built from the gpupool source tree, version $VERSION.
EOF
	printf 'gpupool (%s) unstable; urgency=low\n\n  * Built from the source tree.\n\n -- gpupool developers <gpupool@localhost>  %s\n' \
	    "$VERSION" "$(date -u -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" |
	    gzip -9n >"$d/usr/share/doc/$p/changelog.gz"
}

# finish PACKAGE: md5sums, Installed-Size, and the .deb.
finish() {
	local p=$1 d="$STAGE/$1" size
	(cd "$d" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' |
	    sort -z | xargs -0 -r md5sum >DEBIAN/md5sums)
	size=$(du -sk --exclude=DEBIAN "$d" | cut -f1)
	sed -i "/^Architecture:/a Installed-Size: $size" "$d/DEBIAN/control"
	find "$d" -type d -exec chmod 0755 {} +
	dpkg-deb --root-owner-group -Zxz --build "$d" \
	    "$OUT/${p}_${VERSION}_${ARCH}.deb" >/dev/null
	echo "$OUT/${p}_${VERSION}_${ARCH}.deb"
}

# ---- gpupool
stage gpupool
d="$STAGE/gpupool"
install -D -m 0755 "$BIN" "$d/usr/bin/gpupool"
strip --strip-unneeded "$d/usr/bin/gpupool" 2>/dev/null || true
install -D -m 0644 "$LIB" "$d/usr/lib/gpupool/libgpupool.so"
strip --strip-unneeded "$d/usr/lib/gpupool/libgpupool.so" 2>/dev/null || true
# The CUDA interposition library the agent preloads into jobs holding a
# fraction of a GPU (docs/gpu-sharing.md); the agent finds it here.
[ -f "$BUILD/libgpupool-cuda.so" ] || { echo "make-deb: no $BUILD/libgpupool-cuda.so" >&2; exit 1; }
install -D -m 0644 "$BUILD/libgpupool-cuda.so" "$d/usr/lib/gpupool/libgpupool-cuda.so"
strip --strip-unneeded "$d/usr/lib/gpupool/libgpupool-cuda.so" 2>/dev/null || true
# pid 1 of container jobs (static), where the agent looks: next to gpupool
[ -x "$BUILD/gpupool-init" ] || { echo "make-deb: no $BUILD/gpupool-init" >&2; exit 1; }
install -m 0755 "$BUILD/gpupool-init" "$d/usr/bin/gpupool-init"
strip --strip-unneeded "$d/usr/bin/gpupool-init" 2>/dev/null || true
for m in man/*.[18]; do
	sec=${m##*.}
	install -D -m 0644 "$m" "$d/usr/share/man/man$sec/$(basename "$m")"
	gzip -9n "$d/usr/share/man/man$sec/$(basename "$m")"
done
install -d "$d/usr/share/bash-completion/completions" "$d/usr/share/zsh/vendor-completions"
"$BIN" completion bash >"$d/usr/share/bash-completion/completions/gpupool"
"$BIN" completion zsh >"$d/usr/share/zsh/vendor-completions/_gpupool"
chmod 0644 "$d/usr/share/bash-completion/completions/gpupool" \
    "$d/usr/share/zsh/vendor-completions/_gpupool"
install -D -m 0644 contrib/grafana/gpupool.json "$d/usr/share/gpupool/grafana/gpupool.json"
for f in README.md docs/*.md; do
	install -m 0644 "$f" "$d/usr/share/doc/gpupool/"
done
finish gpupool

# ---- gpupool-coordinator
stage gpupool-coordinator
d="$STAGE/gpupool-coordinator"
install -D -m 0644 packaging/systemd/gpupool-coordinator.service \
    "$d/lib/systemd/system/gpupool-coordinator.service"
install -D -m 0644 packaging/etc/gpupool-coordinator.default \
    "$d/etc/default/gpupool-coordinator"
finish gpupool-coordinator

# ---- gpupool-agent
stage gpupool-agent
d="$STAGE/gpupool-agent"
install -D -m 0644 packaging/systemd/gpupool-agent.service \
    "$d/lib/systemd/system/gpupool-agent.service"
install -D -m 0644 packaging/etc/gpupool-agent.default "$d/etc/default/gpupool-agent"
install -D -m 0644 packaging/etc/policy "$d/etc/gpupool/policy"
install -D -m 0644 packaging/etc/rootless.conf \
    "$d/usr/share/doc/gpupool-agent/examples/rootless.conf"
finish gpupool-agent
rm -rf "$STAGE"
