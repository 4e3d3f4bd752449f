#!/bin/bash
# Two isertd gateways over one RBD image as one SCSI target (docs/cluster.md),
# with the Linux kernel initiator.  The Ceph cluster (tests/ceph/cluster.sh:
# one mon, one memstore OSD) and both gateways run in the guest: gateway A on
# 127.0.0.1, B on 127.0.0.2, iSCSI over TCP, both ALUA groups
# active/optimized; the image has no exclusive-lock (docs/rbd.md, "Both
# gateways active").
#
# Cluster nodes (cl_nodes): two open-iscsi ifaces with initiator names of
# their own stand for two hosts, node 1 through gateway A, node 2 through B.
# fence_scsi (fence-agents): both unfence (register, WRITE EXCLUSIVE -
# REGISTRANTS ONLY), node 2 fences node 1 (`-o off`: PREEMPT AND ABORT through
# B), node 1's writes through A then get RESERVATION CONFLICT, `-o on` lets
# them through again.  Then a Windows cluster validation-like sequence with
# sg_persist: both register, node 1 reserves WERO and writes, node 2 preempts
# and aborts it and writes; node 1's next write is refused, and what both
# nodes read is node 2's data.
#
# dm-multipath (cl_multipath): one host logged in through both gateways, one
# path group (both active/optimized), fio write+verify rounds on the map;
# gateway A killed with -9: B fences it (blocklisted), makes A's group
# unavailable, the I/O goes on through B, every fio round verifies, and
# `rbd export` of the image equals what the map reads.  The longest a write
# waited around the kill is printed as the time to resume.
#
# A fleet (cl_fleet, docs/fleet.md): three gateways' own files (127.0.0.1-3,
# one portal group each) imported into one document with iserctl cluster
# import, stored in RADOS, and the gateways started with --cluster; one
# host logged in through all three, dm-multipath over the three paths, fio
# write+verify rounds on the map; meanwhile LUN 1 (another image) is added
# through gateway 2 alone: after a rescan it is a disk on every path and a
# map of three paths, and a full write+verify on it passes; then gateway 3
# is removed from the fleet (iserctl gateway remove, through gateway 1): its
# path takes no more I/O, the I/O goes on through the other two, every fio
# round verifies, and gateway 3 says why it serves nothing.
source "$VM_LIB"
source "$(dirname "$VM_LIB")/multipath.sh"
CL_T=iqn.2026-11.org.isert.vm:cluster
CL_NODE1=iqn.2026-11.org.isert.vm:node-1
CL_NODE2=iqn.2026-11.org.isert.vm:node-2
CL_DIR=/tmp/ceph-cl   # the guest's tmpfs: the mon's store is no business of the 9p share
GW_A= GW_B=

# gateway NAME TAG IP: an isertd serving $CL_T's portal group TAG on IP:3260,
# the image rbd/cl at LUN 0, admin socket /run/gw-NAME.sock.
gateway() {
	local name=$1 tag=$2 ip=$3 other=$((3 - $2)) cfg=/tmp/gw-$1.json
	cat > $cfg <<EOF
{ "backstores": [ { "name": "cl", "type": "rbd", "pool": "rbd", "image": "cl", "conf": "$CEPH_CONF" } ],
  "targets": [ { "iqn": "$CL_T",
    "alua": { "mode": "both", "groups": [
      { "id": $tag, "state": "active_optimized", "tpgs": [ $tag ] },
      { "id": $other, "state": "active_optimized", "remote_ports": [ $other ] } ] },
    "tpgs": [ { "tag": $tag, "demo_mode": true, "portals": [ { "ip": "$ip", "port": 3260 } ],
      "luns": [ { "lun": 0, "backstore": "cl" } ] } ] } ],
  "global": { "reactors": 1 } }
EOF
	"$ISERT_BUILD/target/isertd" --config $cfg --admin-socket /run/gw-$name.sock --state-dir none \
		>> "$VM_WORK/gw-$name.log" 2>&1 &
	eval "GW_${name^^}=$!"
	wait_for 60 bash -c "ss -Hltn 'src $ip and sport = :3260' | grep -q ."
}
gw() { "$ISERT_BUILD/tools/iserctl/iserctl" -s /run/gw-$1.sock "${@:2}"; }
# gw_group_state GW GROUP: the state gateway GW reports for ALUA group GROUP.
gw_group_state() { gw $1 alua $CL_T | awk -v g=$2 '$1 == g {print $2}'; }

