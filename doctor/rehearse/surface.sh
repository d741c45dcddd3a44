# dfdoctor rehearsal: carry the rehearsal's own renamed files (NAME.dfdoctor-rh-TAG) out of the second wall
# (wall.sh) to where the line named them, so that the look reads them as it would without the wall. Run by
# `sh -c` at that place before the look, with the rehearsal's tag. Nothing else leaves the wall: every other
# write stays in its upper layer, which sweep.sh removes. A file is carried only into a folder that really exists
# and only where nothing (not even a link) is in its place.
m=dfdoctor-rh-$1
for W in /dev/shm/$m.wall*; do
[ -f "$W/map" ] || continue
while read -r n d; do
  [ -d "$W/t/u$n" ] || continue
  (cd "$W/t/u$n" && find . -type f -name "*.$m") | while IFS= read -r f; do
    f=${f#./}; t=$d/$f
    [ -d "$(dirname "$t")" ] && [ ! -e "$t" ] && [ ! -L "$t" ] && cp "$W/t/u$n/$f" "$t" && echo "==surfaced $t"
  done
done < "$W/map"
done
exit 0
