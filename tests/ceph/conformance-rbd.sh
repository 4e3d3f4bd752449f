#!/bin/bash
# libiscsi's conformance suite (iscsi-test-cu ALL, --dataloss) on an RBD
# LUN added live to a fleet of two gateways (docs/fleet.md: two isertd
# --cluster, one path through each, docs/cluster.md), with the same lists
# and checks as the RAM LUNs (tests/conformance/run-conformance.sh; LUN kind
# "rbd" in skip-list.txt and expected-skips.txt).  The fleet's document
# starts with the target and no LUN; the backstore and LUN 0 are added
# through gateway A (iserctl), and the suite starts once gateway B serves
# it too.  ALL runs through gateway A first; then the suites whose outcome
# depends on which gateway a one-path test meets run through gateway B
# first: the reservation families (their state is kept by both gateways),
# Reserve6 and the ALUA report.  The rest of ALL is the same code behind
# either gateway, and its second pass bought nothing the first had not.
# MultipathIO already has a path through each gateway in the first run
# (each of its tests uses every path); run again on its own it would also
# meet libiscsi 1.19's COMPARE AND WRITE test bug (it zeroes LBAs 0-255,
# then compares LBA 256 too, so it passes only where an earlier suite of the
# run zeroed that block).  Run under tests/ceph/cluster.sh run, which exports
# CEPH_CONF.
#
# usage: conformance-rbd.sh ISERTD ISERCTL [PORT]
set -eu
isertd=${1:?usage: conformance-rbd.sh ISERTD ISERCTL [PORT]}
iserctl=${2:?usage: conformance-rbd.sh ISERTD ISERCTL [PORT]}
port=${3:-3263}
here=$(cd "$(dirname "$0")" && pwd)
: "${CEPH_CONF:?run under tests/ceph/cluster.sh run}"
T=iqn.2026-11.org.isert:conformance
work=$(mktemp -d)
pids=
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$work"' EXIT
rbd --conf "$CEPH_CONF" rm rbd/conformance >/dev/null 2>&1 || true   # a rerun on a kept cluster
rbd --conf "$CEPH_CONF" create --size 256M rbd/conformance
fleet=conformance-$$
cat >"$work/fleet.json" <<JSON
{ "format": "isert-fleet",
  "targets": [ { "iqn": "$T",
    "alua": { "mode": "both", "groups": [ { "id": 1, "state": "active_optimized", "tpgs": [ 1 ] },
                                          { "id": 2, "state": "active_optimized", "tpgs": [ 2 ] } ] },
    "tpg": { "demo_mode": true, "demo_target_reset": true } } ],
  "gateways": [
    { "name": "gw-a", "tpgs": [ { "target": "$T", "tag": 1, "portals": [ { "ip": "127.0.0.1", "port": $port } ] } ] },
    { "name": "gw-b", "tpgs": [ { "target": "$T", "tag": 2, "portals": [ { "ip": "127.0.0.2", "port": $port } ] } ] } ] }
JSON
rados --conf "$CEPH_CONF" -p rbd put "isert_config.$fleet" "$work/fleet.json"
for g in a b; do
	# APTPL state in the work folder, never in the host's /var/lib/isert.
	mkdir -p "$work/$g"
	"$isertd" --cluster "rbd/$fleet" --gateway "gw-$g" --ceph-conf "$CEPH_CONF" --state-dir "$work/$g" \
		--admin-socket "$work/$g.sock" >"$work/$g.log" 2>&1 &
	pids="$pids $!"
done
ready() { "$iserctl" -s "$work/$1.sock" call fleet.status >/dev/null 2>&1; }
for _ in $(seq 300); do ready a && ready b && break; sleep 0.1; done
fail() { echo "conformance-rbd: $*"; for g in a b; do echo "---- gateway $g"; cat "$work/$g.log"; done; exit 1; }
"$iserctl" -s "$work/a.sock" create /backstores/rbd type=rbd pool=rbd image=conformance "conf=$CEPH_CONF" ||
	fail "the backstore could not be added through gateway A"
"$iserctl" -s "$work/a.sock" create "/iscsi/$T/tpg1/luns/lun0" backstore=rbd ||
	fail "LUN 0 could not be added through gateway A"
for _ in $(seq 100); do iscsi-inq "iscsi://127.0.0.2:$port/$T/0" >/dev/null 2>&1 && break; sleep 0.1; done
iscsi-inq "iscsi://127.0.0.2:$port/$T/0" >/dev/null 2>&1 || fail "gateway B does not serve LUN 0"
echo "LUN 0 added through gateway A, served by both: $("$iserctl" -s "$work/b.sock" call fleet.status |
	python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join("%s at generation %s" % (g["name"], g["generation"]) for g in d["gateways"]))')"
b_first=$(printf 'ALL.%s,' PrinReadKeys PrinServiceactionRange PrinReportCapabilities \
	ProutRegister ProutReserve ProutClear ProutPreempt Reserve6 ReportTargetPortGroups)
b_first=${b_first%,}
# shellcheck disable=SC2086
CONFORMANCE_PIDS="$(echo $pids)" CONFORMANCE_RUNS="rbd:0:ALL:-d rbd:0:$b_first:-d:ba" \
	"$here/../conformance/run-conformance.sh" "$isertd" "$port" || fail "the suite failed"
pids=
