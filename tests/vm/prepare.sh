#!/bin/bash
# Prepare the test guest: a Debian kernel and a busybox initramfs holding the
# modules the VM tests need.  Everything comes from Debian packages fetched
# with `apt-get download` into CACHE and is reused by later runs; nothing else
# is ever downloaded.
#
# usage: prepare.sh CACHE
# env:   ISERT_VM_KVER  kernel ABI to use (default: what linux-image-6.12-amd64
#                       depends on, else linux-image-amd64)
# prints the directory holding vmlinuz + initramfs.cpio.gz on its last line
# (stdout).  Exit 77 (meson's "skip") when qemu or the kernel cannot be had,
# 1 when something that should have worked broke.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${1:?usage: prepare.sh CACHE}
mkdir -p "$CACHE" && CACHE=$(cd "$CACHE" && pwd) || { echo "vm: cannot create cache $CACHE" >&2; exit 1; }
# One preparation at a time (tools/test.sh starts one in the background while
# it builds; run.sh's own call then waits here and finds the guest ready).
exec 9>"$CACHE/.lock" || { echo "vm: cannot write $CACHE/.lock" >&2; exit 1; }
flock -n 9 || { echo "vm: another prepare.sh is preparing the guest: waiting for it" >&2; flock 9; }

skip() { echo "vm: SKIP: $*" >&2; exit 77; }
die() { echo "vm: ERROR: $*" >&2; exit 1; }
log() { echo "vm: $*" >&2; }

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
for t in busybox cpio gzip dpkg-deb xz; do
	command -v $t >/dev/null || skip "$t not installed (tools/deps.sh installs it)"
done
# The initramfs needs a static busybox: the guest has no libc before the chroot.
file_is_static() { ! LC_ALL=C ldd "$1" >/dev/null 2>&1; }
file_is_static "$(command -v busybox)" || skip "busybox is dynamically linked (apt-get install busybox-static)"

# Everything that shapes the initramfs: a change rebuilds it, not the kernel.
recipe_hash() { cat "$HERE/prepare.sh" "$HERE/mkinitramfs.sh" "$HERE/guest-init" | sha256sum | cut -c1-16; }

ready_dir() {   # ready_dir KVER -> prints dir if a complete guest for KVER is cached
	local d=$CACHE/$1
	[ -f "$d/vmlinuz" ] && [ -f "$d/initramfs.cpio.gz" ] && [ "$(cat "$d/recipe" 2>/dev/null)" = "$(recipe_hash)" ] && echo "$d"
}

