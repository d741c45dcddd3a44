# dfdoctor rehearsal: look at one place after the line's session ended, then remove what the rehearsal made.
# Run by `sh -s` at that place (through the line's own hops) with arguments:
#   $1  the sentinel's folder ("" where there is none)   $2  interpreter words to look up ("python3 python")
#   then pairs: a folder the path is relative to ("" = where the session starts) and a renamed log path.
# Prints sections "==NAME" that doctor/rehearse/runner.py reads. Never touches a path without the rehearsal's tag.
d=$1; words=$2; shift 2
if [ -n "$d" ] && [ -d "$d" ]; then
  echo "==start"; cat "$d/start.json" 2>/dev/null; echo
  b1=$(cat "$d/beat" 2>/dev/null); sleep 0.6; b2=$(cat "$d/beat" 2>/dev/null)
  echo "==beats ${b1:-none} ${b2:-none}"
  pid=$(sed -n 's/.*"pid": \([0-9]*\).*/\1/p' "$d/start.json" 2>/dev/null)
  # alive: the sentinel's own process still runs (a loaded machine may not let it beat within 0.6 s)
  state=$(sed -n 's/^[^)]*) \([A-Z]\).*/\1/p' "/proc/$pid/stat" 2>/dev/null)
  if [ -n "$pid" ] && [ -n "$state" ] && [ "$state" != Z ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$d/"; then
    echo "==alive yes"; else echo "==alive no"; fi
  echo "==end"; cat "$d/end.json" 2>/dev/null; echo
  # the renamed files the sentinel's own fds point to: their path is known here even where the line's was not
  fdlogs=$(grep -o '"target": "[^"]*[.]dfdoctor-rh-[^"]*"' "$d/start.json" 2>/dev/null | sed 's/^"target": "//; s/"$//' | sort -u)
  touch "$d/stop" 2>/dev/null
  sleep 0.3
  if [ -n "$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$d/"; then
    kill -9 "$pid" 2>/dev/null && echo "==killed $pid"
  fi
  rm -rf "$d"
  # a sentinel that started late (no start.json when it was read): found by its command line
  [ -z "$pid" ] && for c in /proc/[0-9]*/cmdline; do
    cmd=$(tr '\0' ' ' < "$c" 2>/dev/null)  # matched by `case`: a grep for it would find itself
    case "$cmd" in *"$d/"*) ;; *) continue ;; esac
    p=${c#/proc/}; p=${p%/cmdline}; [ "$p" != "$$" ] && kill -9 "$p" 2>/dev/null && echo "==killed $p"
  done
  [ -n "$fdlogs" ] && printf '%s\n' "$fdlogs" | while IFS= read -r f; do
    [ -f "$f" ] || continue
    echo "==log $f $(wc -c < "$f" | tr -d ' ')"; head -c 2000 "$f"; echo; rm -f "$f"
  done
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
