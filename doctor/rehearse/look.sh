# dfdoctor rehearsal: look at one place while the line runs and after its session ended, then remove what the
# rehearsal made. Run by `sh -s` at that place (through the line's own hops), started before the line, with arguments:
#   $1  the sentinel's folder ("" where there is none)   $2  interpreter words to look up ("python3 python")
#   then pairs: a folder the path is relative to ("" = where the session starts) and a renamed log path.
# It waits for events, not for time. While the line runs it says "==started" as soon as the sentinel has started,
# with what the sentinel said of itself (start.json, on the same line).
# The runner then writes one line on stdin when the line's session has ended: three counts of ticks (TICK_S each),
# what is left of the margin the hang-up race needs, of the wait for a sentinel that has not started, and of the
# rehearsal's time (past that wait, a sentinel not started is waited for while a process of the line still runs
# here: a python still starting on a loaded machine) (EOF, when the runner is gone, means look now). After the margin the sentinel counts as alive at its next heartbeat,
# and as gone as soon as it wrote how it ended or its process is gone.
# Prints sections "==NAME" that doctor/rehearse/runner.py reads. Never touches a path without the rehearsal's tag.
d=$1; words=$2; shift 2
tick=0.05
# the rehearsal's renamed files, carried out of the second wall (surface.sh) before they are read
surface() { [ -n "${DFDOCTOR_RH_SURFACE:-}" ] && sh -c "$DFDOCTOR_RH_SURFACE" sh "$DFDOCTOR_RH_TAG"; }
# c: now, in centiseconds (/proc/uptime, read by the shell itself), else the loop's turns in ticks of 5 cs
clock() {
  c=; read -r c _ 2>/dev/null < /proc/uptime
  case "$c" in [1-9]*.[0-9][0-9]) c=${c%.*}${c#*.} ;; *) c=$((i * 5)) ;; esac
}
# lives: a process of the line may run here, in a container of this host too (a host sees their processes). Every
# process on the line's way to the job carries the rehearsal's mark in its words: the shells that run the line (its
# text names the sentinel), each hop's command (ssh, pct exec, lxc-attach: the sentinel's path is one of their
# words) and each process they fork before it execs the next (lxc-attach's attached child is a fork of it, with its
# words). dfdoctor's own scripts (a look, a sweep: "# dfdoctor rehearsal: ") are not the line's. Words that read
# empty are a zombie's or a kernel thread's; any other process reads so between two execs (or on its way out): read
# again in the next pass, and not known while it reads so (it may be the line's). One pass over /proc is not a snapshot: a process of the line may fork and exit while it is read (the
# child's pid was not listed, the parent was gone when read). So the passes go on over the pids that appeared since
# the last, until every one of a pass was read alive (nothing of the line can have forked out of sight then: what
# runs now was read, with the words it has had since, its fork's or its exec's, both marked). A grep that cannot say
# (another grep's options) is not known either. The pattern's bracket keeps the mark itself out of grep's words.
# The pattern and whether grep can say are found at the first call and kept (six forks a call, each tick of a
# `quiet`); a grep that could not say is asked again at the next call (a fork that failed once says nothing of it).
lives() {
  if [ -z "${lv_can:-}" ]; then
    lv_pat="dfdoctor-rh-[$(printf %.1s "$DFDOCTOR_RH_TAG")]${DFDOCTOR_RH_TAG#?}"
    [ "$(printf 'dfdoctor-rh-%s\0' "$DFDOCTOR_RH_TAG" | grep -la "$lv_pat" 2>/dev/null; printf '' | grep -La . 2>/dev/null)" = \
      "(standard input)
(standard input)" ] || return 0
    lv_can=1
  fi
  lv_seen=" " lv_k=0 lv_again=
  while [ "$lv_k" -lt 50 ]; do
    lv_k=$((lv_k + 1)); set -- ${lv_again:-}
    for lv_c in /proc/[0-9]*/cmdline; do
      lv_p=${lv_c#/proc/}; lv_p=${lv_p%/cmdline}
      case "$lv_seen" in *" $lv_p "*) continue ;; esac
      lv_seen="$lv_seen$lv_p "; set -- "$@" "$lv_c"
    done
    [ $# -gt 0 ] || return 1
    # the marked ones that are not dfdoctor's own; what grep could not read was gone before it was read
    lv_m=$(grep -la "$lv_pat" "$@" 2>&1 < /dev/null) lv_gone= lv_n=
    for lv_c in $lv_m; do case "$lv_c" in /proc/*/cmdline) lv_n="$lv_n $lv_c" ;; *) lv_gone=1 ;; esac; done
    if [ -n "$lv_n" ]; then
      for lv_c in $(grep -La '# dfdoctor rehearsal: ' $lv_n 2>&1 < /dev/null); do
        case "$lv_c" in /proc/*/cmdline) is_but "${lv_c%cmdline}status" || return 0 ;; *) lv_gone=1 ;; esac
      done
    fi
    # the ones whose words read empty: gone (a zombie, or no longer there), a kernel thread, or not known yet (alive,
    # between an exit and its zombie, or an exec and its words: read again in the next pass, with the new ones)
    lv_e=$(grep -La . "$@" 2>&1 < /dev/null)
    set --
    for lv_c in $lv_e; do case "$lv_c" in /proc/*/cmdline) set -- "$@" "${lv_c%cmdline}stat" ;; *) lv_gone=1 ;; esac; done
    lv_again=
    if [ $# -gt 0 ]; then
      # each stat file read by getline: one gone before it was read is said so (awk's own open of it was fatal)
      for lv_c in $(awk 'BEGIN { for (i = 1; i < ARGC; i++) { f = ARGV[i]
          if ((getline l < f) <= 0) { print "gone"; continue }
          close(f); sub(/^.*\) /, "", l); split(l, a, " ")
          if (a[1] == "Z" || a[1] == "X") print "gone"; else if (a[2] != 2 && a[2] != 0) print "again:" f } }' \
          "$@" 2>&1 < /dev/null); do
        case "$lv_c" in gone) lv_gone=1 ;; again:/proc/*/stat) lv_c=${lv_c#again:}; lv_again="$lv_again ${lv_c%stat}cmdline" ;;
          *) return 0 ;; esac  # awk could not say: not known
      done
    fi
    [ -n "$lv_gone$lv_again" ] || return 1
    [ -z "${lv_until:-}" ] || { clock; [ "$c" -lt "$lv_until" ]; } || return 0  # out of time: not known
  done
  return 0  # processes of the pass kept going before they were read: not known
}
# is_proc PID [START]: whether process PID runs (not a zombie, its memory not gone: its cmdline would read empty),
# and started at START; p_start: when it started. Read by the shell itself from /proc/PID/stat: once the sentinel
# was seen by its command line, each tick asks this instead of a `tr | grep` of it (two forks a tick).
is_proc() {
  p_start=; p_st=; read -r p_st 2>/dev/null < "/proc/$1/stat" || [ -n "$p_st" ] || return 1
  p_want=${2:-}
  set -- ${p_st##*) }   # state, then the fields after it: 20 its start time, 21 its memory's size
  case "${1:-Z}" in Z|X) return 1 ;; esac
  [ "${21:-0}" != 0 ] || return 1
  p_start=${20:-}
  [ -n "$p_start" ] && { [ -z "$p_want" ] || [ "$p_start" = "$p_want" ]; }
}
# is_but STATUS: whether that process is the one `quiet N PID` leaves out: the sentinel, pid PID in the pid
# namespace of its container (the last of its NSpid, read at the host; one of several: only a process in a
# namespace of its own, so that no process of the host itself is ever left out)
is_but() {
  [ -n "${lv_but:-}" ] || return 1
  lv_ns=$(sed -n 's/^NSpid:[[:space:]]*//p' "$1" 2>/dev/null)
  case "$lv_ns" in *[[:space:]]*) [ "${lv_ns##*[[:space:]]}" = "$lv_but" ] ;; *) return 1 ;; esac
}
# quiet N [PID]: say whether every process of the line here is gone (but the sentinel, PID in its container: the
# question asked once it started), waiting for it up to N ticks
# (by the clock: under a churn of processes a pass of `lives` goes on over the new ones, and N such waits could
# keep the look from the runner's next word for seconds; a question not answered by then, and 0.2 s, is answered "no")
quiet() {
  q=0; lv_but=${2:-}; i=0; clock; lv_until=$((c + ${1:-0} * 5 + 20))  # a pass of lives gets 0.2 s at least
  while lives; do
    q=$((q + 1)); clock; [ "$q" -gt "${1:-0}" ] || [ "$c" -ge "$lv_until" ] && { echo "==quiet no"; lv_until=; return; }
    sleep $tick
  done
  lv_until=
  echo "==quiet yes"
}
if [ -n "$d" ] && [ -d "$d" ]; then
  exec 3<&0
  ( IFS= read -r w <&3; echo "${w:-0 0}" > "$d/.ended" ) &
  rd=$! said=
  while [ -d "$d" ] && [ ! -s "$d/.ended" ]; do
    [ -z "$said" ] && [ -e "$d/start.json" ] && printf '==started %s\n' "$(tr -d '\n' < "$d/start.json" 2>/dev/null)" && said=1
    # said: all that is left to wait for is the runner's line, which the reader writes as it comes: waited for
    # (a builtin), not ticked for (a `sleep` forked every tick, for the line's whole session)
    [ -n "$said" ] && { wait "$rd"; break; }
    sleep $tick
  done
  read -r mt nt lt < "$d/.ended" 2>/dev/null
  # the waits are kept in real time, in centiseconds of /proc/uptime (no fork): on a loaded machine one turn of
  # this loop takes well over a tick, and counting turns stretched the margin (0.5 s became a second). Where
  # /proc/uptime cannot be read, turns are counted as before.
  i=0; b1=; pid=; seen=
  clock; m_at=$((c + ${mt:-0} * 5)); n_at=$((c + ${nt:-0} * 5)); l_at=$((c + ${lt:-0} * 5))
  while [ -d "$d" ] && [ ! -e "$d/end.json" ]; do
    clock
    if [ -e "$d/start.json" ]; then
      [ -z "$pid" ] && pid=$(sed -n 's/.*"pid": \([0-9]*\).*/\1/p' "$d/start.json" 2>/dev/null)
      if [ -n "$seen" ]; then is_proc "$pid" "$seen" || break   # it was running here and is gone
      elif [ -n "$pid" ] && is_proc "$pid" && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$d/"; then
        seen=$p_start; fi
      if [ "$c" -ge "$m_at" ]; then
        b=; read -r b 2>/dev/null < "$d/beat"   # the last beat has no newline: read says so, and keeps it
        # an empty read is the sentinel rewriting the file, not a beat: the first beat read after the margin is
        # the one the next must differ from (CI, under load: an empty first read let a beat from before the
        # margin count as one after it)
        if [ -n "$b" ]; then
          if [ -z "$b1" ]; then b1=$b; elif [ "$b" != "$b1" ]; then break; fi
        fi
      fi
      [ "$c" -ge $((m_at + 100)) ] && break   # no heartbeat for a second: the process check below decides
    elif [ "$c" -ge "$n_at" ]; then [ "$c" -lt "$l_at" ] && lives || break; fi
    sleep $tick; i=$((i+1))
  done
  echo "==start"; cat "$d/start.json" 2>/dev/null; echo
  b2=$(cat "$d/beat" 2>/dev/null)
  echo "==beats ${b1:-none} ${b2:-none}"
  pid=$(sed -n 's/.*"pid": \([0-9]*\).*/\1/p' "$d/start.json" 2>/dev/null)
  # alive: the sentinel's own process still runs (a loaded machine may not let it beat in time)
  state=$(sed -n 's/^[^)]*) \([A-Z]\).*/\1/p' "/proc/$pid/stat" 2>/dev/null)
  if [ -n "$pid" ] && [ -n "$state" ] && [ "$state" != Z ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$d/"; then
    echo "==alive yes"; else echo "==alive no"; fi
  echo "==end"; cat "$d/end.json" 2>/dev/null; echo
  # the renamed files the sentinel's own fds point to: their path is known here even where the line's was not
  fdlogs=$(grep -o '"target": "[^"]*[.]dfdoctor-rh-[^"]*"' "$d/start.json" 2>/dev/null | sed 's/^"target": "//; s/"$//' | sort -u)
  touch "$d/stop" 2>/dev/null
  if [ -n "$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$d/"; then
    kill -9 "$pid" 2>/dev/null && echo "==killed $pid"
  fi
  rm -rf "$d"
  # a sentinel that started late (no start.json when it was read): found by its command line. One grep reads them
  # all where grep reads past a NUL (a `tr` each was a fork per process here: ~0.3 CPU-s a rehearsal whose line
  # started nothing, with 100 processes); busybox's grep stops at the first, so there each is read by `tr`. Either
  # way `case` matches what was read (a grep's own words name it too)
  late=/proc/[0-9]*/cmdline
  [ -z "$pid" ] && printf 'x\0%s\n' "$d/" | grep -qaF "$d/" 2>/dev/null &&
    late=$(grep -laF "$d/" /proc/[0-9]*/cmdline 2>/dev/null < /dev/null)
  [ -z "$pid" ] && for c in $late; do
    cmd=$(tr '\0' ' ' 2>/dev/null < "$c")  # (no word on stderr of one gone since it was listed: grep's own)
    case "$cmd" in *"$d/"*) ;; *) continue ;; esac
    p=${c#/proc/}; p=${p%/cmdline}; [ "$p" != "$$" ] && kill -9 "$p" 2>/dev/null && echo "==killed $p"
  done
  surface
  [ -n "$fdlogs" ] && printf '%s\n' "$fdlogs" | while IFS= read -r f; do
    [ -f "$f" ] || continue
    echo "==log $f $(wc -c < "$f" | tr -d ' ')"; head -c 2000 "$f"; echo; rm -f "$f"
  done
else
  # a place without a sentinel looks once the session has ended (the runner's line, or EOF). Before that, the
  # runner may ask `quiet N`: whether a process of the line still runs here, waited for up to N ticks
  while IFS= read -r w; do case "$w" in "quiet "*) quiet ${w#quiet } ;; *) break ;; esac; done
  surface
fi
for w in $words; do
  echo "==have $w $(command -v "$w" 2>/dev/null)"
done
while [ $# -ge 2 ]; do
  dir=$1; f=$2; shift 2
  case "$f" in *.dfdoctor-rh-*) ;; *) continue ;; esac
  ( [ -z "$dir" ] || cd "$dir" 2>/dev/null
    if [ -e "$f" ]; then
      echo "==log $f $(wc -c < "$f" | tr -d ' ')"; head -c 2000 "$f"; echo; rm -f "$f"
    else echo "==log $f missing"; fi )
done
echo "==done"
