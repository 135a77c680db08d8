// Frame parser (issue 19; Algo-Logic's compact messages, accelkv's binary protocol version 1,
// docs/PROTOCOL.md): the bytes of a request frame in, one byte a cycle; every operation out
// with its position and a verdict; the frame's outcome flagged exactly as the `proto`
// crate's `decode_request` flags it, with the same limits (inputs `max_*`).
//
// The host streams a buffer's bytes (`in_valid`/`in_byte` while `in_ready`) and raises
// `in_end` once there are no more. Operations leave on `op_*` as they are parsed; they count
// only if the frame's outcome (`done`, `err`) is 0: as in `decode_request`, an error found
// later in the frame (or a frame the buffer does not hold whole) voids them. Reset between
// buffers. Bytes past the frame's `frame_len` are not read (the next frame's).
//
// Outcome (`err`, `why`, `arg`):
//   0 ok
//   1 incomplete        arg: bytes needed (as `FrameError::Incomplete { needed }`)
//   2 bad magic
//   3 bad version       arg: the version byte
//   4 too large         why: 1 frame, 2 operation count, 3 token; arg: the declared size
//   5 malformed         why: 1 unknown header flags, 2 frame length shorter than its header,
//                       3 response frame where a request was expected, 4 operation count
//                       larger than the frame, 5 truncated operation header, 6 operation runs
//                       past the end of the frame, 7 bytes after the last operation
// Operation verdict (`op_verdict`, `op_status`): 0 decodes; 1 unknown opcode; 2 invalid with
// `op_status` (3 too large, 4 malformed), as `decode_op` answers `Request::Invalid`.
module frame_parser (
    input  logic        clk,
    input  logic        rst,
    input  logic [31:0] max_frame,
    input  logic [15:0] max_ops,
    input  logic [31:0] max_key,
    input  logic [31:0] max_value,
    input  logic [31:0] max_token,
    input  logic        in_valid,
    input  logic [7:0]  in_byte,
    input  logic        in_end,
    output logic        in_ready,
    output logic        op_valid,
    output logic [7:0]  op_opcode,
    output logic [15:0] op_id,
    output logic [31:0] op_key_off,
    output logic [15:0] op_key_len,
    output logic [31:0] op_val_off,
    output logic [31:0] op_val_len,
    output logic [1:0]  op_verdict,
    output logic [3:0]  op_status,
    output logic        done,
    output logic [2:0]  err,
    output logic [2:0]  why,
    output logic [31:0] arg
);
  typedef enum logic [3:0] {
    HDR, HCHK, TLEN, TOK, BODY, OPSTART, OPH, OPCHK, KV, EMIT, SKIP, FIN, STOP
  } st_t;
  st_t st;

  logic [31:0] pos;        // bytes consumed
  logic [7:0]  hdr[14];
  logic [31:0] frame_len, end_at;
  logic [15:0] op_count, ops_done;
  logic        resp_flag;  // FLAG_RESPONSE
  logic        flag12;     // more operations than the frame can hold
  logic        rec;        // an operation error was recorded
  logic [2:0]  rec_why;
  logic [7:0]  oh[10];     // operation header
  logic [7:0]  v[8];       // first value bytes
  logic [31:0] kv_left, kv_at;  // key+value bytes left, bytes of it consumed

  wire consuming = (st == HDR || st == TLEN || st == TOK || st == OPH || st == KV
      || (st == SKIP && pos != frame_len));
  assign in_ready = consuming;

  wire [15:0] klen = {oh[5], oh[4]};
  wire [31:0] vlen = {oh[9], oh[8], oh[7], oh[6]};
  wire [7:0]  opc = oh[0];

  // The operation's verdict (decode_op), from its opcode, lengths and first value bytes.
  logic [1:0] verdict;
  logic [3:0] status;
  always_comb begin
    logic known, needs_key;
    logic [31:0] l, rest;
    known = (opc >= 8'h01 && opc <= 8'h0D) || opc == 8'h10 || opc == 8'h11 || opc == 8'h20;
    needs_key = (opc >= 8'h01 && opc <= 8'h04) || (opc >= 8'h0B && opc <= 8'h0D)
        || opc == 8'h10 || opc == 8'h11 || opc == 8'h20;
    l = {v[4], v[3], v[2], v[1]};
    rest = vlen - 32'd5;
    verdict = 2'd0;
    status = 4'd0;
    if (!known) verdict = 2'd1;
    else if (needs_key && klen == 16'd0) {verdict, status} = {2'd2, 4'd4};
    else if (opc != 8'h08 && {16'd0, klen} > max_key) {verdict, status} = {2'd2, 4'd3};
    else begin
      case (opc)
        8'h02, 8'h03, 8'h07: if (vlen > max_value) {verdict, status} = {2'd2, 4'd3};
        8'h0B, 8'h0C: begin
          if (vlen < 32'd8) {verdict, status} = {2'd2, 4'd4};
          else if (vlen - 32'd8 > max_value) {verdict, status} = {2'd2, 4'd3};
          else if (opc == 8'h0C && vlen != 32'd8) {verdict, status} = {2'd2, 4'd4};
        end
        8'h05, 8'h06: begin
          if (vlen < 32'd4) {verdict, status} = {2'd2, 4'd4};
          else if (vlen - 32'd4 > max_key) {verdict, status} = {2'd2, 4'd3};
        end
        8'h10:
          if (!((v[0] == 8'd3 || v[0] == 8'd5) && v[1] <= 8'd2 && vlen == 32'd10))
            {verdict, status} = {2'd2, 4'd4};
        8'h11: begin
          if (vlen < 32'd5 || v[0] > 8'd1 || l > rest || (v[0] == 8'd0 && l != 32'd0))
            {verdict, status} = {2'd2, 4'd4};
          else if (rest - l > max_value) {verdict, status} = {2'd2, 4'd3};
        end
        8'h20: begin
          if (!(vlen >= 32'd4 && v[0] <= 8'd4 && v[1] <= 8'd7 && v[2] <= 8'd2
                && {24'd0, v[3]} <= vlen - 32'd4))
            {verdict, status} = {2'd2, 4'd4};
          else if (vlen - 32'd4 - {24'd0, v[3]} > max_value) {verdict, status} = {2'd2, 4'd3};
        end
        default: ;
      endcase
    end
  end

  task automatic finish(input logic [2:0] e, input logic [2:0] w, input logic [31:0] a);
    err <= e;
    why <= w;
    arg <= a;
    done <= 1'b1;
    st <= STOP;
  endtask

  always_ff @(posedge clk) begin
    if (rst) begin
      st <= HDR;
      pos <= '0;
      done <= 1'b0;
      op_valid <= 1'b0;
      ops_done <= '0;
      rec <= 1'b0;
      flag12 <= 1'b0;
    end else begin
      op_valid <= 1'b0;
      if (consuming && !in_valid && in_end) begin
        // no more bytes: the frame is incomplete
        case (st)
          HDR: finish(3'd1, 3'd0, 32'd14);
          TLEN: finish(3'd1, 3'd0, 32'd15);
          TOK: finish(3'd1, 3'd0, end_at);
          default: finish(3'd1, 3'd0, frame_len);
        endcase
      end else begin
        case (st)
          HDR: if (in_valid) begin
            hdr[pos[3:0]] <= in_byte;
            pos <= pos + 32'd1;
            if (pos == 32'd1 && {in_byte, hdr[0]} != 16'h4BAC) finish(3'd2, 3'd0, 32'd0);
            else if (pos == 32'd13) st <= HCHK;
          end
          HCHK: begin
            frame_len <= {hdr[7], hdr[6], hdr[5], hdr[4]};
            op_count <= {hdr[13], hdr[12]};
            resp_flag <= hdr[3][0];
            if (hdr[2] != 8'd1) finish(3'd3, 3'd0, {24'd0, hdr[2]});
            else if ((hdr[3] & 8'hFC) != 8'd0) finish(3'd5, 3'd1, 32'd0);
            else if ({hdr[7], hdr[6], hdr[5], hdr[4]} > max_frame)
              finish(3'd4, 3'd1, {hdr[7], hdr[6], hdr[5], hdr[4]});
            else if ({hdr[13], hdr[12]} > max_ops) finish(3'd4, 3'd2, {16'd0, hdr[13], hdr[12]});
            else if (hdr[3][1]) st <= TLEN;
            else begin
              end_at <= 32'd14;
              st <= BODY;
            end
          end
          TLEN: if (in_valid) begin
            pos <= pos + 32'd1;
            end_at <= 32'd15 + {24'd0, in_byte};
            if ({24'd0, in_byte} > max_token) finish(3'd4, 3'd3, {24'd0, in_byte});
            else if (in_byte == 8'd0) st <= BODY;
            else st <= TOK;
          end
          TOK: if (in_valid) begin
            pos <= pos + 32'd1;
            if (pos + 32'd1 == end_at) st <= BODY;
          end
          BODY: begin
            if (frame_len < end_at) finish(3'd5, 3'd2, 32'd0);
            else if (resp_flag) finish(3'd5, 3'd3, 32'd0);
            else begin
              // op_count > (frame_len - at) / 10, without a divider
              flag12 <= (frame_len - end_at) < {16'd0, op_count} * 32'd10;
              st <= OPSTART;
            end
          end
          OPSTART: begin
            if (pos == frame_len) st <= FIN;
            else if (flag12 || rec) st <= SKIP;
            else if (ops_done == op_count) begin
              rec <= 1'b1;
              rec_why <= 3'd7;
              st <= SKIP;
            end else if (frame_len - pos < 32'd10) begin
              rec <= 1'b1;
              rec_why <= 3'd5;
              st <= SKIP;
            end else begin
              kv_at <= '0;
              st <= OPH;
            end
          end
          OPH: if (in_valid) begin
            oh[kv_at[3:0]] <= in_byte;
            pos <= pos + 32'd1;
            kv_at <= kv_at + 32'd1;
            if (kv_at == 32'd9) st <= OPCHK;
          end
          OPCHK: begin
            // 33-bit sum: a length near 2^32 must not wrap below the frame's end
            if ({1'b0, pos} + {17'd0, klen} + {1'b0, vlen} > {1'b0, frame_len}) begin
              rec <= 1'b1;
              rec_why <= 3'd6;
              st <= SKIP;
            end else begin
              op_key_off <= pos;
              op_val_off <= pos + {16'd0, klen};
              kv_left <= {16'd0, klen} + vlen;
              kv_at <= '0;
              for (int i = 0; i < 8; i++) v[i] <= 8'd0;
              st <= ({16'd0, klen} + vlen == 32'd0) ? EMIT : KV;
            end
          end
          KV: if (in_valid) begin
            pos <= pos + 32'd1;
            kv_at <= kv_at + 32'd1;
            if (kv_at >= {16'd0, klen} && kv_at - {16'd0, klen} < 32'd8)
              v[3'(kv_at - {16'd0, klen})] <= in_byte;
            if (kv_at + 32'd1 == kv_left) st <= EMIT;
          end
          EMIT: begin
            op_valid <= 1'b1;
            op_opcode <= opc;
            op_id <= {oh[3], oh[2]};
            op_key_len <= klen;
            op_val_len <= vlen;
            op_verdict <= verdict;
            op_status <= status;
            ops_done <= ops_done + 16'd1;
            st <= OPSTART;
          end
          SKIP: begin
            if (pos == frame_len) st <= FIN;
            else if (in_valid) begin
              pos <= pos + 32'd1;
              if (pos + 32'd1 == frame_len) st <= FIN;
            end
          end
          FIN: begin
            if (flag12) finish(3'd5, 3'd4, 32'd0);
            else if (rec) finish(3'd5, rec_why, 32'd0);
            else if (ops_done != op_count) finish(3'd5, 3'd5, 32'd0);
            else finish(3'd0, 3'd0, 32'd0);
          end
          default: ;
        endcase
      end
    end
  end
endmodule
