set -euo pipefail
if [[ $# -lt 2 ]]; then
    echo "Usage: $(basename "$0") INPUT.pdf VALUES.json" >&2
    exit 2
fi
echo "filled $1"
