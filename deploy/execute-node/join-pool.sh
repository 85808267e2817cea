#!/usr/bin/env bash
# Join this Linux GPU workstation to the campus HTCondor pool as a Nightshift execute node.
#
#   sudo ./join-pool.sh --central-manager cm.campus.example --token-file ws-42.token \
#        [--availability idle|nights|both] \
#        [--portal https://nightshift.campus.example --portal-token-file kit.token]
#
# It installs HTCondor from the distribution (Debian 13 / Ubuntu 24.04 and later ship it;
# elsewhere install HTCondor first, see https://htcondor.org/downloads), drops in the
# Nightshift execute-node config and the owner-GPU probe, installs the IDTOKEN the pool's
# admin issued for this machine, and restarts HTCondor. With --portal, the workstation also
# publishes the portal's placement figures (docs/placement.md), read with the personal access
# token in --portal-token-file (an account allowed to view workstation forecasts). Safe to
# run again.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CM="" TOKEN="" AVAILABILITY=idle PORTAL="" PORTAL_TOKEN=""
while [ $# -gt 0 ]; do
    case "$1" in
        --central-manager) CM=$2; shift 2 ;;
        --token-file) TOKEN=$2; shift 2 ;;
        --availability) AVAILABILITY=$2; shift 2 ;;
        --portal) PORTAL=$2; shift 2 ;;
        --portal-token-file) PORTAL_TOKEN=$2; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "join-pool: unknown option $1" >&2; exit 2 ;;
    esac
done
say() { printf 'join-pool: %s\n' "$*"; }
die() { printf 'join-pool: error: %s\n' "$*" >&2; exit 1; }

