# SANITIZE on the nvme backstore (sourced by t-isertd-nvme.sh, after
# suite_nvme_pt; docs/config.md "SANITIZE by backstore"): what QEMU's NVMe
# controller says it can do (nvme id-ctrl: OACS, SANICAP, FNA, NN) decides
# which erase isertd offers (NVMe Sanitize, else Format NVM with Secure Erase
# Settings, else none), and REPORT SUPPORTED OPERATION CODES, isertd's log and
# the command itself must agree with it: an offered BLOCK ERASE of the whole
# namespace leaves zeroes where a pattern was written, a refused one (and
# CRYPTO ERASE where it is not offered) is INVALID FIELD IN CDB and touches
# nothing.  OVERWRITE is the NVMe Write path every other check uses (its
# whole-namespace run under TCG would take minutes; the host's integration
# test covers it on RAM and file LUs).  First as the packaged unit runs
# isertd, without CAP_SYS_ADMIN (suite_sanitize_nvme_unit): no erase is
# offered, and a BLOCK ERASE is refused without the LU failing.

# id_ctrl FIELD: a field of Identify Controller as nvme-cli's JSON has it.
san_id_ctrl() { nvme id-ctrl "${NVME_DEV%n1}" -o json | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
# san_expect CRYPTO: what nvme_erase_plan decides for the whole namespace: sanitize, format or none.
san_expect() {
	local oacs sanicap fna nn bit
	oacs=$(san_id_ctrl oacs) sanicap=$(san_id_ctrl sanicap) fna=$(san_id_ctrl fna) nn=$(san_id_ctrl nn)
	bit=$([ "$1" = 1 ] && echo 1 || echo 2)
	if [ $((sanicap & bit)) -ne 0 ] && [ "$nn" -eq 1 ]; then echo sanitize
	elif [ $((oacs & 2)) -eq 0 ] || { [ "$1" = 1 ] && [ $((fna & 4)) -eq 0 ]; }; then echo none
	elif [ $((fna & 3)) -ne 0 ] && [ "$nn" -ne 1 ]; then echo none
	else echo format; fi
}
# san_rsoc DEV SA: REPORT SUPPORTED OPERATION CODES' SUPPORT field for SANITIZE/SA (3 supported, 1 not).
san_rsoc() { sg_opcodes --opcode=0x48,"$2" --raw "$1" 2>/dev/null | od -An -tu1 -j1 -N1 | awk '{print $1 % 8}'; }
san_zeroes() {   # san_zeroes DEV: the 64 KiB at 96 MiB read back as zeroes
	dd if="$1" iflag=direct bs=64k skip=$((96 * 16)) count=1 status=none | cmp -s - <(head -c 65536 /dev/zero)
}
san_pattern() {   # san_pattern DEV: 64 KiB of 0xab at 96 MiB, read back
	head -c 65536 /dev/zero | tr '\0' '\253' > /tmp/san-ab &&
		dd if=/tmp/san-ab of="$1" oflag=direct bs=64k seek=$((96 * 16)) count=1 status=none &&
		san_kept "$1"
}
san_kept() {   # san_kept DEV: the pattern san_pattern wrote is still there (read only)
	dd if="$1" iflag=direct bs=64k skip=$((96 * 16)) count=1 status=none | cmp -s - /tmp/san-ab
}
# san_b1 DEV MASK WANT: VPD B1's byte 7 (WABEREQ in bits 7-6, WACEREQ in bits 5-4) & MASK is WANT.
san_b1() {
	local b; b=$(sg_vpd --page=0xb1 --raw "$1" 2>/dev/null | od -An -tu1 -j7 -N1 | tr -d ' ')
	echo "    VPD B1 byte 7: ${b:-(none)}"
	[ -n "$b" ] && [ $((b & $2)) -eq $(($3)) ]
}
# san_refused_ifc DEV ARG: sg_sanitize ARG is refused as ILLEGAL REQUEST (status 5: INVALID FIELD IN CDB
# pointing at the service action; not 3, MEDIUM ERROR, what a failed erase gives).
san_refused_ifc() {
	local rc
	sg_sanitize -v "$2" --quick --wait "$1" > /tmp/san-refused.txt 2>&1; rc=$?
	grep -iE 'sanitize|sense|illegal|invalid' /tmp/san-refused.txt | sed 's/^ */    /'
	echo "    sg_sanitize $2: status $rc"
	[ $rc -eq 5 ] && grep -qi 'Invalid field in cdb' /tmp/san-refused.txt
}
suite_sanitize_nvme() {
	local p=$1 t=$VM_PREFIX:nvmept lun dev block crypto want
	block=$(san_expect 0) crypto=$(san_expect 1)
	echo "    nvme id-ctrl: oacs=$(san_id_ctrl oacs) sanicap=$(san_id_ctrl sanicap) fna=$(san_id_ctrl fna)" \
		"nn=$(san_id_ctrl nn): block erase by $block, crypto erase by $crypto"
	must "isertd starts (isertd-nvme-pt.json) for SANITIZE" isertd_start "$CONFIG_PT"
	want=$(case $block in sanitize) echo "block erase by NVMe Sanitize";; format) echo "block erase by Format NVM";;
		*) echo "block erase not offered";; esac)
	ok "isertd's log: SANITIZE $want" grep -q "SANITIZE $want" "$VM_WORK/isertd.log"
	must "discovery lists $t" has_line $t <<< "$(iscsi_discover "$p")"
	must "$t: login" login_wait $t "$p" 1
	read -r lun dev <<< "$(iscsi_disks $t)"
	ok "RSOC: SANITIZE OVERWRITE supported" test "$(san_rsoc /dev/$dev 1)" = 3
	ok "RSOC: SANITIZE BLOCK ERASE $([ $block = none ] && echo "not ")supported, as id-ctrl says" \
		test "$(san_rsoc /dev/$dev 2)" = "$([ $block = none ] && echo 1 || echo 3)"
	ok "RSOC: SANITIZE CRYPTO ERASE $([ $crypto = none ] && echo "not ")supported, as id-ctrl says" \
		test "$(san_rsoc /dev/$dev 3)" = "$([ $crypto = none ] && echo 1 || echo 3)"
	ok "VPD B1: WABEREQ $([ $block = none ] && echo 00b || echo 01b), as id-ctrl says" \
		san_b1 /dev/$dev 0xc0 "$([ $block = none ] && echo 0 || echo 0x40)"
	ok "a pattern written at 96 MiB reads back" san_pattern /dev/$dev
	if [ $block != none ]; then
		ok "sg_sanitize --block (IMMED=0): the namespace erased by $block" \
			sg_sanitize --block --quick --wait --timeout=600 /dev/$dev
		ok "after BLOCK ERASE the pattern reads back as zeroes" san_zeroes /dev/$dev
	else
		ok "sg_sanitize --block is refused" bash -c "! sg_sanitize --block --quick --wait /dev/$dev"
		ok "the refused BLOCK ERASE left the pattern" san_kept /dev/$dev
	fi
	if [ $crypto = none ]; then
		ok "sg_sanitize --crypto is refused" bash -c "! sg_sanitize --crypto --quick --wait /dev/$dev"
	fi
	ok "TEST UNIT READY after it: ready" sg_turs /dev/$dev
	must "$t: logout" logout_gone $t "$p"
	ok "isertd (nvme backstore, SANITIZE) stops cleanly" isertd_stop
}

