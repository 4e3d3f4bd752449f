#!/bin/bash
# The installed library as an outside project sees it: meson install into a
# scratch DESTDIR, build docs/examples/isc-example.c with nothing but
# pkg-config and cc, run it against isertd on loopback and check what it
# prints; and check that libisert-initiator.so exports only isc_* (and the
# version node), each declared in the installed header.
# usage: test_install.sh SOURCE_ROOT BUILD_DIR ISERTD PORT [SANITIZE]
# SANITIZE: the build's b_sanitize ("none" or e.g. "address,undefined"); a
# sanitized library needs the example built with the same runtime.
set -u
src=$1 build=$2 isertd=$3 port=$4 sanitize=${5:-none}
san=
[ "$sanitize" = none ] || san=-fsanitize=$sanitize
tmp=$(mktemp -d /tmp/isert-install.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL $*"; exit 1; }
ok() { echo "ok   $*"; }

dest=$tmp/dest
meson install -C "$build" --no-rebuild --destdir "$dest" >"$tmp/install.log" 2>&1 ||
	{ tail -20 "$tmp/install.log"; fail "meson install"; }
pc=$(find "$dest" -name isert-initiator.pc | head -1)
[ -n "$pc" ] || fail "isert-initiator.pc not installed"
hdr=$(find "$dest" -path '*/include/isert/initiator.h' | head -1)
[ -n "$hdr" ] || fail "isert/initiator.h not installed"
so=$(find "$dest" -name 'libisert-initiator.so.1' | head -1)
[ -n "$so" ] || fail "libisert-initiator.so.1 not installed"
ok "installed: ${pc#$dest} ${hdr#$dest} ${so#$dest}"

# Exports: isc_* and the version node, nothing else; every isc_* one declared in the header.
nm -D --defined-only "$so" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$tmp/exports"
leaks=$(grep -v -e '^isc_' -e '^ISERT_INITIATOR_1$' "$tmp/exports")
[ -z "$leaks" ] || fail "non-isc symbols exported: $(echo $leaks)"
grep -q '^isc_session_new$' "$tmp/exports" || fail "isc_session_new not exported"
undeclared=
for sym in $(grep '^isc_' "$tmp/exports"); do
	grep -Eq "[ *]$sym\(" "$hdr" || undeclared="$undeclared $sym"
done
[ -z "$undeclared" ] || fail "exported but not in isert/initiator.h:$undeclared"
ok "exports: $(grep -c '^isc_' "$tmp/exports") isc_* symbols, nothing else"
# The names before 1.2 stay exported, each at the address of its _sync function: programs built
# against 1.0 and 1.1 keep running.
addr() { nm -D --defined-only "$so" | awk -v s="$1" '{ sub(/@.*/, "", $NF) } $NF == s { print $1 }'; }
for old in isc_connect isc_connect_url isc_logout isc_discover; do
	a=$(addr $old)
	[ -n "$a" ] && [ "$a" = "$(addr ${old}_sync)" ] || fail "$old is not exported as ${old}_sync is"
done
ok "isc_connect, isc_connect_url, isc_logout, isc_discover: exported, the same functions as their _sync names"
readelf -d "$so" | grep -q 'SONAME.*\[libisert-initiator\.so\.1\]' || fail "soname is not libisert-initiator.so.1"
ok "soname libisert-initiator.so.1"

# Build the example the way the documentation says, with the DESTDIR as sysroot.
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$dest
flags=$(pkg-config --cflags --libs isert-initiator) || fail "pkg-config isert-initiator"
cc -Wall -Werror $san -o "$tmp/isc-example" "$src/docs/examples/isc-example.c" $flags 2>"$tmp/cc.log" ||
	{ cat "$tmp/cc.log"; fail "cc isc-example.c $flags"; }
ok "built the example: cc ... $flags"

# A target with a file LUN whose first block we know.
img=$tmp/disk.img
printf 'ISERT-EXAMPLE-01' >"$img"
truncate -s 8M "$img"
cat >"$tmp/isertd.json" <<JSON
{ "backstores": [ { "name": "disk", "type": "file", "path": "$img", "size": "8M" } ],
  "targets": [ { "iqn": "iqn.2026-11.org.isert:example",
    "tpgs": [ { "tag": 1, "demo_mode": true,
      "portals": [ { "ip": "127.0.0.1", "port": $port } ],
      "luns": [ { "lun": 0, "backstore": "disk" } ] } ] } ] }
JSON
"$isertd" --config "$tmp/isertd.json" >"$tmp/isertd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	(exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/isertd.log"; fail "isertd exited"; }
	sleep 0.1
done

libdir=$(dirname "$so")
LD_LIBRARY_PATH=$libdir "$tmp/isc-example" "iscsi://127.0.0.1:$port/iqn.2026-11.org.isert:example/0" \
	>"$tmp/out" 2>"$tmp/err" || { cat "$tmp/out" "$tmp/err"; fail "isc-example exited $?"; }
cat "$tmp/out"
grep -qx 'capacity: 16384 blocks of 512 bytes' "$tmp/out" || fail "capacity line"
grep -qx 'block 0: 49 53 45 52 54 2d 45 58 41 4d 50 4c 45 2d 30 31' "$tmp/out" || fail "block 0 line"
[ ! -s "$tmp/err" ] || { cat "$tmp/err"; fail "the library or example wrote to stderr"; }
ok "isc-example read the capacity and block 0 through the installed library"

# The loader picks the installed library, not the build tree's.
LD_LIBRARY_PATH=$libdir ldd "$tmp/isc-example" | grep -q "=> $libdir/libisert-initiator.so.1" ||
	fail "isc-example does not use the installed library"
ok "isc-example runs on the installed libisert-initiator.so.1"
echo "all passed"
