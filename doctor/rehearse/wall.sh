# dfdoctor rehearsal's second wall: run a command in a private mount namespace where every writable mount this
# place can see is covered by a throw-away layer, so a write the analysis missed never reaches anything real.
# Run by `sh -c` at the place the line runs, as: sh -c WALL sh TAG N [strict] -- COMMAND... (or -- -c TEXT)
#   TAG   the rehearsal's tag; its private folder /tmp/dfdoctor-rh-TAG stays the real one (the look reads it)
#   N     the place's depth in the line's hops (0: this machine): one machine reached twice keeps two walls
# The mounts are read from this place's /proc/self/mountinfo, never from a list: each writable mount of a
# filesystem that holds files (/, /tmp, /var, /dev/shm, /home, /srv, a docker volume, ...) gets an overlay whose
# upper layer lies in a tmpfs of the wall's own ($W/t: no layer overlaps the folder it covers, /dev/shm included);
# a writable file mounted on its own (docker's /etc/hosts) gets a throw-away copy. /proc, /sys, devices, read-only
# mounts and the like are put back as they are. COMMAND is exec'd (same process, same session): only its mounts
# differ. Where the wall cannot stand (not root, no unshare, a refused mount) COMMAND runs as it would have, and
# $W/off says why. sweep.sh unmounts and removes $W; surface.sh carries the rehearsal's renamed files out of it.
m=dfdoctor-rh-$1; W=/dev/shm/$m.wall$2; shift 2
# no shell started from here sources a file behind the reader's back, walled or not
unset BASH_ENV ENV
# `strict`: where the wall cannot stand, the command does not run at all (exit 1, $W/off says why): the line
# hides code the reader did not run, and nothing would hold what it may have missed
nowall=
while [ $# -gt 0 ] && [ "$1" != -- ]; do [ "$1" = strict ] && nowall=false; shift; done
shift
# `-c TEXT`: the text a login shell would have run (an ssh hop's remote command), run by that same shell
[ "$1" = -c ] && set -- "${SHELL:-sh}" -c "$2"
[ -d /dev/shm ] && mkdir -m 700 "$W" 2>/dev/null || exec $nowall "$@"
# the effective uid, read by the shell itself (no process), else by `id`
u=; while read -r k r e _; do [ "$k" = Uid: ] && u=$e && break; done < /proc/self/status 2>/dev/null
if [ "${u:-$(id -u)}" != 0 ]; then echo "not root here" > "$W/off"; exec $nowall "$@"; fi
if ! command -v unshare >/dev/null 2>&1; then echo "no unshare (util-linux) here" > "$W/off"; exec $nowall "$@"; fi
if ! unshare --mount true 2>/dev/null; then
  echo "a private mount namespace was refused here (unshare --mount)" > "$W/off"; exec $nowall "$@"
fi
# the layers' own tmpfs, under a private mount of $W (it reaches no other namespace); sweep.sh unmounts both
mkdir -m 700 "$W/t" && mount --bind "$W" "$W" && mount --make-private "$W" &&
  mount -t tmpfs -o mode=700 dfdoctor-wall "$W/t" 2>/dev/null ||
  { echo "no tmpfs for the throw-away layers could be mounted here" > "$W/off"; exec $nowall "$@"; }
inner=$(cat <<'EOF'
W=$1 m=$2 nowall=$3 here=$PWD; shift 3
# the wall's own files are named relative to $W; the new root is built under t/r, real paths are never mounted on
cd "$W" || exec $nowall "$@"
# each mount point (its topmost entry) with what to do: "c" cover, "k" keep as it is; "?" a writable mount whose
# name a line of text cannot carry, a hole: no wall then
awk -v own="/dev/shm/dfdoctor-rh-" '
  function unesc(s,   out, i, c) { out = ""
    for (i = 1; i <= length(s); i++) { c = substr(s, i, 1)
      if (c == "\\" && substr(s, i + 1, 3) ~ /^[0-7][0-7][0-7]$/) {
        c = sprintf("%c", substr(s, i + 1, 1) * 64 + substr(s, i + 2, 1) * 8 + substr(s, i + 3, 1)); i += 3 }
      out = out c }
    return out }
  { for (i = 7; i <= NF && $i != "-"; i++) ; fs = $(i + 1); mp = unesc($5)
    if (index(mp, own) == 1) next
    keep = $6 !~ /^rw(,|$)/ || mp ~ /^\/(proc|sys)(\/|$)/ ||
      fs ~ /^(proc|sysfs|devtmpfs|devpts|cgroup|cgroup2|mqueue|debugfs|tracefs|securityfs|pstore|bpf|fusectl|configfs|autofs|binfmt_misc|nsfs|efivarfs|selinuxfs|rpc_pipefs|hugetlbfs|fuse\.lxcfs|squashfs|iso9660)$/
    what[mp] = keep ? "k" : mp ~ /^[ \t]|[ \t]$|\n/ ? "?" : "c"
    if (!(mp in seen)) { seen[mp] = 1; order[++n] = mp } }
  END { for (i = 1; i <= n; i++) print length(order[i]) " " what[order[i]] " " order[i] }' /proc/self/mountinfo |
  sort -n | cut -d' ' -f2- > mounts && [ -s mounts ] || { echo "the mounts here could not be read" > off; exec $nowall "$@"; }
if grep -q '^?' mounts; then echo "a writable mount here has a name the wall cannot carry" > off; exec $nowall "$@"; fi
# a view of each mount as it is, taken before any layer hides what lies below it: a covered folder's (its lower
# layer), a throw-away copy of a covered file, the mount itself for one kept (put back where a layer hides it; a
# kept mount that cannot be viewed stays hidden: the line sees the covered folder below it, which holds no harm)
# Which mount is a folder is read once, and every folder's view made by one mkdir (a process each was a fifth of
# the wall's time, issue 45)
n=0 dirs=
while read -r k d <&3; do
  n=$((n + 1)); f=-; [ -d "$d" ] && f=d && dirs="$dirs t/l$n"; printf '%s %s %s\n' "$f" "$k" "$d" >> kinds
done 3< mounts
[ -z "$dirs" ] || mkdir $dirs || { echo "the views' folders could not be made" > off; exec $nowall "$@"; }
# The mounts of each step are made by one `mount -a` of a table the wall writes (a `mount` process per mount was
# most of the wall's time, issue 45; util-linux and busybox both read one): `mounts_of` turns lines
# "N<tab>WHAT<tab>SOURCE<tab>TARGET" (WHAT: c cover, k keep, f a file's copy, o an overlay) into its lines, in
# order, with fstab's escapes, mounts them, and prints those whose target stands once it is done (read back from
# mountinfo). A failed mount is seen there, as each `mount`'s status said before. $W holds no character to escape.
mounts_of() {
  awk -F'\t' -v W="$W" 'function esc(s) { gsub(/\\/, "\\134", s); gsub(/ /, "\\040", s); gsub(/\t/, "\\011", s); return s }
    $2 == "o" { print "dfdoctor-wall " esc($4) " overlay lowerdir=" W "/t/l" $1 ",upperdir=" W "/t/u" $1 ",workdir=" W "/t/w" $1 " 0 0"; next }
    { print esc($3) " " esc($4) " none bind 0 0" }' "$1" > "$1.tab" && mount -a -T "$W/$1.tab" 2>/dev/null
  awk -F'\t' 'function unesc(s,   out, i, c) { out = ""
      for (i = 1; i <= length(s); i++) { c = substr(s, i, 1)
        if (c == "\\" && substr(s, i + 1, 3) ~ /^[0-7][0-7][0-7]$/) {
          c = sprintf("%c", substr(s, i + 1, 1) * 64 + substr(s, i + 2, 1) * 8 + substr(s, i + 3, 1)); i += 3 }
        out = out c }
      return out }
    FILENAME == "/proc/self/mountinfo" { split($0, f, " "); up[unesc(f[5])] = 1; next }
    ($4 in up)' /proc/self/mountinfo "$1"
}
why= n=0 T=$(printf '\t')
# what each view is to be (want), and those a mount makes (views.want: all but the copies)
: > want; : > views.want
wants() { printf '%s\t%s\t%s\t%s\n' "$@" >> want; [ "$2" = f ] || printf '%s\t%s\t%s\t%s\n' "$@" >> views.want; }
while read -r f k d <&3; do
  n=$((n + 1))
  if [ "$k" = c ] && [ "$f" = d ]; then wants "$n" c "$d" "$W/t/l$n"
  elif [ "$k" = c ] && [ -f "$d" ] && [ ! -L "$d" ]; then
    cp -p "$d" "t/l$n" 2>/dev/null || { why="no throw-away copy of $d could be made"; break; }
    wants "$n" f "$d" ""
  elif [ "$f" = d ]; then wants "$n" k "$d" "$W/t/l$n"
  else : > "t/l$n" && wants "$n" k "$d" "$W/t/l$n"; fi
done 3< kinds
[ -z "$why" ] || { echo "$why" > off; exec $nowall "$@"; }
# the sockets listening under a covered folder (tmux's, an ssh agent's): one cannot connect through an overlay,
# so each is bound through as it is (what a line asks a server is not a write the wall is for); their views are
# taken with the mounts'
# Each by its physical path (a link on the way, /var/run -> /run, would lead out of the new root): all of them by
# one `realpath` where there is one (a path it cannot resolve, it leaves out), else by one `readlink -f` each.
physical() {
  if command -v realpath >/dev/null 2>&1; then
    u=$1; set --; while IFS= read -r p; do set -- "$@" "$p"; done < "$u"
    [ $# -eq 0 ] || realpath "$@" 2>/dev/null
  else
    while IFS= read -r p; do readlink -f "$p" 2>/dev/null; done < "$1"
  fi
}
awk 'NR > 1 && $8 ~ /^\// { print $8 }' /proc/net/unix 2>/dev/null | sort -u > unix
physical unix | {
  s=0
  while IFS= read -r p; do
    [ -S "$p" ] || continue
    case "$p" in *"$T"*) continue ;; esac
    s=$((s + 1)); : > "t/s$s" && wants "s$s" k "$p" "$W/t/s$s"
  done
}
# the views that stand: a covered folder's that does not leaves no wall; a kept one that does not stays hidden
# (the line sees the covered folder below it, which holds no harm); a file's copy is made already
why=$(mounts_of views.want | awk -F'\t' 'FILENAME == "-" { up[$1] = 1; next }
  $1 ~ /^s/ { if ($1 in up) print substr($1, 2) " " $3 > "sockets"; next }
  $2 == "c" && !($1 in up) { print "no view of " $3 " could be taken"; exit }
  $2 == "f" || ($1 in up) { print $1 " " ($2 == "f" ? "c" : $2) " " $3 > "views" }' - want)
[ -z "$why" ] || { echo "$why" > off; exec $nowall "$@"; }
keep=/tmp/$m
if [ -d "$keep" ]; then
  mkdir t/k && mount --bind "$keep" t/k || { echo "$keep could not be kept" > off; exec $nowall "$@"; }
fi
# the new root, t/r, built shortest path first (a mount inside another comes back on top of the other's layer):
# an overlay over each covered folder, its throw-away copy over each covered file, every kept mount as it is.
# The line then runs chrooted there: a mount stacked over / alone would not be seen (a process's root is the
# mount below it).
grep -q '^[0-9]* [ck] /$' views || { echo "no view of / could be taken" > off; exec $nowall "$@"; }
command -v chroot >/dev/null 2>&1 || { echo "no chroot here" > off; exec $nowall "$@"; }
: > root; dirs=
while read -r n k d <&3; do
  if [ "$k" = c ] && [ -d "t/l$n" ]; then
    dirs="$dirs t/u$n t/w$n"; printf '%s\to\t%s\t%s\n' "$n" "$d" "$W/t/r${d%/}" >> root; printf '%s %s\n' "$n" "$d" >> map
  elif [ "$k" = c ]; then printf '%s\tf\t%s\t%s\n' "$n" "$W/t/l$n" "$W/t/r${d%/}" >> root; printf '%s %s\n' "$n" "$d" >> files
  else printf '%s\tk\t%s\t%s\n' "$n" "$W/t/l$n" "$W/t/r${d%/}" >> root; fi
done 3< views
mkdir t/r $dirs || { echo "the layers' folders could not be made" > off; exec $nowall "$@"; }
# each socket's view over the socket itself in the new root (one that does not stand: the server is not reached)
[ -s sockets ] && while read -r s p <&3; do printf 's%s\tk\t%s\t%s\n' "$s" "$W/t/s$s" "$W/t/r$p" >> root; done 3< sockets
# an overlay or a copy that does not stand leaves no wall, nor does / not viewed; any other kept mount may be missing
why=$(mounts_of root | awk -F'\t' -v R="$W/t/r" 'FILENAME == "-" { up[$1] = 1; next }
  !($1 in up) { d = substr($4, length(R) + 1); if (d == "") d = "/"
    if ($2 == "o") { print "an overlay over " d " was refused"; exit }
    if ($2 == "f") { print "no throw-away copy of " d " could be put in its place"; exit }
    if ($4 == R) { print "/ could not be viewed"; exit } }' - root)
[ -z "$why" ] || { echo "$why" > off; exec $nowall "$@"; }
# the sentinel's private folder is the real one: the look, outside this namespace, reads what it wrote
if [ -d t/k ]; then mount --bind t/k "t/r$keep" || { echo "$keep could not be kept" > off; exec $nowall "$@"; }; fi
# the session's folder anew through the layers: the folder it held is the one below them
[ -d "t/r$here" ] || { echo "the session's folder $here could not be entered through the wall" > off; exec $nowall "$@"; }
echo up > on
# the new root moved onto / (as switch_root does): a file the line opens is then named from outside this
# namespace as the line named it (/proc/PID/fd), not by its place under $W
cd t/r && { mount --move . / 2>/dev/null; exec chroot . sh -c 'cd "$1" && shift && exec "$@"' sh "$here" "$@"; }
EOF
)
exec unshare --mount --propagation private sh -c "$inner" sh "$W" "$m" "$nowall" "$@"
