//! The write door as commands use it: one operation through the reservation station, inside
//! the connection's running transaction when there is one. Single writes outside MULTI go
//! through here, not through the transaction module (`commands/tx.rs`).

use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use crate::resp::session::Session;

/// One operation through the write door: inside the connection's running transaction
/// (EXEC's, a script's, or a multi-key command's) when there is one, else through the
/// station on its own.
pub(crate) fn run_op(sh: &Shared, s: &mut Session, op: Op<'_>) -> Done {
    match s.tx.running.as_deref_mut() {
        Some(tx) => sh.writes().tx_run(tx, op),
        None => sh.writes().run_one(op),
    }
}