[ -n "$CM" ] || die "--central-manager is required (the pool's collector host)"
[ -n "$TOKEN" ] && [ -r "$TOKEN" ] || die "--token-file must name a readable IDTOKEN file"
case "$AVAILABILITY" in idle|nights|both) ;; *) die "--availability is idle, nights or both" ;; esac
# Only a host name or address may reach the config file.
[[ "$CM" =~ ^[A-Za-z0-9.:-]+$ ]] || die "--central-manager must be a host name or address"
if [ -n "$PORTAL" ]; then
    # Only a URL of these characters may reach the config file.
    [[ "$PORTAL" =~ ^https?://[A-Za-z0-9.:/_-]+$ ]] || die "--portal must be an http(s) URL"
    [ -n "$PORTAL_TOKEN" ] && [ -r "$PORTAL_TOKEN" ] \
        || die "--portal needs --portal-token-file, a readable personal access token file"
fi
[ "$(id -u)" = 0 ] || die "run as root (sudo)"

if ! command -v condor_master >/dev/null; then
    say "installing HTCondor"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq condor >/dev/null \
        || die "could not install the condor package; install HTCondor, then run this again"
fi
# Live sessions (TensorBoard, notebooks, served endpoints) reach a job through
# condor_ssh_to_job: the starter runs this sshd binary over HTCondor's own connection. The
# ssh daemon itself need not run, and nothing listens on the network for it.
SSHD=$(condor_config_val SSH_TO_JOB_SSHD 2>/dev/null || echo /usr/sbin/sshd)
if [ ! -x "$SSHD" ]; then
    say "installing openssh-server (its sshd binary, for live sessions into jobs)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        openssh-server >/dev/null \
        || say "warning: no sshd ($SSHD): jobs here run, but cannot be opened live"
fi

CONFIG_DIR=/etc/condor/config.d
LIBEXEC=$(condor_config_val LIBEXEC)
install -m 0644 "$HERE/nightshift-execute.conf" "$CONFIG_DIR/40-nightshift-execute.conf"
install -m 0755 "$HERE/owner-gpu-probe" "$LIBEXEC/nightshift-owner-gpu-probe"
install -m 0755 "$HERE/placement-figures" "$LIBEXEC/nightshift-placement-figures"
# The owner's "I need it back" on the workstation itself (sudo nightshift-reclaim 10).
install -m 0755 "$HERE/reclaim" /usr/local/sbin/nightshift-reclaim
# A one-time code for the owner to claim the workstation in the portal.
install -m 0755 "$HERE/claim-code" /usr/local/sbin/nightshift-claim-code
# The starter shim that gives each slot's job an account of its own.
install -m 0755 "$HERE/nightshift-starter" "$LIBEXEC/nightshift-starter"
# HTCondor's file-transfer plugin for the jobs' datasets and the delivery module it runs
# (the kit's links to the portal's copies; install copies what they point at).
install -m 0755 "$HERE/nightshift_data_plugin.py" "$LIBEXEC/nightshift_data_plugin.py"
install -m 0644 "$HERE/nightshift_data.py" "$LIBEXEC/nightshift_data.py"
install -m 0644 "$HERE/cache_keeper.py" "$LIBEXEC/cache_keeper.py"
# The cache keeper, which alone writes the shared caches, as an account no job runs as.
install -d -m 0755 "$LIBEXEC/nightshift-keeper"
for module in cache_keeper_daemon cache_keeper environment_cache nightshift_data; do
    install -m 0644 "$HERE/$module.py" "$LIBEXEC/nightshift-keeper/$module.py"
done
chmod 0755 "$LIBEXEC/nightshift-keeper/cache_keeper_daemon.py"
KEEPER_USER=$(condor_config_val NIGHTSHIFT_CACHE_KEEPER_USER)
id "$KEEPER_USER" >/dev/null 2>&1 \
    || useradd --system --no-create-home --shell /usr/sbin/nologin "$KEEPER_USER"
cat >"$CONFIG_DIR/45-nightshift-join.conf" <<CONF
# Written by join-pool.sh: this workstation's place in the campus pool.
CONDOR_HOST = $CM
use ROLE : Execute
use FEATURE : GPUs
use SECURITY : RECOMMENDED_v9_0
SEC_DEFAULT_AUTHENTICATION_METHODS = IDTOKENS
NIGHTSHIFT_AVAILABILITY = $AVAILABILITY
CONF
install -d -m 0700 /etc/condor/tokens.d
install -m 0600 "$TOKEN" /etc/condor/tokens.d/nightshift-execute.token
if [ -n "$PORTAL" ]; then
    # Read by the startd's cron, which runs as the condor account.
    install -m 0640 -g condor "$PORTAL_TOKEN" /etc/condor/nightshift-portal.token
    cat >>"$CONFIG_DIR/45-nightshift-join.conf" <<CONF
NIGHTSHIFT_PORTAL_URL = $PORTAL
NIGHTSHIFT_PORTAL_TOKEN_FILE = /etc/condor/nightshift-portal.token
STARTD_CRON_JOBLIST = \$(STARTD_CRON_JOBLIST) PLACEMENT
CONF
fi

# The shared environment cache, and uv to install into it (the keeper uses pip without).
# Only the keeper's account writes either cache; jobs read them.
CACHE=$(condor_config_val NIGHTSHIFT_ENV_CACHE)
install -d -o "$KEEPER_USER" -m 0755 "$CACHE"
# The dataset cache: each version fetched once from the portal, reused by later jobs.
install -d -o "$KEEPER_USER" -m 0755 "$(condor_config_val NIGHTSHIFT_DATA_CACHE)"
if ! [ -x /usr/local/bin/uv ]; then
    say "installing uv (from the package index) for the environment cache"
    scratch=$(mktemp -d)
    if python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$scratch" uv \
        && python3 -m zipfile -e "$scratch"/uv-*.whl "$scratch/wheel" \
        && install -m 0755 "$scratch"/wheel/uv-*.data/scripts/uv /usr/local/bin/uv; then
        :
    else
        say "warning: uv could not be installed; jobs will install environments with pip"
    fi
    rm -rf "$scratch"
fi

say "checking the configuration"
condor_config_val START >/dev/null || die "HTCondor rejects the configuration"
systemctl enable --now condor >/dev/null 2>&1 || true
condor_reconfig >/dev/null 2>&1 || systemctl restart condor
say "joined $CM with the $AVAILABILITY policy; within a minute this machine should show on"
say "the portal's Pool page. Check here with: condor_status -af Name OwnerGpuActive Start"
