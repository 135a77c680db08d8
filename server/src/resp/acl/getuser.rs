//! ACL GETUSER (a user's flags, passwords and selectors, as Redis 7.2 describes them) and
//! ACL SAVE and LOAD (the ACL file, `file.rs`).

use crate::core::acl::Selector;
use crate::resp::acl::TableCommands;
use crate::resp::call::Call;
use accelkv_proto::resp;

/// `ACL GETUSER name`: its description, or a null when there is no such user.
pub fn getuser(x: &mut Call<'_, '_>) {
    let v = x.s.proto;
    let Some(u) = x.sh.acl().get(x.args[2]) else {
        return resp::bulk_in(x.out, None, v);
    };
    let out = &mut *x.out;
    resp::map(out, 6, v);
    resp::bulk(out, Some(b"flags"));
    let flags = u.flags();
    resp::array(out, flags.len());
    for f in flags {
        resp::bulk(out, Some(f.as_bytes()));
    }
    resp::bulk(out, Some(b"passwords"));
    let hexes = u.password_hexes();
    resp::array(out, hexes.len());
    for h in hexes {
        resp::bulk(out, Some(h.as_bytes()));
    }
    selector(out, &u.root);
    resp::bulk(out, Some(b"selectors"));
    resp::array(out, u.selectors.len());
    for s in &u.selectors {
        resp::map(out, 3, v);
        selector(out, s);
    }
}

/// A selector's commands, keys and channels (three pairs of a map).
fn selector(out: &mut Vec<u8>, s: &Selector) {
    for (k, text) in [
        ("commands", s.commands_text()),
        ("keys", s.keys_text()),
        ("channels", s.channels_text()),
    ] {
        resp::bulk(out, Some(k.as_bytes()));
        resp::bulk(out, Some(text.as_bytes()));
    }
}

const NO_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// `ACL SAVE` (`save`) or `ACL LOAD`.
pub fn save_or_load(x: &mut Call<'_, '_>, save: bool) {
    let Some(path) = x.sh.settings().aclfile.clone() else {
        return resp::error(x.out, NO_FILE);
    };
    let acl = x.sh.acl();
    if save {
        return match crate::resp::acl::file::save(acl, &path) {
            Ok(()) => resp::simple(x.out, "OK"),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "ACL SAVE failed");
                resp::error(
                    x.out,
                    "ERR There was an error trying to save the ACLs. Please check the server logs for more information",
                )
            }
        };
    }
    let cmds = TableCommands::new((x.dispatch.table)(), x.dispatch.find);
    let before: Vec<Vec<u8>> = acl.all().iter().map(|u| u.name.clone()).collect();
    match crate::resp::acl::file::load(acl, &path, &cmds) {
        Ok(()) => {
            // The connections of users the file no longer declares are closed.
            for name in before.iter().filter(|n| acl.get(n).is_none()) {
                let f = crate::core::clients::Filter {
                    user: Some(name.clone()),
                    ..Default::default()
                };
                if x.sh.clients().kill(&f, x.s.id).1 {
                    x.s.quit = true;
                }
            }
            resp::simple(x.out, "OK")
        }
        Err(e) => resp::error(x.out, &format!("ERR {e}")),
    }
}