# ---- as the packaged unit runs isertd: no CAP_SYS_ADMIN ----------------------
# isertd.service keeps CAP_SYS_ADMIN out of its bounding set, and Linux passes
# an NVMe admin command other than Identify only with it: Format NVM and
# Sanitize fail with EACCES.  isertd asks the kernel at open and does not
# offer the erases then (docs/admin.md, "Sanitizing a LU"), where it used to
# offer them, fail the BLOCK ERASE and leave the LU in sanitize failure mode,
# remembered across restarts.  isertd runs here under the unit's own
# capabilities and system call filter (UNIT_CONFINE, lib.sh).
san_no_marker() { ! ls $STATE_DIR/sanitize-* 2>/dev/null; }
suite_sanitize_nvme_unit() {
	local p=$1 t=$VM_PREFIX:nvmept lun dev
	python3 "$ISERT_SRC/tests/package/unit_confine.py" "$ISERT_SRC/configs/systemd/isertd.service.in" --show -- true 2>&1 |
		sed 's/^/    /'
	ISERTD_WRAP=$UNIT_CONFINE
	must "isertd starts under isertd.service's capabilities and system call filter" isertd_start "$CONFIG_PT"
	ISERTD_WRAP=
	grep "backstore 'ng0n1'" "$VM_WORK/isertd.log" | tail -2 | sed 's/^/    /'
	ok "unit: isertd's log says the erases are not offered, and that CAP_SYS_ADMIN is missing" \
		grep -q "SANITIZE BLOCK ERASE and CRYPTO ERASE not offered: .*Permission denied.*CAP_SYS_ADMIN" \
		"$VM_WORK/isertd.log"
	must "discovery lists $t" has_line $t <<< "$(iscsi_discover "$p")"
	must "$t: login" login_wait $t "$p" 1
	read -r lun dev <<< "$(iscsi_disks $t)"
	ok "unit: RSOC: SANITIZE OVERWRITE supported" test "$(san_rsoc /dev/$dev 1)" = 3
	ok "unit: RSOC: SANITIZE BLOCK ERASE not supported" test "$(san_rsoc /dev/$dev 2)" = 1
	ok "unit: RSOC: SANITIZE CRYPTO ERASE not supported" test "$(san_rsoc /dev/$dev 3)" = 1
	ok "unit: VPD B1: WABEREQ and WACEREQ 00b" san_b1 /dev/$dev 0xf0 0
	ok "unit: a pattern written at 96 MiB reads back (NVMe I/O passthrough without CAP_SYS_ADMIN)" \
		san_pattern /dev/$dev
	ok "unit: sg_sanitize --block is refused: ILLEGAL REQUEST, INVALID FIELD IN CDB" san_refused_ifc /dev/$dev --block
	ok "unit: sg_sanitize --crypto is refused the same way" san_refused_ifc /dev/$dev --crypto
	ok "unit: the refused BLOCK ERASE left the pattern" san_kept /dev/$dev
	ok "unit: TEST UNIT READY after it: ready (no sanitize failure mode)" sg_turs /dev/$dev
	ok "unit: no sanitize marker in $STATE_DIR (nothing to come back in after a restart)" san_no_marker
	rm -f $STATE_DIR/sanitize-*   # the unfixed target's marker would put the next run in failure mode
	must "$t: logout" logout_gone $t "$p"
	ok "isertd (under the unit's confinement) stops cleanly" isertd_stop
}
suite_sanitize_nvme_unit $PORTAL
suite_sanitize_nvme $PORTAL
