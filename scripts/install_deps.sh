#!/usr/bin/env bash
# Installs the Debian 12 packages ember needs to build, test and run its
# demos. Run as root (or with sudo available).
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS=(
  build-essential cmake pkg-config git
  lua5.4 liblua5.4-dev lua-busted
  libopenblas-dev libdnnl-dev libreadline-dev libcjson-dev libcairo2-dev libpng-dev
  tmux valgrind procps
  python3 python3-torch
  dataset-fashion-mnist
  wamerican wfrench wngerman wspanish witalian
  bible-kjv bible-kjv-text
)
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${PKGS[@]}"