pkg_known() { [ -n "$(apt-cache show "$1" 2>/dev/null | sed -n 's/^Version: //p' | head -1)" ]; }
pick_kver() {
	local meta k
	for meta in linux-image-6.12-amd64 linux-image-amd64; do
		k=$(apt-cache depends "$meta" 2>/dev/null | sed -n 's/.*Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -1)
		[ -n "$k" ] && { echo "$k"; return 0; }
	done
	return 1
}

KVER=${ISERT_VM_KVER:-}
if [ -z "$KVER" ]; then
	KVER=$(pick_kver)
	if [ -z "$KVER" ] && [ "$(id -u)" = 0 ]; then
		log "apt knows no Debian kernel; running apt-get update once"
		apt-get update -q >/dev/null 2>&1
		KVER=$(pick_kver)
	fi
fi
if [ -z "$KVER" ]; then
	# Offline with a usable guest in the cache: use the newest one.
	d=$(for k in "$CACHE"/*/; do ready_dir "$(basename "$k")"; done 2>/dev/null | sort -V | tail -1)
	[ -n "$d" ] && { log "apt offline; using cached guest $d"; echo "$d"; exit 0; }
	skip "cannot determine a Debian kernel (apt-cache knows no linux-image-amd64)"
fi
case $KVER in *cloud*) skip "kernel $KVER: the cloud flavour lacks rxe, iSER and 9p";; esac

if d=$(ready_dir "$KVER"); then log "guest for $KVER cached in $d"; echo "$d"; exit 0; fi

OUT=$CACHE/$KVER DEBS=$CACHE/debs
mkdir -p "$OUT" "$DEBS"
log "preparing guest kernel $KVER in $OUT"
pkg_known "linux-image-$KVER" || skip "apt does not know linux-image-$KVER"
VER=$(apt-cache show "linux-image-$KVER" | sed -n 's/^Version: //p' | head -1)

# fetch PKG -> path of its .deb in the cache (downloaded only if missing)
fetch() {
	local p=$1 f
	f=$(ls "$DEBS/${p}_"*.deb 2>/dev/null | head -1)
	if [ -z "$f" ]; then
		(cd "$DEBS" && apt-get download -q "$p=$VER" 2>&1 | grep -v -i -e unsandboxed -e '^Get:' >&2)
		f=$(ls "$DEBS/${p}_"*.deb 2>/dev/null | head -1)
	fi
	[ -n "$f" ] && echo "$f"
}

IMG=$(fetch "linux-image-$KVER") || skip "apt-get download linux-image-$KVER failed (no Debian mirror reachable?)"
rm -rf "$OUT/kroot" && mkdir -p "$OUT/kroot" && dpkg-deb -x "$IMG" "$OUT/kroot" || die "cannot unpack $IMG"
MODDIR=$OUT/kroot/lib/modules/$KVER
[ -f "$OUT/kroot/boot/vmlinuz-$KVER" ] || die "$IMG has no /boot/vmlinuz-$KVER"

# Modules Debian does not build (CONFIG_RDMA_SIW is unset): compile them out of
# tree against the headers package, from the matching linux-source package.
EXTRA=()
has_mod() { find "$MODDIR/kernel" -name "$1.ko*" | grep -q . || grep -q "/$1.ko" "$MODDIR/modules.builtin" 2>/dev/null; }
if has_mod siw; then
	:
elif [ -f "$OUT/siw.ko" ]; then
	EXTRA+=("$OUT/siw.ko")
else
	command -v make >/dev/null && command -v gcc >/dev/null || skip "siw.ko must be built but gcc/make are missing"
	HDRDEPS=$(apt-cache depends "linux-headers-$KVER" | sed -n 's/.*Depends: \(linux-\(headers\|kbuild\)-[^ ]*\)$/\1/p' | sort -u)
	SRCPKG=linux-source-$(echo "$KVER" | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')
	log "building siw.ko from $SRCPKG with linux-headers-$KVER"
	W=$OUT/siw-build; rm -rf "$W"; mkdir -p "$W/hdr" "$W/src"
	for p in "linux-headers-$KVER" $HDRDEPS; do
		f=$(fetch "$p") || skip "apt-get download $p failed"
		dpkg-deb -x "$f" "$W/hdr" || die "cannot unpack $f"
	done
	SRC=$(fetch "$SRCPKG") || skip "apt-get download $SRCPKG failed"
	H=$W/hdr/usr/src/linux-headers-$KVER
	# The headers' Makefile includes its common part by absolute path.
	sed -i "s#^include /usr/src/#include $W/hdr/usr/src/#" "$H/Makefile"
	dpkg-deb --fsys-tarfile "$SRC" | tar -xO "./usr/src/$SRCPKG.tar.xz" | xz -dc -T0 |
		tar -x -C "$W/src" --strip-components=5 --wildcards "$SRCPKG/drivers/infiniband/sw/siw/*" ||
		die "cannot extract siw sources from $SRC"
	make -s -C "$H" M="$W/src" CONFIG_RDMA_SIW=m CONFIG_DEBUG_INFO_BTF_MODULES= modules >&2 ||
		die "building siw.ko failed"
	strip --strip-debug "$W/src/siw.ko" -o "$OUT/siw.ko" || die "strip siw.ko"
	rm -rf "$W"
	EXTRA+=("$OUT/siw.ko")
fi

cp "$OUT/kroot/boot/vmlinuz-$KVER" "$OUT/vmlinuz"
"$HERE/mkinitramfs.sh" "$OUT/kroot" "$KVER" "$OUT/initramfs.cpio.gz" "${EXTRA[@]}" >&2 || die "mkinitramfs failed"
rm -rf "$OUT/kroot"
echo "$KVER" > "$OUT/kver"
recipe_hash > "$OUT/recipe"
log "guest ready: $OUT"
echo "$OUT"
