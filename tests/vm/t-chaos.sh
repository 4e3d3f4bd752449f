#!/bin/bash
# The chaos soak (tests/chaos/README.md) in the guest: chaos.py's host
# clients and events, plus the kernel initiator with fio crc32c verify on its
# own LUN over TCP, over iSER on Soft-RoCE and on Soft-iWARP and on a
# dm-multipath map (TCP and iSER paths in two ALUA groups, the preferred one
# put in standby and back), `iseradm map` with fio verify, and RDMA link
# flaps.  CHAOS_SECONDS (default 45) and CHAOS_SEED (default 1); the report
# and the logs are copied to the work folder (chaos/).
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/multipath.sh"
vm_cleanup_hook() { mp_stop; iscsiadm -m node --logoutall=all >/dev/null 2>&1; pkill -x isertd; return 0; }
must "iscsid" iscsi_start
MP_FIND=yes   # the map over :kmp's two paths only; the single-path clients keep their disks
must "multipathd (ALUA handler, udevd)" mp_start
RXE=$(rdma_up rxe) && SIW=$(rdma_up siw)
must "Soft-RoCE and Soft-iWARP up" test -n "$RXE" -a -n "$SIW"
chaos() {
	python3 "$ISERT_SRC/tests/chaos/chaos.py" --build "$ISERT_BUILD" --seconds "${CHAOS_SECONDS:-45}" \
		--seed "${CHAOS_SEED:-1}" --port 3300 --work /tmp/chaos --guest "$RXE,$SIW" \
		--initiator "$ISCSI_INITIATOR" > "$VM_WORK/chaos.log" 2>&1
	local rc=$?
	# The work folder holds the admin socket, which the 9p share cannot: copy what is worth keeping.
	mkdir -p "$VM_WORK/chaos" && cp /tmp/chaos/*.json /tmp/chaos/*.log /tmp/chaos/*.txt /tmp/chaos/*.out "$VM_WORK/chaos/" 2>/dev/null
	grep -vE '^ok ' "$VM_WORK/chaos.log" | sed 's/^/    /' | tail -60
	# Soft-RoCE's QP1 (GSI) in ERR means no connection can be made on rxe0 any more (tests/chaos/README.md).
	rdma res show qp > "$VM_WORK/chaos/qp.txt" 2>&1; grep GSI "$VM_WORK/chaos/qp.txt" | sed 's/^/    /'
	return $rc
}
ok "chaos soak: every verifying client checks, no isertd died unasked, memory bounded" chaos
vm_done
