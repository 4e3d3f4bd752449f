#!/bin/bash
# The guest itself: NVMe namespace (discard, volatile write cache, and that the
# NVMe command tracing the other tests rely on sees flush, FUA and discard), ublk,
# Soft-RoCE and Soft-iWARP bring-up.  Then the deployment guide
# (docs/deploy-iser.md) runs, every `sh` block in order, on Soft-RoCE.
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"

must "nvme: $NVME_DEV present with discard and a volatile write cache" nvme_ready
ok "ublk: /dev/ublk-control present" test -c /dev/ublk-control
ok "io_uring usable (O_DIRECT read of the namespace)" \
	fio --name=probe --filename=$NVME_DEV --ioengine=io_uring --direct=1 --rw=read --bs=4k --size=64k --output=/dev/null

# The trace counters must see each kind on the raw device; otherwise a later
# "did not reach the NVMe namespace" would be a harness bug.
must "tracing: nvme_setup_cmd" nvmetrace_start
dd if=/dev/urandom of=/tmp/pat bs=64k count=1 status=none
dd if=/tmp/pat of=$NVME_DEV bs=64k count=1 oflag=direct,dsync status=none
ok "tracing: an O_DSYNC direct write reaches the namespace with FUA" test "$(nvmetrace_count fua)" -ge 1
nvmetrace_clear
sync $NVME_DEV   # fsync on the block device: a cache flush
ok "tracing: fsync reaches the namespace as a flush" test "$(nvmetrace_count flush)" -ge 1
nvmetrace_clear
blkdiscard -o 1048576 -l 1048576 $NVME_DEV
ok "tracing: blkdiscard reaches the namespace as a deallocation" test "$(nvmetrace_count dealloc)" -ge 1
nvmetrace_clear
fallocate -z -o 2097152 -l 1048576 $NVME_DEV
ok "tracing: fallocate ZERO_RANGE reaches the namespace as Write Zeroes" test "$(nvmetrace_count zeroes)" -ge 1
nvmetrace_stop

rdma_check() {   # rdma_check PROVIDER IP
	local p=$1 ip=$2
	ok "$p: ${p}0 port ACTIVE on $ip" rdma_port_active ${p}0
	ok "$p: rdma link lists ${p}0" sh -c "rdma link show | grep -q '^link ${p}0/1 state ACTIVE'"
	ok "$p: address $ip on its netdev" sh -c "ip -4 addr show vmnet_$p | grep -q 'inet $ip/'"
}
ok "rdma: both providers come up" for_each_rdma rdma_check
ok "rdma: devices removed afterwards" test -z "$(ls /sys/class/infiniband 2>/dev/null)"

source "$(dirname "$VM_LIB")/isns.sh"   # open-iscsi discovering isertd's targets through iSNS (isnsd)

# deploy_doc: docs/deploy-iser.md's commands as tests/docs/doc_script.py
# makes them one script, with this guest's site values; isertd, iserctl,
# iseradm and iserbench from the build tree.
deploy_doc() {
	local ip rc
	ip=$(rdma_up rxe) && iscsi_start || return 1
	python3 "$ISERT_SRC/tests/docs/doc_script.py" "$ISERT_SRC/docs/deploy-iser.md" > /tmp/deploy.sh || return 1
	# The portal's tos=106 as rdma_cm holds it: its trace event of a cm_id's end shows the ToS.
	echo > $TR/trace && echo 1 > $TR/events/rdma_cma/cm_id_destroy/enable && echo 1 > $TR/tracing_on || return 1
	mkdir -p /tmp/deploy && (cd /tmp/deploy &&
		PATH=$ISERT_BUILD/target:$ISERT_BUILD/tools/iserctl:$ISERT_BUILD/initiator:$ISERT_BUILD/tools/iserbench:$PATH \
		IP=$ip RDMA_DEV=rxe0 NVME=$NVME_DEV IQN=$VM_PREFIX:deploy CHAP_USER=$CHAP_USER CHAP_PASS=$CHAP_PASS secs=2 \
		timeout 600 bash /tmp/deploy.sh) > "$VM_WORK/deploy.log" 2>&1
	rc=$?
	sed 's/^/    /' "$VM_WORK/deploy.log" | tail -60
	pkill -TERM -x isertd && wait_for 20 sh -c '! pgrep -x isertd >/dev/null'
	echo 0 > $TR/events/rdma_cma/cm_id_destroy/enable
	grep -o "cm_id_destroy: .*dst=0.0.0.0:0 .*" $TR/trace | sed "s/^/    /"
	grep -q "cm_id_destroy: .*src=$ip:3260 dst=0.0.0.0:0 tos=106" $TR/trace ||
		{ echo "    isertd's RDMA CM listener on $ip:3260 did not hold tos 106"; rc=1; }
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	rdma_down rxe
	return $rc
}
ok "docs/deploy-iser.md: every command runs, in order (Soft-RoCE, the NVMe namespace, open-iscsi over iSER, iseradm map, an iserbench sweep); the iSER listener held its tos" deploy_doc
vm_done
