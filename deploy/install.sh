#!/bin/sh
# Installs crosstalk as a systemd service on a Debian or Ubuntu machine, and
# upgrades or removes it.
#
#   sudo deploy/install.sh --domain relay.example.com --person alice --name "Alice Liddell"
#       installs, configures, adds the first person, checks, starts, waits for
#       the certificate, and prints how to connect
#   sudo deploy/install.sh            installs (or upgrades) without starting,
#                                     and says what to do next
#   sudo deploy/install.sh --uninstall [--purge]
#                                     removes the service; --purge also the
#                                     data and the configuration
#
# Options:
#   --binary PATH    install this binary (default: build it with cargo)
#   --domain NAME    the DNS name of this machine (RELAY_DOMAINS)
#   --email ADDRESS  the ACME account's contact (RELAY_ACME_EMAIL)
#   --person HANDLE  the first person to add; --name "Their Name"
#   --staging        use Let's Encrypt's staging directory (for a first try)
#   --root DIR       install under DIR instead of / (no users, no systemctl)
#   --dry-run        say what would change, change nothing
#
# Running it again changes nothing but what is new: the binary and the units
# are replaced when they differ (an upgrade; the service is restarted if it
# runs), the configuration and the data are kept.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
checkout=$(dirname "$here")

root=""
dry_run=false
uninstall=false
purge=false
binary=""
domain=""
email=""
person=""
name=""
staging=false

usage() {
    sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --root) root=${2:?--root needs a folder}; shift 2 ;;
        --dry-run) dry_run=true; shift ;;
        --uninstall) uninstall=true; shift ;;
        --purge) purge=true; shift ;;
        --binary) binary=${2:?--binary needs a path}; shift 2 ;;
        --domain) domain=${2:?--domain needs a name}; shift 2 ;;
        --email) email=${2:?--email needs an address}; shift 2 ;;
        --person) person=${2:?--person needs a handle}; shift 2 ;;
        --name) name=${2:?--name needs a name}; shift 2 ;;
        --staging) staging=true; shift ;;
        -h|--help) usage 0 ;;
        *) echo "install.sh: unknown option $1" >&2; usage 2 ;;
    esac
done

# Values that go into the configuration are checked, not trusted: a name
# is DNS labels (a comma-separated list of them), an address is one line
# with one @ and no shell or configuration syntax.
if [ -n "$domain" ] && { [ "$(printf '%s' "$domain" | wc -l)" -ne 0 ] || ! printf '%s' "$domain" | grep -Eqx '([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(,([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*'; }; then
    echo "install.sh: --domain $domain is not a DNS name (letters, digits, '-' and '.')" >&2
    exit 2
fi
if [ -n "$email" ] && { [ "$(printf '%s' "$email" | wc -l)" -ne 0 ] || ! printf '%s' "$email" | grep -Eqx '[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}'; }; then
    echo "install.sh: --email $email is not an email address" >&2
    exit 2
fi

if [ "$purge" = true ] && [ "$uninstall" = false ]; then
    echo "install.sh: --purge goes with --uninstall" >&2
    exit 2
fi
if [ -z "$root" ] && [ "$(id -u)" -ne 0 ]; then
    echo "install.sh: run as root (sudo), or try it with --root DIR" >&2
    exit 1
fi
root=${root%/}

bin_dir="$root/usr/local/bin"
unit_dir="$root/etc/systemd/system"
sysusers_dir="$root/usr/lib/sysusers.d"
config_dir="$root/etc/crosstalk"
env_file="$config_dir/crosstalk.env"
state_dir="$root/var/lib/crosstalk"
units="crosstalk.service crosstalk-backup.service crosstalk-backup.timer"

# Whether this is a real install, with users and systemd.
live() { [ -z "$root" ] && [ "$dry_run" = false ]; }

say() { printf '%s\n' "$*"; }

# Runs a command, or says it would.
run() {
    if [ "$dry_run" = true ]; then
        say "would run: $*"
    else
        "$@"
    fi
}

