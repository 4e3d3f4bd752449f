#!/bin/bash
# dm-multipath (multipath-tools, `prio alua`) over two paths to one isertd LU
# (isertd-multipath.json): path 1 iSER on Soft-iWARP in target port group 1
# (active/optimized, preferred), path 2 iSER on Soft-RoCE in group 2
# (active/non-optimized); MP_PATH2=tcp makes path 2 TCP.  fio writes and
# verifies the multipath device in rounds for the whole sequence while group
# 1 goes standby and back, unavailable and back (iserctl alua set), and while
# path 1's link goes down and up: I/O moves to path 2 and returns to path 1,
# and every fio round verifies.  Then `iseradm map` over the same two
# portal groups (map_alua): group 1 standby and back under fio.
# The link that goes down is Soft-iWARP's: when a Soft-RoCE link went down
# under a busy connection, the guest kernel's rxe left its GSI QP (the one
# RoCE's connection manager sends on) in the error state after the link came
# back (`rdma res show qp`), and open-iscsi's reconnect never completed.
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/ublk-map.sh"
source "$(dirname "$VM_LIB")/multipath.sh"
ADM="$ISERT_BUILD/initiator/iseradm --initiator-name $ISCSI_INITIATOR"
ISERTD_SOCK=/run/isertd-vm.sock
MP_T=$VM_PREFIX:mp
MP_PATH2=${MP_PATH2:-rxe}

