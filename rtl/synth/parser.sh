#!/bin/bash
# Synthesis of the frame parser for a Lattice iCE40 HX8K with Yosys and nextpnr
# (apt-get install -y yosys nextpnr-ice40 fpga-icestorm): cell counts, then place and route
# for the clock's fmax. Results: docs/RTL.md.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-../target/rtl-synth}
mkdir -p "$OUT"
yosys -q -l "$OUT/parser-ice40.log" -p "read_verilog -sv sv/frame_parser.sv synth/parser_top.sv; \
    synth_ice40 -top parser_top -json $OUT/parser.json; tee -o $OUT/parser-stat.txt stat"
timeout 600 nextpnr-ice40 --hx8k --package ct256 --json "$OUT/parser.json" \
    --pcf-allow-unconstrained --freq 100 --seed 1 --log "$OUT/parser-pnr.log" --quiet || true
grep -E "SB_LUT4|SB_DFF|SB_RAM40|SB_CARRY|Number of cells" "$OUT/parser-stat.txt" | sed 's/^ */ice40: /'
grep -E "Max frequency|ICESTORM_LC|ICESTORM_RAM|SB_IO" "$OUT/parser-pnr.log" | tail -6
