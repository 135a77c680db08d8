//! Options shared by the durability tests: 4 KiB nodes (splits and merges come quickly) and
//! 64 KiB values (small slabs, so crash images stay small).

use accelkv_durable::{Options, SyncPolicy};
use accelkv_tree::Config;

pub fn test_options(sync: SyncPolicy) -> Options {
    Options {
        config: Config {
            node_size: 4096,
            chunk_size: 1 << 20,
            max_value: 64 << 10,
            ..Config::default()
        },
        sync,
    }
}
