#!/bin/sh
# Installs crosstalk as a systemd service on a fresh Debian or Ubuntu VPS.
#
#   sudo deploy/install.sh [path/to/crosstalk]
#
# Without a path it builds the release binary with cargo first. It creates
# the crosstalk user, installs the binary, the admin wrapper and the unit,
# writes /etc/crosstalk/crosstalk.env from the example if there is none, and
# starts the service. Running it again upgrades the binary and restarts.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

if [ "$(id -u)" -ne 0 ]; then
    echo "install.sh: run as root (sudo)" >&2
    exit 1
fi

binary=${1:-}
if [ -z "$binary" ]; then
    echo "Building the release binary…"
    (cd "$root" && cargo build --release --locked)
    binary="$root/target/release/crosstalk"
fi

id crosstalk >/dev/null 2>&1 ||
    useradd --system --home-dir /var/lib/crosstalk --no-create-home --shell /usr/sbin/nologin crosstalk

install -m 0755 "$binary" /usr/local/bin/crosstalk
install -m 0755 "$here/crosstalk-admin" /usr/local/bin/crosstalk-admin
install -m 0644 "$root/systemd/crosstalk.service" /etc/systemd/system/crosstalk.service
install -d -m 0750 -o root -g crosstalk /etc/crosstalk
if [ ! -e /etc/crosstalk/crosstalk.env ]; then
    install -m 0640 -o root -g crosstalk "$here/crosstalk.env.example" /etc/crosstalk/crosstalk.env
    echo "Wrote /etc/crosstalk/crosstalk.env: set RELAY_DOMAINS (or certificate files) there."
fi
install -d -m 0700 -o crosstalk -g crosstalk /var/lib/crosstalk

systemctl daemon-reload
systemctl enable crosstalk.service
systemctl restart crosstalk.service
echo "crosstalk is installed. Add people with: sudo crosstalk-admin add HANDLE \"Name\""
echo "Logs: journalctl -u crosstalk -f"
