#!/bin/bash
# By hand, not in the suite: vm-initiator-iser's multipath link flap on
# Soft-iWARP, MP_FLAPS times (default 16, about 50 s each) against one
# isertd.  iseradm map over iSER and TCP, fio verify, the iSER path's link
# down with its address flushed, back, the path logs in again (map_multipath
# in ublk-map.sh).  After each round the portal must still take a
# discovery: siw's listener dies when a connect to it is interrupted
# (docs/architecture.md), and stop 42's CI met that once.  siw's CM debug
# messages are on; each round's dmesg is kept as $VM_WORK/dmesg-N.txt
# ("kernel_bindconnect: error -512" is an interrupted connect).
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/ublk-map.sh"
ADM="$ISERT_BUILD/initiator/iseradm --initiator-name $ISCSI_INITIATOR"
vm_cleanup_hook() {
	local d
	for d in /dev/ublkc*; do [ -e "$d" ] && $ADM unmap "$d" >/dev/null 2>&1; done
	isertd_stop >/dev/null 2>&1
	return 0
}
dyndbg() { echo "file siw_cm.c $1" > /sys/kernel/debug/dynamic_debug/control 2>/dev/null; }
soak() {
	local p=$1 ip=$2 t=$VM_PREFIX:open i
	sed "s/@IP@/$ip/; s/@POLL@/event/" "$(dirname "$VM_LIB")/isertd-iser.json" > /tmp/isertd-iser-$p.json
	ok "$p isertd: starts with an iSER portal on $ip:3260" isertd_start /tmp/isertd-iser-$p.json 3262 || return 1
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	dyndbg +p || vm_log "no dynamic debug: dmesg-N.txt will not have siw's CM messages"
	for i in $(seq "${MP_FLAPS:-16}"); do
		vm_log "=== flap $i"
		dmesg -C
		map_multipath $ip vmnet_$p iser://$ip/$t/0 iscsi://127.0.0.1:3262/$t/0 iser://$ip/$t/1
		dmesg > "$VM_WORK/dmesg-$i.txt"
		# A broken listener takes no connection again; isertd's exit then panics the guest (siw_destroy_listen).
		ok "flap $i: the iSER portal still takes a discovery" adm_discovers iser://$ip || { dyndbg -p; return 1; }
	done
	dyndbg -p
	ok "$p isertd: survived and stops cleanly" isertd_stop
}
adm_discovers() { timeout 60 $ADM discover "$1" >/dev/null 2>&1; }
RDMA_PROVIDERS=siw
for_each_rdma soak
vm_done
