# dfdoctor rehearsal: remove everything one rehearsal made at one place, also after an interrupted one.
# Run by `sh -c` at that place (through the line's own hops) with arguments:
#   $1  the rehearsal's tag; then pairs: a folder ("" = where the session starts, "~" = $HOME) and a file the
#   line writes, as the line names it (the rehearsal's suffix is added here).
# Only names that carry the rehearsal's mark are touched. The mark is put together here, never passed whole, so
# that this script's own command line (and the hops' that carry it) never carries it.
# Its own ancestors, and dfdoctor's own looks and sweeps (their scripts start "# dfdoctor rehearsal: "; they carry
# renamed paths as arguments, here or on their way to another place), are never killed: they end by themselves.
m="dfdoctor-rh-$1"; shift
tmux -L "$m" kill-server 2>/dev/null
mine=" $$ "; a=$$
while [ "${a:-0}" -gt 1 ]; do
  a=$(sed 's/^.*) [A-Za-z] \([0-9]*\) .*/\1/' "/proc/$a/stat" 2>/dev/null); mine="$mine$a "
done
# A container's processes are seen from its host too: each place kills only those of its own pid namespace (the
# sweep of the container's place, running beside this one, kills the others).
ns=$(readlink /proc/$$/ns/pid 2>/dev/null)
for c in $(grep -laF "$m" /proc/[0-9]*/cmdline 2>/dev/null); do
  p=${c#/proc/}; p=${p%/cmdline}
  [ "$(readlink "/proc/$p/ns/pid" 2>/dev/null)" = "$ns" ] || continue
  case "$mine" in *" $p "*) continue ;; esac
  case "$(tr '\0' ' ' < "$c" 2>/dev/null)" in *"# dfdoctor rehearsal: "*) continue ;; esac
  kill -9 "$p" 2>/dev/null && echo "==killed $p"
done
rm -rf "/tmp/$m" "/tmp/$m.screen" "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$m" 2>/dev/null
# the second wall (wall.sh): its views of the user's mounts exist only inside the wall's own namespace; here $W
# is a private bind of itself with the layers' tmpfs on $W/t, both unmounted before anything is removed
for W in /dev/shm/$m.wall*; do
  [ -d "$W" ] || continue
  if [ -f "$W/on" ] && [ ! -f "$W/off" ]; then echo "==wall ${W##*.wall} up $(cut -d' ' -f2- "$W/map" | tr '\n' ' ')"
  else echo "==wall ${W##*.wall} off $(cat "$W/off" 2>/dev/null)"; fi
  umount -l "$W/t" 2>/dev/null; umount -l "$W" 2>/dev/null
  grep -qF "$W" /proc/self/mountinfo || { rm -rf "$W" && echo "==removed $W"; }
done
while [ $# -ge 2 ]; do
  dir=$1; f="$2.$m"; shift 2
  case "$dir" in "~") dir=$HOME ;; esac
  ( [ -z "$dir" ] || cd "$dir" 2>/dev/null; [ -e "$f" ] && rm -f "$f" && echo "==removed $f" )
done
echo "==swept"
