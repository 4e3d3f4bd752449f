#!/bin/bash
# Data integrity soak over iSER: the kernel initiator logs in to isertd and
# runs fio randrw 4k-1m QD16 with crc32c verification FIO_LOOPS times
# (default 4) for FIO_SECS each (default 30), on each provider in
# FIO_PROVIDERS (default "siw").  This is how the siw zero-copy corruption was
# reproduced (3 of 4 loops failed before the fix, 0 of 4 after).  Not part of
# the suite:  FIO_LOOPS=8 tests/vm/run.sh --timeout 1200 tests/vm/fio-verify-loop.sh
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
vm_cleanup_hook() { iscsiadm -m node --logoutall=all >/dev/null 2>&1; isertd_stop >/dev/null 2>&1; }
must "iscsid starts" iscsi_start
for p in ${FIO_PROVIDERS:-siw}; do
	ip=$(rdma_ip $p) portal=$(rdma_ip $p):3260 t=$VM_PREFIX:open
	must "$p: RDMA device up" rdma_up $p
	sed "s/@IP@/$ip/; s/@POLL@/event/" "$(dirname "$VM_LIB")/isertd-iser.json" > /tmp/fio-loop.json
	must "$p: isertd starts" isertd_start /tmp/fio-loop.json 3262
	iscsi_discover "$portal" iser >/dev/null
	must "$p: login over iSER" bash -c "iscsiadm -m node -T $t -p $portal -I iser --login >/dev/null"
	must "$p: disks appear" iscsi_wait_disks $t 2
	read -r _ dev <<< "$(iscsi_disks $t | head -1)"
	for i in $(seq ${FIO_LOOPS:-4}); do
		ok "$p: fio verify loop $i" fio --name=verify --filename=/dev/$dev --direct=1 --ioengine=libaio \
			--iodepth=16 --rw=randrw --bsrange=4k-1m --verify=crc32c --verify_fatal=1 --size=128m \
			--time_based --runtime=${FIO_SECS:-30} --eta=never --output="$VM_WORK/fio-$p-$i.txt"
		grep -E "verify failed|READ:|WRITE:" "$VM_WORK/fio-$p-$i.txt" | head -3 | sed 's/^/    /'
	done
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	isertd_stop >/dev/null 2>&1
done
vm_done
