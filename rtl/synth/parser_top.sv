// A pin-light wrapper of the frame parser for place and route (synth/parser.sh): the limits
// arrive through a shift register a byte per cycle, bytes of the frame on `din`, and each
// operation's fields leave through a shift register a bit per cycle, so the parser itself
// is what gets timed.
module parser_top (
    input  logic       clk,
    input  logic       rst,
    input  logic [7:0] din,
    input  logic       cfg,        // shift `din` into the limits register
    input  logic       in_valid,
    input  logic       in_end,
    output logic       in_ready,
    output logic       op_valid,
    output logic       done,
    output logic [2:0] err,
    output logic       dout
);
  logic [151:0] lim;
  logic [127:0] res;
  logic [7:0] opc;
  logic [15:0] id, klen;
  logic [31:0] koff, voff, vlen, arg;
  logic [1:0] verdict;
  logic [3:0] status;
  logic [2:0] why;
  logic ov;
  always_ff @(posedge clk) begin
    if (cfg) lim <= {din, lim[151:8]};
    if (ov) res <= {5'd0, opc, id, klen, koff, voff ^ vlen, verdict, status, why, arg[9:0]};
    else res <= {1'b0, res[127:1]};
  end
  assign dout = res[0];
  assign op_valid = ov;
  frame_parser u (
      .clk, .rst,
      .max_frame(lim[31:0]), .max_ops(lim[47:32]), .max_key(lim[79:48]),
      .max_value(lim[111:80]), .max_token(lim[143:112]),
      .in_valid, .in_byte(din), .in_end, .in_ready,
      .op_valid(ov), .op_opcode(opc), .op_id(id), .op_key_off(koff), .op_key_len(klen),
      .op_val_off(voff), .op_val_len(vlen), .op_verdict(verdict), .op_status(status),
      .done, .err, .why, .arg
  );
endmodule