# mp_state STATE DEV OTHER: group 1 put in STATE; I/O then reaches DEV only.
mp_state() { iserctl alua set $MP_T 1 "$1" >/dev/null && wait_for 120 mp_io_on $2 $3; }
# mp_tpg_writes: "W1 W2", the WRITEs isertd counted for $MP_T through portal groups 1 and 2.
mp_tpg_writes() {
	iserctl stats --json | python3 -c "
import json, sys
w = {1: 0, 2: 0}
for e in json.load(sys.stdin)['luns']:
    if e['target'] == '$MP_T' and e['tpg'] in w:
        w[e['tpg']] += e['commands']['write']
print(w[1], w[2])"
}
# mp_writes_via N: over one second WRITEs reach portal group N (1 or 2) and none the other.
mp_writes_via() {
	local a1 a2 b1 b2
	read -r a1 a2 <<< "$(mp_tpg_writes)"; sleep 1; read -r b1 b2 <<< "$(mp_tpg_writes)"
	[ -n "$a1" ] && [ -n "$b2" ] || return 1
	if [ $1 = 1 ]; then [ $((b1 - a1)) -gt 0 ] && [ $((b2 - a2)) -eq 0 ]
	else [ $((b2 - a2)) -gt 0 ] && [ $((b1 - a1)) -eq 0 ]; fi
}
# map_alua URL1 URL2: `iseradm map` (ublk-map.sh) with one queue and two
# paths into portal groups 1 and 2, failover; group 1 goes standby under the
# fio rounds and comes back: the WRITEs move to group 2, `maps` shows path 0
# standby, then up, and the WRITEs return to group 1; every round verifies.
map_alua() {
	local dev fio_pid
	ok "map ALUA: iseradm map over portal groups 1 and 2 (one queue, failover)" \
		map_up dev "$1" "$2" --queues 1 || return 1
	rm -f "$VM_WORK/mp.stop"
	mp_fio_loop ${dev#/dev/} & fio_pid=$!
	ok "map ALUA: fio's WRITEs go through group 1 (path 0) only" wait_for 60 mp_writes_via 1
	iserctl alua set $MP_T 1 standby >/dev/null
	ok "map ALUA: group 1 standby: maps shows path 0 standby" wait_for 30 map_path_is $dev 0 standby
	ok "map ALUA: the WRITEs go through group 2 only" wait_for 60 mp_writes_via 2
	iserctl alua set $MP_T 1 active_optimized >/dev/null
	ok "map ALUA: group 1 active again: maps shows path 0 up" wait_for 30 map_path_is $dev 0 up
	ok "map ALUA: the WRITEs return to group 1" wait_for 60 mp_writes_via 1
	touch "$VM_WORK/mp.stop"
	wait $fio_pid
	ok "map ALUA: every fio round wrote and verified with no error" mp_fio_clean 1
	ok "map ALUA: unmapped" map_down $dev
}

multipath_suite() {
	local ip1 ip2 iser2 if2 d1 d2 dm fio_pid r u2 cfg=/tmp/isertd-multipath.json
	vm_log "=== dm-multipath, ALUA: path 1 iSER on siw, path 2 $MP_PATH2"
	ip1=$(rdma_up siw) || { ok "multipath: Soft-iWARP up" false; return 1; }
	if [ "$MP_PATH2" = tcp ]; then ip2=127.0.0.2 iser2=false if2=default
	else ip2=$(rdma_up rxe) || { ok "multipath: Soft-RoCE up" false; return 1; }; iser2=true if2=iser; fi
	sed "s/@IP1@/$ip1/; s/@IP2@/$ip2/; s/@ISER2@/$iser2/" "$(dirname "$VM_LIB")/isertd-multipath.json" > $cfg
	must "multipath: isertd starts with portal group 1 on $ip1 (iSER) and 2 on $ip2" isertd_start $cfg 3262
	iscsi_node $MP_T $ip1:3260 iser && iscsi_node $MP_T $ip2:3260 $if2
	ok "multipath: login on path 1" iscsi_login $MP_T $ip1:3260 iser || return 1
	ok "multipath: login on path 2" iscsi_login $MP_T $ip2:3260 $if2 || return 1
	wait_for 30 mp_dev $ip1; wait_for 30 mp_dev $ip2
	d1=$(mp_dev $ip1) d2=$(mp_dev $ip2)
	echo "    path 1 $d1 ($ip1), path 2 $d2 ($ip2)"
	ok "multipath: the kernel's ALUA handler is attached to both paths" \
		bash -c "grep -qx alua /sys/block/$d1/device/dh_state && grep -qx alua /sys/block/$d2/device/dh_state"
	must "multipath: multipathd starts (udevd, prio alua, group_by_prio)" mp_start
	ok "multipath: one map holds both paths" wait_for 30 mp_two_paths $d1 $d2
	dm=$(mp_map $d1)
	multipath -ll 2>/dev/null | sed 's/^/    /'
	ok "multipath: prio alua ranks the active/optimized path 1 above the active/non-optimized path 2" \
		wait_for 30 mp_prio_above $d1 $d2
	mp_prio_above $d1 $d2
	rm -f "$VM_WORK/mp.stop"
	mp_fio_loop $dm & fio_pid=$!
	ok "multipath: fio writes and verifies through $dm, on path 1 only" wait_for 60 mp_io_on $d1 $d2
	ok "multipath: iserctl alua set group 1 standby: I/O moves to path 2" mp_state standby $d2 $d1
	mp_show
	ok "multipath: group 1 active_optimized again: I/O returns to path 1" mp_state active_optimized $d1 $d2
	ok "multipath: group 1 unavailable: I/O moves to path 2" mp_state unavailable $d2 $d1
	ok "multipath: group 1 active_optimized again: I/O returns to path 1" mp_state active_optimized $d1 $d2
	r=$(grep -c "^round" "$VM_WORK/mp-fio.txt")
	# Down and without its address: siw's TCP between two local addresses
	# runs over loopback whatever the dummy netdev's link state is.
	ip link set vmnet_siw down && ip addr flush dev vmnet_siw
	ok "multipath: path 1's link down: I/O continues on path 2" wait_for 90 mp_io_on $d2 $d1
	mp_show
	ip addr add $ip1/24 dev vmnet_siw && ip link set vmnet_siw up
	wait_for 20 rdma_port_active siw0
	ok "multipath: path 1's link up: the path returns and I/O is back on it" wait_for 120 mp_io_on $d1 $d2
	mp_show
	ok "multipath: fio went on through the link failure (2 more rounds)" wait_for 120 mp_rounds_ge $((r + 2))
	touch "$VM_WORK/mp.stop"
	wait $fio_pid
	ok "multipath: every fio round wrote and verified with no error" mp_fio_clean 4
	ok "multipath: no I/O error on the multipath device in dmesg" bash -c "! dmesg | grep -E 'I/O error.*dev $dm|$dm.*I/O error|Buffer I/O error on dev $dm'"
	mp_stop
	iscsiadm -m node -T $MP_T --logout >/dev/null 2>&1
	rm -f /etc/multipath.conf
	[ "$MP_PATH2" = tcp ] && u2=iscsi://$ip2/$MP_T/0 || u2=iser://$ip2/$MP_T/0
	map_alua iser://$ip1/$MP_T/0 $u2
	ok "multipath: isertd stops cleanly" isertd_stop
	rdma_down siw; [ "$MP_PATH2" = tcp ] || rdma_down rxe
}

vm_cleanup_hook() {
	touch "$VM_WORK/mp.stop"
	mp_stop
	$ADM maps 2>/dev/null | awk '/^\/dev\/ublkb/ {print $1}' | while read -r d; do $ADM unmap $d >/dev/null 2>&1; done
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	isertd_stop >/dev/null 2>&1
}
must "iscsid starts" iscsi_start
multipath_suite
vm_done
