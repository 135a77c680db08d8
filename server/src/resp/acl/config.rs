//! The ACL's CONFIG parameters: `acllog-max-len`, `acl-pubsub-default` (the channels a new
//! user starts with), `requirepass` (the default user's one password, as in Redis 6+)
//! and `aclfile` (read only).

use crate::core::acl::edit;
use crate::core::shared::Shared;
use crate::resp::acl::TableCommands;
use crate::resp::call::Dispatcher;
use crate::resp::session::Session;

/// Their names and values now, for CONFIG GET.
pub fn params(sh: &Shared, s: &Session) -> Vec<(&'static str, String)> {
    let acl = sh.acl();
    let pubsub = if acl.pubsub_all() {
        "allchannels"
    } else {
        "resetchannels"
    };
    vec![
        ("acllog-max-len", s.global.acl_log.max_len().to_string()),
        ("acl-pubsub-default", pubsub.into()),
        ("requirepass", acl.requirepass()),
        (
            "aclfile",
            sh.settings()
                .aclfile
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
    ]
}

/// CONFIG SET of one of them: `None` when `name` is not one.
pub fn set(
    sh: &Shared,
    s: &Session,
    name: &str,
    value: &[u8],
    dispatch: &Dispatcher,
) -> Option<Result<(), String>> {
    let bad = |why: &str| {
        Err(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    let acl = sh.acl();
    Some(match name {
        "acllog-max-len" => match std::str::from_utf8(value)
            .ok()
            .and_then(|t| t.parse::<usize>().ok())
        {
            Some(n) => {
                s.global.acl_log.set_max_len(n);
                Ok(())
            }
            None => bad("argument couldn't be parsed into an integer"),
        },
        "acl-pubsub-default" => match value.to_ascii_lowercase().as_slice() {
            v @ (b"allchannels" | b"resetchannels") => {
                acl.set_pubsub_all(v == b"allchannels");
                Ok(())
            }
            _ => bad("argument(s) must be one of the following: allchannels, resetchannels"),
        },
        "requirepass" => {
            let base = (*acl.default_user()).clone();
            let rule = if value.is_empty() {
                b"nopass".to_vec()
            } else {
                [b">", value].concat()
            };
            let cmds = TableCommands::new((dispatch.table)(), dispatch.find);
            match edit(
                base,
                &[b"resetpass".to_vec(), rule],
                &cmds,
                acl.pubsub_all(),
            ) {
                Ok(u) => {
                    acl.put(u);
                    acl.set_requirepass(&String::from_utf8_lossy(value));
                    Ok(())
                }
                Err((_, e)) => bad(&e.to_string()),
            }
        }
        "aclfile" => bad("can't set immutable config"),
        _ => return None,
    })
}
