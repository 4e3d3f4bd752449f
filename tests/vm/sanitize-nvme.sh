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
# test covers it on RAM and file LUs).

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
		dd if="$1" iflag=direct bs=64k skip=$((96 * 16)) count=1 status=none | cmp -s - /tmp/san-ab
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
	ok "a pattern written at 96 MiB reads back" san_pattern /dev/$dev
	if [ $block != none ]; then
		ok "sg_sanitize --block (IMMED=0): the namespace erased by $block" \
			sg_sanitize --block --quick --wait --timeout=600 /dev/$dev
		ok "after BLOCK ERASE the pattern reads back as zeroes" san_zeroes /dev/$dev
	else
		ok "sg_sanitize --block is refused" bash -c "! sg_sanitize --block --quick --wait /dev/$dev"
		ok "the refused BLOCK ERASE left the pattern" san_pattern /dev/$dev
	fi
	if [ $crypto = none ]; then
		ok "sg_sanitize --crypto is refused" bash -c "! sg_sanitize --crypto --quick --wait /dev/$dev"
	fi
	ok "TEST UNIT READY after it: ready" sg_turs /dev/$dev
	must "$t: logout" logout_gone $t "$p"
	ok "isertd (nvme backstore, SANITIZE) stops cleanly" isertd_stop
}
suite_sanitize_nvme $PORTAL
