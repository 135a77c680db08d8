#!/bin/bash
# Cell counts of the tree-walk engine (request table, memory-request generator, KSUS key
# search units with their node buffers) with Yosys's iCE40 mapping (apt-get install -y
# yosys): LUT4s, flip-flops, carry cells and 4 Kbit block RAMs. The engine does not fit any
# iCE40 (one unit's node banks take all 32 RAMs of an HX8K), so there is no place and
# route: the counts say what a larger FPGA must hold. Results: docs/RTL.md. The default
# configuration takes about 6 minutes on the 2-core machine; 4 units and 64 slots did not
# finish in 45.
#   KSUS=1 SLOTS=16 NODE=8192 rtl/synth/walk.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-../target/rtl-synth}
KSUS=${KSUS:-1}
SLOTS=${SLOTS:-16}
NODE=${NODE:-8192}
mkdir -p "$OUT"
yosys -q -l "$OUT/walk-ice40.log" -p "read_verilog -sv sv/ksu.sv sv/walk.sv; \
    chparam -set NKSU $KSUS -set SLOTS $SLOTS -set NODE_BYTES $NODE walk; \
    synth_ice40 -top walk; tee -o $OUT/walk-stat.txt stat"
echo "walk engine, $KSUS units, $SLOTS slots, $NODE-byte nodes:"
grep -E "SB_LUT4|SB_DFF|SB_RAM40|SB_CARRY|Number of cells" "$OUT/walk-stat.txt" | sed 's/^ */ice40: /'
