//! ACL users in the RESP adapter: the command table named for the core's rules
//! ([`TableCommands`]: ids are the statistics indexes, a container's subcommands after
//! the table's rows), the categories (`categories.rs`), the gate's check (`check.rs`), the
//! ACL command (`command.rs`), ACL LOG (`log.rs`) and the ACL file (`file.rs`). The users
//! themselves live in the core (`core/acl/`), which every protocol logs in through.

pub mod categories;
pub mod check;
pub mod command;
pub mod config;
pub mod file;
pub mod getuser;
pub mod log;

use crate::core::acl::Commands;
use crate::resp::call::Spec;
use crate::resp::subcommands;
use std::sync::OnceLock;

/// The command table as the rules name it.
pub struct TableCommands {
    table: &'static [Spec],
    find: fn(&[u8]) -> Option<&'static Spec>,
}

impl TableCommands {
    pub fn new(table: &'static [Spec], find: fn(&[u8]) -> Option<&'static Spec>) -> Self {
        TableCommands { table, find }
    }

    /// Every id's categories, worked out once.
    fn all_categories(&self) -> &'static [u32] {
        static C: OnceLock<Vec<u32>> = OnceLock::new();
        C.get_or_init(|| {
            (0..subcommands::names(self.table).len())
                .map(|id| {
                    let (pos, sub) = subcommands::parts(self.table, id);
                    let spec = &self.table[pos];
                    categories::of(spec, sub, subcommands::is_container(spec.name))
                })
                .collect()
        })
    }

    /// The lower-case names of every id (`get`, `config|get`).
    pub fn names(&self) -> Vec<String> {
        subcommands::names(self.table)
    }
}

impl Commands for TableCommands {
    fn count(&self) -> usize {
        self.all_categories().len()
    }

    fn command(&self, name: &str) -> Option<usize> {
        let spec = (self.find)(name.as_bytes())?;
        self.table.iter().position(|s| std::ptr::eq(s, spec))
    }

    fn subcommands(&self, id: usize) -> std::ops::Range<usize> {
        subcommands::range(self.table, id)
    }

    fn subcommand(&self, id: usize, sub: &str) -> Option<usize> {
        subcommands::find(self.table, id, sub.as_bytes())
    }

    fn category(&self, name: &str) -> Option<u32> {
        categories::bit(name)
    }

    fn categories(&self, id: usize) -> u32 {
        self.all_categories().get(id).copied().unwrap_or(0)
    }
}
