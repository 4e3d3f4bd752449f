#!/bin/bash
# Install what the demo needs (tools/deps.sh --demo: the build dependencies
# and libiscsi's client tools), build, start isertd on its embedded default
# (a 1 GiB RAM LUN on 127.0.0.1:3260, any initiator admitted) and show it
# working with libiscsi's client tools.  The target keeps running in the
# foreground afterwards; Ctrl-C stops it.  Its own build directory, without
# the tests, so that tools/test.sh's build finds every test dependency.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh --demo
[ -d build-demo ] || meson setup build-demo -Dtests=false
ninja -C build-demo
build-demo/target/isertd &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
for _ in $(seq 50); do iscsi-ls iscsi://127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
echo "== iscsi-ls -s iscsi://127.0.0.1"
iscsi-ls -s iscsi://127.0.0.1
echo "== iscsi-inq iscsi://127.0.0.1/iqn.2026-11.org.isert:default/0"
iscsi-inq iscsi://127.0.0.1/iqn.2026-11.org.isert:default/0 | grep -E 'Vendor|Product|Revision'
echo "== iscsi-readcapacity16 iscsi://127.0.0.1/iqn.2026-11.org.isert:default/0"
iscsi-readcapacity16 iscsi://127.0.0.1/iqn.2026-11.org.isert:default/0 | head -3
echo "== isertd is serving; Ctrl-C to stop"
trap - EXIT
wait $pid