# The disk of the session to IP (one session per address at a time here).
cl_dev() { wait_for 30 mp_dev $1 >/dev/null && mp_dev $1; }
# write_status DEV: sg_raw's status of a one-block WRITE(10) through DEV, unit attentions taken first.
write_status() {
	local i out
	for i in 1 2 3 4; do
		out=$(sg_raw -s 512 -i /tmp/blk512 /dev/$1 2a 00 00 00 00 08 00 00 01 00 2>&1)
		echo "$out" | grep -qi 'unit attention' || break
	done
	echo "$out" | grep -qi 'reservation conflict' && { echo conflict; return; }
	# sg_raw says nothing more on success (some versions "SCSI Status: Good").
	[ -z "$(echo "$out" | grep -iE 'status|sense|error' | grep -vi 'status: *good')" ] && { echo good; return; }
	echo "$out" | head -3 | tr '\n' ' '
}
write_conflicts() { [ "$(write_status $1)" = conflict ]; }
write_passes() { local s; s=$(write_status $1); [ "$s" = good ] || { echo "    $s"; return 1; }; }
blk_write_refused() { ! blk_write "$@"; }
# blk_write DEV FILE / blk_same DEV FILE: 1 MiB at 4 MiB, written (O_DIRECT) / read back equal.
blk_write() { dd if=$2 of=/dev/$1 bs=1M count=1 seek=4 oflag=direct status=none 2>/dev/null; }
blk_same() { dd if=/dev/$1 bs=1M count=1 skip=4 iflag=direct status=none | cmp -s - $2; }
# uas_clear DEV: TEST UNIT READY until no unit attention is left (sg_persist would fail on one).
uas_clear() { local i; for i in 1 2 3 4 5; do sg_turs /dev/$1 >/dev/null 2>&1 && return 0; done; }
# prout DEV ARGS...: sg_persist -n -o ARGS through DEV.
prout() { uas_clear $1; sg_persist -n -o "${@:2}" -d /dev/$1; }
# keys_are DEV KEY...: sg_persist's READ KEYS through DEV lists exactly these keys.
keys_are() {
	local got want
	uas_clear $1
	got=$(sg_persist -n -i -k -d /dev/$1 | awk '/^ +0x/ {print $1}' | sort | tr '\n' ' ')
	want=$(printf '%s\n' "${@:2}" | sort | tr '\n' ' ')
	echo "    keys through $1: $got"
	[ "$got" = "$want" ]
}
# holder_is DEV KEY TYPE: READ RESERVATION through DEV: held by KEY, TYPE in sg_persist's words.
holder_is() {
	local out; uas_clear $1; out=$(sg_persist -n -i -r -d /dev/$1)
	echo "$out" | grep -q "Key=$2" && echo "$out" | grep -qi "$3"
}

