// A pin-light wrapper of the key search unit for place and route (synth/ksu.sh): a beat, the
// search's parameters and the answer move through shift registers a byte (in) or a bit (out)
// per cycle, so the unit itself is what gets timed.
module ksu_top (
    input  logic       clk,
    input  logic       rst,
    input  logic [7:0] din,
    input  logic       shift,       // shift `din` into the 512-bit beat register
    input  logic       cfg,         // latch beat index, key length, rv and now from it
    input  logic       beat_valid,
    input  logic       key_valid,
    input  logic       start,
    output logic       ready,
    output logic       done,
    output logic [2:0] status,
    output logic       leaf,
    output logic       dout         // the answer (value offset, next), a bit per cycle
);
  logic [511:0] sh;
  logic [15:0] idx;
  logic [8:0] key_len;
  logic [63:0] rv, now;
  logic [79:0] res;
  logic [31:0] value_off, cycles;
  logic [63:0] next;
  logic beat_ready, key_ready, d;
  always_ff @(posedge clk) begin
    if (shift) sh <= {din, sh[511:8]};
    if (cfg) {now, rv, key_len, idx} <= sh[152:0];
    if (d) res <= {value_off ^ cycles, next[47:0] ^ next[63:16]};
    else res <= {1'b0, res[79:1]};
  end
  assign dout = res[0];
  assign done = d;
  assign ready = beat_ready & key_ready;
  ksu #(.NODE_BYTES(8192)) u (
      .clk, .rst, .beat_valid, .beat_idx(idx), .beat_data(sh), .beat_ready,
      .key_valid, .key_idx(idx[2:0]), .key_data(sh), .key_ready,
      .start, .key_len, .rv, .now, .done(d), .status, .value_off, .next, .leaf, .cycles
  );
endmodule
