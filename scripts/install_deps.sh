#!/usr/bin/env bash
# Installs the Debian 12 packages ember needs to build, test and run its
# demos. Run as root (or with sudo available).
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then # the header above is the help
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS=(
  build-essential cmake pkg-config git
  lua5.4 liblua5.4-dev lua-busted lua-argparse lua-ldoc luarocks
  libopenblas-dev libdnnl-dev libreadline-dev libcjson-dev libcairo2-dev libpng-dev
  tmux valgrind procps strace
  clang-14 libclang-rt-14-dev libomp-14-dev
  python3 python3-torch
  dataset-fashion-mnist
  wamerican wfrench wngerman wspanish witalian
  bible-kjv bible-kjv-text
  libopenmpi-dev openmpi-bin
)
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${PKGS[@]}"
