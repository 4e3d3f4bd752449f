#!/bin/bash
# libiscsi's conformance suite (iscsi-test-cu ALL, --dataloss) on
# an RBD LUN served by two gateways (two isertd, one path through each:
# docs/cluster.md), with the same lists and checks as the RAM LUNs
# (tests/conformance/run-conformance.sh; LUN kind "rbd" in skip-list.txt
# and expected-skips.txt).  ALL runs through gateway A first; then the
# suites whose outcome depends on which gateway a one-path test meets run
# through gateway B first: the reservation families (their state is kept by
# both gateways), Reserve6 and the ALUA report.  The rest of ALL is the same
# code behind either gateway, and its second pass bought nothing the first
# had not.  MultipathIO already has a path through each gateway in the first
# run (each of its tests uses every path); run again on its own it would
# also meet libiscsi 1.19's COMPARE AND WRITE test bug (it zeroes LBAs 0-255,
# then compares LBA 256 too, so it passes only where an earlier suite of the
# run zeroed that block).  Run under tests/ceph/cluster.sh run, which exports
# CEPH_CONF.
#
# usage: conformance-rbd.sh ISERTD [PORT]
set -eu
isertd=${1:?usage: conformance-rbd.sh ISERTD [PORT]}
port=${2:-3263}
here=$(cd "$(dirname "$0")" && pwd)
: "${CEPH_CONF:?run under tests/ceph/cluster.sh run}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rbd --conf "$CEPH_CONF" rm rbd/conformance >/dev/null 2>&1 || true   # a rerun on a kept cluster
rbd --conf "$CEPH_CONF" create --size 256M rbd/conformance
# gateway TAG: the target with portal group TAG, both ALUA groups active/optimized.
gateway() {
	local tag=$1 other=$((3 - $1)) groups
	groups="{ \"id\": $tag, \"state\": \"active_optimized\", \"tpgs\": [ $tag ] },
	        { \"id\": $other, \"state\": \"active_optimized\", \"remote_ports\": [ $other ] }"
	cat <<JSON
{ "backstores": [ { "name": "rbd", "type": "rbd", "pool": "rbd", "image": "conformance", "conf": "$CEPH_CONF" } ],
  "targets": [ { "iqn": "iqn.2026-11.org.isert:conformance",
    "alua": { "mode": "both", "groups": [ $groups ] },
    "tpgs": [ { "tag": $tag, "demo_mode": true, "demo_target_reset": true,
      "portals": [ { "ip": "127.0.0.1", "port": 3260 } ], "luns": [ { "lun": 0, "backstore": "rbd" } ] } ] } ] }
JSON
}
b_first=$(printf 'ALL.%s,' PrinReadKeys PrinServiceactionRange PrinReportCapabilities \
	ProutRegister ProutReserve ProutClear ProutPreempt Reserve6 ReportTargetPortGroups)
b_first=${b_first%,}
gateway 1 >"$work/a.json"
gateway 2 >"$work/b.json"
CONFORMANCE_CONFIG=$work/a.json CONFORMANCE_CONFIG2=$work/b.json \
	CONFORMANCE_RUNS="rbd:0:ALL:-d rbd:0:$b_first:-d:ba" \
	"$here/../conformance/run-conformance.sh" "$isertd" "$port"