cl_nodes() {
	local d1 d2
	vm_log "=== two cluster nodes, one through each gateway"
	iscsi_iface h1 $CL_NODE1 && iscsi_iface h2 $CL_NODE2
	iscsi_node $CL_T 127.0.0.1:3260 h1 && iscsi_node $CL_T 127.0.0.2:3260 h2
	must "nodes: node 1 logs in through gateway A" iscsi_login $CL_T 127.0.0.1:3260 h1
	must "nodes: node 2 logs in through gateway B" iscsi_login $CL_T 127.0.0.2:3260 h2
	d1=$(cl_dev 127.0.0.1) d2=$(cl_dev 127.0.0.2)
	echo "    node 1: /dev/$d1 (gateway A), node 2: /dev/$d2 (gateway B)"
	head -c 512 /dev/urandom > /tmp/blk512
	ok "fence_scsi: node 1 unfences (-o on: registers key 1, reserves WRITE EXCLUSIVE - REGISTRANTS ONLY through A)" \
		fence_scsi -o on -k 1 -d /dev/$d1
	ok "fence_scsi: node 2 unfences through B" fence_scsi -o on -k 2 -d /dev/$d2
	ok "sg_persist through B: keys 0x1 and 0x2" keys_are $d2 0x1 0x2
	ok "sg_persist through B: WRITE EXCLUSIVE - REGISTRANTS ONLY held by 0x1" holder_is $d2 0x1 'registrants only'
	ok "node 1 writes through A" write_passes $d1
	ok "fence_scsi: node 2 fences node 1 (-o off: PREEMPT AND ABORT through B)" fence_scsi -o off -k 1 -d /dev/$d2
	ok "fence_scsi -o status: node 1 off" bash -c "! fence_scsi -o status -k 1 -d /dev/$d1 >/dev/null"
	ok "fence_scsi -o status: node 2 on" fence_scsi -o status -k 2 -d /dev/$d2
	ok "node 1's write through A: RESERVATION CONFLICT" write_conflicts $d1
	ok "sg_persist through A: only key 0x2" keys_are $d1 0x2
	ok "sg_persist through A: 0x2 holds the reservation" holder_is $d1 0x2 'registrants only'
	ok "fence_scsi: node 1 unfenced again (-o on through A)" fence_scsi -o on -k 1 -d /dev/$d1
	ok "node 1 writes through A again" write_passes $d1
	prout $d2 -C -K 0x2 >/dev/null

	# Windows cluster validation's arbitration, data checked.
	head -c 1M /dev/urandom > /tmp/p1; head -c 1M /dev/urandom > /tmp/p2
	ok "validation: node 1 registers 0xa1 through A" prout $d1 -G -S 0xa1
	ok "validation: node 2 registers 0xa2 through B" prout $d2 -G -S 0xa2
	ok "validation: node 1 reserves WRITE EXCLUSIVE - REGISTRANTS ONLY" prout $d1 -R -K 0xa1 -T 5
	ok "validation: node 1 writes 1 MiB through A" blk_write $d1 /tmp/p1
	ok "validation: node 2 reads node 1's data through B" blk_same $d2 /tmp/p1
	ok "validation: node 2 preempts and aborts node 1 through B" prout $d2 -A -K 0xa2 -S 0xa1 -T 5
	ok "validation: node 1's write through A is refused" blk_write_refused $d1 /tmp/p2
	ok "validation: node 2 writes 1 MiB through B" blk_write $d2 /tmp/p2
	ok "validation: node 1 reads node 2's data through A" blk_same $d1 /tmp/p2
	ok "validation: node 2 reads its data through B" blk_same $d2 /tmp/p2
	ok "validation: node 2 clears" prout $d2 -C -K 0xa2
	iscsi_logout $CL_T 127.0.0.1:3260 h1 >/dev/null; iscsi_logout $CL_T 127.0.0.2:3260 h2 >/dev/null
	wait_for 30 bash -c "! ls /sys/class/iscsi_session/ 2>/dev/null | grep -q ."
}

same_prio() { local a b; a=$(mp_prio $1) b=$(mp_prio $2); echo "    priorities: $1 $a, $2 $b"; [ -n "$a" ] && [ "$a" = "$b" ]; }
blocklisted() { [ -n "$1" ] && ceph osd blocklist ls 2>/dev/null | grep -qF "$1"; }
b_took_over() { [ "$(gw_group_state b 1)" = unavailable ] && [ "$(gw_group_state b 2)" = active_optimized ]; }
# mp_io_both DEV1 DEV2: over one second I/O reaches both.
mp_io_both() {
	local a1 b1 a2 b2
	a1=$(mp_sectors $1) b1=$(mp_sectors $2); sleep 1; a2=$(mp_sectors $1) b2=$(mp_sectors $2)
	[ $((a2 - a1)) -gt 0 ] && [ $((b2 - b1)) -gt 0 ]
}
# The longest completion latency of any fio round, in seconds (fio prints clat in usec or msec).
fio_longest() {
	awk '/ clat \((usec|msec)\)/ { u = $2 == "(msec):" ? 1e3 : 1e6
	     for (i = 3; i <= NF; i++) if ($i ~ /^max=/) { v = $i; sub(/max=/, "", v); sub(/,/, "", v)
	       if (v / u > m) m = v / u } } END { printf "%.1f\n", m }' "$VM_WORK"/mp-fio-*.txt
}

