#!/bin/bash
# The harness checked against a known-good target: the kernel initiator
# sequences of t-isertd-tcp.sh and t-isertd-nvme.sh against LIO in the guest.
# Then the migration from LIO (iserctl import lio, docs/admin.md): LIO's
# configuration, with the cases lio-extras.py adds, saved by rtslib-fb as
# targetcli saveconfig writes it (kept as lio-saveconfig.json in the work
# folder: tests/import/'s fixture), LIO cleared, the file imported, isertd
# started on it on the same portal, and the node records with suite_tcp's
# CHAP settings (one-way, mutual) log in again; the ext4 written on the NVMe
# LUN through LIO reads back.
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/lio.sh"
PORTAL=127.0.0.1:3260
vm_cleanup_hook() {
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	[ -z "$ISERTD_PID" ] || ok "migrated: isertd stops cleanly on SIGTERM" isertd_stop
}
must "nvme: $NVME_DEV present" nvme_ready
must "LIO configured through configfs" lio_setup $PORTAL
must "iscsid starts" iscsi_start
suite_tcp $PORTAL
suite_nvme $PORTAL

# ---- migration ----------------------------------------------------------------
SAVED=$VM_WORK/lio-saveconfig.json IMPORTED=$VM_WORK/isertd-imported.json X=$VM_PREFIX:extra
import_rc_is() {   # import_rc_is STATUS: iserctl import lio's exit status, its messages kept
	"$ISERT_BUILD/tools/iserctl/iserctl" import lio "$SAVED" -o "$IMPORTED" 2> "$VM_WORK/import.err"
	local rc=$?; sed 's/^/    /' "$VM_WORK/import.err"; [ $rc -eq "$1" ]
}
iser_ip=$(rdma_up rxe) || iser_ip=-   # an iSER portal needs an RDMA device for ib_isert and isertd
ok "LIO: extra cases made with rtslib-fb (fileio in an ALUA group, demo mode with CHAP, iSER portal, a 2nd TPG)" \
	python3 -W ignore "$(dirname "$VM_LIB")/lio-extras.py" $X /tmp/lio-file0.img "$iser_ip" "$SAVED"
# rtslib removes a storage object's HBA with it; lio.sh keeps four ramdisks in rd_mcp_0, so one pass
# ends at that rmdir: again until nothing is left.
lio_clear() {
	local i
	for i in 1 2 3 4 5 6; do
		python3 -W ignore -c 'import rtslib_fb; rtslib_fb.RTSRoot().clear_existing(confirm=True)' 2>/dev/null && return 0
	done
	return 1
}
must "LIO cleared (rtslib-fb clear_existing)" lio_clear
must "iserctl import lio: written, the items not carried listed (exit 6)" import_rc_is 6
ok "no CHAP secret in import's messages" bash -c "! grep -qE 'vm-init1-secret|vm-target-secret|demo-secret-0123' '$VM_WORK/import.err'"
must "isertd starts on the imported configuration" isertd_start "$IMPORTED" 3260
# -o nonpersistent: a discovery that stores records would reset the node records' CHAP settings.
must "migrated: discovery lists $VM_PREFIX:open, :chap, :mutual, :nvme" test "$(iscsiadm -m discovery -t st \
	-p $PORTAL -o nonpersistent | awk '{print $2}' | grep -cE ":(open|chap|mutual|nvme)\$")" -eq 4
# suite_nvme's discovery rewrote the node records: the CHAP settings suite_tcp used, again.
iscsi_chap $VM_PREFIX:chap $PORTAL $CHAP_USER $CHAP_PASS
iscsi_chap $VM_PREFIX:mutual $PORTAL $CHAP_USER $CHAP_PASS $CHAP_MUSER $CHAP_MPASS
for t in open:2 chap:1 mutual:1; do
	ok "migrated: $VM_PREFIX:${t%:*}: the node record logs in, ${t#*:} LUN(s)" login_wait $VM_PREFIX:${t%:*} $PORTAL ${t#*:}
	ok "migrated: $VM_PREFIX:${t%:*}: logout" logout_gone $VM_PREFIX:${t%:*} $PORTAL
done
ok "migrated: $VM_PREFIX:nvme: login, 1 LUN" login_wait $VM_PREFIX:nvme $PORTAL 1
read -r _ dev <<< "$(iscsi_disks $VM_PREFIX:nvme)"
ok "migrated: $VM_PREFIX:nvme ($dev): the files written through LIO read back identical" \
	fs_verify /dev/$dev /mnt/nvme "$VM_WORK/nvme.sums"
ok "migrated: $VM_PREFIX:nvme: logout" logout_gone $VM_PREFIX:nvme $PORTAL
ok "migrated: $X (demo mode, CHAP demo-user): iscsi-inq on the fileio LUN 0" \
	iscsi-inq "iscsi://demo-user%demo-secret-0123@127.0.0.1:3261/$X/0"
vm_done
