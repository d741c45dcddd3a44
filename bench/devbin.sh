#!/bin/bash
# Builds .devbin/ (git-ignored): this machine's OpenSSH client and server with the libraries they need (glibc's
# own excepted), for a machine that has none (the device tool's). Send it with the run's carry=[".devbin"];
# bench/fleet_ssh_device.sh uses it when it is there. Each tool gets a wrapper that sets LD_LIBRARY_PATH for that
# tool alone, never for the pythons the server starts.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .devbin && mkdir -p .devbin/real .devbin/lib .devbin/bin
TOOLS=(/usr/sbin/sshd /usr/bin/ssh /usr/bin/ssh-keygen)
cp "${TOOLS[@]}" .devbin/real/
for b in "${TOOLS[@]}"; do ldd "$b" | awk '/=>/{print $3}'; done | sort -u \
  | grep -v -E '/(libc|ld-linux|libresolv|libpthread|libdl|libm)[.-]' | xargs -I{} cp -L {} .devbin/lib/
for t in ssh ssh-keygen sshd; do
  printf '#!/bin/sh\nD=$(cd "$(dirname "$0")/.." && pwd)\nLD_LIBRARY_PATH=$D/lib exec "$D/real/%s" "$@"\n' "$t" > ".devbin/bin/$t"
  chmod +x ".devbin/bin/$t"
done
du -sh .devbin