cl_multipath() {
	local d1 d2 dm fio_pid r addr_a t_kill
	vm_log "=== dm-multipath over both gateways, both active/optimized"
	iscsi_node $CL_T 127.0.0.1:3260 && iscsi_node $CL_T 127.0.0.2:3260
	must "multipath: login through gateway A" iscsi_login $CL_T 127.0.0.1:3260
	must "multipath: login through gateway B" iscsi_login $CL_T 127.0.0.2:3260
	d1=$(cl_dev 127.0.0.1) d2=$(cl_dev 127.0.0.2)
	must "multipath: multipathd starts" mp_start
	ok "multipath: one map holds both paths" wait_for 30 mp_two_paths $d1 $d2
	dm=$(mp_map $d1)
	multipath -ll 2>/dev/null | sed 's/^/    /'
	ok "multipath: both paths ranked alike (both groups active/optimized)" same_prio $d1 $d2
	rm -f "$VM_WORK/mp.stop"
	mp_fio_loop $dm & fio_pid=$!
	ok "multipath: fio writes and verifies through $dm, through both gateways" wait_for 60 mp_io_both $d1 $d2
	ok "multipath: a fio round verified with both gateways writing" wait_for 240 mp_rounds_ge 1
	addr_a=$(gw b --json cluster | python3 -c '
import json, sys
for o in json.load(sys.stdin).get("reservations", []):
    for g in o.get("gateways", []):
        if not g.get("self"): print(g["addr"]); sys.exit()')
	echo "    gateway A's client: ${addr_a:-?}"
	r=$(grep -c "^round" "$VM_WORK/mp-fio.txt")
	t_kill=$(vm_now)
	kill -9 $GW_A; wait $GW_A 2>/dev/null; GW_A=
	vm_log "gateway A killed (-9)"
	ok "multipath: I/O goes on through gateway B only" wait_for 120 mp_io_on $d2 $d1
	echo "    I/O flowing through B only $(vm_took $t_kill) after the kill"
	mp_show
	ok "multipath: gateway B fenced A" wait_for 60 grep -q "fenced (blocklisted)" "$VM_WORK/gw-b.log"
	grep "fenced" "$VM_WORK/gw-b.log" | head -2 | sed 's/^/    /'
	ok "multipath: A's client is on the OSDs' blocklist" blocklisted "$addr_a"
	ok "multipath: B reports A's group 1 unavailable and its own group 2 active/optimized" \
		wait_for 30 b_took_over
	ok "multipath: fio went on (2 more rounds)" wait_for 300 mp_rounds_ge $((r + 2))
	touch "$VM_WORK/mp.stop"
	wait $fio_pid
	ok "multipath: every fio round wrote and verified with no error" mp_fio_clean $((r + 2))
	echo "    time to resume: the longest a write waited, over every round: $(fio_longest) s"
	ok "multipath: rbd export of the image equals what the map reads" \
		bash -c "cmp <(rbd export --no-progress rbd/cl - 2>/dev/null) <(dd if=/dev/$dm bs=1M iflag=direct status=none)"
	mp_stop
	iscsiadm -m node -T $CL_T --logout >/dev/null 2>&1
	kill $GW_B; wait $GW_B; r=$?; GW_B=
	ok "multipath: gateway B stops cleanly" [ $r -eq 0 ]
}

FL_T=iqn.2026-11.org.isert.vm:fleet
FL_GW=()
# fl_file N: gateway N's own file: portal group N on 127.0.0.N:3260, image rbd/fl at LUN 0, three ALUA
# groups (its own in "tpgs", the others' ports in "remote_ports"), as gateways that each keep a file do.
fl_file() {
	local n=$1 g key groups=
	for g in 1 2 3; do
		key=remote_ports; [ $g = $n ] && key=tpgs
		groups="$groups${groups:+,} { \"id\": $g, \"state\": \"active_optimized\", \"$key\": [ $g ] }"
	done
	cat <<EOF
{ "backstores": [ { "name": "fl", "type": "rbd", "pool": "rbd", "image": "fl", "conf": "$CEPH_CONF" } ],
  "targets": [ { "iqn": "$FL_T", "alua": { "mode": "both", "groups": [ $groups ] },
    "tpgs": [ { "tag": $n, "demo_mode": true, "portals": [ { "ip": "127.0.0.$n", "port": 3260 } ],
      "luns": [ { "lun": 0, "backstore": "fl" } ] } ] } ],
  "global": { "reactors": 1 } }
EOF
}
gwf() { "$ISERT_BUILD/tools/iserctl/iserctl" -s /run/fl-$1.sock "${@:2}"; }
# fl_dev IP LUN: the disk of LUN through the session to IP.
fl_dev() {
	local c s
	for c in /sys/class/iscsi_connection/connection*; do
		[ "$(cat $c/persistent_address 2>/dev/null)" = "$1" ] || continue
		s=${c##*/connection}; s=${s%%:*}
		ls /sys/class/iscsi_session/session$s/device/target*/*:*:*:$2/block 2>/dev/null | head -1
		return 0
	done
	return 1
}
fl_devs() { local n; for n in 1 2 3; do fl_dev 127.0.0.$n $1; done | grep -c .; }
fl_lun_everywhere() { [ "$(fl_devs $1)" -eq 3 ]; }   # fl_lun_everywhere LUN: a disk through each gateway
fl_three_paths() {   # fl_three_paths D1 D2 D3: one map holds the three
	[ -n "$(mp_map $1)" ] && [ "$(mp_map $1)" = "$(mp_map $2)" ] && [ "$(mp_map $1)" = "$(mp_map $3)" ] &&
		[ -b /dev/$(mp_map $1) ]
}
# fl_io_on_not D1 D2 D3: over one second I/O reaches D1 or D2, none D3.
fl_io_on_not() {
	local a1 b1 c1 a2 b2 c2
	a1=$(mp_sectors $1) b1=$(mp_sectors $2) c1=$(mp_sectors $3); sleep 1
	a2=$(mp_sectors $1) b2=$(mp_sectors $2) c2=$(mp_sectors $3)
	[ $((a2 - a1 + b2 - b1)) -gt 0 ] && [ $((c2 - c1)) -eq 0 ]
}
fl_generation_all() {   # every running gateway of the fleet (asked through gateway 1) runs one generation
	gwf 1 --json cluster status | python3 -c '
import json, sys
d = json.load(sys.stdin); g = {x["generation"] for x in d["gateways"] if x["running"]}
sys.exit(0 if len(g) == 1 and None not in g else 1)'
}

cl_fleet() {
	local n d1 d2 d3 e1 e2 e3 dm dm1 fio_pid r
	vm_log "=== a fleet of three gateways: a LUN added through one under multipath I/O, a gateway removed"
	must "fleet: images rbd/fl and rbd/fl1" bash -c "rbd create --size 192M --image-feature layering rbd/fl &&
		rbd create --size 64M --image-feature layering rbd/fl1"
	for n in 1 2 3; do fl_file $n > /tmp/fl-$n.json; done
	must "fleet: iserctl cluster import of the three gateways' files" "$ISERT_BUILD/tools/iserctl/iserctl" cluster \
		import --gateway gw-1=/tmp/fl-1.json --gateway gw-2=/tmp/fl-2.json --gateway gw-3=/tmp/fl-3.json -o /tmp/fleet.json
	must "fleet: the document stored in RADOS" rados -p rbd put isert_config.vm /tmp/fleet.json
	for n in 1 2 3; do
		mkdir -p /tmp/fl-state-$n
		"$ISERT_BUILD/target/isertd" --cluster rbd/vm --gateway gw-$n --state-dir /tmp/fl-state-$n \
			--admin-socket /run/fl-$n.sock >> "$VM_WORK/fl-$n.log" 2>&1 &
		FL_GW[$n]=$!
		must "fleet: gateway $n starts (portal group $n, 127.0.0.$n)" \
			wait_for 60 bash -c "ss -Hltn 'src 127.0.0.$n and sport = :3260' | grep -q ."
	done
	for n in 1 2 3; do
		iscsi_node $FL_T 127.0.0.$n:3260
		must "fleet: login through gateway $n" iscsi_login $FL_T 127.0.0.$n:3260
	done
	must "fleet: LUN 0 is a disk through each gateway" wait_for 30 fl_lun_everywhere 0
	d1=$(fl_dev 127.0.0.1 0) d2=$(fl_dev 127.0.0.2 0) d3=$(fl_dev 127.0.0.3 0)
	echo "    LUN 0: /dev/$d1 /dev/$d2 /dev/$d3"
	must "fleet: multipathd starts" mp_start
	must "fleet: one map holds the three paths" wait_for 30 fl_three_paths $d1 $d2 $d3
	dm=$(mp_map $d1)
	rm -f "$VM_WORK/mp.stop"
	mp_fio_loop $dm & fio_pid=$!
	ok "fleet: a fio round verified on LUN 0's map" wait_for 240 mp_rounds_ge 1
	ok "fleet: backstore fl1 added through gateway 2" gwf 2 create /backstores/fl1 type=rbd pool=rbd image=fl1 \
		"conf=$CEPH_CONF"
	ok "fleet: LUN 1 added through gateway 2 (its portal group 2)" gwf 2 create /iscsi/$FL_T/tpg2/luns/lun1 backstore=fl1
	ok "fleet: every gateway runs the new generation" wait_for 30 fl_generation_all
	gwf 1 cluster status | sed 's/^/    /'
	iscsiadm -m session --rescan >/dev/null
	ok "fleet: after a rescan LUN 1 is a disk through all three gateways" wait_for 60 fl_lun_everywhere 1
	e1=$(fl_dev 127.0.0.1 1) e2=$(fl_dev 127.0.0.2 1) e3=$(fl_dev 127.0.0.3 1)
	ok "fleet: LUN 1 is one map of three paths" wait_for 30 fl_three_paths $e1 $e2 $e3
	dm1=$(mp_map $e1)
	ok "fleet: LUN 1 written and verified in full through its map" fio --name=l1 --filename=/dev/$dm1 --direct=1 \
		--ioengine=libaio --iodepth=8 --rw=write --bs=64k --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--eta=never --output="$VM_WORK/fl-lun1.txt"
	r=$(grep -c "^round" "$VM_WORK/mp-fio.txt")
	ok "fleet: gateway 3 removed from the fleet through gateway 1, under I/O" gwf 1 gateway remove gw-3
	ok "fleet: gateway 3's path takes no I/O, gateways 1 and 2 do" wait_for 120 fl_io_on_not $d1 $d2 $d3
	ok "fleet: gateway 3 says it was removed" grep -q "is not in the fleet's document" "$VM_WORK/fl-3.log"
	ok "fleet: fio went on (2 more rounds)" wait_for 300 mp_rounds_ge $((r + 2))
	touch "$VM_WORK/mp.stop"
	wait $fio_pid
	ok "fleet: every fio round on LUN 0 wrote and verified with no error" mp_fio_clean $((r + 2))
	mp_stop
	iscsiadm -m node -T $FL_T --logout >/dev/null 2>&1
	for n in 1 2 3; do
		kill ${FL_GW[$n]}; wait ${FL_GW[$n]}; r=$?; FL_GW[$n]=
		ok "fleet: gateway $n stops cleanly" [ $r -eq 0 ]
	done
}

vm_cleanup_hook() {
	touch "$VM_WORK/mp.stop"
	mp_stop
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	for p in $GW_A $GW_B "${FL_GW[@]}"; do kill -9 $p 2>/dev/null; done
	"$ISERT_SRC/tests/ceph/cluster.sh" stop $CL_DIR >/dev/null 2>&1
}

command -v fence_scsi >/dev/null || { echo "fence_scsi not found: apt-get install fence-agents (tools/deps.sh)"; exit 1; }
mkdir -p $CL_DIR
must "ceph: a one-mon, one-OSD cluster starts in the guest" "$ISERT_SRC/tests/ceph/cluster.sh" start $CL_DIR
export CEPH_CONF=$CL_DIR/ceph.conf
must "ceph: image rbd/cl, 192 MiB, layering only (no exclusive-lock)" \
	rbd create --size 192M --image-feature layering rbd/cl
must "gateway A starts (portal group 1, 127.0.0.1)" gateway a 1 127.0.0.1
must "gateway B starts (portal group 2, 127.0.0.2)" gateway b 2 127.0.0.2
must "iscsid starts" iscsi_start
cl_nodes
cl_multipath
cl_fleet
vm_done