changed=0
# put SRC DEST MODE [GROUP]: installs a file unless an identical one is there.
put() {
    if [ -f "$2" ] && cmp -s "$1" "$2"; then
        say "unchanged $2"
        return 0
    fi
    changed=$((changed + 1))
    if [ "$dry_run" = true ]; then
        say "would install $2"
        return 0
    fi
    group=${4:-}
    if [ -n "$group" ] && [ -z "$root" ]; then
        install -D -m "$3" -o root -g "$group" "$1" "$2"
    else
        install -D -m "$3" "$1" "$2"
    fi
    say "installed $2"
}

# folder PATH MODE [OWNER]: makes a folder with this mode (and owner).
folder() {
    if [ -d "$1" ]; then
        return 0
    fi
    changed=$((changed + 1))
    if [ "$dry_run" = true ]; then
        say "would create $1"
        return 0
    fi
    if [ -n "${3:-}" ] && [ -z "$root" ]; then
        install -d -m "$2" -o "$3" -g "$3" "$1"
    else
        install -d -m "$2" "$1"
    fi
    say "created $1"
}

remove() {
    for path in "$@"; do
        if [ -e "$path" ]; then
            run rm -rf "$path"
            say "removed $path"
        fi
    done
}

if [ "$uninstall" = true ]; then
    if live; then
        for unit in crosstalk-backup.timer crosstalk.service; do
            systemctl disable --now "$unit" 2>/dev/null || true
        done
    fi
    remove "$bin_dir/crosstalk" "$bin_dir/crosstalk-admin" "$sysusers_dir/crosstalk.conf"
    for unit in $units; do
        remove "$unit_dir/$unit"
    done
    if live; then
        systemctl daemon-reload
    fi
    if [ "$purge" = true ]; then
        remove "$state_dir" "$config_dir"
        say "crosstalk is removed, with its data and configuration."
    else
        say "crosstalk is removed. Its data ($state_dir) and configuration ($config_dir) are kept; --uninstall --purge removes them."
    fi
    exit 0
fi

if [ -z "$binary" ]; then
    binary="$checkout/target/release/crosstalk"
    # Never a build as root in a checkout someone else could write: its
    # build scripts would run as root.
    if [ "$(id -u)" -eq 0 ] && { [ "$(stat -c %u "$checkout")" -ne 0 ] ||
        [ -n "$(find "$checkout" -maxdepth 2 -perm /022 ! -type l -print -quit)" ]; }; then
        echo "install.sh: will not build as root in $checkout, which others can write:" >&2
        echo "  build it as its owner (cargo build --release), then: sudo $0 --binary $binary ..." >&2
        exit 1
    fi
    if [ "$dry_run" = true ]; then
        say "would build $binary with cargo"
    else
        say "Building the release binary…"
        (cd "$checkout" && cargo build --release --locked)
    fi
fi

# The user first, so files can be given to its group.
put "$checkout/systemd/crosstalk.sysusers" "$sysusers_dir/crosstalk.conf" 0644
if live; then
    systemd-sysusers "$sysusers_dir/crosstalk.conf"
fi
binary_changed=$changed
put "$binary" "$bin_dir/crosstalk" 0755
put "$here/crosstalk-admin" "$bin_dir/crosstalk-admin" 0755
for unit in $units; do
    put "$checkout/systemd/$unit" "$unit_dir/$unit" 0644
done
upgraded=$((changed - binary_changed))
folder "$config_dir" 0750
if live; then
    chgrp crosstalk "$config_dir"
fi
folder "$state_dir" 0700 crosstalk
if [ -f "$env_file" ]; then
    say "kept $env_file"
else
    put "$here/crosstalk.env.example" "$env_file" 0640 crosstalk
fi

