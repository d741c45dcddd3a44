# dfdoctor rehearsal's second wall: run a command in a private mount namespace where the user's folders are
# covered by an overlay whose upper layer is thrown away, so a write the analysis missed never reaches them.
# Run by `sh -c` at the place the line runs, as: sh -c WALL sh TAG N DIR... -- COMMAND... (or -- -c TEXT)
#   TAG   the rehearsal's tag; its private folder /tmp/dfdoctor-rh-TAG stays the real one (the look reads it)
#   N     the place's depth in the line's hops (0: this machine): one machine reached twice keeps two walls
#   DIR   folders the line touches (its cwd, its redirects' folders, the job's script's folder), absolute or
#         relative to where the session starts; the session's folder, $HOME and /tmp are always covered
# COMMAND is exec'd (same process, same session): only its mounts differ. Where the wall cannot stand (not root,
# no unshare, no /dev/shm, a refused mount) COMMAND runs as it would have, and $W/off says why. Every folder looks
# as before (a missing one is still missing, an existing one still writable); writes land in $W/u/N instead, and
# sweep.sh removes $W. The rehearsal's own renamed files are carried out of $W by surface.sh, for the look.
m=dfdoctor-rh-$1; W=/dev/shm/$m.wall$2; shift 2
dirs="$PWD
$HOME
/tmp"
while [ $# -gt 0 ] && [ "$1" != -- ]; do dirs="$dirs
$1"; shift; done
shift
# `-c TEXT`: the text a login shell would have run (an ssh hop's remote command), run by that same shell
[ "$1" = -c ] && set -- "${SHELL:-sh}" -c "$2"
[ -d /dev/shm ] && mkdir -m 700 "$W" 2>/dev/null || exec "$@"
if [ "$(id -u)" != 0 ]; then echo "not root here" > "$W/off"; exec "$@"; fi
if ! command -v unshare >/dev/null 2>&1; then echo "no unshare (util-linux) here" > "$W/off"; exec "$@"; fi
if ! unshare --mount true 2>/dev/null; then
  echo "a private mount namespace was refused here (unshare --mount)" > "$W/off"; exec "$@"
fi
inner=$(cat <<'EOF'
W=$1 m=$2 dirs=$3; shift 3
# each folder: its physical path, else its nearest existing ancestor; never /, /proc, /sys, /dev, /run
want=$(printf '%s\n' "$dirs" | while IFS= read -r d; do
  [ -n "$d" ] || continue
  while [ ! -d "$d" ] && [ "$d" != / ] && [ "$d" != . ]; do d=$(dirname "$d"); done
  d=$(cd "$d" 2>/dev/null && pwd -P) || continue
  case "$d" in /|/proc|/proc/*|/sys|/sys/*|/dev|/dev/*|/run|/run/*) continue ;; esac
  echo "$d"
done | sort -u)
# a folder inside another is covered by it; a mount inside a covered folder gets an overlay of its own (an
# overlay does not reach into the mounts below its lower folder: they would look empty)
top=$(printf '%s\n' "$want" | awk 'NF { for (i in k) if (index($0 "/", k[i] "/") == 1) next; k[NR] = $0; print }')
all=$(awk -v tops="$top" 'BEGIN { n = split(tops, t, "\n") }
  $5 !~ /\\/ && $5 !~ /^\/(proc|sys|dev|run)\// { for (i = 1; i <= n; i++) if (index($5, t[i] "/") == 1) print $5 }
  END { for (i = 1; i <= n; i++) print t[i] }' /proc/self/mountinfo | sort -u | awk '{ print length($0) " " $0 }' |
  sort -n | cut -d' ' -f2-)
# a view of each folder as it is, taken before any overlay hides what lies below it
n=0
while IFS= read -r d; do
  [ -d "$d" ] || continue
  n=$((n + 1))
  mkdir -p "$W/l/$n" "$W/u/$n" "$W/w/$n" && mount --bind "$d" "$W/l/$n" &&
    printf '%s %s\n' "$n" "$d" >> "$W/map" || { echo "no view of $d could be taken" > "$W/off"; exec "$@"; }
done <<END
$all
END
# the sockets listening under a covered folder (tmux's, an ssh agent's): one cannot connect through an overlay,
# so each is bound through as it is (what a line asks a server is not a write the wall is for)
awk 'NR > 1 && $8 ~ /^\// { print $8 }' /proc/net/unix 2>/dev/null | sort -u > "$W/sockets.all"
s=0
while IFS= read -r p; do
  [ -S "$p" ] || continue
  while read -r n d; do
    case "$p" in "$d"/*) ;; *) continue ;; esac
    s=$((s + 1)); : > "$W/s$s" && mount --bind "$p" "$W/s$s" && printf '%s %s\n' "$s" "$p" >> "$W/sockets"
    break
  done < "$W/map"
done < "$W/sockets.all"
keep=/tmp/$m
if [ -d "$keep" ]; then
  mkdir -p "$W/k" && mount --bind "$keep" "$W/k" || { echo "$keep could not be kept" > "$W/off"; exec "$@"; }
fi
while read -r n d; do
  mount -t overlay dfdoctor-wall -o "lowerdir=$W/l/$n,upperdir=$W/u/$n,workdir=$W/w/$n" "$d" 2>/dev/null ||
    { echo "an overlay over $d was refused" > "$W/off"; exec "$@"; }
done < "$W/map"
if [ -f "$W/sockets" ]; then
  while read -r s p; do mount --bind "$W/s$s" "$p" 2>/dev/null; done < "$W/sockets"
fi
# the sentinel's private folder is the real one: the look, outside this namespace, reads what it wrote
if [ -d "$W/k" ]; then mount --bind "$W/k" "$keep" || { echo "$keep could not be kept" > "$W/off"; exec "$@"; }; fi
# the session's folder anew through the overlays: the folder it held is the one below them
cd "$PWD" || { echo "the session's folder $PWD could not be entered through the wall" > "$W/off"; exec "$@"; }
echo up > "$W/on"
exec "$@"
EOF
)
exec unshare --mount --propagation private sh -c "$inner" sh "$W" "$m" "$dirs" "$@"
