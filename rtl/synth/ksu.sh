#!/bin/bash
# Synthesis of the key search unit (8 KiB nodes, keys up to 64 bytes) for a Lattice iCE40 HX8K with Yosys and
# nextpnr (apt-get install -y yosys nextpnr-ice40 fpga-icestorm): cell counts, then place and
# route for the clock's fmax. Results: docs/RTL.md.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-../target/rtl-synth}
mkdir -p "$OUT"
yosys -q -l "$OUT/ice40.log" -p "read_verilog -sv sv/ksu.sv synth/ksu_top.sv; \
    synth_ice40 -top ksu_top -json $OUT/ksu.json; tee -o $OUT/ice40-stat.txt stat"
# The HX8K is 88% full. router1 (seed 1) routes the current unit in about 8 minutes on the
# 2-core machine; router2 stalls on one overused wire with this netlist (it routed the
# previous one). Bounded at 20 minutes.
timeout 1200 nextpnr-ice40 --hx8k --package ct256 --json "$OUT/ksu.json" --pcf-allow-unconstrained \
    --router router1 --freq 40 --seed 1 --log "$OUT/pnr.log" --quiet || true
grep -E "SB_LUT4|SB_DFF|SB_RAM40|SB_CARRY|Number of cells" "$OUT/ice40-stat.txt" | sed 's/^ */ice40: /'
grep -E "Max frequency|ICESTORM_LC|ICESTORM_RAM|SB_IO" "$OUT/pnr.log" | tail -6
