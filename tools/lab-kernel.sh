#!/bin/bash
# Fetches the lab's guest kernel (`tierlab lab`, docs/lab.md): Debian bookworm-backports'
# linux-image-amd64, downloaded with `apt-get download` from the same Debian archive as the
# host's apt sources, through a private apt configuration (its own source list, package lists
# and cache under DEST), so the host's apt state is not changed and nothing is installed.
# The package is unpacked into DEST/kernel (vmlinuz, config, modules).
#   tools/lab-kernel.sh DEST
set -euo pipefail
dest=${1:?usage: tools/lab-kernel.sh DEST}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
if ls "$dest"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then exit 0; fi
command -v apt-get >/dev/null 2>&1 || { echo "lab-kernel: apt-get not found: cannot fetch the lab's kernel" >&2; exit 1; }
# The Debian archive the host's apt uses (deb822 or one-line sources).
uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /debian\/?$/) { print $i; exit } }' \
  /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 || true)
if [ -z "$uri" ]; then
  uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:.*debian\/?$/) { print $i; exit } }' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n1 || true)
fi
[ -n "$uri" ] || { echo "lab-kernel: no Debian archive in apt's sources" >&2; exit 1; }
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
work=$dest/apt
rm -rf "$work"
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/deb"
echo "deb [signed-by=$keyring] $uri bookworm-backports main" > "$work/sources.list"
opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/none"
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "Dir::State::status=/dev/null"
  -o "APT::Sandbox::User=root" -qq)
echo "lab-kernel: fetching linux-image-amd64 from bookworm-backports ($uri)"
apt-get "${opts[@]}" update
# linux-image-amd64 is a meta package: the kernel is its one dependency.
pkg=$(apt-cache "${opts[@]}" depends linux-image-amd64 | awk '/Depends: linux-image-/ { print $2; exit }')
[ -n "$pkg" ] || { echo "lab-kernel: linux-image-amd64 not found in bookworm-backports" >&2; exit 1; }
(cd "$work/deb" && apt-get "${opts[@]}" download "$pkg")
rm -rf "$dest/kernel.tmp"
dpkg-deb -x "$work"/deb/*.deb "$dest/kernel.tmp"
rm -rf "$dest/kernel" "$work"
mv "$dest/kernel.tmp" "$dest/kernel"
echo "lab-kernel: $(ls "$dest"/kernel/boot/vmlinuz-*)"