# set_var NAME VALUE: sets a variable in the configuration, if it differs.
set_var() {
    if grep -qxF "$1=$2" "$env_file" 2>/dev/null &&
        [ "$(grep -c "^#\{0,1\}$1=" "$env_file")" -eq 1 ]; then
        return 0
    fi
    changed=$((changed + 1))
    if [ "$dry_run" = true ]; then
        say "would set $1 in $env_file"
        return 0
    fi
    # The value as it is (awk reads it from the environment, where nothing
    # is interpreted), in place of the line that sets or suggests it; the
    # file keeps its owner and mode.
    # Every line that sets or suggests it goes; the value takes the first's
    # place. The copy is made readable by root alone.
    edited="$env_file.new.$$"
    (umask 077 && NAME="$1" VALUE="$2" awk '
        BEGIN { line = ENVIRON["NAME"] "=" ENVIRON["VALUE"] }
        index($0, ENVIRON["NAME"] "=") == 1 || index($0, "#" ENVIRON["NAME"] "=") == 1 {
            if (!done) print line
            done = 1
            next
        }
        { print }
        END { if (!done) print line }
    ' "$env_file" > "$edited")
    cat "$edited" > "$env_file"
    rm -f "$edited"
    say "set $1 in $env_file"
}
if [ -n "$domain" ]; then
    set_var RELAY_DOMAINS "$domain"
fi
if [ -n "$email" ]; then
    set_var RELAY_ACME_EMAIL "$email"
fi
if [ "$staging" = true ]; then
    set_var RELAY_ACME_DIRECTORY letsencrypt-staging
fi

if ! live; then
    if [ "$changed" -eq 0 ]; then
        say "Nothing to change: crosstalk is installed as it would be."
    fi
    exit 0
fi

systemctl daemon-reload
admin="$bin_dir/crosstalk-admin"
if systemctl is-active --quiet crosstalk.service; then
    if [ "$upgraded" -gt 0 ]; then
        systemctl restart crosstalk.service
        say "Upgraded and restarted crosstalk: $("$bin_dir/crosstalk" --version)"
    else
        say "crosstalk is running, unchanged: $("$bin_dir/crosstalk" --version)"
    fi
    exit 0
fi

if [ -z "$person" ]; then
    say ""
    say "crosstalk is installed but not started. Next:"
    say "  1. point DNS at this machine and open ports 80 and 443;"
    say "  2. set RELAY_DOMAINS (and RELAY_ACME_EMAIL) in $env_file, or run this again with --domain;"
    say "  3. add the first person: sudo crosstalk-admin add HANDLE \"Name\";"
    say "  4. check and start: sudo crosstalk-admin check && sudo systemctl enable --now crosstalk"
    exit 0
fi

# Add the first person unless they exist; their connection lines come now.
if "$admin" people 2>/dev/null | awk 'NR > 1 { print $1 }' | grep -qx "$person"; then
    say "$person is on the team already; to print a new token: sudo crosstalk-admin rotate $person"
else
    "$admin" add "$person" ${name:+"$name"}
fi

if ! "$admin" check; then
    say ""
    say "crosstalk is installed, but not started: fix what check says above (in $env_file),"
    say "then: sudo systemctl enable --now crosstalk"
    exit 1
fi
systemctl enable --now crosstalk.service
systemctl enable --now crosstalk-backup.timer

# The certificate: ACME takes a few seconds when DNS and port 443 are right.
say "Waiting for the certificate…"
since=$(date +%s)
while :; do
    if journalctl -u crosstalk --since "@$since" -o cat 2>/dev/null | grep -q "DeployedNewCert\|DeployedCachedCert"; then
        say "crosstalk is running with its certificate: https://$(sed -n 's/^RELAY_DOMAINS=\([^,]*\).*/\1/p' "$env_file")"
        break
    fi
    if ! systemctl is-active --quiet crosstalk.service; then
        say "crosstalk stopped; see: journalctl -u crosstalk"
        exit 1
    fi
    if [ $(( $(date +%s) - since )) -ge 90 ]; then
        say "No certificate after 90 s: it keeps trying, with backoff. The usual causes are a DNS record"
        say "that does not point here yet, or port 443 closed in a firewall. Watch: journalctl -u crosstalk -f"
        break
    fi
    sleep 2
done
say "Logs: journalctl -u crosstalk -f    Backups: daily, in $state_dir/backups"
