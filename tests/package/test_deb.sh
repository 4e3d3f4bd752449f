#!/bin/bash
# The Debian packages built from this tree, checked the way an admin meets
# them: dpkg-buildpackage, lintian (no error, no warning), the conffile
# /etc/isertd/isertd.json root-only (0600) in the package, then a clean
# Debian 12 (a debootstrap minbase chroot) where the previous build is
# installed (its conffile 0644, as 0.1.0 shipped it), isertd runs as its unit
# runs it (Type=notify: READY=1 on NOTIFY_SOCKET) under the unit's
# capabilities and system call filter (unit_confine.py) and serves nothing,
# the admin puts a configuration in, the new build upgrades it keeping the
# edit and making the file 0600, isertd serves it and libiscsi logs in, and
# a purge leaves no file behind.
# Usage: test_deb.sh SRCDIR   (root; network to the Debian mirror)
set -euo pipefail
src=$(realpath "$1")
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (debootstrap, chroot)"; exit 77; }
for t in dpkg-buildpackage lintian debootstrap iscsi-ls unshare; do
	command -v $t >/dev/null || { echo "SKIP: $t missing (tools/deps.sh installs it)"; exit 77; }
done
work=$(mktemp -d /var/tmp/isert-deb.XXXXXX)
root=$work/root
boot=   # the background debootstrap, once started
cleanup() {
	[ -z "$boot" ] || { kill "$boot" 2>/dev/null; wait "$boot" 2>/dev/null; } || true
	umount -l "$root/proc" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
t0=$SECONDS
step() { echo "== [$((SECONDS - t0)) s] $*"; }
fail() { echo "FAIL: $*"; exit 1; }
pkgs=(isertd iseradm iserbench libisert-initiator1 libisert-initiator-dev)

# The chroot is mostly downloads: it is made while the packages build.
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
step "debootstrap minbase bookworm from ${mirror:=http://deb.debian.org/debian}, in the background"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 &
boot=$!

step "dpkg-buildpackage (the tree's files, git's view of them)"
mkdir -p "$work/src/iser-toolkit"
git -C "$src" ls-files -z --cached --others --exclude-standard |
	(cd "$src" && xargs -0 sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' _) |
	tar -C "$src" --null -T - -cf - | tar -C "$work/src/iser-toolkit" -xf -
(cd "$work/src/iser-toolkit" && dpkg-buildpackage -us -uc -b -j"$(nproc)" >"$work/build.log" 2>&1) ||
	{ tail -40 "$work/build.log"; fail "dpkg-buildpackage"; }
ver=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
mkdir -p "$work/debs/cur" "$work/debs/prev"
for p in "${pkgs[@]}"; do cp "$work/src/${p}_${ver}_"*.deb "$work/debs/cur/"; done

step "the conffile in the package: root only"
perm=$(dpkg-deb -c "$work/debs/cur/isertd_${ver}_"*.deb | awk '$6 == "./etc/isertd/isertd.json" { print $1 }')
echo "   ${perm:-(missing)} ./etc/isertd/isertd.json"
[ "$perm" = "-rw-------" ] || fail "/etc/isertd/isertd.json is ${perm:-missing} in the isertd package, not -rw------- (0600)"

step "lintian"
# One lintian run (it takes tens of seconds): its tags shown, its status the check.
lrc=0
lintian --fail-on error,warning -I "$work/src/iser-toolkit_${ver}_"*.changes >"$work/lintian.txt" 2>&1 || lrc=$?
grep -v 'root privileges' "$work/lintian.txt" || true
[ "$lrc" -eq 0 ] || fail "lintian reports an error or a warning (above; status $lrc)"

# The previous build: the same files under a lower version, so the upgrade
# runs every maintainer script and conffile rule of a real one; its conffile
# 0644, as 0.1.0 shipped it, which the upgrade must make 0600.
prev="${ver}~prev"
for d in "$work/debs/cur/"*.deb; do
	x=$work/x; rm -rf "$x"; dpkg-deb -R "$d" "$x"
	sed -i -e "s/^Version: .*/Version: $prev/" -e "s/(= $ver)/(= $prev)/" "$x/DEBIAN/control"
	[ ! -f "$x/etc/isertd/isertd.json" ] || chmod 0644 "$x/etc/isertd/isertd.json"
	dpkg-deb -b "$x" "$work/debs/prev/" >/dev/null
done

step "debootstrap: waiting for it"
wait "$boot" || { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
boot=
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { chroot "$root" env DEBIAN_FRONTEND=noninteractive "$@" </dev/null; }
in_root apt-get update -q >/dev/null
# What a purge must come back to: every file but apt's, dpkg's and logs.
files() {
	(cd "$root" && find . -xdev \( -path ./proc -o -path ./var/lib/apt -o -path ./var/lib/dpkg \
		-o -path ./var/cache -o -path ./var/log -o -path ./tmp -o -path ./etc/ld.so.cache \) -prune \
		-o -print) | sort
}
# Their dependencies first (from the packages' own Depends, which shlibs
# made), so that what a purge must come back to is this state exactly.
deps=$(for d in "$work/debs/cur/"*.deb; do dpkg-deb -f "$d" Depends; echo; done |
	tr ',' '\n' | sed 's/^ *//; /^$/d; /^libisert-initiator1 /d' | sort -u | paste -sd, -)
step "install the dependencies: $deps"
in_root apt-get satisfy -y -q "$deps" >"$work/deps.log" 2>&1 || { tail -30 "$work/deps.log"; fail "dependencies"; }
echo "   $(grep -c '^Setting up' "$work/deps.log") packages set up"
files >"$work/files.before"

cp -r "$work/debs" "$root/tmp/"
step "install the previous build (${pkgs[*]} $prev)"
in_root sh -c 'apt-get install -y -q /tmp/debs/prev/*.deb' >"$work/install.log" 2>&1 ||
	{ tail -30 "$work/install.log"; fail "install"; }

[ -L "$root/etc/systemd/system/multi-user.target.wants/isertd.service" ] ||
	fail "isertd.service is not enabled after install"
[ -f "$root/etc/isertd/isertd.json" ] || fail "/etc/isertd/isertd.json missing"
grep -qx /etc/isertd/isertd.json "$root/var/lib/dpkg/info/isertd.conffiles" || fail "isertd.json is not a conffile"
[ "$(stat -c %a "$root/etc/isertd/isertd.json")" = 644 ] || fail "the previous build's isertd.json is not 0644"
for f in usr/share/man/man8/isertd.8.gz usr/share/man/man5/isertd.json.5.gz usr/share/man/man8/iseradm.8.gz \
	usr/share/man/man1/iserbench.1.gz usr/share/bash-completion/completions/iserctl \
	usr/include/isert/initiator.h; do
	[ -e "$root/$f" ] || fail "$f missing"
done

# run_unit CHECK: isertd started in a fresh network namespace exactly as
# isertd.service's ExecStart says, inside the chroot, with NOTIFY_SOCKET as
# systemd would set it and the unit's capabilities and system call filter
# (unit_confine.py); CHECK (libiscsi from the host, iserctl); SIGTERM, exit 0.
run_unit() {
	local exec
	exec=$(sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/isertd.service")
	[ -n "$exec" ] || fail "no ExecStart in the installed unit"
	echo "   ExecStart=$exec"
	unshare -n bash -c '
		set -euo pipefail
		root=$1 exec=$2 check=$3 confine=$4
		ip link set lo up
		rm -f "$root/run/notify"
		python3 - "$root/run/notify" <<-"EOF" &
		import socket, sys
		s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1]); s.settimeout(30)
		while b"READY=1" not in s.recv(4096): pass
		EOF
		py=$!
		for _ in $(seq 50); do [ -S "$root/run/notify" ] && break; sleep 0.1; done
		python3 "$confine" "$root/lib/systemd/system/isertd.service" --show --root "$root" -- \
			env NOTIFY_SOCKET=/run/notify $exec >"$root/tmp/isertd.log" 2>&1 &
		pid=$!
		# Whatever fails below, no isertd outlives the namespace.
		trap "kill -9 $pid $py 2>/dev/null || true" EXIT
		wait $py || { cat "$root/tmp/isertd.log"; echo "FAIL: no READY=1 from isertd"; exit 1; }
		echo "   READY=1 received"
		grep "^unit_confine:" "$root/tmp/isertd.log" | sed "s/^/   /"
		grep -q "^Seccomp:[[:space:]]*2" /proc/$pid/status || { echo "FAIL: isertd runs without a system call filter"; exit 1; }
		eval "$check" || { cat "$root/tmp/isertd.log"; exit 1; }
		kill -TERM $pid
		rc=0; wait $pid || rc=$?
		[ $rc -eq 0 ] || { cat "$root/tmp/isertd.log"; echo "FAIL: isertd exited $rc on SIGTERM"; exit 1; }
		echo "   SIGTERM: exit 0"
	' _ "$root" "$exec" "$1" "$src/tests/package/unit_confine.py"
}
lun=iscsi://127.0.0.1/iqn.2026-11.org.isert:default/0
step "isertd as the unit runs it, on the packaged isertd.json: ready, serving nothing"
run_unit "chroot \$root iserctl ls | tee /dev/stderr | grep -q 'backstores \[0\]' &&
	chroot \$root iserctl ls | grep -q 'iscsi \[0 targets\]' && ! iscsi-ls -s iscsi://127.0.0.1 2>/dev/null &&
	echo '   no backstore, no target, nothing on 127.0.0.1:3260'"

step "configure: the demo configuration with a 512 MiB RAM LUN into isertd.json, upgrade to $ver"
# Written over the file (as an editor saving in place does): its mode stays the previous build's.
sed 's/"size": "1G"/"size": "512M"/' "$src/configs/default.json" > "$root/etc/isertd/isertd.json"
grep -q '"512M"' "$root/etc/isertd/isertd.json" || fail "the edit did not apply (default.json changed?)"
in_root sh -c 'apt-get install -y -q /tmp/debs/cur/*.deb' >"$work/upgrade.log" 2>&1 ||
	{ tail -30 "$work/upgrade.log"; fail "upgrade"; }
for p in "${pkgs[@]}"; do
	[ "$(chroot "$root" dpkg-query -W -f '${Version}' "$p")" = "$ver" ] || fail "$p not upgraded to $ver"
done
grep -q '"512M"' "$root/etc/isertd/isertd.json" || fail "the upgrade lost the edited config"
ls "$root/etc/isertd/" | grep -q 'dpkg-' && fail "the upgrade left $(ls "$root/etc/isertd")"
mode=$(stat -c %a "$root/etc/isertd/isertd.json")
[ "$mode" = 600 ] || fail "isertd.json is mode $mode after the upgrade, not 600"
echo "   upgraded; the edited isertd.json kept, mode 0600"
step "isertd after the upgrade serves the edited config (512 MiB LUN); iscsi-ls and iscsi-inq log in"
run_unit "iscsi-ls -s iscsi://127.0.0.1 | tee /dev/stderr | grep -q 'iqn.2026-11.org.isert:default' &&
	iscsi-inq $lun | grep -q 'Vendor' && chroot \$root iserctl ls >/dev/null &&
	iscsi-readcapacity16 $lun | tee /dev/stderr | grep -qi 'returned logical block address:1048575' &&
	echo '   iscsi-ls, iscsi-inq, iserctl ls, 512 MiB: ok'"

step "purge"
in_root apt-get purge -y -q "${pkgs[@]}" >"$work/purge.log" 2>&1 || { tail -30 "$work/purge.log"; fail "purge"; }
rm -rf "$root/tmp/debs" "$root/run/notify"
files >"$work/files.after"
if ! diff "$work/files.before" "$work/files.after"; then
	fail "the purge left files behind (lines with > above)"
fi
echo "   nothing left behind"
step "ok"
