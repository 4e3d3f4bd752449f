# bash completion for iserctl: commands, options, and object paths read from
# the running isertd (iserctl paths).
_iserctl()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local sock=() i cmd=
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-s|--socket) sock=(-s "${COMP_WORDS[i+1]}"); ((i++)) ;;
		-g|--generation) ((i++)) ;;
		-*) ;;
		*) cmd=${COMP_WORDS[i]}; break ;;
		esac
	done
	case $prev in
	-s|--socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	-g|--generation|--backups) return ;;
	--target|--backstore|--initiator|--lun|--tsih|-d) return ;;
	--by) COMPREPLY=($(compgen -W "lun initiator" -- "$cur")); return ;;
	esac
	if [ -z "$cmd" ]; then
		COMPREPLY=($(compgen -W "ls paths sessions create delete set apply restore save config call stats top alua
			-s --socket -j --json -g --generation -n --dry-run -h --help" -- "$cur"))
		return
	fi
	case $cmd in
	create|delete|set)
		if [ "$prev" = "$cmd" ]; then
			compopt -o nospace 2>/dev/null
			COMPREPLY=($(compgen -W "$(iserctl "${sock[@]}" paths 2>/dev/null)" -- "$cur"))
		fi ;;
	apply|restore|save)
		COMPREPLY=($(compgen -f -- "$cur") $(compgen -W "--dry-run --target --backstore --backups" -- "$cur")) ;;
	sessions)
		COMPREPLY=($(compgen -W "close" -- "$cur")) ;;
	stats)
		COMPREPLY=($(compgen -W "reset --target --initiator --lun --tsih --json" -- "$cur")) ;;
	top)
		COMPREPLY=($(compgen -W "-d -n -b --by" -- "$cur")) ;;
	alua)
		COMPREPLY=($(compgen -W "set active_optimized active_nonoptimized standby unavailable transitioning
			preferred= mode= transition_time=" -- "$cur")) ;;
	call)
		[ "$prev" = call ] && COMPREPLY=($(compgen -W "$(iserctl "${sock[@]}" call rpc.methods 2>/dev/null |
			sed -n 's/.*"name": "\([^"]*\)".*/\1/p')" -- "$cur")) ;;
	esac
}
complete -F _iserctl iserctl
