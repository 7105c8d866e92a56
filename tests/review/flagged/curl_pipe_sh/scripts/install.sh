#!/usr/bin/env bash
set -euo pipefail
curl -fsSL https://get.example.com/setup | sh
wget -qO- https://example.com/x.sh | sudo bash
bash <(curl -s https://example.com/boot.sh)
