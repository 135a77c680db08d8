// A pin-light wrapper of the key search unit for place and route (synth/ksu.sh): the
// search's parameters and beat data move in through a 64-bit shift register a byte per
// cycle, the answer out a bit per cycle, so the unit itself is what gets timed. A beat's 512
// bits are XORs of two of the shift register's 64 bits (below), 512 LUTs where a 512-bit
// register took 512 more flip-flops and congested the HX8K's routing. KEY_BYTES is the longest key the unit serves: 64 keeps the key
// banks in flip-flops, so the node banks' 32 block RAMs (a 512-bit beat per cycle needs 32
// RAMs of 16 bits, whatever the depth) are all an HX8K has.
module ksu_top #(
    parameter int KEY_BYTES = 64
) (
    input  logic       clk,
    input  logic       rst,
    input  logic [7:0] din,
    input  logic       shift,       // shift `din` into the 64-bit register
    input  logic [1:0] cfg,         // 1: latch rv, 2: now, 3: beat index and key length
    input  logic       beat_valid,
    input  logic       key_valid,
    input  logic       start,
    output logic       ready,
    output logic       done,
    output logic [2:0] status,
    output logic       leaf,
    output logic       dout         // the answer (value offset, next), a bit per cycle
);
  logic [63:0] sh;
  logic [511:0] beat;
  logic [15:0] idx;
  logic [8:0] key_len;
  logic [63:0] rv, now;
  logic [79:0] res;
  logic [31:0] value_off, cycles;
  logic [63:0] next;
  logic beat_ready, key_ready, d;
  always_ff @(posedge clk) begin
    if (shift) sh <= {din, sh[63:8]};
    case (cfg)
      2'd1: rv <= sh;
      2'd2: now <= sh;
      2'd3: {key_len, idx} <= sh[24:0];
      default: ;
    endcase
    if (d) res <= {value_off ^ cycles, next[47:0] ^ next[63:16]};
    else res <= {1'b0, res[79:1]};
  end
  // Beat bit j of word w is sh[(j + 8w) mod 64] ^ sh[(7j + w + 1) mod 64]: a different pair
  // for every bit of every word (7 is odd, so no two (w, j) give the same pair), so no two
  // bank or key-register inputs are the same signal and Yosys merges none of them (a plain
  // rotation let it merge the eight banks' key registers into one).
  genvar w, j;
  generate
    for (w = 0; w < 8; w++) begin : g_word
      for (j = 0; j < 64; j++) begin : g_bit
        assign beat[w*64+j] = sh[(j+8*w)%64] ^ sh[(7*j+w+1)%64];
      end
    end
  endgenerate
  assign dout = res[0];
  assign done = d;
  assign ready = beat_ready & key_ready;
  ksu #(.NODE_BYTES(8192), .KEY_BYTES(KEY_BYTES)) u (
      .clk, .rst, .beat_valid, .beat_idx(idx), .beat_data(beat), .beat_ready,
      .key_valid, .key_idx(idx[2:0]), .key_data(beat), .key_ready,
      .start, .key_len, .rv, .now, .done(d), .status, .value_off, .next, .leaf, .cycles
  );
endmodule
